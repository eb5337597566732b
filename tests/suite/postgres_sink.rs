//! The PostgreSQL sink against a real server of the test's own, reading the local
//! log: every message one row; a row the database refuses for good (a CHECK
//! constraint) goes to the dead letters with the server's reason, the others are
//! written; and reading the same messages again (positions reset) changes no row.

use std::collections::BTreeMap;

use ferry::grants::postgres::PgPools;
use ferry::sink::SinkConnector;
use ferry::status::Event;
use ferry_tests::components::POSTGRES_SINK;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::postgres_server::{PASSWORD, PgServer};
use ferry_tests::records::{seq_messages, seq_of};
use serde_json::json;

/// A `postgres-sink` `key` writing topic `orders` into table `orders` of `server`,
/// its dead letters into topic `orders-dead`.
fn sink(h: &Harness, server: &PgServer, key: &str) -> SinkConnector {
    let mut sink = h.sink(key, POSTGRES_SINK, json!({ "connection": "db", "table": "orders" }), &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.postgres = vec!["db".into()];
    let servers = BTreeMap::from([("db".to_string(), server.ferry_server(h.dir.path(), "db", PASSWORD))]);
    sink.sandbox.postgres = PgPools::granted(&sink.sandbox.grants, &servers).unwrap();
    sink
}

/// Run `sink` until it stored its position past offset `end - 1` of `orders`.
async fn drain(h: &Harness, sink: SinkConnector, end: u64) {
    let key = sink.key.to_string();
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    running
        .wait_for("every message written", |e| {
            matches!(e, Event::Written { key: k, topic, end: e, .. } if **k == *key && topic == "orders" && *e == end)
        })
        .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_are_written_once_by_id_and_a_refused_row_is_dead_lettered() {
    let server = PgServer::start();
    server
        .execute(
            r#"CREATE TABLE orders ("id" text PRIMARY KEY, "payload" jsonb, "payload_bytes" bytea,
               "headers" jsonb NOT NULL, "stream" text NOT NULL, "topic" text NOT NULL, "partition" int8 NOT NULL,
               "offset" int8 NOT NULL CHECK ("offset" <> 7), "origin_timestamp" timestamptz)"#,
        )
        .await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..30)).await;
    drain(&h, sink(&h, &server, "pg"), 30).await;

    let seqs = "SELECT (payload->>'seq')::int8 FROM orders ORDER BY \"offset\"";
    let written = server.query_i64s(seqs).await;
    assert_eq!(written, (0..30).filter(|s| *s != 7).collect::<Vec<_>>(), "every row but the refused one");
    let dead = h.records("orders-dead");
    assert_eq!(dead.iter().map(|r| seq_of(&r.payload)).collect::<Vec<_>>(), [7], "the refused one, dead-lettered");
    let reason = dead[0].headers.as_ref().unwrap()["ferry-dead-letter-reason"].to_string();
    assert!(reason.contains("23514"), "the server's reason, with its SQLSTATE: {reason}");

    // The same messages again, from the start: nothing changes in the table.
    let before = server.query_i64s("SELECT count(*) FROM orders").await;
    let digest = "SELECT ('x' || substr(md5(string_agg(id || payload::text, ',' ORDER BY id)), 1, 15))::bit(60)::int8 \
                  FROM orders";
    let digest_before = server.query_i64s(digest).await;
    drain(&h, sink(&h, &server, "pg-replay"), 30).await;
    assert_eq!(server.query_i64s("SELECT count(*) FROM orders").await, before, "no row added");
    assert_eq!(server.query_i64s(digest).await, digest_before, "no row changed");
}
