//! The source against a scripted server: the queries it sends, the cursor it moves
//! (with its tie-breaker), the messages it makes, and the errors it names.

use std::collections::VecDeque;
use std::time::Duration;

use ferry_guest::Source;
use ferry_guest::http::{HttpError, Request, Response};
use serde_json::{Value, json};

use super::{Cursor, InfluxDbSource};
use crate::query::Transport;
use crate::time::parse_rfc3339;

#[derive(Default)]
struct Scripted {
    answers: VecDeque<Result<Response, HttpError>>,
    requests: Vec<Request>,
    slept: Vec<Duration>,
}

impl Transport for Scripted {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        self.requests.push(request.clone());
        self.answers.pop_front().unwrap_or_else(|| Ok(rows(&[])))
    }
    fn sleep(&mut self, duration: Duration) {
        self.slept.push(duration);
    }
}

const QUERY: &str = "SELECT * FROM cpu WHERE time >= $cursor ORDER BY time ASC LIMIT $limit OFFSET $offset";

/// A 200 with one series of `(time, host, v)` rows.
fn rows(rows: &[(i64, &str, f64)]) -> Response {
    let values: Vec<Value> = rows.iter().map(|(t, h, v)| json!([t, h, v])).collect();
    let body = json!({ "results": [{ "statement_id": 0, "series": [{ "name": "cpu", "columns": ["time", "host", "v"], "values": values }] }] });
    Response { status: 200, headers: vec![], body: body.to_string().into_bytes() }
}

fn config(settings: Value) -> Result<crate::config::Config, String> {
    let mut full = json!({ "url": "http://influx:8086", "db": "metrics", "query": QUERY, "batch_size": 3 });
    full.as_object_mut().unwrap().extend(settings.as_object().unwrap().clone());
    serde_json::from_value(full).map_err(|e| e.to_string())
}

fn source(answers: Vec<Result<Response, HttpError>>) -> InfluxDbSource<Scripted> {
    let mut source =
        InfluxDbSource::<Scripted>::open(config(json!({ "retry_delay": "10ms" })).unwrap(), &Cursor::default())
            .unwrap();
    source.transport.answers = answers.into();
    source
}

fn query_of(request: &Request) -> String {
    let q = request.url.split("&q=").nth(1).unwrap();
    let mut out = Vec::new();
    let bytes = q.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(&q[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn rows_at_one_time_are_paged_by_the_tie_breaker_none_twice_none_lost() {
    let mut source = source(vec![
        Ok(rows(&[(10, "a", 1.0), (20, "a", 2.0), (20, "b", 3.0)])),
        Ok(rows(&[(20, "c", 4.0), (20, "d", 5.0), (20, "e", 6.0)])),
        Ok(rows(&[(20, "f", 7.0), (30, "a", 8.0)])),
    ]);
    let first = source.poll(&Cursor::default()).unwrap().unwrap();
    assert_eq!(first.next, Cursor { time: Some(20), skip: 2 });
    assert_eq!(
        serde_json::from_slice::<Value>(&first.messages[1].payload).unwrap(),
        json!({ "time": 20, "host": "a", "v": 2.0, "measurement": "cpu" })
    );
    assert_eq!(first.messages[0].origin_timestamp, Some(0), "10 ns is 0 µs");
    let second = source.poll(&first.next).unwrap().unwrap();
    assert_eq!(second.next, Cursor { time: Some(20), skip: 5 }, "a page all at one time");
    let third = source.poll(&second.next).unwrap().unwrap();
    assert_eq!(third.next, Cursor { time: Some(30), skip: 1 });
    assert!(source.poll(&third.next).unwrap().is_none());
    let queries: Vec<String> = source.transport.requests.iter().map(query_of).collect();
    assert_eq!(
        queries,
        [
            "SELECT * FROM cpu WHERE time >= 0 ORDER BY time ASC LIMIT 3 OFFSET 0",
            "SELECT * FROM cpu WHERE time >= 20 ORDER BY time ASC LIMIT 3 OFFSET 2",
            "SELECT * FROM cpu WHERE time >= 20 ORDER BY time ASC LIMIT 3 OFFSET 5",
            "SELECT * FROM cpu WHERE time >= 30 ORDER BY time ASC LIMIT 3 OFFSET 1",
        ]
    );
    assert!(source.transport.requests[0].url.starts_with("http://influx:8086/query?db=metrics&epoch=ns&q="));
}

#[test]
fn errors_name_the_query_and_the_server_and_a_busy_server_is_tried_again() {
    let refused = json!({ "results": [{ "statement_id": 0, "error": "error parsing query: found EOF" }] });
    let mut source =
        source(vec![Ok(Response { status: 200, headers: vec![], body: refused.to_string().into_bytes() })]);
    let error = source.poll(&Cursor::default()).unwrap_err().message().to_string();
    assert!(error.contains("refused the query") && error.contains("found EOF"), "{error}");

    let unauthorized = Response { status: 401, headers: vec![], body: br#"{"error":"authorization failed"}"#.to_vec() };
    let mut source = self::source(vec![Ok(unauthorized)]);
    let error = source.poll(&Cursor::default()).unwrap_err().message().to_string();
    assert!(error.contains("refused the credentials (HTTP 401: authorization failed)"), "{error}");

    let busy = Response { status: 503, headers: vec![], body: vec![] };
    let mut source = self::source(vec![Ok(busy), Err(HttpError::Failed("reset".into())), Ok(rows(&[(5, "a", 1.0)]))]);
    assert_eq!(source.poll(&Cursor::default()).unwrap().unwrap().messages.len(), 1);
    assert_eq!(source.transport.slept, [Duration::from_millis(10), Duration::from_millis(20)]);

    let mut backwards = self::source(vec![Ok(rows(&[(20, "a", 1.0), (10, "a", 1.0)]))]);
    let error = backwards.poll(&Cursor::default()).unwrap_err().message().to_string();
    assert!(error.contains("ORDER BY time ASC"), "{error}");
}

#[test]
fn what_a_1x_server_cannot_honour_and_mistakes_are_named() {
    for (settings, words) in [
        (json!({ "query": "SELECT * FROM cpu" }), "plugin_config.query has no $cursor"),
        (
            json!({ "query": "SELECT * FROM cpu WHERE time >= $cursor GROUP BY * LIMIT $limit OFFSET $offset" }),
            "GROUP BY",
        ),
        (json!({ "cursor_field": "seq" }), "InfluxQL orders rows by time only"),
        (json!({ "payload_format": "text" }), "payload_format \"text\""),
        (json!({ "payload_column": "v" }), "payload_column"),
        (json!({ "token": "api-token" }), "no API tokens"),
        (json!({ "initial_offset": "yesterday" }), "initial_offset \"yesterday\""),
        (json!({ "batch_size": 0 }), "batch_size 0"),
    ] {
        let error = config(settings.clone()).err();
        assert!(error.as_deref().is_some_and(|e| e.contains(words)), "{settings}: {error:?}");
    }
    let iggy = json!({ "version": "v2", "org": "o", "bucket": "metrics/autogen", "db": null, "token": "u:p", "poll_interval": "1s", "stuck_batch_cap_factor": 10 });
    let mut full = iggy.clone();
    full.as_object_mut().unwrap().remove("db");
    let mut raw = json!({ "url": "http://influx:8086", "query": QUERY });
    raw.as_object_mut().unwrap().extend(full.as_object().unwrap().clone());
    let config: crate::config::Config = serde_json::from_value(raw).unwrap();
    assert_eq!((config.db.as_str(), config.authorization.as_deref()), ("metrics", Some("Basic dTpw")));
}

#[test]
fn initial_offset_is_read_as_rfc_3339() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
    assert_eq!(parse_rfc3339("2024-01-01T00:00:00Z"), Ok(1_704_067_200_000_000_000));
    assert_eq!(parse_rfc3339("2024-01-01T01:00:00.5+01:00"), Ok(1_704_067_200_500_000_000));
    assert!(parse_rfc3339("2024-13-01T00:00:00Z").is_err());
}
