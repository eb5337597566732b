//! The InfluxDB sink against a real InfluxDB 1.x server of the test's own
//! (`ferry_tests::influxdb_server`): every record one point, exactly once, through a
//! `kill -9` of ferry mid-flow (a replay overwrites its own point); a point the server
//! refuses (a field type conflict) and a record that cannot be a point go to the dead
//! letters with the reason, the others are written, and a replay changes nothing; a
//! server down is retried until everything is written once; refused credentials are
//! said, and nothing is written or dead-lettered until they are right.

use std::collections::BTreeMap;

use ferry::contract::{Message, Uint128};
use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{INFLUXDB_SINK, RANDOM_SOURCE};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::influxdb_server::{InfluxServer, PASSWORD, USER};
use ferry_tests::records::seq_messages;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use crate::sinks::{drain_orders as drain, wait_written_orders as wait_written};

/// An `influxdb-sink` `key` reading topic `orders`, writing to database `db` of
/// `server` with `plugin_config` added, its dead letters into topic `orders-dead`.
fn sink(h: &Harness, server: &InfluxServer, key: &str, plugin_config: Value) -> SinkConnector {
    let mut config = json!({ "url": server.url(""), "db": "db", "retry_delay": "10ms", "retry_max_delay": "50ms" });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut sink = h.sink(key, INFLUXDB_SINK, config, &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.network = vec![server.address()];
    sink
}

/// The server's answers are read on a blocking thread: the test's runtime goes on.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Each `seq` field of `measurement` in `db`, with how many points hold it.
fn seqs(server: &InfluxServer, measurement: &str) -> BTreeMap<u64, usize> {
    let mut seqs = BTreeMap::new();
    for row in blocking(|| server.select("db", &format!("SELECT seq FROM \"{measurement}\""))) {
        *seqs.entry(row["seq"].as_u64().unwrap_or_else(|| panic!("no seq in {row:?}"))).or_insert(0) += 1;
    }
    seqs
}

fn message(payload: &str, seq: u64) -> Message {
    Message {
        id: Some(Uint128::from(u128::from(seq) + 1)),
        headers: Vec::new(),
        payload: payload.as_bytes().to_vec().into(),
        origin_timestamp: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_point_and_an_unmappable_record_are_dead_lettered_and_a_replay_changes_nothing() {
    let server = blocking(InfluxServer::start);
    blocking(|| server.create_database("db"));
    let h = Harness::new();
    // `v` a float, but a string at seq 7 (a field type conflict); seq 13 not JSON,
    // seq 21 with no measurement.
    let messages = (0..30)
        .map(|seq| match seq {
            7 => message(r#"{"m":"orders","seq":7,"v":"seven"}"#, seq),
            13 => message("not json", seq),
            21 => message(r#"{"seq":21,"v":21.5}"#, seq),
            _ => message(&format!(r#"{{"m":"orders","seq":{seq},"v":{seq}.5,"region":"eu"}}"#), seq),
        })
        .collect();
    h.append("orders", messages).await;
    let mapped = json!({ "payload_format": "fields", "measurement_field": "m", "tags": ["region"] });
    drain(&h, sink(&h, &server, "influx", mapped.clone()), 30).await;

    let written = seqs(&server, "orders");
    let expected: Vec<u64> = (0..30).filter(|s| ![7, 13, 21].contains(s)).collect();
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), expected, "every point but the three");
    assert!(written.values().all(|n| *n == 1), "once each: {written:?}");
    let rows = blocking(|| server.select("db", "SELECT * FROM orders WHERE seq = 3"));
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!((row["v"].as_f64(), row["region"].as_str(), row["offset"].as_str()), (Some(3.5), Some("eu"), Some("3")));
    assert_eq!(
        (row["stream"].as_str(), row["topic"].as_str(), row["partition"].as_str()),
        (Some("test"), Some("orders"), Some("0"))
    );

    let dead = h.records("orders-dead");
    let reasons: Vec<String> = dead
        .iter()
        .map(|r| r.headers.as_ref().unwrap()["ferry-dead-letter-reason"]["string"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(dead.len(), 3, "{reasons:?}");
    let reason_of = |payload: &str| {
        let at = dead
            .iter()
            .position(|r| &r.payload[..] == payload.as_bytes())
            .unwrap_or_else(|| panic!("{payload} dead-lettered"));
        reasons[at].clone()
    };
    let conflict = reason_of(r#"{"m":"orders","seq":7,"v":"seven"}"#);
    assert!(
        conflict.contains("InfluxDB refused the point: HTTP 400") && conflict.contains("field type conflict"),
        "{conflict}"
    );
    assert!(reason_of("not json").contains("its payload is not JSON"), "{reasons:?}");
    assert!(reason_of(r#"{"seq":21,"v":21.5}"#).contains("it has no \"m\" (the measurement_field)"), "{reasons:?}");

    // The same messages again, from the start: the same points, overwritten.
    let before = blocking(|| server.select("db", "SELECT * FROM orders"));
    drain(&h, sink(&h, &server, "influx-replay", mapped), 30).await;
    assert_eq!(blocking(|| server.select("db", "SELECT * FROM orders")), before, "no point added or changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_down_is_retried_and_logged_until_every_point_is_written_once() {
    let mut server = blocking(InfluxServer::start);
    blocking(|| server.create_database("db"));
    let h = Harness::new();
    h.append("orders", seq_messages(0..50)).await;
    let config = json!({ "payload_format": "fields", "measurement": "orders", "max_retries": 1 });
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink(&h, &server, "influx", config)]));
    wait_written(&mut running, "influx", 50).await;

    blocking(|| server.kill_9());
    h.append("orders", seq_messages(50..100)).await;
    let Event::Retried { reason, .. } =
        running.wait_for("a retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "influx")).await
    else {
        unreachable!()
    };
    assert!(
        reason.contains(&format!("InfluxDB at {}", server.url(""))) && reason.contains("after 2 attempt(s)"),
        "{reason}"
    );
    assert_eq!(
        h.committed("influx").map(|c| ferry_tests::records::positions(&c.state)["test/orders"]),
        Some(50),
        "stored past what failed, no further"
    );

    blocking(|| server.restart());
    wait_written(&mut running, "influx", 100).await;
    running.stop().await;
    let written = seqs(&server, "orders");
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
    assert!(written.values().all(|n| *n == 1), "once each: {written:?}");
    assert!(h.records("orders-dead").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_said_and_nothing_is_written_until_they_are_right() {
    let server = blocking(InfluxServer::start_with_auth);
    blocking(|| server.create_database("db"));
    let h = Harness::new();
    h.append("orders", seq_messages(0..20)).await;
    let wrong = json!({ "payload_format": "fields", "username": USER, "password": "not-the-password" });
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink(&h, &server, "influx", wrong)]));
    let Event::Retried { reason, .. } =
        running.wait_for("a retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "influx")).await
    else {
        unreachable!()
    };
    running.stop().await;
    assert!(reason.contains("refused the credentials (HTTP 401: authorization failed)"), "{reason}");
    assert!(reason.contains("check username and password"), "{reason}");
    assert!(h.records("orders-dead").is_empty(), "nothing dead-lettered: the message is not at fault");
    assert!(h.committed("influx").is_none(), "no position stored");
    assert!(blocking(|| server.select("db", "SHOW MEASUREMENTS")).is_empty(), "nothing written");

    // Iggy's v2 form: the token as "username:password".
    let right = json!({ "payload_format": "fields", "version": "v2", "org": "ferry", "bucket": "db", "token": format!("{USER}:{PASSWORD}") });
    let mut config = sink(&h, &server, "influx", right.clone());
    config.plugin_config = {
        let mut value: Value = serde_json::from_str(&config.plugin_config).unwrap();
        value.as_object_mut().unwrap().remove("db");
        value.to_string()
    };
    drain(&h, config, 20).await;
    assert_eq!(seqs(&server, "iggy_messages").keys().copied().collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
}

const COUNT: u64 = 300;

/// A ferry config: the random source (about 2 records every 5 ms, so the kill lands
/// mid-flow) into the sink, each record's `seq` its point's timestamp (in seconds)
/// and no offset tag: a point is the measurement and `seq` alone, so a record written
/// twice is one point.
fn config(site: &Site, server: &InfluxServer) -> std::path::PathBuf {
    site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "feed"
path = "{RANDOM_SOURCE}"
poll_interval = "1ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {COUNT}, messages_per_batch = 2, interval = "5ms", payload_size = 40 }}

[[sinks]]
key = "influx"
path = "{INFLUXDB_SINK}"
poll_interval = "2ms"
batch_length = 20
retry_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
dead_letters = {{ stream = "dead", topic = "influx" }}
grants = {{ network = ["{address}"] }}

[sinks.plugin_config]
url = "{url}"
db = "db"
measurement = "feed"
payload_format = "fields"
timestamp_field = "seq"
precision = "s"
include_metadata = false
include_offset_tag = false
include_origin_timestamp = false
retry_delay = "10ms"
retry_max_delay = "100ms"
"#,
            address = server.address(),
            url = server.url(""),
        ),
    )
}

/// The timestamps (the `seq`s) of the points in `feed`, with their `text`.
fn points(server: &InfluxServer) -> Vec<u64> {
    server.select("db", "SELECT text FROM feed").iter().map(|row| row["time"].as_u64().unwrap() / 1_000_000).collect()
}

#[test]
fn every_record_is_one_point_through_a_kill_9_of_ferry() {
    let server = InfluxServer::start();
    server.create_database("db");
    let site = Site::new();
    let config = config(&site, &server);
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=influx", "running"]);
    until("a hundred points in InfluxDB", || points(&server).len() >= 100);
    run.kill_9();
    let before_the_kill = points(&server).len();
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=influx", "running"]);
    until("every point", || points(&server).len() as u64 == COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let points = points(&server);
    assert_eq!(points, (0..COUNT).collect::<Vec<_>>(), "every record, one point each, in time order");
    assert!((before_the_kill as u64) < COUNT, "the kill landed mid-flow");
    let rows = server.select("db", "SELECT * FROM feed WHERE time = 7s");
    assert_eq!(rows.len(), 1);
    assert!(rows[0]["text"].as_str().is_some_and(|t| !t.is_empty()), "{:?}", rows[0]);
    assert!(!LocalLog::topic_file(&site.log_dir(), "dead", "influx").exists(), "nothing dead-lettered");
}
