//! The sink against a scripted server: the points it writes, what each answer makes
//! of the batch, and that nothing is acknowledged unwritten.

use std::collections::VecDeque;
use std::time::Duration;

use ferry_guest::http::{HttpError, Request, Response};
use ferry_guest::{Sink, SinkBatch, StoredMessage, Written};
use serde_json::{Value, json};

use super::InfluxDbSink;
use crate::send::Transport;

/// Answers in order (then 204s), every request and pause kept; with `refuse`, a
/// body holding that text is answered 400 as a 1.x partial write.
#[derive(Default)]
struct Scripted {
    answers: VecDeque<Result<Response, HttpError>>,
    refuse: Option<String>,
    requests: Vec<Request>,
    slept: Vec<Duration>,
}

impl Transport for Scripted {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        self.requests.push(request.clone());
        if let Some(refused) = &self.refuse
            && String::from_utf8_lossy(&request.body).contains(refused.as_str())
        {
            let body = br#"{"error":"partial write: field type conflict: input field \"v\" on measurement \"m\" is type string, already exists as type float dropped=1"}"#;
            return Ok(Response { status: 400, headers: vec![], body: body.to_vec() });
        }
        self.answers.pop_front().unwrap_or(Ok(status(204)))
    }
    fn sleep(&mut self, duration: Duration) {
        self.slept.push(duration);
    }
}

fn status(code: u16) -> Response {
    Response { status: code, headers: vec![], body: vec![] }
}

fn config(config: Value) -> Result<crate::config::Config, String> {
    let mut full = json!({ "url": "http://influx:8086" });
    if config.get("bucket").is_none() {
        full["db"] = json!("metrics");
    }
    full.as_object_mut().unwrap().extend(config.as_object().unwrap().clone());
    serde_json::from_value(full).map_err(|e| e.to_string())
}

fn sink(settings: Value) -> InfluxDbSink<Scripted> {
    InfluxDbSink::<Scripted>::open(config(settings).unwrap()).unwrap()
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
                timestamp: 1_700_000_000_123_456 + i as u64,
                origin_timestamp: Some(1_600_000_000_000_000),
                headers: vec![],
                payload: payload.as_bytes().to_vec(),
            })
            .collect(),
    }
}

fn lines(request: &Request) -> Vec<String> {
    String::from_utf8(request.body.clone()).unwrap().lines().map(str::to_string).collect()
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[test]
fn each_message_is_a_point_in_iggys_layout_in_one_request() {
    let mut sink = sink(json!({ "version": "v2", "bucket": "metrics/week", "org": "acme", "token": "w:secret" }));
    let spaced = "{ \"a\" : \"x \\\"y\\\"\",\n \"b\": [1, 2] }";
    assert_eq!(sink.write(&batch(&[r#"{"seq": 1}"#, spaced])).unwrap(), Written::Ack);
    let sent = &sink.transport.requests;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].url, "http://influx:8086/write?db=metrics&precision=u&rp=week");
    assert_eq!(header(&sent[0], "Authorization"), Some("Basic dzpzZWNyZXQ="), "w:secret");
    assert_eq!(
        lines(&sent[0]),
        [
            r#"iggy_messages,stream=s,topic=t,partition=2,offset=10 message_id="100",payload_json="{\"seq\":1}",iggy_origin_timestamp=1600000000000000i 1700000000123456"#,
            r#"iggy_messages,stream=s,topic=t,partition=2,offset=11 message_id="101",payload_json="{\"a\":\"x \\\"y\\\"\",\"b\":[1,2]}",iggy_origin_timestamp=1600000000000000i 1700000000123457"#,
        ]
    );
}

#[test]
fn a_record_maps_to_measurement_tags_typed_fields_and_its_own_timestamp() {
    let mut sink = sink(json!({
        "payload_format": "fields", "measurement_field": "kind", "tags": ["host", "zone"], "timestamp_field": "at",
        "precision": "s", "include_metadata": false, "include_offset_tag": false, "include_origin_timestamp": false,
    }));
    let record = r#"{"kind":"cpu load","host":"a,b=c","zone":7,"at":1700000000,"v":0.5,"n":3,"ok":true,"s":"q\"x","o":{"k":1},"z":null}"#;
    assert_eq!(sink.write(&batch(&[record])).unwrap(), Written::Ack);
    let sent = &sink.transport.requests[0];
    assert_eq!(sent.url, "http://influx:8086/write?db=metrics&precision=s");
    assert_eq!(lines(sent), [r#"cpu\ load,host=a\,b\=c,zone=7 v=0.5,n=3i,ok=true,s="q\"x",o="{\"k\":1}" 1700000000"#]);
    let mut listed = self::sink(
        json!({ "payload_format": "fields", "fields": ["n", "missing"], "timestamp_from": "origin_timestamp", "precision": "ms" }),
    );
    listed.write(&batch(&[r#"{"n":2.0,"x":1}"#])).unwrap();
    assert_eq!(
        lines(&listed.transport.requests[0]),
        [
            "iggy_messages,stream=s,topic=t,partition=2,offset=10 n=2.0,iggy_origin_timestamp=1600000000000000i 1600000000000"
        ]
    );
}

#[test]
fn a_message_that_cannot_be_a_point_is_rejected_naming_why_and_the_others_are_written() {
    let mut sink = sink(json!({
        "payload_format": "fields", "measurement_field": "m", "timestamp_field": "at", "include_origin_timestamp": false,
    }));
    let written = sink
        .write(&batch(&[
            r#"{"m":"ok","v":1,"at":5}"#,
            "not json",
            r#"{"v":1,"at":5}"#,
            r#"{"m":"x","v":1,"at":"noon"}"#,
            r#"{"m":"x","at":5}"#,
            "[1]",
            r#"{"m":"a\\","v":1,"at":5}"#,
        ]))
        .unwrap();
    let Written::Reject(rejected) = written else { panic!("{written:?}") };
    let reasons: Vec<(usize, &str)> = rejected.iter().map(|r| (r.index, r.reason.as_str())).collect();
    for (i, (index, words)) in [
        (1, "its payload is not JSON"),
        (2, "it has no \"m\" (the measurement_field)"),
        (3, "its timestamp_field \"at\" is \"noon\", not an integer"),
        (4, "it has no field to write"),
        (5, "not an object (a array)"),
        (6, "a backslash"),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(reasons[i].0, index);
        assert!(reasons[i].1.contains(words), "{index}: {}", reasons[i].1);
    }
    assert_eq!(reasons.len(), 6);
    assert_eq!(lines(&sink.transport.requests[0]).len(), 1, "the one mappable point was sent");
}

#[test]
fn a_refused_request_is_split_until_the_refused_point_is_alone_and_rejected_with_the_answer() {
    let mut sink = sink(json!({ "payload_format": "fields" }));
    sink.transport.refuse = Some("v=\"text\"".into());
    let payloads = [r#"{"v":1}"#, r#"{"v":2}"#, r#"{"v":"text"}"#, r#"{"v":4}"#, r#"{"v":5}"#];
    let Written::Reject(rejected) = sink.write(&batch(&payloads)).unwrap() else { panic!() };
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].index, 2);
    assert!(rejected[0].reason.contains("HTTP 400: partial write: field type conflict"), "{}", rejected[0].reason);
    let written: Vec<String> = sink
        .transport
        .requests
        .iter()
        .filter(|r| !String::from_utf8_lossy(&r.body).contains("text"))
        .flat_map(lines)
        .collect();
    for v in [1, 2, 4, 5] {
        assert!(written.iter().any(|l| l.contains(&format!("v={v}i"))), "v={v} written: {written:?}");
    }
    let mut small = self::sink(json!({ "batch_size": 2 }));
    small.write(&batch(&["1", "2", "3"])).unwrap();
    assert_eq!(small.transport.requests.iter().map(|r| lines(r).len()).collect::<Vec<_>>(), [2, 1]);
}

#[test]
fn a_failing_server_is_tried_again_then_left_to_the_host_and_refused_credentials_are_said() {
    let mut sink = sink(json!({ "retry_delay": "100ms", "retry_max_delay": "300ms" }));
    sink.transport.answers =
        vec![Ok(status(503)), Err(HttpError::Failed("ConnectionRefused".into())), Ok(status(500)), Ok(status(500))]
            .into();
    match sink.write(&batch(&["1"])).unwrap() {
        Written::Retry(why) => assert!(why.contains("HTTP 500") && why.contains("after 4 attempt(s)"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(sink.transport.slept, [100, 200, 300].map(Duration::from_millis));
    let body = br#"{"error":"authorization failed"}"#.to_vec();
    sink.transport.answers = vec![Ok(Response { status: 401, headers: vec![], body })].into();
    match sink.write(&batch(&["1"])).unwrap() {
        Written::Retry(why) => {
            assert!(why.contains("refused the credentials (HTTP 401: authorization failed)"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    sink.transport.answers = vec![Ok(Response {
        status: 404,
        headers: vec![],
        body: br#"{"error":"database not found: \"metrics\""}"#.to_vec(),
    })]
    .into();
    assert!(matches!(sink.write(&batch(&["1"])).unwrap(), Written::Retry(why) if why.contains("CREATE DATABASE")));
}

#[test]
fn what_a_1x_server_cannot_honour_and_mistakes_are_named() {
    for (settings, words) in [
        (json!({ "token": "an-api-token" }), "an InfluxDB 1.x server has no API tokens"),
        (json!({ "version": "v4" }), "plugin_config.version \"v4\""),
        (json!({ "bucket": "b", "db": "x" }), "db and plugin_config.bucket both"),
        (json!({ "precision": "h" }), "plugin_config.precision \"h\""),
        (json!({ "payload_format": "csv" }), "plugin_config.payload_format \"csv\""),
        (json!({ "fields": ["a"] }), "only with payload_format = \"fields\""),
        (json!({ "tags": ["offset"] }), "a tag the sink writes already"),
        (json!({ "payload_format": "text", "tags": ["a"] }), "read a JSON record"),
        (json!({ "username": "u" }), "without a password"),
        (json!({ "batch_size": 0 }), "batch_size is 0"),
        (json!({ "timeout": "soon" }), "plugin_config.timeout \"soon\""),
        (json!({ "url": "influx:8086" }), "plugin_config.url"),
        (json!({ "db": "" }), "database name is empty"),
    ] {
        let error = config(settings.clone()).err();
        assert!(error.as_deref().is_some_and(|e| e.contains(words)), "{settings}: {error:?}");
    }
    assert!(config(json!({ "circuit_breaker_threshold": 3, "max_open_retries": 2, "org": "o" })).is_ok());
}
