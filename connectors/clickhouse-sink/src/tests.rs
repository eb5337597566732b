//! The sink against a scripted server: what it sends, and what it makes of each
//! answer.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use ferry_guest::http::{HttpError, Request, Response};
use ferry_guest::{Sink, SinkBatch, StoredMessage, Written};
use serde_json::json;

use super::*;

type Answerer = Box<dyn FnMut(&Request) -> Response>;

#[derive(Default, Clone)]
struct Scripted {
    answer: Rc<RefCell<Option<Answerer>>>,
    sent: Rc<RefCell<Vec<Request>>>,
    slept: Rc<RefCell<Vec<Duration>>>,
}

impl Transport for Scripted {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        self.sent.borrow_mut().push(request.clone());
        match self.answer.borrow_mut().as_mut() {
            Some(answer) => Ok(answer(request)),
            None => Err(HttpError::Failed("ConnectionRefused".into())),
        }
    }

    fn sleep(&mut self, duration: Duration) {
        self.slept.borrow_mut().push(duration);
    }
}

fn answer(status: u16, body: &str) -> Response {
    Response { status, headers: Vec::new(), body: body.as_bytes().to_vec() }
}

fn scripted_sink(
    plugin_config: serde_json::Value,
    answer: impl FnMut(&Request) -> Response + 'static,
) -> (ClickHouseSink<Scripted>, Scripted) {
    let scripted = Scripted::default();
    *scripted.answer.borrow_mut() = Some(Box::new(answer));
    let config: Config = serde_json::from_value(plugin_config).unwrap();
    (ClickHouseSink { config, transport: scripted.clone() }, scripted)
}

fn batch(payloads: &[&str]) -> SinkBatch {
    let messages = payloads
        .iter()
        .enumerate()
        .map(|(i, payload)| StoredMessage {
            offset: 10 + i as u64,
            id: if i == 2 { 0 } else { 0xabc0 + i as u128 },
            timestamp: 0,
            origin_timestamp: None,
            headers: Vec::new(),
            payload: payload.as_bytes().to_vec(),
        })
        .collect();
    SinkBatch { stream: "s".into(), topic: "t".into(), partition: 1, messages }
}

fn base() -> serde_json::Value {
    json!({"url": "http://ch:8123/", "database": "analytics", "table": "events", "username": "ferry",
           "password": "secret", "id_column": "ferry_id"})
}

#[test]
fn a_batch_is_one_insert_with_the_stable_id_spliced_into_each_row() {
    let (mut sink, scripted) = scripted_sink(base(), |_| answer(200, ""));
    let written = sink.write(&batch(&[r#"{"seq":1}"#, r#" { "seq" : 2 } "#, "{}"])).unwrap();
    assert_eq!(written, Written::Ack);
    let sent = scripted.sent.borrow();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].url,
        "http://ch:8123/?database=analytics&query=INSERT%20INTO%20analytics.events%20FORMAT%20JSONEachRow"
    );
    assert!(sent[0].headers.contains(&("X-ClickHouse-Key".into(), "secret".into())), "{:?}", sent[0].headers);
    let body = String::from_utf8(sent[0].body.clone()).unwrap();
    let expected = format!(
        "{{\"ferry_id\":\"{:032x}\",\"seq\":1}}\n{{\"ferry_id\":\"{:032x}\",\"seq\" : 2 }}\n{{\"ferry_id\":\"s/t/1/12\"}}\n",
        0xabc0, 0xabc1
    );
    assert_eq!(body, expected);
    for line in body.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("each row is JSON");
    }
}

#[test]
fn a_row_the_server_refuses_is_left_out_and_the_rest_inserted_again() {
    let bad = r#"{"seq":"bad"}"#;
    let (mut sink, scripted) = scripted_sink(base(), move |request| {
        let body = String::from_utf8(request.body.clone()).unwrap();
        match body.lines().position(|line| line.contains("\"bad\"")) {
            Some(row) => answer(
                500,
                &format!(
                    "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \" before: bad\"}}\n: \
                     (while read the value of key seq): (at row {}) , e.what() = DB::Exception",
                    row + 1
                ),
            ),
            None => answer(200, ""),
        }
    });
    let written = sink.write(&batch(&[r#"{"seq":1}"#, bad, "[1]", r#"{"seq":4}"#])).unwrap();
    let Written::Reject(rejected) = written else { panic!("{written:?}") };
    let rejected: Vec<(usize, &str)> = rejected.iter().map(|r| (r.index, r.reason.as_str())).collect();
    assert_eq!(
        rejected[0],
        (1, "Code: 27: Cannot parse input: expected \" (while read the value of key seq): (at row 2)")
    );
    assert_eq!(rejected[1], (2, "the payload is not a JSON object, which a JSONEachRow row is"));
    let sent = scripted.sent.borrow();
    assert_eq!(sent.len(), 2, "the first insert refused, the second without the bad row");
    assert_eq!(String::from_utf8_lossy(&sent[1].body).lines().count(), 2);
}

#[test]
fn a_server_in_trouble_is_tried_again_then_the_batch_waits_and_credentials_wait_at_once() {
    let (mut sink, scripted) =
        scripted_sink(base(), |_| answer(503, "Code: 241, e.displayText() = DB::Exception: Memory limit"));
    let written = sink.write(&batch(&[r#"{"seq":1}"#])).unwrap();
    let Written::Retry(why) = written else { panic!("{written:?}") };
    assert!(why.contains("offset 10") && why.contains("HTTP 503") && why.contains("after 4 attempt(s)"), "{why}");
    assert_eq!(*scripted.slept.borrow(), vec![Duration::from_secs(1); 3]);

    let (mut sink, scripted) =
        scripted_sink(base(), |_| answer(401, "Code: 193, e.displayText() = DB::Exception: Wrong password"));
    let Written::Retry(why) = sink.write(&batch(&[r#"{"seq":1}"#])).unwrap() else { panic!() };
    assert!(why.contains("Code: 193: Wrong password (the credentials are refused)"), "{why}");
    assert!(scripted.slept.borrow().is_empty(), "not tried again within the write");

    let (mut sink, _) = scripted_sink(base(), |_| {
        answer(404, "Code: 60, e.displayText() = DB::Exception: Table analytics.events doesn't exist.")
    });
    let Written::Retry(why) = sink.write(&batch(&[r#"{"seq":1}"#])).unwrap() else { panic!() };
    assert!(why.contains("doesn't exist. (create it, and the batch goes in)"), "{why}");
}

#[test]
fn open_says_when_the_table_is_missing_or_the_server_away() {
    let config: Config = serde_json::from_value(base()).unwrap();
    let scripted = Scripted::default();
    *scripted.answer.borrow_mut() = Some(Box::new(|request: &Request| {
        assert!(request.url.ends_with("query=EXISTS%20TABLE%20analytics.events"), "{}", request.url);
        answer(200, "0\n")
    }));
    let mut sink = ClickHouseSink { config: config.clone(), transport: scripted };
    let error = sink.check_table().unwrap_err().to_string();
    assert!(error.contains("there is no table analytics.events"), "{error}");
    let mut sink = ClickHouseSink { config, transport: Scripted::default() };
    let error = sink.check_table().unwrap_err().to_string();
    assert!(error.contains("http://ch:8123: no answer: ConnectionRefused"), "{error}");
}

#[test]
fn passed_through_rows_are_sent_as_they_are_in_their_format() {
    let (mut sink, scripted) = scripted_sink(
        json!({"url": "http://ch:8123", "table": "events", "insert_format": "string", "string_format": "csv"}),
        |_| answer(200, ""),
    );
    let written = sink.write(&batch(&["1,a", "2,b\n3,c", "4,d"])).unwrap();
    let Written::Reject(rejected) = written else { panic!("{written:?}") };
    assert_eq!((rejected[0].index, rejected[0].reason.as_str()), (1, "the row holds a line break: one row a line"));
    let sent = scripted.sent.borrow();
    assert!(sent[0].url.ends_with("query=INSERT%20INTO%20default.events%20FORMAT%20CSV"), "{}", sent[0].url);
    assert_eq!(sent[0].body, b"1,a\n4,d\n");
}

#[test]
fn a_config_mistake_names_the_key() {
    for (plugin_config, said) in [
        (json!({"table": "t"}), "missing field `url`"),
        (json!({"url": "http://ch", "table": "t; DROP TABLE x"}), "plugin_config.table"),
        (json!({"url": "http://ch", "table": "t", "database": "1db"}), "plugin_config.database"),
        (json!({"url": "http://ch", "table": "t", "insert_format": "row_binary"}), "RowBinaryWithDefaults"),
        (json!({"url": "http://ch", "table": "t", "insert_format": "parquet"}), "plugin_config.insert_format"),
        (json!({"url": "http://ch", "table": "t", "string_format": "csv"}), "plugin_config.string_format"),
        (
            json!({"url": "http://ch", "table": "t", "insert_format": "string", "id_column": "id"}),
            "plugin_config.id_column",
        ),
        (json!({"url": "http://ch", "table": "t", "timeout_seconds": 0}), "plugin_config.timeout_seconds"),
        (json!({"url": "ch:8123", "table": "t"}), "plugin_config.url"),
        (json!({"url": "http://ch", "table": "t", "tabel": "x"}), "unknown field `tabel`"),
    ] {
        let error = serde_json::from_value::<Config>(plugin_config.clone()).unwrap_err().to_string();
        assert!(error.contains(said), "{plugin_config}: {error}");
    }
}
