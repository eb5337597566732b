//! The PostgreSQL source against a real server of the test's own: rows arrive in the
//! log in order with no gap through `kill -9` of ferry at random moments, and a row
//! is deleted only once the batch that carried it was delivered and committed; a
//! NACKed batch deletes nothing, and its rows come again; a query the server refuses
//! and a lost server are logged and retried until rows flow again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use ferry::capabilities::postgres::PgPools;
use ferry::contract::NackReason;
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::POSTGRES_SOURCE;
use ferry_tests::faults::FaultyTarget;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::postgres_server::{PASSWORD, PgServer};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::faults::is_nack;
use crate::process::{Ferry, PATIENCE, Site, crash_plan};

/// A table `events` of `count` rows, ids 1..=count.
async fn events(server: &PgServer, count: i64) {
    server.execute("CREATE TABLE events (id int8 PRIMARY KEY, body text NOT NULL)").await;
    server.execute(&format!("INSERT INTO events SELECT n, 'event ' || n FROM generate_series(1, {count}) AS n")).await;
}

/// The `id` of every row the log holds for `demo/events`, in log order.
fn delivered(log: &Path) -> Vec<i64> {
    if !LocalLog::topic_file(log, "demo", "events").exists() {
        return Vec::new();
    }
    let records = LocalLog::read_all(log, "demo", "events").unwrap();
    records
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.payload).unwrap()["id"].as_i64().unwrap())
        .collect()
}

/// `source` granted the connection `db` to `server`.
fn granted(h: &Harness, server: &PgServer, mut source: SourceConnector) -> SourceConnector {
    source.sandbox.grants.postgres = vec!["db".into()];
    let servers = BTreeMap::from([("db".to_string(), server.ferry_server(h.dir.path(), "db", PASSWORD))]);
    source.sandbox.shared.postgres = PgPools::granted(&source.sandbox.grants.postgres, &servers).unwrap();
    source
}

/// The `id` of every row the harness's source `key` delivered, in log order.
fn ids_in(h: &Harness, key: &str) -> Vec<i64> {
    h.records(key)
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.payload).unwrap()["id"].as_i64().unwrap())
        .collect()
}

/// Every row the log holds has its id at most once before, in ascending order of
/// first appearance: what a crash may repeat is a batch, never a hole or a reorder.
fn first_appearances(ids: &[i64]) -> Vec<i64> {
    let mut seen = BTreeSet::new();
    ids.iter().copied().filter(|id| seen.insert(*id)).collect()
}

#[test]
fn rows_arrive_in_order_through_kill_9_and_are_deleted_only_after_delivery() {
    const ROWS: i64 = 3000;
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = PgServer::start();
    tokio.block_on(events(&server, ROWS));
    let site = Site::new();
    let config = format!(
        r#"
[state]
path = "state"

[local_log]
path = "log"

{server}
[[sources]]
key = "events"
path = "{POSTGRES_SOURCE}"
poll_interval = "2ms"

[[sources.streams]]
stream = "demo"
topic = "events"

[sources.grants]
postgres = ["db"]

[sources.plugin_config]
connection = "db"
table = "events"
batch_size = 50
after_ack = {{ delete = true }}
"#,
        server = server.ferry_toml(&site.path("."), "db"),
    );
    let config = site.config("ferry.toml", &config);
    let remaining = || tokio.block_on(server.query_i64s("SELECT id FROM events ORDER BY id"));
    let all: BTreeSet<i64> = (1..=ROWS).collect();

    let (rounds, mut rng) = crash_plan("postgres_source::rows_arrive_in_order_through_kill_9");
    for _ in 0..rounds.min(8) {
        let mut ferry = Ferry::start(&config, &[]);
        ferry.kill_9_at_a_random_moment(&mut rng, &["key=events", "starting"]);
        let ids = delivered(&site.log_dir());
        let first = first_appearances(&ids);
        assert_eq!(first, (1..=first.len() as i64).collect::<Vec<_>>(), "in order, no gap");
        let deleted: BTreeSet<i64> = all.difference(&remaining().into_iter().collect()).copied().collect();
        let in_log: BTreeSet<i64> = first.into_iter().collect();
        assert!(
            deleted.is_subset(&in_log),
            "a row was deleted before it was delivered: {:?}",
            deleted.difference(&in_log)
        );
    }

    let mut ferry = Ferry::start(&config, &[]);
    let deadline = Instant::now() + PATIENCE;
    while !remaining().is_empty() || first_appearances(&delivered(&site.log_dir())).len() as i64 != ROWS {
        assert!(Instant::now() < deadline, "gave up: {} rows left", remaining().len());
        std::thread::sleep(Duration::from_millis(100));
    }
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    let ids = delivered(&site.log_dir());
    assert_eq!(first_appearances(&ids), (1..=ROWS).collect::<Vec<_>>(), "every row, in order");
    let repeated = ids.len() as i64 - ROWS;
    eprintln!("{repeated} row(s) delivered again after a kill (at-least-once)");
    let payload: serde_json::Value =
        serde_json::from_slice(&LocalLog::read_all(&site.log_dir(), "demo", "events").unwrap()[0].payload).unwrap();
    assert_eq!(payload, json!({ "id": 1, "body": "event 1" }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_batch_deletes_nothing_and_comes_again() {
    let server = PgServer::start();
    events(&server, 120).await;
    let h = Harness::new();
    let target = FaultyTarget::new(h.log.clone());
    target.set_failing(true);
    let plugin = json!({ "connection": "db", "table": "events", "batch_size": 40, "after_ack": { "delete": true } });
    let mut source = granted(&h, &server, h.source("nacked", POSTGRES_SOURCE, plugin));
    source.target = target.clone();
    source.settings.max_consecutive_nacks = 1000;
    let mut running = h.start(vec![source]);
    for _ in 0..4 {
        running.wait_for("a NACK", is_nack("nacked", NackReason::DeliveryFailed)).await;
    }
    assert_eq!(server.query_i64s("SELECT count(*) FROM events").await, [120], "NACKed: nothing deleted");
    let refused = target.refused_payloads();
    assert!(refused.iter().all(|batch| batch == &refused[0]), "the same rows again after each NACK");
    assert_eq!(refused[0].len(), 40);

    target.set_failing(false);
    running.wait_idle("nacked").await;
    running.stop().await;
    assert_eq!(ids_in(&h, "nacked"), (1..=120).collect::<Vec<_>>(), "each row once, in order");
    assert_eq!(server.query_i64s("SELECT count(*) FROM events").await, [0], "deleted once delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_query_and_a_lost_server_are_logged_and_retried_until_rows_flow_again() {
    let mut server = PgServer::start();
    events(&server, 200).await;
    // The table is not there when the source starts: every poll is refused (42P01).
    server.execute("ALTER TABLE events RENAME TO events_away").await;
    let h = Harness::new();
    let plugin = json!({ "connection": "db", "table": "events", "batch_size": 20 });
    let mut running = h.start(vec![granted(&h, &server, h.source("flaky", POSTGRES_SOURCE, plugin))]);
    let is_guest_error = |e: &Event| matches!(e, Event::GuestError { key, .. } if &**key == "flaky");
    let Event::GuestError { message, .. } = running.wait_for("a refused query", is_guest_error).await else {
        unreachable!()
    };
    assert!(message.contains("reading the rows of `events`") && message.contains("42P01"), "{message}");
    let logged = |needle: &str| capture().of("flaky").iter().any(|l| l.message.contains(needle));
    assert!(logged("42P01"), "the refusal is not in the log: {:?}", capture().of("flaky"));
    assert!(h.records("flaky").is_empty(), "rows out of a refused query");

    // The table is back: every row comes, in order, once.
    server.execute("ALTER TABLE events_away RENAME TO events").await;
    wait_for_rows(&h, &mut running, 200).await;

    // The server dies under the idle source: its polls fail on the lost connection...
    tokio::task::block_in_place(|| server.kill_9());
    let Event::GuestError { message, .. } = running.wait_for("a lost connection", is_guest_error).await else {
        unreachable!()
    };
    assert!(message.contains("reading the rows of `events`"), "{message}");
    assert!(logged(&message), "the lost connection is not in the log: {:?}", capture().of("flaky"));
    // ...until it is back: the rows written meanwhile flow, after the others.
    tokio::task::block_in_place(|| server.restart());
    server.execute("INSERT INTO events SELECT n, 'event ' || n FROM generate_series(201, 300) AS n").await;
    wait_for_rows(&h, &mut running, 300).await;
    running.stop().await;
    assert_eq!(ids_in(&h, "flaky"), (1..=300).collect::<Vec<_>>(), "each row once, in order");
}

/// Wait until the source `flaky` is idle with `count` rows delivered.
async fn wait_for_rows(h: &Harness, running: &mut Running, count: usize) {
    // Idle means that a poll found nothing more; the rows may have come just after.
    while h.records("flaky").len() < count {
        running.wait_idle("flaky").await;
    }
}
