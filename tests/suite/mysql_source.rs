//! The MySQL source against a real MariaDB server of the test's own
//! (`ferry_tests::mariadb_server`, Debian's mariadb-server): rows arrive in the log in
//! order with no gap through `kill -9` of ferry at random moments, and a row is deleted
//! only once the batch that carried it was delivered and committed; ordered by a
//! timestamp with a tie-breaker, a NACKed batch marks nothing and its rows come again,
//! identical; a missing table and a killed server are logged and retried until rows
//! flow again; a connection not granted is refused without connecting, a wrong password
//! is said, and rows over the connector's `limits.max_batch_bytes` are refused.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use ferry::config::ByteSize;
use ferry::contract::NackReason;
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::MYSQL_SOURCE;
use ferry_tests::faults::FaultyTarget;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::mariadb_server::{MariaDbServer, PASSWORD};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::faults::is_nack;
use crate::process::{Ferry, PATIENCE, Site, crash_plan};

const PASSWORD_ENV: &str = "FERRY_TEST_MARIADB_PASSWORD";

/// A table `events` of `count` rows, ids 1..=count.
fn events(server: &MariaDbServer, count: u64) {
    server.sql(&format!(
        "CREATE TABLE events (id BIGINT PRIMARY KEY, body VARCHAR(100) NOT NULL); \
         INSERT INTO events SELECT seq, CONCAT('event ', seq) FROM seq_1_to_{count}"
    ));
}

/// The ids of `table`'s rows, in the order given.
fn ids(server: &MariaDbServer, query: &str) -> Vec<i64> {
    server.sql(query).lines().filter(|l| !l.is_empty()).map(|l| l.trim().parse().unwrap()).collect()
}

/// The `id` of each payload, in order.
fn payload_ids<'a>(payloads: impl IntoIterator<Item = &'a [u8]>) -> Vec<i64> {
    payloads.into_iter().map(|p| serde_json::from_slice::<Value>(p).unwrap()["id"].as_i64().unwrap()).collect()
}

/// The `id` of every row the log holds for `demo/events`, in log order.
fn delivered(log: &Path) -> Vec<i64> {
    if !LocalLog::topic_file(log, "demo", "events").exists() {
        return Vec::new();
    }
    let records = LocalLog::read_all(log, "demo", "events").unwrap();
    payload_ids(records.iter().map(|r| &r.payload[..]))
}

/// The `id` of every row the harness's source `key` delivered, in log order.
fn ids_in(h: &Harness, key: &str) -> Vec<i64> {
    payload_ids(h.records(key).iter().map(|r| &r.payload[..]))
}

/// Each id once, at its first appearance: what a crash may repeat is a batch, never
/// a hole or a reorder.
fn first_appearances(ids: &[i64]) -> Vec<i64> {
    let mut seen = BTreeSet::new();
    ids.iter().copied().filter(|id| seen.insert(*id)).collect()
}

/// `source` granted the connection `db` to `server`, its password from `password_env`.
fn granted(server: &MariaDbServer, mut source: SourceConnector, password_env: &str) -> SourceConnector {
    source.sandbox.grants.mysql = vec!["db".into()];
    source.sandbox.shared.mysql = server.granted("db", password_env);
    source
}

fn set_password() {
    // SAFETY: every test of this binary that touches it sets the same value.
    unsafe { std::env::set_var(PASSWORD_ENV, PASSWORD) };
}

#[test]
fn rows_arrive_in_order_through_kill_9_and_are_deleted_only_after_delivery() {
    const ROWS: u64 = 6000;
    let server = MariaDbServer::start();
    events(&server, ROWS);
    let site = Site::new();
    let config = format!(
        r#"
[state]
path = "state"

[local_log]
path = "log"

{section}
[[sources]]
key = "events"
path = "{MYSQL_SOURCE}"
poll_interval = "2ms"
streams = [{{ stream = "demo", topic = "events" }}]
grants = {{ mysql = ["db"] }}
plugin_config = {{ connection = "db", table = "events", batch_size = 10, after_ack = {{ delete = true }} }}
"#,
        section = server.ferry_section("db", PASSWORD_ENV),
    );
    let config = site.config("ferry.toml", &config);
    let env = [(PASSWORD_ENV, PASSWORD)];
    let remaining = || ids(&server, "SELECT id FROM events ORDER BY id");
    let all: BTreeSet<i64> = (1..=ROWS as i64).collect();

    let (rounds, mut rng) = crash_plan("mysql_source::rows_arrive_in_order_through_kill_9");
    let mut mid_flow = 0;
    for _ in 0..rounds.min(8) {
        let mut ferry = Ferry::start(&config, &env);
        ferry.kill_9_at_a_random_moment(&mut rng, &["key=events", "running"]);
        let first = first_appearances(&delivered(&site.log_dir()));
        assert_eq!(first, (1..=first.len() as i64).collect::<Vec<_>>(), "in order, no gap");
        let deleted: BTreeSet<i64> = all.difference(&remaining().into_iter().collect()).copied().collect();
        let in_log: BTreeSet<i64> = first.into_iter().collect();
        assert!(deleted.is_subset(&in_log), "deleted before it was delivered: {:?}", deleted.difference(&in_log));
        mid_flow += usize::from(!in_log.is_empty() && in_log.len() < all.len());
    }
    eprintln!("{mid_flow} kill(s) landed while rows were flowing");
    assert!(mid_flow > 0, "no kill landed while rows were flowing");

    let mut ferry = Ferry::start(&config, &env);
    let deadline = Instant::now() + PATIENCE;
    while !remaining().is_empty() || first_appearances(&delivered(&site.log_dir())).len() as u64 != ROWS {
        assert!(Instant::now() < deadline, "gave up: {} rows left", remaining().len());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    let ids = delivered(&site.log_dir());
    assert_eq!(first_appearances(&ids), (1..=ROWS as i64).collect::<Vec<_>>(), "every row, in order");
    // The local log keeps the cursor beside the batch it commits: a kill repeats nothing.
    assert_eq!(ids.len() as u64, ROWS, "no row twice in the local log");
    let first = &LocalLog::read_all(&site.log_dir(), "demo", "events").unwrap()[0];
    assert_eq!(serde_json::from_slice::<Value>(&first.payload).unwrap(), json!({ "id": 1, "body": "event 1" }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_timestamp_and_tie_breaker_a_nacked_batch_marks_nothing_and_comes_again() {
    let server = tokio::task::block_in_place(MariaDbServer::start);
    // Ten rows share each timestamp, and later ids have earlier times: the order is
    // (at, id), which batches of 25 cut through the middle of a timestamp.
    tokio::task::block_in_place(|| {
        server.sql(
            "CREATE TABLE jobs (id INT PRIMARY KEY, at DATETIME(3) NOT NULL, body VARCHAR(50) NOT NULL, \
             done BOOL NOT NULL DEFAULT FALSE, KEY (at, id)); \
             INSERT INTO jobs (id, at, body) SELECT seq, \
               TIMESTAMP'2026-12-07 10:00:00.250' + INTERVAL ((120 - seq) DIV 10) SECOND, CONCAT('job ', seq) \
             FROM seq_1_to_120",
        )
    });
    let order = tokio::task::block_in_place(|| ids(&server, "SELECT id FROM jobs ORDER BY at, id"));
    assert_ne!(order, (1..=120).collect::<Vec<_>>(), "the tie-breaker matters");
    set_password();
    let h = Harness::new();
    let target = FaultyTarget::new(h.log.clone());
    target.set_failing(true);
    let plugin = json!({ "connection": "db", "table": "jobs", "tracking_column": "at", "tie_breaker_column": "id",
                         "batch_size": 25, "after_ack": { "mark_column": "done" } });
    let mut source = granted(&server, h.source("jobs", MYSQL_SOURCE, plugin), PASSWORD_ENV);
    source.target = target.clone();
    source.settings.max_consecutive_nacks = 1000;
    let mut running = h.start(vec![source]);
    for _ in 0..3 {
        running.wait_for("a NACK", is_nack("jobs", NackReason::DeliveryFailed)).await;
    }
    let marked = || ids(&server, "SELECT COUNT(*) FROM jobs WHERE done");
    assert_eq!(tokio::task::block_in_place(marked), [0], "NACKed: nothing marked");
    let refused = target.refused_payloads();
    assert!(refused.iter().all(|batch| batch == &refused[0]), "the same rows again after each NACK");
    assert_eq!(payload_ids(refused[0].iter().map(|p| &p[..])), order[..25]);

    target.set_failing(false);
    while h.records("jobs").len() < 120 {
        running.wait_idle("jobs").await;
    }
    running.stop().await;
    assert_eq!(ids_in(&h, "jobs"), order, "each row once, in (at, id) order");
    assert_eq!(tokio::task::block_in_place(marked), [120], "marked once delivered");
    let first: Value = serde_json::from_slice(&h.records("jobs")[0].payload).unwrap();
    assert_eq!(
        first,
        json!({ "id": order[0], "at": "2026-12-07 10:00:00.25", "body": format!("job {}", order[0]), "done": 0 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_and_a_killed_server_are_logged_and_retried_until_rows_flow_again() {
    let mut server = tokio::task::block_in_place(MariaDbServer::start);
    set_password();
    let h = Harness::new();
    let plugin = json!({ "connection": "db", "table": "events", "batch_size": 20 });
    let mut running = h.start(vec![granted(&server, h.source("flaky", MYSQL_SOURCE, plugin), PASSWORD_ENV)]);
    let is_guest_error = |e: &Event| matches!(e, Event::GuestError { key, .. } if &**key == "flaky");
    let Event::GuestError { message, .. } = running.wait_for("a refused query", is_guest_error).await else {
        unreachable!()
    };
    assert!(message.contains("reading the rows of `events`") && message.contains("1146"), "{message}");
    assert!(h.records("flaky").is_empty(), "rows out of a refused query");

    // The table is made: every row comes, in order, once.
    tokio::task::block_in_place(|| events(&server, 200));
    wait_for_rows(&h, &mut running, 200).await;

    // The server dies under the idle source: its polls fail on the lost connection...
    tokio::task::block_in_place(|| server.kill_9());
    let Event::GuestError { message, .. } = running.wait_for("a lost connection", is_guest_error).await else {
        unreachable!()
    };
    assert!(message.contains("reading the rows of `events`"), "{message}");
    // ...until it is back: the rows written meanwhile flow, after the others.
    tokio::task::block_in_place(|| {
        server.restart();
        server.sql("INSERT INTO events SELECT seq, CONCAT('event ', seq) FROM seq_201_to_300");
    });
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_granted_a_wrong_password_and_rows_over_the_byte_limit_are_refused_saying_so() {
    let server = tokio::task::block_in_place(MariaDbServer::start);
    tokio::task::block_in_place(|| events(&server, 10));
    set_password();
    let h = Harness::new();
    let connections = || {
        let text = server.sql("SHOW GLOBAL STATUS LIKE 'Connections'");
        text.split_whitespace().last().unwrap().parse::<u64>().unwrap()
    };
    let before = tokio::task::block_in_place(connections);
    let plugin = json!({ "connection": "elsewhere", "table": "events" });
    let mut running = h.start(vec![granted(&server, h.source("ungranted", MYSQL_SOURCE, plugin), PASSWORD_ENV)]);
    let failed =
        running.wait_for("the open to fail", |e| matches!(e, Event::Failed { key, .. } if &**key == "ungranted")).await;
    running.stop().await;
    assert!(format!("{failed:?}").contains("not in this connector's grants.mysql"), "{failed:?}");
    // One more connection: the query that counts them.
    assert_eq!(tokio::task::block_in_place(connections), before + 1, "ferry never connected");

    // SAFETY: this variable is this test's alone.
    unsafe { std::env::set_var("FERRY_TEST_MARIADB_WRONG_PASSWORD", "wrong") };
    let plugin = json!({ "connection": "db", "table": "events" });
    let wrong =
        granted(&server, h.source("locked-out", MYSQL_SOURCE, plugin.clone()), "FERRY_TEST_MARIADB_WRONG_PASSWORD");
    let mut running = h.start(vec![wrong]);
    let said =
        running.wait_for("the refusal", |e| matches!(e, Event::GuestError { key, .. } if &**key == "locked-out")).await;
    running.stop().await;
    assert!(format!("{said:?}").contains("Access denied"), "{said:?}");
    assert!(h.records("locked-out").is_empty());

    // Ten rows of a kilobyte are over a limit of one: refused, not read.
    tokio::task::block_in_place(|| {
        server.sql(
            "CREATE TABLE wide (id INT PRIMARY KEY, body TEXT NOT NULL); \
             INSERT INTO wide SELECT seq, REPEAT('x', 1000) FROM seq_1_to_10",
        )
    });
    let plugin = json!({ "connection": "db", "table": "wide" });
    let mut small = granted(&server, h.source("small", MYSQL_SOURCE, plugin), PASSWORD_ENV);
    small.sandbox.limits.max_batch_bytes = ByteSize::kib(1);
    let mut running = h.start(vec![small]);
    let said =
        running.wait_for("the refusal", |e| matches!(e, Event::GuestError { key, .. } if &**key == "small")).await;
    running.stop().await;
    assert!(
        format!("{said:?}").contains("more than 1024 bytes") && format!("{said:?}").contains("limits.max_batch_bytes"),
        "{said:?}"
    );
    assert!(h.records("small").is_empty());
}
