//! The PostgreSQL sink's mapped columns against a real server: JSON payload fields
//! and metadata land in typed columns, converted by the server; a message the server
//! cannot convert, one a CHECK refuses and one that is no JSON object go to the dead
//! letters with the reason, the others are written; an upsert keyed by a business
//! key keeps the latest values; a table without a unique index on the keys is a
//! retry naming it, until the index is there; and reading the same messages again
//! changes no row.

use ferry::contract::{Message, Uint128};
use ferry::engine::status::Event;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::postgres_server::PgServer;
use serde_json::json;

use crate::postgres_sink::{drain, sink_with, wait_written};

/// A message with id `id` and `payload`.
fn message(id: u128, payload: &str, origin_timestamp: Option<u64>) -> Message {
    Message {
        id: Some(Uint128::from(id)),
        headers: Vec::new(),
        payload: payload.as_bytes().to_vec().into(),
        origin_timestamp,
    }
}

/// The single text value `sql` returns (NULL as "").
async fn query_text(server: &PgServer, sql: &str) -> String {
    let row = server.client().await.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    row.get::<_, Option<String>>(0).unwrap_or_default()
}

/// A digest of every row of `orders`, in `order_id` order.
async fn digest(server: &PgServer) -> String {
    query_text(server, "SELECT md5(string_agg(o::text, ',' ORDER BY order_id)) FROM orders o").await
}

/// Write the same messages again from the start with a sink of another key: no row
/// may change, and only the `refused` messages (refused again) may be dead-lettered:
/// a row written before is no refusal.
async fn assert_a_replay_changes_nothing(
    h: &Harness,
    server: &PgServer,
    plugin_config: serde_json::Value,
    end: u64,
    refused: usize,
) {
    let before = digest(server).await;
    assert!(!before.is_empty(), "rows to compare");
    let dead_before = dead_letters(h).len();
    drain(h, sink_with(h, server, "pg-replay", plugin_config), end).await;
    assert_eq!(digest(server).await, before, "a replay changed the table");
    let dead = dead_letters(h);
    assert_eq!(dead.len(), dead_before + refused, "dead letters of the replay: {:?}", &dead[dead_before..]);
}

/// The dead letters' payloads, each with its reason.
fn dead_letters(h: &Harness) -> Vec<(String, String)> {
    h.records("orders-dead")
        .iter()
        .map(|r| {
            let reason = r.headers.as_ref().unwrap()["ferry-dead-letter-reason"].to_string();
            (String::from_utf8_lossy(&r.payload).into_owned(), reason)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_fields_become_typed_columns_and_what_the_server_refuses_is_dead_lettered() {
    let server = PgServer::start();
    server
        .execute(
            "CREATE TABLE orders (order_id bigint PRIMARY KEY, customer text NOT NULL, \
             total numeric(12,2) CHECK (total >= 0), placed timestamptz, details jsonb, paid boolean, \
             message_id text UNIQUE, received timestamptz, note text DEFAULT 'none')",
        )
        .await;
    let plugin_config = json!({
        "connection": "db",
        "table": "orders",
        "columns": {
            "order_id": "order_id", "customer": "customer", "total": "/amount/total", "placed": "placed",
            "details": "details", "paid": "paid", "message_id": "@id", "received": "@origin_timestamp",
        },
    });
    let h = Harness::new();
    let messages = [
        r#"{"order_id": 1, "customer": "ada", "amount": {"total": 12.5}, "placed": "2024-02-29T12:34:56.000001Z",
            "details": {"gift": true, "items": [1, 2]}, "paid": true}"#,
        r#"{"order_id": 2, "customer": "grace", "amount": {"total": "9999999999.99"},
            "placed": "2024-03-01T00:00:00+02:00", "details": null, "paid": false}"#,
        r#"{"order_id": 3, "customer": "bad", "amount": {"total": "twelve"}}"#,
        r#"{"order_id": 4, "customer": "negative", "amount": {"total": -1}}"#,
        r#"[{"order_id": 5}]"#,
        r#"{"order_id": 6, "customer": "min", "unmapped": 1}"#,
        "order 7, in plain text",
    ];
    let origin = |i: u128| (i == 1).then_some(1_709_210_096_000_001);
    h.append("orders", (1..).zip(messages).map(|(id, payload)| message(id, payload, origin(id))).collect()).await;
    drain(&h, sink_with(&h, &server, "pg", plugin_config.clone()), 7).await;

    // Compared as the server prints the typed values: numeric to its scale, times in
    // UTC to the microsecond, jsonb normalised, booleans as t/f, NULL as nothing, and
    // a column not mapped left to its default.
    let rows = query_text(
        &server,
        "SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s', order_id, customer, total, placed AT TIME ZONE 'UTC', \
         details, paid, message_id, received AT TIME ZONE 'UTC', note), E'\\n' ORDER BY order_id) FROM orders",
    )
    .await;
    assert_eq!(
        rows,
        "1|ada|12.50|2024-02-29 12:34:56.000001|{\"gift\": true, \"items\": [1, 2]}|t|1|2024-02-29 12:34:56.000001|none\n\
         2|grace|9999999999.99|2024-02-29 22:00:00||f|2||none\n\
         6|min|||||6||none"
    );

    let dead = dead_letters(&h);
    let payloads: Vec<&str> = dead.iter().map(|(payload, _)| payload.as_str()).collect();
    assert_eq!(payloads, [messages[2], messages[3], messages[4], messages[6]], "the refused ones, dead-lettered");
    let expected = [
        &["22P02", "numeric", "twelve"][..],
        &["23514", "orders_total_check"],
        &["the payload is a JSON array, not an object"],
        &["the payload is not JSON"],
    ];
    for ((payload, reason), needles) in dead.iter().zip(expected) {
        assert!(needles.iter().all(|n| reason.contains(n)), "{payload}: {reason} should say {needles:?}");
    }

    assert_a_replay_changes_nothing(&h, &server, plugin_config, 7, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_by_business_key_keeps_the_latest_values_once_the_table_has_a_unique_index_for_it() {
    let server = PgServer::start();
    // No unique index on order_id yet: ON CONFLICT cannot work.
    server.execute("CREATE TABLE orders (order_id bigint NOT NULL, status text, total numeric, written_by text)").await;
    let plugin_config = json!({
        "connection": "db",
        "table": "orders",
        "columns": { "order_id": "order_id", "status": "status", "total": "total", "written_by": "@id" },
        "conflict_columns": ["order_id"],
        "upsert": true,
    });
    let h = Harness::new();
    let updates =
        [(1, "placed", "10"), (2, "placed", "20"), (1, "paid", "11.5"), (3, "placed", "5"), (2, "cancelled", "20")];
    let messages = (1..)
        .zip(updates)
        .map(|(id, (order, status, total))| {
            message(id, &format!(r#"{{"order_id": {order}, "status": "{status}", "total": {total}}}"#), None)
        })
        .collect();
    h.append("orders", messages).await;
    let mut running =
        Running::start(h.host_with(Vec::new(), vec![sink_with(&h, &server, "pg", plugin_config.clone())]));

    // The server refuses the statement itself (SQLSTATE 42P10): a retry, whose reason
    // names the index the table lacks; nothing is written, nothing dead-lettered.
    let Event::Retried { reason, .. } =
        running.wait_for("a retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "pg")).await
    else {
        unreachable!()
    };
    assert!(reason.contains("42P10") && reason.contains("unique index on exactly (order_id)"), "{reason}");
    assert_eq!(server.query_i64s("SELECT count(*) FROM orders").await, [0]);
    assert!(h.committed("pg").is_none(), "no position stored past a batch not written");

    // With the index, the same batch goes in: the later message of an order wins.
    server.execute("ALTER TABLE orders ADD PRIMARY KEY (order_id)").await;
    wait_written(&mut running, "pg", 5).await;
    running.stop().await;
    let rows = query_text(
        &server,
        "SELECT string_agg(format('%s|%s|%s|%s', order_id, status, total, written_by), ',' ORDER BY order_id) \
         FROM orders",
    )
    .await;
    assert_eq!(rows, "1|paid|11.5|3,2|cancelled|20|5,3|placed|5|4");
    assert!(dead_letters(&h).is_empty());

    // Written again from the start, every upsert runs again and ends where it was.
    assert_a_replay_changes_nothing(&h, &server, plugin_config, 5, 0).await;
}
