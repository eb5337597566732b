//! The ClickHouse sink against a real server (Debian's `clickhouse-server`, one per
//! test, on free ports): every record lands in a `ReplacingMergeTree` once by its
//! stable id through `kill -9`s of ferry and of ClickHouse (the duplicate rows a
//! replay inserts counted, and merged away); a row ClickHouse refuses goes to the
//! dead letters with the server's words while the rest of its batch is inserted;
//! refused credentials and a missing table are said, and nothing is written.

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use ferry::store::local_log::LocalLog;
use ferry_tests::clickhouse_server::{ChServer, PASSWORD, USER};
use ferry_tests::components::{CLICKHOUSE_SINK, FILE_SOURCE, RANDOM_SOURCE};

const COUNT: u64 = 3000;

/// The table the random source's records go into, one row per stable id once merged.
const EVENTS: &str =
    "CREATE TABLE events (ferry_id String, seq UInt64, text String) ENGINE = ReplacingMergeTree() ORDER BY ferry_id";

/// The sink's part of a config: `table` on `server`, its password a secret.
fn sink(server: &ChServer, table: &str, topic: &str) -> String {
    format!(
        r#"
[[sinks]]
key = "clickhouse"
path = "{CLICKHOUSE_SINK}"
poll_interval = "2ms"
batch_length = 50
retry_backoff = {{ initial = "10ms", max = "200ms" }}
streams = [{{ stream = "demo", topics = ["{topic}"] }}]
dead_letters = {{ stream = "dead", topic = "clickhouse" }}
grants = {{ network = ["{address}"] }}

[sinks.plugin_config]
url = "http://{address}"
table = "{table}"
username = "{USER}"
id_column = "ferry_id"
retry_delay = 0
max_retries = 1

[sinks.secrets]
password = {{ env = "FERRY_TEST_CLICKHOUSE_PASSWORD" }}
"#,
        address = server.address()
    )
}

fn start(config: &std::path::Path, password: &str) -> Ferry {
    Ferry::start(config, &[("FERRY_TEST_CLICKHOUSE_PASSWORD", password)])
}

fn count(server: &ChServer, sql: &str) -> u64 {
    server.try_query(sql).ok().and_then(|text| text.trim().parse().ok()).unwrap_or(0)
}

#[test]
fn every_record_lands_once_by_its_id_through_kill_9s_of_ferry_and_of_clickhouse() {
    let mut server = ChServer::start();
    server.query(EVENTS);
    let site = Site::new();
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

# About 4 records every 5 ms: the kills land mid-flow.
[[sources]]
key = "feed"
path = "{RANDOM_SOURCE}"
poll_interval = "1ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {COUNT}, messages_per_batch = 4, interval = "5ms", payload_size = 60 }}
{}"#,
            sink(&server, "events", "feed")
        ),
    );
    let rows = |server: &ChServer| count(server, "SELECT uniqExact(seq) FROM events");
    let mut run = start(&config, PASSWORD);
    run.wait_for_line(&["key=clickhouse", "running"]);
    until("500 rows", || rows(&server) >= 500);
    run.kill_9();
    let mut run = start(&config, PASSWORD);
    run.wait_for_line(&["key=clickhouse", "running"]);
    until("1000 rows", || rows(&server) >= 1000);
    server.kill_9();
    run.wait_for_line(&["key=clickhouse", "the insert from offset"]);
    server.restart();
    until("1500 rows", || rows(&server) >= 1500);
    run.kill_9();
    let mut run = start(&config, PASSWORD);
    run.wait_for_line(&["key=clickhouse", "running"]);
    until("every row", || rows(&server) == COUNT);
    let offsets = || LocalLog::read_all(&site.log_dir(), "demo", "feed").map(|r| r.len()).unwrap_or(0) as u64;
    assert_eq!(offsets(), COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let inserted = count(&server, "SELECT count() FROM events");
    let once = count(&server, "SELECT count() FROM events FINAL");
    let ids = count(&server, "SELECT uniqExact(ferry_id) FROM events");
    eprintln!("clickhouse sink: {inserted} rows inserted for {COUNT} records, {} by replays", inserted - COUNT);
    assert_eq!((once, ids), (COUNT, COUNT), "one row per record once merged, one id per record");
    let seqs = server.query("SELECT min(seq), max(seq) FROM events FINAL");
    assert_eq!(seqs.trim(), format!("0\t{}", COUNT - 1));
    // A replay inserts at most the batch in flight at each kill (three of them).
    assert!(inserted - COUNT <= 3 * 50, "{inserted} rows");
    assert!(
        !LocalLog::read_all(&site.log_dir(), "dead", "clickhouse").is_ok_and(|dead| !dead.is_empty()),
        "nothing dead-lettered"
    );
}

#[test]
fn a_row_clickhouse_refuses_is_dead_lettered_with_its_words_and_the_rest_of_its_batch_inserted() {
    let server = ChServer::start();
    server.query(EVENTS);
    let site = Site::new();
    // 200 JSON lines; every 25th has a seq ClickHouse cannot read as a number.
    std::fs::create_dir(site.path("in")).unwrap();
    let lines: String = (0..200)
        .map(|seq| match seq % 25 {
            7 => format!("{{\"seq\":\"bad-{seq}\",\"text\":\"x\"}}\n"),
            _ => format!("{{\"seq\":{seq},\"text\":\"line {seq}\"}}\n"),
        })
        .collect();
    std::fs::write(site.path("in/app.log"), lines).unwrap();
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "lines"
path = "{FILE_SOURCE}"
poll_interval = "5ms"
streams = [{{ stream = "demo", topic = "lines" }}]
plugin_config = {{ path = "/in/*.log", format = "json_lines", batch_size = 100 }}
grants = {{ dirs = [{{ host = "in", guest = "/in" }}] }}
{}"#,
            sink(&server, "events", "lines")
        ),
    );
    let mut run = start(&config, PASSWORD);
    let dead = || LocalLog::read_all(&site.log_dir(), "dead", "clickhouse").unwrap_or_default();
    until("the refused rows dead-lettered", || dead().len() == 8);
    until("the others inserted", || count(&server, "SELECT count() FROM events") == 192);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let dead_seqs: Vec<String> =
        dead().iter().map(|r| serde_json::from_slice::<Value>(&r.payload).unwrap()["seq"].to_string()).collect();
    assert_eq!(dead_seqs, (0..200).filter(|s| s % 25 == 7).map(|s| format!("\"bad-{s}\"")).collect::<Vec<_>>());
    let reason = dead()[0].headers.as_ref().unwrap()["ferry-dead-letter-reason"].to_string();
    assert!(
        reason.contains("Code: 27") && reason.contains("Cannot parse input") && reason.contains("(at row"),
        "{reason}"
    );
    assert!(!reason.contains("line 8"), "the reason quotes none of the rows after the refused one: {reason}");
    let kept = server.query("SELECT groupArray(seq) FROM (SELECT seq FROM events ORDER BY seq)");
    let expected: Vec<String> = (0..200).filter(|s| s % 25 != 7).map(|s| s.to_string()).collect();
    assert_eq!(kept.trim(), format!("[{}]", expected.join(",")));
}

#[test]
fn refused_credentials_and_a_missing_table_are_said_and_nothing_is_written() {
    let server = ChServer::start();
    let site = Site::new();
    let config = site.config(
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
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = 10 }}
{}"#,
            sink(&server, "events", "feed")
        ),
    );
    let mut run = start(&config, "not-the-password");
    let line = run.wait_for_line(&["key=clickhouse", "Wrong password"]);
    assert!(!line.contains(PASSWORD), "{line}");
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let mut run = start(&config, PASSWORD);
    run.wait_for_line(&["key=clickhouse", "there is no table default.events"]);
    // Created, and the batch goes in.
    server.query(EVENTS);
    until("the rows", || count(&server, "SELECT count() FROM events") == 10);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}
