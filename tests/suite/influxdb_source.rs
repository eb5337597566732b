//! The InfluxDB source against a real InfluxDB 1.x server of the test's own: points
//! of several series at each timestamp (more than a page at one time) read into the
//! local log in time order through a `kill -9` of ferry mid-flow, every point there,
//! none lost and at most the batch in flight twice; a query the server refuses is an
//! error naming it, retried, and nothing is delivered; a server down is said and
//! waited for; refused credentials are said, and nothing is delivered.

use std::collections::BTreeSet;

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use ferry::store::local_log::LocalLog;
use ferry_tests::components::INFLUXDB_SOURCE;
use ferry_tests::influxdb_server::{InfluxServer, PASSWORD, USER};

/// Series at each timestamp, and timestamps: 7 points a time, pages of 5.
const SERIES: u64 = 7;
const TIMES: u64 = 60;
const BATCH: u64 = 5;

fn config(site: &Site, server: &InfluxServer, query: &str) -> std::path::PathBuf {
    config_with(site, server, query, "")
}

/// [`config`] with more `plugin_config` lines.
fn config_with(site: &Site, server: &InfluxServer, query: &str, more: &str) -> std::path::PathBuf {
    site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "influx"
path = "{INFLUXDB_SOURCE}"
poll_interval = "5ms"
streams = [{{ stream = "demo", topic = "points" }}]
restart_backoff = {{ initial = "10ms", max = "50ms" }}
grants = {{ network = ["{address}"] }}

[sources.plugin_config]
url = "{url}"
db = "db"
query = '{query}'
batch_size = {BATCH}
retry_delay = "10ms"
retry_max_delay = "50ms"
{more}
"#,
            address = server.address(),
            url = server.url(""),
        ),
    )
}

/// The `seq`s of the log's records, in log order, with their times.
fn delivered(site: &Site) -> Vec<(u64, u64)> {
    LocalLog::read_all(&site.log_dir(), "demo", "points")
        .unwrap_or_default()
        .iter()
        .map(|record| {
            let row: Value = serde_json::from_slice(&record.payload).unwrap();
            (row["time"].as_u64().unwrap(), row["seq"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn points_at_one_time_are_read_in_order_through_a_kill_9_none_lost() {
    let server = InfluxServer::start();
    server.create_database("db");
    let mut lines = String::new();
    for time in 0..TIMES {
        for series in 0..SERIES {
            let seq = time * SERIES + series;
            lines.push_str(&format!("points,host=h{series} seq={seq}i {}\n", 1_000_000_000 + time * 1_000));
        }
    }
    server.write("db", &lines);
    let site = Site::new();
    let query = "SELECT * FROM points WHERE time >= $cursor ORDER BY time ASC LIMIT $limit OFFSET $offset";
    let config = config(&site, &server, query);
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=influx", "running"]);
    until("some points in the log", || delivered(&site).len() >= 40);
    run.kill_9();
    let before_the_kill = delivered(&site).len() as u64;
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=influx", "running"]);
    until("every point in the log", || {
        let seqs: BTreeSet<u64> = delivered(&site).iter().map(|(_, seq)| *seq).collect();
        seqs.len() as u64 == TIMES * SERIES
    });
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let rows = delivered(&site);
    let times: Vec<u64> = rows.iter().map(|(time, _)| *time).collect();
    assert!(times.is_sorted(), "in time order");
    let seqs: Vec<u64> = rows.iter().map(|(_, seq)| *seq).collect();
    let duplicates = ferry_tests::records::assert_complete(&seqs, TIMES * SERIES);
    eprintln!("influxdb source: {} records, {duplicates} read again after the kill", rows.len());
    assert!(duplicates as u64 <= BATCH, "at most the batch in flight again: {duplicates}");
    assert!(before_the_kill < TIMES * SERIES, "the kill landed mid-flow");
}

#[test]
fn a_query_the_server_refuses_is_said_and_nothing_is_delivered() {
    let server = InfluxServer::start();
    server.create_database("db");
    server.write("db", "points seq=1i 1000000000\n");
    let site = Site::new();
    let query = "SELECT * FRM points WHERE time >= $cursor LIMIT $limit OFFSET $offset";
    let mut run = Ferry::start(&config(&site, &server, query), &[]);
    let line = run.wait_for_line(&["key=influx", "refused the query"]);
    assert!(line.contains("SELECT * FRM points WHERE time >= 0") && line.contains("error parsing query"), "{line}");
    run.wait_until_logged(&["key=influx", "running"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert!(delivered(&site).is_empty());
}

const QUERY: &str = "SELECT * FROM points WHERE time >= $cursor ORDER BY time ASC LIMIT $limit OFFSET $offset";

/// Ten points, `seq` 0 to 9, a microsecond apart.
fn ten_points(server: &InfluxServer) {
    let lines: String = (0..10).map(|seq| format!("points seq={seq}i {}\n", 1_000_000_000 + seq * 1_000)).collect();
    server.write("db", &lines);
}

#[test]
fn a_server_down_is_said_and_waited_for_and_every_point_arrives_once_it_is_up() {
    let mut server = InfluxServer::start();
    server.create_database("db");
    ten_points(&server);
    server.kill_9();
    let site = Site::new();
    let mut run = Ferry::start(&config(&site, &server, QUERY), &[]);
    let line = run.wait_for_line(&["key=influx", "no answer"]);
    assert!(line.contains(&format!("InfluxDB at {}", server.url(""))), "{line}");
    server.restart();
    until("every point in the log", || delivered(&site).len() == 10);
    run.wait_until_logged(&["key=influx", "running"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert_eq!(delivered(&site).iter().map(|(_, seq)| *seq).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
}

#[test]
fn refused_credentials_are_said_and_nothing_is_delivered_until_they_are_right() {
    let server = InfluxServer::start_with_auth();
    server.create_database("db");
    ten_points(&server);
    let site = Site::new();
    let wrong = format!("username = \"{USER}\"\npassword = \"not-the-password\"");
    let mut run = Ferry::start(&config_with(&site, &server, QUERY, &wrong), &[]);
    let line = run.wait_for_line(&["key=influx", "refused the credentials"]);
    assert!(line.contains("HTTP 401") && line.contains("check username and password"), "{line}");
    run.wait_until_logged(&["key=influx", "running"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert!(delivered(&site).is_empty(), "nothing delivered");

    // Iggy's v2 form: the token as "username:password".
    let right = format!("token = \"{USER}:{PASSWORD}\"");
    let mut run = Ferry::start(&config_with(&site, &server, QUERY, &right), &[]);
    until("every point in the log", || delivered(&site).len() == 10);
    run.wait_until_logged(&["key=influx", "running"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}
