//! The sink against a scripted endpoint: what is sent, what each answer makes of
//! the batch, and that nothing is ever acknowledged unsent.

use std::collections::VecDeque;
use std::time::Duration;

use ferry_guest::http::{HttpError, Request, Response};
use ferry_guest::{HeaderValue, Rejected, Sink, SinkBatch, StoredMessage, Written};
use serde_json::{Value, json};

use super::HttpSink;
use crate::send::Transport;

/// Answers in order (then 200s), every request and pause kept.
#[derive(Default)]
struct Scripted {
    answers: VecDeque<Result<Response, HttpError>>,
    requests: Vec<Request>,
    slept: Vec<Duration>,
}

impl Transport for Scripted {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        self.requests.push(request.clone());
        self.answers.pop_front().unwrap_or(Ok(status(200)))
    }
    fn sleep(&mut self, duration: Duration) {
        self.slept.push(duration);
    }
}

fn status(code: u16) -> Response {
    Response { status: code, headers: vec![], body: vec![] }
}

fn sink(config: Value, answers: Vec<Result<Response, HttpError>>) -> HttpSink<Scripted> {
    let mut full = json!({ "url": "http://api:8080/ingest" });
    full.as_object_mut().unwrap().extend(config.as_object().unwrap().clone());
    let mut sink = HttpSink::<Scripted>::open(serde_json::from_value(full).unwrap()).unwrap();
    sink.transport.answers = answers.into();
    sink
}

fn batch(payloads: &[&str]) -> SinkBatch {
    SinkBatch {
        stream: "s".into(),
        topic: "t".into(),
        partition: 2,
        messages: payloads
            .iter()
            .enumerate()
            .map(|(i, payload)| StoredMessage {
                offset: 10 + i as u64,
                id: 100 + i as u128,
                timestamp: 5,
                origin_timestamp: Some(4),
                headers: vec![("k".into(), HeaderValue::from("v"))],
                payload: payload.as_bytes().to_vec(),
            })
            .collect(),
    }
}

fn body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).unwrap()
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[test]
fn each_message_is_sent_in_iggys_envelope_with_an_idempotency_key() {
    let mut sink = sink(json!({ "headers": { "Authorization": "Bearer t" } }), vec![]);
    assert_eq!(sink.write(&batch(&[r#"{"seq":1}"#, "not json"])).unwrap(), Written::Ack);
    let sent = &sink.transport.requests;
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[0].method.as_str(), sent[0].url.as_str()), ("POST", "http://api:8080/ingest"));
    assert_eq!(header(&sent[0], "Authorization"), Some("Bearer t"));
    assert_eq!(header(&sent[0], "Content-Type"), Some("application/json"));
    assert_eq!(header(&sent[0], "Idempotency-Key"), Some(format!("{:032x}", 100u128).as_str()));
    assert_eq!(
        body(&sent[0]),
        json!({"metadata": {"iggy_id": "100", "iggy_offset": 10, "iggy_timestamp": 5, "iggy_stream": "s",
            "iggy_topic": "t", "iggy_partition_id": 2, "iggy_headers": {"k": "v"}}, "payload": {"seq": 1}})
    );
    assert_eq!(body(&sent[1])["payload"], json!({"data": "bm90IGpzb24=", "iggy_payload_encoding": "base64"}));
}

#[test]
fn a_batch_goes_as_ndjson_or_a_json_array_in_one_request() {
    let mut ndjson = sink(json!({ "batch_mode": "ndjson", "include_metadata": false }), vec![]);
    assert_eq!(ndjson.write(&batch(&["1", "2", "3"])).unwrap(), Written::Ack);
    let request = &ndjson.transport.requests[0];
    assert_eq!(request.body, b"1\n2\n3\n");
    assert_eq!(header(request, "Content-Type"), Some("application/x-ndjson"));
    assert_eq!(header(request, "Idempotency-Key"), Some(format!("{:032x}-{:032x}-3", 100u128, 102u128).as_str()));
    let mut array = sink(json!({ "batch_mode": "json_array", "include_metadata": false }), vec![]);
    array.write(&batch(&["1", "{}"])).unwrap();
    assert_eq!(body(&array.transport.requests[0]), json!([1, {}]));
    let mut raw = sink(json!({ "batch_mode": "raw" }), vec![]);
    raw.write(&batch(&["\u{1}bytes"])).unwrap();
    assert_eq!(raw.transport.requests[0].body, "\u{1}bytes".as_bytes());
}

#[test]
fn a_busy_or_failing_server_is_tried_again_honouring_retry_after_then_left_to_the_host() {
    let busy = Response { status: 429, headers: vec![("retry-after".into(), "7".into())], body: b"slow down".to_vec() };
    let mut sink = sink(json!({}), vec![Ok(busy), Ok(status(503)), Err(HttpError::Failed("reset".into()))]);
    assert_eq!(sink.write(&batch(&["1"])).unwrap(), Written::Ack, "the fourth attempt is answered 200");
    assert_eq!(sink.transport.slept, [Duration::from_secs(7), Duration::from_secs(2), Duration::from_secs(4)]);
    assert_eq!(sink.transport.requests.len(), 4);

    let mut sink = sink_with_failures(4);
    match sink.write(&batch(&["1", "2"])).unwrap() {
        Written::Retry(why) => assert!(why.contains("HTTP 502") && why.contains("after 4 attempt(s)"), "{why}"),
        other => panic!("{other:?}"),
    }
    let mut refused = sink_with(vec![Ok(status(401))]);
    assert!(matches!(refused.write(&batch(&["1"])).unwrap(), Written::Retry(why) if why.contains("credentials")));
}

#[test]
fn a_huge_backoff_multiplier_saturates_at_max_retry_delay() {
    let config = json!({ "retry_delay": "1h", "max_retry_delay": "100000000h", "retry_backoff_multiplier": u32::MAX });
    let mut sink = sink(config, (0..4).map(|_| Ok(status(503))).collect());
    assert!(matches!(sink.write(&batch(&["1"])).unwrap(), Written::Retry(_)));
    let max = Duration::from_secs(100_000_000 * 3600);
    assert_eq!(sink.transport.slept, [Duration::from_secs(3600), max, max]);
}

fn sink_with_failures(count: usize) -> HttpSink<Scripted> {
    sink_with((0..count).map(|_| Ok(status(502))).collect())
}

fn sink_with(answers: Vec<Result<Response, HttpError>>) -> HttpSink<Scripted> {
    sink(json!({}), answers)
}

#[test]
fn a_body_the_server_refuses_is_rejected_with_its_answer_and_a_batch_split() {
    let refuse = Response { status: 422, headers: vec![], body: b"{\"error\": \"seq is odd\"}".to_vec() };
    let mut each = sink_with(vec![Ok(status(200)), Ok(refuse.clone())]);
    assert_eq!(
        each.write(&batch(&["0", "1", "2"])).unwrap(),
        Written::Reject(vec![Rejected::new(1, "HTTP 422: {\"error\": \"seq is odd\"}")])
    );
    assert_eq!(each.transport.requests.len(), 3, "the others were sent");
    let mut whole = sink(json!({ "batch_mode": "ndjson" }), vec![Ok(refuse.clone()), Ok(refuse)]);
    assert!(matches!(whole.write(&batch(&["0", "1"])).unwrap(), Written::Unwritable(_)));
    assert!(matches!(whole.write(&batch(&["1"])).unwrap(), Written::Reject(r) if r[0].index == 0));
    let mut small = sink(json!({ "max_payload_size_bytes": 10, "include_metadata": false }), vec![]);
    assert!(
        matches!(small.write(&batch(&["12345678901"])).unwrap(), Written::Reject(r) if r[0].reason.contains("over max_payload_size_bytes (10)"))
    );
    assert!(small.transport.requests.is_empty(), "not sent");
}

#[test]
fn what_ferry_cannot_honour_and_mistakes_are_named() {
    for (config, words) in [
        (json!({ "tls_danger_accept_invalid_certs": true }), "always verifies certificates"),
        (json!({ "method": "FETCH" }), "\"FETCH\" is none of GET"),
        (json!({ "url": "api/ingest" }), "plugin_config.url"),
        (json!({ "batch_mode": "csv" }), "unknown variant `csv`"),
        (json!({ "headers": { "content-type": "text/plain" } }), "the content type follows batch_mode"),
        (json!({ "timeout": "soon" }), "plugin_config.timeout \"soon\""),
        (json!({ "success_status_codes": [] }), "success_status_codes"),
    ] {
        let mut full = json!({ "url": "http://api/x" });
        full.as_object_mut().unwrap().extend(config.as_object().unwrap().clone());
        let error = serde_json::from_value::<crate::config::Config>(full).err().map(|e| e.to_string());
        assert!(error.as_deref().is_some_and(|e| e.contains(words)), "{config}: {error:?}");
    }
}
