//! Sinks in `ferry` run as a process: a bad `[[sinks]]` table is refused before
//! anything runs, naming the file, the sink and the key; a file sink with no
//! directory granted says so and restarts while its neighbours run; SIGTERM settles
//! the sinks and exits 0; `ferry status` and `ferry state show` show the sinks.

use std::collections::BTreeMap;

use ferry::store::local_log::LocalLog;
use ferry_tests::components::{FAULTY_SINK, FILE_SINK, RANDOM_SOURCE};
use ferry_tests::records::{positions, seqs};
use ferry_tests::sink_output::{faulty_sink_written, file_sink_output};
use nix::sys::signal::Signal;

use crate::bad_config::refused;
use crate::process::{Ferry, Site, ferry, file_sink_table, random_source_config};

/// The `[[sinks.streams]]` entry of [`file_sink_table`].
const STREAMS: &str = "[[sinks.streams]]\nstream = \"demo\"\ntopics = [\"feed\"]\n";
/// The grant of [`file_sink_table`].
const GRANT: &str = "[sinks.grants]\ndirs = [{ host = \"archive-out\", guest = \"/out\", writable = true }]\n";

#[test]
fn a_bad_sink_table_is_refused_naming_the_file_the_sink_and_the_key() {
    let site = Site::new();
    // The granted directory exists: each config below has exactly one thing wrong.
    std::fs::create_dir(site.path("archive-out")).unwrap();
    let source = random_source_config("feed", "max_count = 10");
    let sink = |settings: &str| file_sink_table("archive", settings, "");
    let at = "ferry.toml: sinks[0] (key `archive`): ";
    let cases = [
        (
            sink("").replace(STREAMS, ""),
            format!("{at}streams: at least one [[sinks.streams]] entry with topics is required"),
        ),
        (
            sink("").replace("topics = [\"feed\"]", "topics = []"),
            format!("{at}streams: at least one [[sinks.streams]] entry with topics is required"),
        ),
        (sink("batch_length = 0"), format!("{at}batch_length: must be at least 1")),
        (
            sink("batch_length = 501\nlimits = { max_messages_per_batch = 500 }"),
            format!(
                "{at}batch_length: 501 is more than limits.max_messages_per_batch (500), the most a batch may hold"
            ),
        ),
        (
            sink("dead_letters = { stream = \"demo\", topic = \"feed\" }"),
            format!(
                "{at}dead_letters: demo/feed is also a topic the sink reads: its dead letters would come back to it"
            ),
        ),
        (sink("nack_backoff = { initial = \"1ms\", max = \"2ms\" }"), "unknown field `nack_backoff`".to_string()),
        (
            sink("").replace("key = \"archive\"", "key = \"feed\""),
            "ferry.toml: sinks[0] (key `feed`): key: already used by sources[0]; keys must be unique".to_string(),
        ),
        (
            sink("").replace(FILE_SINK, RANDOM_SOURCE),
            format!(
                "connector `archive`: {RANDOM_SOURCE}: it does not export the interface `iggy:connector/sink@0.2.1`, \
                 so it is not a Ferry sink (it exports: iggy:connector/source@0.2.1)"
            ),
        ),
    ];
    for (sink, expected) in cases {
        let log = refused(&site.config("ferry.toml", &format!("{source}{sink}")), &[]);
        assert!(log.contains(&expected), "expected {expected:?} in:\n{log}");
        // Every connector is checked before any state is taken: the source before the
        // refused sink has no state file either.
        assert!(!site.path("state").exists(), "a refused config must not touch the state directory: {expected}");
    }

    // One name to an environment override: `a-b` (a source) and `a_b` (a sink).
    let source = random_source_config("a-b", "max_count = 10");
    let sink = file_sink_table("a_b", "", "").replace("a_b-out", "archive-out");
    let log = refused(&site.config("ferry.toml", &format!("{source}{sink}")), &[]);
    assert!(log.contains("ferry.toml: sinks[0] (key `a_b`): key: `a_b` and `a-b` (sources[0]) are one name"), "{log}");

    // And the other way round: a sink's component given as a source's path.
    let source = random_source_config("feed", "").replace(RANDOM_SOURCE, FILE_SINK);
    let log = refused(&site.config("ferry.toml", &source), &[]);
    assert!(log.contains("does not export the interface `iggy:connector/source@0.2.1`"), "{log}");
    assert!(!site.path("state").exists());
}

#[test]
fn a_file_sink_with_no_directory_granted_says_so_and_restarts_while_its_neighbour_runs() {
    let site = Site::new();
    let sink = file_sink_table("archive", "restart_backoff = { initial = \"20ms\", max = \"50ms\" }", "");
    let text = format!("{}{}", random_source_config("feed", "max_count = 10"), sink.replace(GRANT, ""));
    let config = site.config("ferry.toml", &text);
    let mut ferry = Ferry::start(&config, &[]);
    let failed = ferry.wait_for_line(&["key=archive", "connector failed", "opening the sink's files in /out"]);
    assert!(failed.contains("it must be granted (grants.dirs, writable)"), "{failed}");
    ferry.wait_for_line(&["key=archive", "starting", "instance=3"]);
    ferry.wait_until_logged(&["key=feed", "idle"]);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());

    let records = LocalLog::read_all(&site.log_dir(), "demo", "feed").unwrap();
    assert_eq!(seqs(&records), (0..10).collect::<Vec<_>>(), "the source delivered everything all the same");
    assert_eq!(site.states().read("archive").unwrap(), None, "the sink committed nothing");
    let status = ferry_stdout(&["status", config.to_str().unwrap()]);
    let row = status_row(&status, "archive");
    assert_eq!(&row[..2], ["archive", "sink"], "{status}");
    assert!(row[4].parse::<u64>().unwrap() >= 3, "instances: {status}");
    assert!(
        status.contains("opening the sink's files in /out: the directory /out is not there for the guest"),
        "the last error names the directory: {status}"
    );
}

#[test]
fn sigterm_settles_the_sinks_and_status_and_state_show_them() {
    let site = Site::new();
    std::fs::create_dir(site.path("archive-out")).unwrap();
    std::fs::create_dir(site.path("picky-out")).unwrap();
    let picky = format!(
        r#"
[[sinks]]
key = "picky"
path = "{FAULTY_SINK}"
poll_interval = "2ms"
dead_letters = {{ stream = "dead", topic = "picky" }}

{STREAMS}
[sinks.grants]
dirs = [{{ host = "picky-out", guest = "/out", writable = true }}]

[sinks.plugin_config]
dir = "/out"
reject_seqs = [5, 7]
"#
    );
    // A source that never stops: SIGTERM comes with messages flowing.
    let source = random_source_config("feed", "messages_per_batch = 5\ninterval = \"2ms\"");
    let text = format!("{source}{}{picky}", file_sink_table("archive", "batch_length = 7", ""));
    let config = site.config("ferry.toml", &text);
    let mut ferry = Ferry::start(&config, &[("FERRY_LOG", "info,ferry_engine::status=debug")]);
    let mut dead = 0;
    while dead < 2 {
        let line = ferry.wait_for_line(&["key=picky", "went to its dead letters"]);
        let count = line.split(" message(s) the sink can never write").next().unwrap().rsplit(' ').next().unwrap();
        dead += count.parse::<u64>().unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    ferry.wait_for_line(&["key=archive", "offset stored"]);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    ferry.wait_until_logged(&["key=archive", "ferry::guest", "closing"]);
    ferry.wait_until_logged(&["key=picky", "ferry::guest", "closing"]);

    // Settled: what each sink wrote is what it committed, no more, no less.
    let committed = |key: &str| -> u64 {
        let state = site.states().read(key).unwrap().unwrap_or_else(|| panic!("{key} committed nothing")).state;
        positions(&state)["demo/feed"]
    };
    let (archive, picky) = (committed("archive"), committed("picky"));
    let output = file_sink_output(&site.path("archive-out"));
    assert_eq!(output.lines.iter().map(|l| l.offset).collect::<Vec<_>>(), (0..archive).collect::<Vec<_>>());
    assert_eq!(output.torn_bytes, 0);
    let kept: Vec<u64> = (0..picky).filter(|seq| ![5, 7].contains(seq)).collect();
    assert_eq!(faulty_sink_written(&site.path("picky-out")), kept);
    let letters = LocalLog::read_all(&site.log_dir(), "dead", "picky").unwrap();
    assert_eq!(seqs(&letters), [5, 7]);

    let status = ferry_stdout(&["status", config.to_str().unwrap()]);
    assert!(status.contains("stopped cleanly"), "{status}");
    // MESSAGES counts what the guest wrote; DEAD what went to the dead letters.
    for (key, messages, dead) in [("archive", archive, 0), ("picky", picky - 2, 2)] {
        let row = status_row(&status, key);
        let generation = site.states().read(key).unwrap().unwrap().generation.to_string();
        let (messages, dead) = (messages.to_string(), dead.to_string());
        assert_eq!(
            [row[1].as_str(), row[3].as_str(), row[6].as_str(), row[8].as_str(), row[10].as_str()],
            ["sink", "stopped", &messages, &dead, &generation],
            "ROLE, PHASE, MESSAGES, DEAD, GENERATION of {key}:\n{status}"
        );
    }
    assert_eq!(status_row(&status, "feed")[1], "source", "{status}");
    let json: serde_json::Value = serde_json::from_str(&ferry_stdout(&["status", config.to_str().unwrap(), "--json"]))
        .expect("status --json prints JSON");
    let picky_json = json["connectors"].as_array().unwrap().iter().find(|c| c["key"] == "picky").unwrap();
    assert_eq!((&picky_json["connector_type"], &picky_json["dead_lettered"]), (&"sink".into(), &2.into()));

    let shown = ferry_stdout(&["state", "show", config.to_str().unwrap()]);
    for (key, at) in [("archive", archive), ("picky", picky)] {
        let line = shown.lines().find(|l| l.starts_with(&format!("{key}: "))).unwrap_or_else(|| panic!("{shown}"));
        assert!(line.contains(&format!("positions {{\"demo/feed\":{at}}}")), "{line}");
        assert!(line.contains(&format!("read demo/feed (offsets below {at})")), "{line}");
        assert!(!line.contains("delivered"), "a sink delivers nothing: {line}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&ferry_stdout(&["state", "show", config.to_str().unwrap(), "picky", "--json"]))
            .expect("state show --json prints JSON");
    let state: BTreeMap<String, u64> = serde_json::from_str(json["state"].as_str().unwrap()).unwrap();
    assert_eq!(state, BTreeMap::from([("demo/feed".to_string(), picky)]));
}

/// What `ferry ARGS` printed, failing the test if it failed.
pub(super) fn ferry_stdout(args: &[&str]) -> String {
    let output = ferry(args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "ferry {args:?}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// The columns of `key`'s row in `ferry status`: KEY ROLE TENANT PHASE INSTANCES
/// BATCHES MESSAGES NACKS DEAD ...
pub(super) fn status_row(status: &str, key: &str) -> Vec<String> {
    let row = status.lines().find(|line| line.split_whitespace().next() == Some(key));
    row.unwrap_or_else(|| panic!("no row for {key}:\n{status}")).split_whitespace().map(str::to_string).collect()
}
