//! A sink's counters keep what its guest wrote apart from what went to its dead
//! letters, in every place an operator reads them: the status file (`ferry status`
//! and its `--json`), the HTTP API (`/sinks/{key}`, `/stats`), the metrics and
//! `ferry top`. The written and the dead-lettered add up to what was sent, each exact.

use nix::sys::signal::Signal;
use serde_json::Value;

use ferry::engine::status::status_file_path;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{FAULTY_SINK, FAULTY_SOURCE};
use ferry_tests::free_port;
use ferry_tests::http_client::{get, get_until};
use ferry_tests::records::seqs;
use ferry_tests::sink_output::faulty_sink_written;

use super::cli::{ferry_stdout, status_row};
use crate::http_api::{head, sample_of, start};
use crate::process::Site;
use crate::top::{number, snapshots, status_until, top};

/// Messages the source sends.
const SENT: u64 = 20;
/// The seqs the sink rejects, each to its dead letters.
const REJECTED: [u64; 3] = [3, 8, 14];

#[test]
fn written_and_dead_lettered_add_up_to_what_was_sent_in_status_api_metrics_and_top() {
    let site = Site::new();
    std::fs::create_dir(site.path("picky-out")).unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!(
        r#"{head}
[[sources]]
key = "feed"
path = "{FAULTY_SOURCE}"
poll_interval = "5ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {SENT}, messages_per_batch = 4 }}

[[sinks]]
key = "picky"
path = "{FAULTY_SINK}"
poll_interval = "5ms"
batch_length = 6
dead_letters = {{ stream = "dead", topic = "picky" }}
[[sinks.streams]]
stream = "demo"
topics = ["feed"]
[sinks.grants]
dirs = [{{ host = "picky-out", guest = "/out", writable = true }}]
[sinks.plugin_config]
dir = "/out"
reject_seqs = {REJECTED:?}
"#,
        head = head(port, "")
    );
    let mut run = start(&site, &text, &[]);
    let config = site.path("ferry.toml");
    let config = config.to_str().unwrap();
    let (written, dead) = (SENT - REJECTED.len() as u64, REJECTED.len() as u64);

    // Settled: every message read, and the sink idle after it (a batch is settled
    // before the next read).
    let sink = get_until(&address, "/sinks/picky", &[], |r| {
        let body = r.json();
        body["messages_polled"] == SENT && body["status"] == "idle"
    })
    .json();
    // What the guest and the dead letters hold, to compare each count with.
    let kept: Vec<u64> = (0..SENT).filter(|seq| !REJECTED.contains(seq)).collect();
    assert_eq!(faulty_sink_written(&site.path("picky-out")), kept);
    assert_eq!(seqs(&LocalLog::read_all(&site.log_dir(), "dead", "picky").unwrap()), REJECTED);

    // The API: the sink's own answer and /stats.
    assert_eq!((&sink["messages_delivered"], &sink["dead_lettered"]), (&written.into(), &dead.into()), "{sink}");
    let stats = get(&address, "/stats", &[]).unwrap().json();
    let of_stats = stats["connectors"].as_array().unwrap().iter().find(|c| c["key"] == "picky").cloned().unwrap();
    let counts = [&of_stats["messages_consumed"], &of_stats["messages_processed"], &of_stats["dead_lettered"]];
    assert_eq!(
        counts.map(Value::as_u64),
        [Some(SENT), Some(written), Some(dead)],
        "consumed, processed, dead: {of_stats}"
    );

    // The metrics.
    let metrics = get(&address, "/metrics", &[]).unwrap().body;
    let metric = |name: &str| sample_of(&metrics, name, "picky", &[]);
    assert_eq!(metric("iggy_connector_messages_consumed_total"), SENT as f64);
    assert_eq!(metric("iggy_connector_messages_processed_total"), written as f64);
    assert_eq!(metric("ferry_connector_dead_lettered_total"), dead as f64);

    // `ferry top`, from the API.
    let screens = snapshots(&top(&[config, "--once"], &[]));
    assert_eq!(number(&screens[0], "picky", "MESSAGES"), written as f64, "{}", screens[0]);
    assert_eq!(number(&screens[0], "picky", "DEAD"), dead as f64, "{}", screens[0]);

    // The status file, once it has been written since, and `ferry status` reading it.
    let file = status_file_path(&site.path("state"));
    let status =
        status_until(&file, |status| status.connectors.iter().any(|c| c.key == "picky" && c.messages_polled == SENT));
    let picky = status.connectors.iter().find(|c| c.key == "picky").unwrap();
    assert_eq!((picky.messages_delivered, picky.dead_lettered), (written, dead), "{picky:?}");
    let row = status_row(&ferry_stdout(&["status", config]), "picky");
    assert_eq!([row[6].as_str(), row[8].as_str()], [written.to_string(), dead.to_string()], "MESSAGES, DEAD: {row:?}");

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}
