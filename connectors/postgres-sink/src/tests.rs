//! The sink over the fake database: what is committed, what is answered, and that
//! the answer never claims more than the database holds.

use ferry_guest::bindings::iggy::connector::postgres::{Error as PgError, Value};
use ferry_guest::{HeaderValue, Rejected, Sink, SinkBatch, StoredMessage, Written};

use super::PostgresSink;
use crate::fake_db::{self, FakeDb, refusal};

type Subject = PostgresSink<FakeDb>;

const CONFIG: &str = r#"{"connection": "main", "table": "public.events"}"#;

fn open(json: &str) -> Subject {
    Subject::open(serde_json::from_str(json).unwrap()).unwrap()
}

/// A batch of messages with these ids, at offsets 10, 11, ..., with JSON payloads.
fn batch(ids: &[u128]) -> SinkBatch {
    let messages = ids
        .iter()
        .zip(10..)
        .map(|(&id, offset)| StoredMessage {
            offset,
            id,
            timestamp: 1_700_000_000_000_000,
            origin_timestamp: None,
            headers: Vec::new(),
            payload: format!("{{\"n\": {id}}}").into_bytes(),
        })
        .collect();
    SinkBatch { stream: "app".into(), topic: "events".into(), partition: 1, messages }
}

/// The committed rows' ids.
fn committed() -> Vec<String> {
    fake_db::with(|state| state.rows.keys().cloned().collect())
}

fn transactions() -> usize {
    fake_db::with(|state| state.transactions.len())
}

fn fail_next(error: PgError) {
    fake_db::with(|state| state.failures.push_back(error));
}

fn rejected_indices(written: &Written) -> Vec<usize> {
    match written {
        Written::Reject(rejected) => rejected.iter().map(|r| r.index).collect(),
        other => panic!("expected a reject, got {other:?}"),
    }
}

fn retry_reason(written: Written) -> String {
    match written {
        Written::Retry(reason) => reason,
        other => panic!("expected a retry, got {other:?}"),
    }
}

#[test]
fn a_batch_is_one_transaction_and_is_acknowledged_once_committed() {
    let mut sink = open(CONFIG);
    assert_eq!(sink.write(&batch(&[1, 2, 3])).unwrap(), Written::Ack);
    assert_eq!(committed(), ["1", "2", "3"]);
    let sql = fake_db::with(|state| {
        assert_eq!(state.transactions.len(), 1, "one transaction per batch");
        assert_eq!(state.transactions[0].len(), 3, "one insert per message");
        state.transactions[0][0].sql.clone()
    });
    assert!(sql.starts_with(r#"INSERT INTO "public"."events""#), "{sql}");
    let row = fake_db::with(|state| state.rows["2"].clone());
    assert_eq!(
        row,
        [
            Value::Text("2".into()),
            Value::Json(r#"{"n": 2}"#.into()),
            Value::Null,
            Value::Json("{}".into()),
            Value::Text("app".into()),
            Value::Text("events".into()),
            Value::Int(1),
            Value::Int(11),
            Value::Null,
        ]
    );
}

#[test]
fn a_replayed_batch_inserts_nothing_new_and_is_acknowledged() {
    let mut sink = open(CONFIG);
    assert_eq!(sink.write(&batch(&[1, 2])).unwrap(), Written::Ack);
    let before = fake_db::with(|state| state.rows.clone());
    // The same batch after a crash before the offset was stored, then one that
    // overlaps it: only the new id is added, the old rows are left as they were.
    assert_eq!(sink.write(&batch(&[1, 2])).unwrap(), Written::Ack);
    assert_eq!(fake_db::with(|state| state.rows.clone()), before);
    let mut overlapping = batch(&[2, 3]);
    overlapping.messages[0].payload = b"{\"changed\": true}".to_vec();
    assert_eq!(sink.write(&overlapping).unwrap(), Written::Ack);
    assert_eq!(committed(), ["1", "2", "3"]);
    assert_eq!(fake_db::with(|state| state.rows["2"][1].clone()), Value::Json(r#"{"n": 2}"#.into()));
}

#[test]
fn a_poison_message_is_rejected_and_the_rest_committed() {
    let mut sink = open(CONFIG);
    fake_db::with(|state| state.poison.insert("3".into()));
    let written = sink.write(&batch(&[1, 2, 3, 4])).unwrap();
    let Written::Reject(rejected) = &written else { panic!("expected a reject, got {written:?}") };
    assert_eq!(rejected.len(), 1);
    let Rejected { index, reason } = &rejected[0];
    assert_eq!(*index, 2, "the index in the batch");
    assert!(reason.contains("violates check constraint") && reason.contains("SQLSTATE 23514"), "{reason}");
    assert_eq!(committed(), ["1", "2", "4"]);
    assert_eq!(transactions(), 2, "refused once, then committed without it");
}

#[test]
fn several_poison_messages_are_taken_out_one_by_one() {
    let mut sink = open(CONFIG);
    fake_db::with(|state| state.poison.extend(["1".to_string(), "4".to_string()]));
    let written = sink.write(&batch(&[1, 2, 3, 4, 5])).unwrap();
    assert_eq!(rejected_indices(&written), [0, 3]);
    assert_eq!(committed(), ["2", "3", "5"]);
    // A batch of nothing but poison: all rejected, nothing committed, and no empty
    // transaction run.
    fake_db::with(|state| state.poison.insert("6".into()));
    let before = transactions();
    let written = sink.write(&batch(&[1, 6])).unwrap();
    assert_eq!(rejected_indices(&written), [0, 1]);
    assert_eq!(committed(), ["2", "3", "5"]);
    assert_eq!(transactions(), before + 2);
}

#[test]
fn a_lost_connection_is_a_retry_with_nothing_committed_and_the_same_batch_then_goes_in() {
    let mut sink = open(CONFIG);
    fail_next(PgError::Connection("connection reset by peer".into()));
    let reason = retry_reason(sink.write(&batch(&[1, 2])).unwrap());
    assert!(reason.contains("postgres `main`") && reason.contains("connection reset by peer"), "{reason}");
    assert!(committed().is_empty());
    assert_eq!(sink.write(&batch(&[1, 2])).unwrap(), Written::Ack);
    assert_eq!(committed(), ["1", "2"]);
}

#[test]
fn failures_that_are_not_about_one_message_are_retries() {
    let mut sink = open(CONFIG);
    let cases = [
        (PgError::TimedOut("past the 5s call deadline".into()), "timed out"),
        (refusal("40001", "could not serialize access", false, Some(1)), "SQLSTATE 40001; worth trying again"),
        // A missing table refuses every message alike: fix it, do not dead-letter all.
        (
            refusal("42P01", "relation \"public.events\" does not exist", true, Some(0)),
            "exists with the default layout",
        ),
        (refusal("42501", "permission denied for table events", true, Some(0)), "may be written"),
        (
            PgError::NotGranted("`main` is not in grants.postgres".into()),
            "add `main` to the connector's grants.postgres",
        ),
    ];
    for (error, expected) in cases {
        fail_next(error.clone());
        let reason = retry_reason(sink.write(&batch(&[1, 2, 3])).unwrap());
        assert!(reason.contains(expected), "{error:?}: {reason}");
        assert!(committed().is_empty(), "{error:?}");
    }
}

#[test]
fn a_data_refusal_that_names_no_statement_leaves_the_splitting_to_the_host() {
    let mut sink = open(CONFIG);
    for index in [None, Some(3)] {
        fail_next(refusal("22P02", "invalid input syntax", true, index));
        let written = sink.write(&batch(&[1, 2, 3])).unwrap();
        assert!(matches!(&written, Written::Unwritable(r) if r.contains("SQLSTATE 22P02")), "{index:?}: {written:?}");
        assert!(committed().is_empty());
    }
}

#[test]
fn json_payloads_go_to_payload_and_others_to_payload_bytes() {
    let mut sink = open(CONFIG);
    let mut mixed = batch(&[1, 2, 3]);
    mixed.messages[1].payload = b"plain text".to_vec();
    mixed.messages[2].payload = vec![0, 159, 146, 150];
    assert_eq!(sink.write(&mixed).unwrap(), Written::Ack);
    let payloads =
        fake_db::with(|state| state.rows.values().map(|row| (row[1].clone(), row[2].clone())).collect::<Vec<_>>());
    assert_eq!(
        payloads,
        [
            (Value::Json(r#"{"n": 1}"#.into()), Value::Null),
            (Value::Null, Value::Bytes(b"plain text".to_vec())),
            (Value::Null, Value::Bytes(vec![0, 159, 146, 150])),
        ]
    );
}

#[test]
fn headers_and_the_origin_timestamp_are_written() {
    let mut sink = open(CONFIG);
    let mut one = batch(&[9]);
    one.messages[0].headers = vec![
        ("source".into(), HeaderValue::String("shop".into())),
        ("attempt".into(), HeaderValue::Uint8(2)),
        ("blob".into(), HeaderValue::Raw(vec![1, 2, 3])),
    ];
    one.messages[0].origin_timestamp = Some(1_650_000_000_000_001);
    assert_eq!(sink.write(&one).unwrap(), Written::Ack);
    let row = fake_db::with(|state| state.rows["9"].clone());
    let Value::Json(headers) = &row[3] else { panic!("headers are {:?}", row[3]) };
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(headers).unwrap(),
        serde_json::json!({"source": {"string": "shop"}, "attempt": {"uint8": 2}, "blob": {"raw": "AQID"}})
    );
    assert_eq!(row[8], Value::Timestamp(1_650_000_000_000_001));
}

#[test]
fn messages_without_ids_are_each_written() {
    let mut sink = open(CONFIG);
    assert_eq!(sink.write(&batch(&[0, 0, 0])).unwrap(), Written::Ack);
    assert_eq!(committed(), ["app/events/1/10", "app/events/1/11", "app/events/1/12"]);
}

#[test]
fn create_table_creates_the_default_layout_on_open_only_when_asked() {
    open(CONFIG);
    assert!(fake_db::with(|state| state.executed.is_empty()));
    open(r#"{"connection": "main", "table": "events", "create_table": true}"#);
    let sql = fake_db::with(|state| state.executed[0].sql.clone());
    assert!(sql.starts_with(r#"CREATE TABLE IF NOT EXISTS "events" ("id" text PRIMARY KEY"#), "{sql}");

    fail_next(refusal("42501", "permission denied for schema public", true, None));
    let config = serde_json::from_str(r#"{"connection": "main", "table": "events", "create_table": true}"#).unwrap();
    let error = Subject::open(config).err().expect("open fails");
    assert!(error.message().contains("creating the table `events`"), "{error}");
    assert!(error.message().contains("permission denied"), "{error}");
}
