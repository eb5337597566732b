//! The PostgreSQL sink against a real server of the test's own, reading the local
//! log: every message one row; a row the database refuses for good (a CHECK
//! constraint) goes to the dead letters with the server's reason, the others are
//! written; reading the same messages again (positions reset) changes no row; and
//! a server lost mid-flow is a retry, logged, until every row is written once.

use std::collections::BTreeMap;

use ferry::capabilities::postgres::PgPools;
use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry_tests::components::POSTGRES_SINK;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::postgres_server::{PASSWORD, PgServer};
use ferry_tests::records::{positions, seq_messages, seq_of};
use serde_json::json;

/// A `postgres-sink` `key` writing topic `orders` into table `orders` of `server`,
/// its dead letters into topic `orders-dead`.
fn sink(h: &Harness, server: &PgServer, key: &str) -> SinkConnector {
    sink_with(h, server, key, json!({ "connection": "db", "table": "orders" }))
}

/// A `postgres-sink` `key` with `plugin_config`, whose `connection` `db` is `server`,
/// reading topic `orders`, its dead letters into topic `orders-dead`.
pub(crate) fn sink_with(h: &Harness, server: &PgServer, key: &str, plugin_config: serde_json::Value) -> SinkConnector {
    let mut sink = h.sink(key, POSTGRES_SINK, plugin_config, &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.postgres = vec!["db".into()];
    let servers = BTreeMap::from([("db".to_string(), server.ferry_server(h.dir.path(), "db", PASSWORD))]);
    sink.sandbox.shared.postgres = PgPools::granted(&sink.sandbox.grants.postgres, &servers).unwrap();
    sink
}

/// The table `orders` in the sink's default layout, with `check` on its `offset`.
async fn create_orders(server: &PgServer, check: &str) {
    server
        .execute(&format!(
            r#"CREATE TABLE orders ("id" text PRIMARY KEY, "payload" jsonb, "payload_bytes" bytea,
               "headers" jsonb NOT NULL, "stream" text NOT NULL, "topic" text NOT NULL, "partition" int8 NOT NULL,
               "offset" int8 NOT NULL {check}, "origin_timestamp" timestamptz)"#
        ))
        .await;
}

/// Wait until `running`'s sink `key` stored its position at `end` of `orders`.
pub(crate) async fn wait_written(running: &mut Running, key: &str, end: u64) {
    running
        .wait_for(&format!("{key} to write up to {end}"), |e| {
            matches!(e, Event::Written { key: k, topic, end: e, .. } if **k == *key && topic == "orders" && *e == end)
        })
        .await;
}

/// Run `sink` until it stored its position past offset `end - 1` of `orders`.
pub(crate) async fn drain(h: &Harness, sink: SinkConnector, end: u64) {
    let key = sink.key.to_string();
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    wait_written(&mut running, &key, end).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_are_written_once_by_id_and_a_refused_row_is_dead_lettered() {
    let server = PgServer::start();
    create_orders(&server, r#"CHECK ("offset" <> 7)"#).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_server_is_retried_and_logged_until_every_row_is_written_once() {
    let mut server = PgServer::start();
    create_orders(&server, "").await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..50)).await;
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink(&h, &server, "pg")]));
    wait_written(&mut running, "pg", 50).await;

    // The server dies; the next messages cannot be written, and are not skipped.
    tokio::task::block_in_place(|| server.kill_9());
    h.append("orders", seq_messages(50..100)).await;
    let Event::Retried { reason, .. } =
        running.wait_for("a retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "pg")).await
    else {
        unreachable!()
    };
    assert!(reason.contains("postgres `db`"), "{reason}");
    let logged = capture().of("pg");
    assert!(logged.iter().any(|l| l.message.contains(&reason)), "the retry is not in the log: {logged:?}");
    assert_eq!(h.committed("pg").map(|c| positions(&c.state)["test/orders"]), Some(50), "stored past what failed");

    // Back: every message is a row, once.
    tokio::task::block_in_place(|| server.restart());
    wait_written(&mut running, "pg", 100).await;
    running.stop().await;
    let written = server.query_i64s("SELECT (payload->>'seq')::int8 FROM orders ORDER BY 1").await;
    assert_eq!(written, (0..100).collect::<Vec<_>>());
}
