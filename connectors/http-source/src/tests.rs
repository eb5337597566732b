//! The source against a scripted endpoint: each way of walking it delivers every
//! record once across polls, ACKs and NACKs (a NACK is a poll from the committed
//! cursor again), and every bad answer is an error naming the URL and what is wrong.

use std::cell::RefCell;
use std::rc::Rc;

use ferry_guest::http::{HttpError, Request, Response};
use ferry_guest::{Batch, Source};
use serde_json::{Value, json};

use super::*;

type Answerer = Box<dyn FnMut(&Request) -> Response>;

/// A transport whose answers a test writes, and which keeps the URLs asked for.
#[derive(Default, Clone)]
struct Scripted {
    answer: Rc<RefCell<Option<Answerer>>>,
    asked: Rc<RefCell<Vec<String>>>,
}

impl Transport for Scripted {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        self.asked.borrow_mut().push(request.url.clone());
        let mut answer = self.answer.borrow_mut();
        match answer.as_mut() {
            Some(answer) => Ok(answer(request)),
            None => Err(HttpError::Failed("connection refused".into())),
        }
    }
}

fn ok(body: Value) -> Response {
    Response { status: 200, headers: Vec::new(), body: body.to_string().into_bytes() }
}

fn config(plugin_config: Value) -> Config {
    serde_json::from_value(plugin_config).unwrap()
}

fn source(
    plugin_config: Value,
    answer: impl FnMut(&Request) -> Response + 'static,
) -> (HttpSource<Scripted>, Scripted) {
    let scripted = Scripted::default();
    *scripted.answer.borrow_mut() = Some(Box::new(answer));
    (HttpSource { config: config(plugin_config), transport: scripted.clone() }, scripted)
}

fn records(batch: &Batch<Cursor>) -> Vec<Value> {
    batch.messages.iter().map(|m| serde_json::from_slice(&m.payload).unwrap()).collect()
}

/// The value of query parameter `name` in `url`.
fn param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| pair.strip_prefix(&format!("{name}=")).map(str::to_string))
}

/// Poll until nothing is new, committing every batch; the records delivered.
fn drain(source: &mut HttpSource<Scripted>, cursor: &mut Cursor) -> Vec<Value> {
    let mut all = Vec::new();
    while let Some(batch) = source.poll(cursor).unwrap() {
        all.extend(records(&batch));
        *cursor = batch.next;
    }
    all
}

/// A list that grows: the records `0..len` as `{"id": n}`.
fn list(len: &Rc<RefCell<u64>>) -> Vec<Value> {
    (0..*len.borrow()).map(|id| json!({"id": id})).collect()
}

fn ids(records: &[Value]) -> Vec<u64> {
    records.iter().map(|r| r["id"].as_u64().unwrap()).collect()
}

#[test]
fn pages_are_walked_and_a_page_not_full_yet_is_asked_again_without_delivering_twice() {
    let len = Rc::new(RefCell::new(5));
    let shared = len.clone();
    let (mut source, scripted) = source(
        json!({"url": "http://api/items?sort=id", "records": "$.items",
               "cursor": {"kind": "page", "size": 2, "size_param": "per_page"}}),
        move |request| {
            let page: usize = param(&request.url, "page").unwrap().parse().unwrap();
            assert_eq!(param(&request.url, "per_page").as_deref(), Some("2"));
            let all = list(&shared);
            ok(json!({"items": all.iter().skip((page - 1) * 2).take(2).collect::<Vec<_>>()}))
        },
    );
    let mut cursor = Cursor::default();
    let first = source.poll(&cursor).unwrap().unwrap();
    assert_eq!(ids(&records(&first)), [0, 1]);
    // Not acknowledged: asked again from the committed cursor, the same records.
    assert_eq!(source.poll(&cursor).unwrap().unwrap(), first);
    cursor = first.next;
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [2, 3, 4]);
    assert_eq!((cursor.position, cursor.skip), (Some(3), 1), "page 3 holds one record so far");
    *len.borrow_mut() = 8;
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [5, 6, 7]);
    assert!(scripted.asked.borrow()[0].starts_with("http://api/items?sort=id&page=1"));
}

#[test]
fn an_offset_moves_by_the_records_delivered() {
    let len = Rc::new(RefCell::new(250));
    let shared = len.clone();
    let (mut source, _) =
        source(json!({"url": "http://api/items", "cursor": {"kind": "offset", "limit": 100}}), move |request| {
            let offset: usize = param(&request.url, "offset").unwrap().parse().unwrap();
            let limit: usize = param(&request.url, "limit").unwrap().parse().unwrap();
            ok(Value::Array(list(&shared).into_iter().skip(offset).take(limit).collect()))
        });
    let mut cursor = Cursor::default();
    assert_eq!(ids(&drain(&mut source, &mut cursor)), (0..250).collect::<Vec<_>>());
    assert_eq!(cursor.position, Some(250));
    *len.borrow_mut() = 260;
    assert_eq!(ids(&drain(&mut source, &mut cursor)), (250..260).collect::<Vec<_>>());
}

#[test]
fn since_delivers_records_of_an_equal_timestamp_once_by_their_tie_breaker() {
    // Records: (id, updated). The endpoint answers those with updated >= since.
    let rows = Rc::new(RefCell::new(vec![(1, "2026-01-01T00:00:01Z"), (2, "2026-01-01T00:00:02Z")]));
    let shared = rows.clone();
    let (mut source, scripted) = source(
        json!({"url": "http://api/changes", "records": "$.data",
               "cursor": {"kind": "since", "param": "updated_after", "field": "$.updated", "tie_breaker": "$.id",
                          "initial": "2026-01-01T00:00:00Z"}}),
        move |request| {
            let since = param(&request.url, "updated_after").unwrap().replace("%3A", ":");
            let data: Vec<Value> = shared
                .borrow()
                .iter()
                .filter(|(_, updated)| **updated >= *since)
                .map(|(id, updated)| json!({"id": id, "updated": updated}))
                .collect();
            ok(json!({ "data": data }))
        },
    );
    let mut cursor = Cursor::default();
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [1, 2]);
    assert_eq!(cursor.since, Some(json!("2026-01-01T00:00:02Z")));
    // Another record with the last timestamp, and a later one.
    rows.borrow_mut().extend([(3, "2026-01-01T00:00:02Z"), (4, "2026-01-01T00:00:03Z")]);
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [3, 4]);
    rows.borrow_mut().push((5, "2026-01-01T00:00:03Z"));
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [5]);
    assert_eq!(cursor.seen, ["4", "5"]);
    assert!(scripted.asked.borrow()[0].ends_with("updated_after=2026-01-01T00%3A00%3A00Z"));
}

#[test]
fn since_without_a_tie_breaker_tells_records_apart_by_their_content() {
    let (mut source, _) =
        source(json!({"url": "http://api/readings", "cursor": {"kind": "since", "field": "$.t"}}), |_| {
            ok(json!([{"t": 5, "v": 1}, {"t": 5, "v": 2}, {"t": 4, "v": 0}]))
        });
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor).len(), 3, "the first poll has no since: all");
    assert_eq!(cursor.since, Some(json!(5)));
    assert!(source.poll(&cursor).unwrap().is_none(), "the same answer again: nothing new");
}

#[test]
fn an_etag_snapshot_is_delivered_when_it_changes_and_not_when_the_server_says_304() {
    let version = Rc::new(RefCell::new(1));
    let shared = version.clone();
    let (mut source, _) = source(
        json!({"url": "http://api/config", "records": "$.entries", "cursor": {"kind": "etag"}}),
        move |request| {
            let etag = format!("\"v{}\"", shared.borrow());
            if request.headers.iter().any(|(n, v)| n == "If-None-Match" && *v == etag) {
                return Response { status: 304, headers: Vec::new(), body: Vec::new() };
            }
            let mut answer = ok(json!({"entries": [{"id": *shared.borrow()}]}));
            answer.headers.push(("etag".into(), etag));
            answer
        },
    );
    let mut cursor = Cursor::default();
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [1]);
    assert_eq!(cursor.etag.as_deref(), Some("\"v1\""));
    *version.borrow_mut() = 2;
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [2]);
}

#[test]
fn next_links_are_followed_and_the_last_page_is_asked_again_for_what_is_added() {
    let len = Rc::new(RefCell::new(5));
    let shared = len.clone();
    let (mut source, scripted) = source(
        json!({"url": "http://api:8080/events", "records": "$.events", "cursor": {"kind": "next", "field": "$.links.next"}}),
        move |request| {
            let from: usize = param(&request.url, "from").map_or(0, |f| f.parse().unwrap());
            let all = list(&shared);
            let page: Vec<_> = all.iter().skip(from).take(2).cloned().collect();
            let next = (from + 2 < all.len()).then(|| format!("/events?from={}", from + 2));
            ok(json!({"events": page, "links": {"next": next}}))
        },
    );
    let mut cursor = Cursor::default();
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [0, 1, 2, 3, 4]);
    assert_eq!((cursor.next.as_deref(), cursor.skip), (Some("http://api:8080/events?from=4"), 1));
    *len.borrow_mut() = 7;
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [5, 6]);
    assert!(scripted.asked.borrow().iter().all(|url| url.starts_with("http://api:8080/events")));
}

#[test]
fn empty_pages_are_hopped_over_and_their_passing_committed() {
    // Ten full pages of nothing new (all delivered), then one with a record.
    let (mut source, _) = source(
        json!({"url": "http://api/items", "records": "$.records",
               "cursor": {"kind": "next", "field": "$.next", "param": "token"}}),
        |request| {
            let token: u64 = param(&request.url, "token").map_or(0, |t| t.parse().unwrap());
            let records = if token == 30 { json!([{"id": 30}]) } else { json!([]) };
            ok(json!({"records": records, "next": if token < 30 { json!(token + 1) } else { Value::Null }}))
        },
    );
    let mut cursor = Cursor::default();
    let passed = source.poll(&cursor).unwrap().unwrap();
    assert!(passed.messages.is_empty(), "{MAX_HOPS} pages passed with nothing: committed empty");
    assert_eq!(passed.next.next.as_deref(), Some(MAX_HOPS.to_string().as_str()));
    cursor = passed.next;
    assert_eq!(ids(&drain(&mut source, &mut cursor)), [30]);
}

#[test]
fn a_bad_answer_is_an_error_naming_the_url_and_what_is_wrong() {
    let cases: [(Response, &str); 5] = [
        (
            Response { status: 503, headers: Vec::new(), body: b"down for maintenance".to_vec() },
            "answered 503: down for maintenance",
        ),
        (Response { status: 401, headers: Vec::new(), body: b"who are you".to_vec() }, "the credentials are refused"),
        (Response { status: 200, headers: Vec::new(), body: b"<html>".to_vec() }, "the answer is not JSON"),
        (ok(json!({"data": {"id": 1}})), "$.data (records) is an object"),
        (ok(json!({"items": []})), "nothing at $.data (records)"),
    ];
    for (answer, said) in cases {
        let answer = RefCell::new(Some(answer));
        let (mut source, _) =
            source(json!({"url": "http://api/items", "records": "$.data", "cursor": {"kind": "offset"}}), move |_| {
                answer.borrow_mut().take().unwrap()
            });
        let error = source.poll(&Cursor::default()).unwrap_err().to_string();
        assert!(error.contains("GET http://api/items?offset=0&limit=100") && error.contains(said), "{error}");
    }
    // A record without the field a since cursor needs.
    let (mut source, _) = source(json!({"url": "http://api/x", "cursor": {"kind": "since", "field": "$.ts"}}), |_| {
        ok(json!([{"ts": 1}, {"id": 2}]))
    });
    let error = source.poll(&Cursor::default()).unwrap_err().to_string();
    assert!(error.contains("record 1 has no string or number at $.ts (cursor.field)"), "{error}");
    // No server at all.
    let scripted = Scripted::default();
    let mut source =
        HttpSource { config: config(json!({"url": "http://api/x", "cursor": {"kind": "etag"}})), transport: scripted };
    let error = source.poll(&Cursor::default()).unwrap_err().to_string();
    assert!(error.contains("GET http://api/x: no answer: connection refused"), "{error}");
}

#[test]
fn a_config_mistake_names_the_key() {
    for (plugin_config, said) in [
        (json!({"url": "http://api/x"}), "plugin_config.cursor: say how"),
        (json!({"url": "api/x", "cursor": {"kind": "etag"}}), "plugin_config.url"),
        (json!({"url": "http://api/x", "cursor": {"kind": "page"}}), "missing field `size`"),
        (json!({"url": "http://api/x", "cursor": {"kind": "page", "size": 0}}), "plugin_config.cursor.size"),
        (json!({"url": "http://api/x", "cursor": {"kind": "since"}}), "missing field `field`"),
        (json!({"url": "http://api/x", "cursor": {"kind": "scroll"}}), "unknown variant `scroll`"),
        (json!({"url": "http://api/x", "cursor": {"kind": "etag", "field": "$.x"}}), "unknown field `field`"),
        (json!({"url": "http://api/x", "records": "data", "cursor": {"kind": "etag"}}), "starts with `$`"),
        (json!({"url": "http://api/x", "body": "{}", "cursor": {"kind": "etag"}}), "plugin_config.body"),
        (json!({"url": "http://api/x", "method": "DELETE", "cursor": {"kind": "etag"}}), "plugin_config.method"),
        (
            json!({"url": "http://api/x", "cursor": {"kind": "since", "field": "$.t", "initial": [1]}}),
            "plugin_config.cursor.initial",
        ),
        (json!({"url": "http://api/x", "cursour": {"kind": "etag"}}), "unknown field `cursour`"),
    ] {
        let error = serde_json::from_value::<Config>(plugin_config.clone()).unwrap_err().to_string();
        assert!(error.contains(said), "{plugin_config}: {error}");
    }
}

#[test]
fn a_record_is_delivered_as_the_endpoint_wrote_it_every_digit_kept() {
    let text = r#"{ "items": [ {"id": 1, "amount": 12345678901234567890.123456789000},
        {"id": 2, "amount": 1e400} ] }"#;
    let scripted = Scripted::default();
    *scripted.answer.borrow_mut() = Some(Box::new(move |_: &Request| Response {
        status: 200,
        headers: Vec::new(),
        body: text.as_bytes().to_vec(),
    }));
    let config = config(json!({"url": "http://api/x", "records": "$.items", "cursor": {"kind": "offset"}}));
    let mut source = HttpSource { config, transport: scripted };
    let batch = source.poll(&Cursor::default()).unwrap().unwrap();
    let payloads: Vec<&[u8]> = batch.messages.iter().map(|m| m.payload.as_slice()).collect();
    assert_eq!(
        payloads,
        [br#"{"id": 1, "amount": 12345678901234567890.123456789000}"#.as_slice(), br#"{"id": 2, "amount": 1e400}"#]
    );
}
