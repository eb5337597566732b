//! The MySQL sink against a real MariaDB server of the test's own
//! (`ferry_tests::mariadb_server`, Debian's mariadb-server), read back with the
//! `mariadb` client: every message one row, once, through a `kill -9` of ferry and one
//! of the server mid-flow (a replay writes nothing: the id is the primary key); a row
//! the server refuses (too long for its column) split out and dead-lettered with the
//! server's words, the rest written; a connection not granted refused before any
//! connection; a wrong password said and nothing written until it is right.

use std::collections::BTreeMap;

use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{MYSQL_SINK, RANDOM_SOURCE};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::mariadb_server::{MariaDbServer, PASSWORD};
use ferry_tests::records::seq_messages;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use crate::sinks::{drain_orders as drain, wait_written_orders as wait_written};

const PASSWORD_ENV: &str = "FERRY_TEST_MARIADB_PASSWORD";

/// A `mysql-sink` `key` reading topic `orders` into `table`, granted `server` as
/// `shop` (its password from `password_env`), with `plugin_config` added; its dead
/// letters into topic `orders-dead`.
fn sink_with(
    h: &Harness,
    server: &MariaDbServer,
    key: &str,
    plugin_config: Value,
    password_env: &str,
) -> SinkConnector {
    let mut config = json!({ "connection": "shop", "table": "orders", "create_table": true });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut sink = h.sink(key, MYSQL_SINK, config, &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.mysql = vec!["shop".into()];
    sink.sandbox.shared.mysql = server.granted("shop", password_env);
    sink
}

fn sink(h: &Harness, server: &MariaDbServer, key: &str, plugin_config: Value) -> SinkConnector {
    // SAFETY: every test of this binary that touches it sets the same value.
    unsafe { std::env::set_var(PASSWORD_ENV, PASSWORD) };
    sink_with(h, server, key, plugin_config, PASSWORD_ENV)
}

/// The `seq` of each row of `table`, with how many rows hold it.
fn seqs(server: &MariaDbServer, table: &str) -> BTreeMap<u64, usize> {
    let mut seqs = BTreeMap::new();
    let text = server.sql(&format!("SELECT JSON_VALUE(CONVERT(payload USING utf8mb4), '$.seq') FROM {table}"));
    for line in text.lines().filter(|l| !l.is_empty()) {
        *seqs.entry(line.trim().parse().unwrap()).or_insert(0) += 1;
    }
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_writes_nothing_and_a_row_too_long_for_its_column_is_dead_lettered() {
    let server = tokio::task::block_in_place(MariaDbServer::start);
    // The operator's table, its payload column narrower than one message.
    tokio::task::block_in_place(|| {
        server.sql(
            "CREATE TABLE orders (id DECIMAL(39,0) NOT NULL PRIMARY KEY, stream VARCHAR(255) NOT NULL, \
             topic VARCHAR(255) NOT NULL, partition_id INT UNSIGNED NOT NULL, message_offset BIGINT UNSIGNED NOT NULL, \
             origin_timestamp BIGINT UNSIGNED NULL, headers JSON NOT NULL, payload VARBINARY(200) NOT NULL)",
        )
    });
    let h = Harness::new();
    let mut messages = seq_messages(0..20);
    messages[7].payload = format!(r#"{{"seq":7,"pad":"{}"}}"#, "x".repeat(300)).into_bytes().into();
    h.append("orders", messages).await;
    drain(&h, sink(&h, &server, "writer", json!({})), 20).await;

    let written = tokio::task::block_in_place(|| seqs(&server, "orders"));
    let expected: Vec<u64> = (0..20).filter(|s| *s != 7).collect();
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), expected, "every row but the long one");
    assert!(written.values().all(|n| *n == 1));
    let dead = h.records("orders-dead");
    assert_eq!(dead.len(), 1);
    let reason = dead[0].headers.as_ref().unwrap()["ferry-dead-letter-reason"]["string"].as_str().unwrap().to_string();
    assert!(reason.contains("1406") && reason.contains("payload"), "{reason}");

    // The same messages again, from the start (another sink's position): nothing new.
    drain(&h, sink(&h, &server, "writer-again", json!({})), 20).await;
    assert_eq!(tokio::task::block_in_place(|| seqs(&server, "orders")), written, "a replay writes nothing");
    let ids = tokio::task::block_in_place(|| server.sql("SELECT COUNT(DISTINCT id), MIN(message_offset) FROM orders"));
    assert_eq!(ids.trim(), "19\t0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_mid_flow_is_waited_for_and_every_row_is_written_once() {
    const COUNT: u64 = 300;
    let mut server = tokio::task::block_in_place(MariaDbServer::start);
    let h = Harness::new();
    h.append("orders", seq_messages(0..COUNT)).await;
    let mut flowing = sink(&h, &server, "steady", json!({}));
    flowing.settings.batch_length = 10;
    let mut running = Running::start(h.host_with(Vec::new(), vec![flowing]));
    wait_written(&mut running, "steady", 50).await;
    tokio::task::block_in_place(|| server.kill_9());
    running
        .wait_for("a retry while it is down", |e| matches!(e, Event::Retried { key, .. } if &**key == "steady"))
        .await;
    tokio::task::block_in_place(|| server.restart());
    wait_written(&mut running, "steady", COUNT).await;
    running.stop().await;

    let written = tokio::task::block_in_place(|| seqs(&server, "orders"));
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    assert!(written.values().all(|n| *n == 1), "once each, through the kill: {written:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_not_granted_is_refused_and_a_wrong_password_is_said_and_nothing_written() {
    let server = tokio::task::block_in_place(MariaDbServer::start);
    let connections = || server.sql("SHOW GLOBAL STATUS LIKE 'Connections'");
    let h = Harness::new();
    h.append("orders", seq_messages(0..10)).await;
    let before = tokio::task::block_in_place(connections);
    let refused = sink(&h, &server, "ungranted", json!({ "connection": "elsewhere" }));
    let mut running = Running::start(h.host_with(Vec::new(), vec![refused]));
    let event =
        running.wait_for("the open to fail", |e| matches!(e, Event::Failed { key, .. } if &**key == "ungranted")).await;
    running.stop().await;
    assert!(format!("{event:?}").contains("not in this connector's grants.mysql"), "{event:?}");
    let after = tokio::task::block_in_place(connections);
    // One connection: the query that counts them.
    let count = |text: &str| text.split_whitespace().last().unwrap().parse::<u64>().unwrap();
    assert_eq!(count(&after), count(&before) + 1, "ferry never connected");

    // SAFETY: this variable is this test's alone.
    unsafe { std::env::set_var("FERRY_TEST_MARIADB_WRONG_PASSWORD", "wrong") };
    let wrong = sink_with(&h, &server, "locked-out", json!({}), "FERRY_TEST_MARIADB_WRONG_PASSWORD");
    let mut running = Running::start(h.host_with(Vec::new(), vec![wrong]));
    let event = running
        .wait_for("the refusal", |e| matches!(e, Event::Failed { key, .. } | Event::GuestError { key, .. } | Event::Retried { key, .. } if &**key == "locked-out"))
        .await;
    running.stop().await;
    assert!(format!("{event:?}").contains("Access denied"), "{event:?}");
    assert!(!tokio::task::block_in_place(|| server.sql("SHOW TABLES")).contains("orders"), "nothing made or written");
    drain(&h, sink(&h, &server, "let-in", json!({})), 10).await;
    assert_eq!(tokio::task::block_in_place(|| seqs(&server, "orders")).len(), 10);
}

const COUNT: u64 = 400;

#[test]
fn every_message_is_one_row_through_a_kill_9_of_ferry() {
    let server = MariaDbServer::start();
    let site = Site::new();
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

{section}
[[sources]]
key = "feed"
path = "{RANDOM_SOURCE}"
poll_interval = "1ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {COUNT}, messages_per_batch = 2, interval = "5ms", payload_size = 40 }}

[[sinks]]
key = "writer"
path = "{MYSQL_SINK}"
poll_interval = "2ms"
batch_length = 20
retry_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
dead_letters = {{ stream = "dead", topic = "writer" }}
grants = {{ mysql = ["shop"] }}
plugin_config = {{ connection = "shop", table = "feed", create_table = true }}
"#,
            section = server.ferry_section("shop", PASSWORD_ENV),
        ),
    );
    let env = [(PASSWORD_ENV, PASSWORD)];
    let count =
        || server.try_sql("SELECT COUNT(*) FROM feed").ok().and_then(|n| n.trim().parse::<u64>().ok()).unwrap_or(0);
    let mut run = Ferry::start(&config, &env);
    run.wait_for_line(&["key=writer", "running"]);
    until("a hundred rows", || count() >= 100);
    run.kill_9();
    let before_the_kill = count();
    let mut run = Ferry::start(&config, &env);
    run.wait_for_line(&["key=writer", "running"]);
    until("every row", || count() >= COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let written = seqs(&server, "feed");
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    assert!(written.values().all(|n| *n == 1), "once each, through the kill: {written:?}");
    assert!(before_the_kill < COUNT, "the kill landed mid-flow");
    assert!(!LocalLog::topic_file(&site.log_dir(), "dead", "writer").exists(), "nothing dead-lettered");
}
