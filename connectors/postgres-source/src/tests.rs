//! The source through the SDK's driver, over the fake database: what is read, what
//! is deleted or marked and when, and recovery from lost connections and restarts.

use ferry_guest::Driver;
use ferry_guest::bindings::iggy::connector::types as wire;

use super::PostgresSource;
use crate::cursor::Key;
use crate::fake_db::{self, FakeDb};
use crate::id::message_id;

type Subject = Driver<PostgresSource<FakeDb>>;

const PLAIN: &str = r#"{"connection": "main", "table": "events", "batch_size": 2}"#;
const DELETE: &str = r#"{"connection": "main", "table": "events", "batch_size": 2, "after_ack": {"delete": true}}"#;
const MARK: &str =
    r#"{"connection": "main", "table": "events", "batch_size": 2, "after_ack": {"mark_column": "processed"}}"#;

fn table(ids: &[i64]) {
    fake_db::with(|state| state.ids = ids.iter().copied().collect());
}

fn left() -> Vec<i64> {
    fake_db::with(|state| state.ids.iter().copied().collect())
}

/// The `id` of each message's row.
fn ids(batch: &wire::Batch) -> Vec<i64> {
    ferry_guest::messages_of(batch)
        .unwrap()
        .iter()
        .map(|m| serde_json::from_slice::<serde_json::Value>(&m.payload).unwrap()["id"].as_i64().unwrap())
        .collect()
}

fn poll(driver: &mut Subject) -> wire::Batch {
    driver.poll().unwrap().expect("a batch")
}

fn nack() -> wire::BatchResult {
    wire::BatchResult::Nack(wire::Nack { reason: wire::NackReason::DeliveryFailed, detail: "test".into() })
}

fn executed() -> usize {
    fake_db::with(|state| state.executed.len())
}

#[test]
fn rows_are_read_in_order_batch_after_batch_with_ids_from_their_keys() {
    table(&[5, 1, 3]);
    let mut driver = Subject::open(PLAIN, None).unwrap();
    let first = poll(&mut driver);
    assert_eq!(ids(&first), [1, 3]);
    assert_eq!(ferry_guest::messages_of(&first).unwrap()[0].id, Some(message_id("events", &Key::Int(1))));
    driver.on_batch_result(first.id, wire::BatchResult::Ack);
    let second = poll(&mut driver);
    assert_eq!(ids(&second), [5]);
    driver.on_batch_result(second.id, wire::BatchResult::Ack);
    assert_eq!(driver.poll().unwrap(), None, "nothing after the last row");
    table(&[1, 3, 5, 6]);
    assert_eq!(ids(&poll(&mut driver)), [6], "a new row is read on a later poll");
    assert_eq!(executed(), 0, "without after_ack nothing is changed");
}

#[test]
fn a_nack_reads_the_same_rows_again_as_the_same_messages_and_deletes_nothing() {
    table(&[1, 2, 3]);
    let mut driver = Subject::open(DELETE, None).unwrap();
    let first = poll(&mut driver);
    driver.on_batch_result(first.id, nack());
    assert_eq!(executed(), 0);
    assert_eq!(left(), [1, 2, 3]);
    let again = poll(&mut driver);
    assert_eq!(ferry_guest::messages_of(&again), ferry_guest::messages_of(&first));
    assert_eq!(again.staged_state, first.staged_state);
}

#[test]
fn an_ack_deletes_the_delivered_rows_once() {
    table(&[1, 2, 3, 4, 5]);
    let mut driver = Subject::open(DELETE, None).unwrap();
    let first = poll(&mut driver);
    assert_eq!(left(), [1, 2, 3, 4, 5], "nothing is deleted before the ACK");
    driver.on_batch_result(first.id, wire::BatchResult::Ack);
    assert_eq!(left(), [3, 4, 5]);
    let second = poll(&mut driver);
    assert_eq!(ids(&second), [3, 4]);
    assert_eq!(executed(), 1, "the next poll does not delete the acknowledged rows again");
    driver.on_batch_result(second.id, wire::BatchResult::Ack);
    assert_eq!(left(), [5]);
}

#[test]
fn a_failed_delete_is_made_good_before_the_next_read() {
    table(&[1, 2, 3, 4]);
    let mut driver = Subject::open(DELETE, None).unwrap();
    let first = poll(&mut driver);
    fake_db::with(|state| state.failures = 1);
    driver.on_batch_result(first.id, wire::BatchResult::Ack);
    assert_eq!(left(), [1, 2, 3, 4], "the connection broke: nothing deleted yet");

    // Still broken at the next poll: the poll fails rather than read past undeleted rows.
    fake_db::with(|state| state.failures = 1);
    let queries = fake_db::with(|state| state.queries.len());
    let error = driver.poll().unwrap_err();
    assert!(error.message().contains("no connection"), "{error}");
    assert_eq!(fake_db::with(|state| state.queries.len()), queries, "no read before the delete");

    // Back: the delete runs first, then the next rows are read.
    let second = poll(&mut driver);
    assert_eq!(left(), [3, 4]);
    assert_eq!(ids(&second), [3, 4]);
}

#[test]
fn a_restart_after_the_ack_finishes_the_delete() {
    table(&[1, 2, 3, 4]);
    let mut before = Subject::open(DELETE, None).unwrap();
    let first = poll(&mut before);
    // The host committed the batch's cursor, then died before telling the guest.
    drop(before);
    let mut after = Subject::open(DELETE, first.staged_state.as_deref()).unwrap();
    assert_eq!(left(), [1, 2, 3, 4]);
    let second = poll(&mut after);
    assert_eq!(left(), [3, 4], "the rows of the committed batch were deleted on the first poll");
    assert_eq!(ids(&second), [3, 4]);
}

#[test]
fn a_lost_connection_fails_the_poll_and_the_next_poll_recovers() {
    table(&[1, 2, 3]);
    let mut driver = Subject::open(PLAIN, None).unwrap();
    fake_db::with(|state| state.failures = 1);
    let error = driver.poll().unwrap_err();
    assert!(error.message().contains("reading the rows of `events`"), "{error}");
    assert_eq!(ids(&poll(&mut driver)), [1, 2]);
}

#[test]
fn rows_are_marked_on_ack_only_and_marked_rows_are_not_read_again() {
    table(&[1, 2, 3]);
    fake_db::with(|state| state.marked.insert(2));
    let mut driver = Subject::open(MARK, None).unwrap();
    let first = poll(&mut driver);
    assert_eq!(ids(&first), [1, 3], "row 2 was marked before");
    driver.on_batch_result(first.id, nack());
    assert_eq!(fake_db::with(|state| state.marked.len()), 1);
    let again = poll(&mut driver);
    driver.on_batch_result(again.id, wire::BatchResult::Ack);
    assert_eq!(fake_db::with(|state| state.marked.iter().copied().collect::<Vec<_>>()), [1, 2, 3]);
    // From the start again (a new connector on the same table): nothing left to read.
    let mut fresh = Subject::open(MARK, None).unwrap();
    assert_eq!(fresh.poll().unwrap(), None);
}

/// Iggy's keys with two tables: each row as Iggy's record of it, each table its own
/// position in one cursor.
const IGGY_TWO_TABLES: &str = r#"{"connection": "main", "mode": "polling", "tables": ["users", "orders"], "batch_size": 2, "delete_after_read": true}"#;

/// `(table_name, data.id)` of each message: Iggy's record of a row.
fn records(batch: &wire::Batch) -> Vec<(String, i64)> {
    ferry_guest::messages_of(batch)
        .unwrap()
        .iter()
        .map(|m| {
            let record: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
            assert_eq!(record["operation_type"], "SELECT");
            (record["table_name"].as_str().unwrap().to_string(), record["data"]["id"].as_i64().unwrap())
        })
        .collect()
}

#[test]
fn several_tables_are_read_in_turn_into_one_batch_each_from_its_own_cursor() {
    table(&[1, 2, 3]);
    let mut driver = Subject::open(IGGY_TWO_TABLES, None).unwrap();
    let first = poll(&mut driver);
    let both = |ids: &[i64]| -> Vec<(String, i64)> {
        ["users", "orders"].iter().flat_map(|table| ids.iter().map(|id| (table.to_string(), *id))).collect()
    };
    assert_eq!(records(&first), both(&[1, 2]));
    let message = &ferry_guest::messages_of(&first).unwrap()[2];
    assert_eq!(message.id, Some(message_id("orders", &Key::Int(1))), "ids by table and key");
    driver.on_batch_result(first.id, nack());
    let again = poll(&mut driver);
    assert_eq!(records(&again), both(&[1, 2]), "the same rows after a NACK");
    assert_eq!(executed(), 0, "nothing deleted before an ACK");
    let cursor: serde_json::Value = serde_json::from_slice(again.staged_state.as_deref().unwrap()).unwrap();
    assert_eq!(cursor["tables"]["orders"]["after"]["tracking"], serde_json::json!({"int": 2}), "{cursor}");

    // The host committed, then died before telling the guest: a restart from the
    // committed cursor deletes each table's delivered rows, then reads on.
    drop(driver);
    let mut restarted = Subject::open(IGGY_TWO_TABLES, again.staged_state.as_deref()).unwrap();
    let second = poll(&mut restarted);
    assert_eq!(executed(), 2, "one delete for each table");
    assert_eq!(records(&second), both(&[3]));
    restarted.on_batch_result(second.id, wire::BatchResult::Ack);
    assert_eq!(restarted.poll().unwrap(), None, "nothing after the last rows of both");
}
