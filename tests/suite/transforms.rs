//! Transform components (`wit/transform.wit`) chained with Iggy's field transforms,
//! on both sides of the log: a source's records changed and dropped before delivery,
//! a sink's before the guest writes them. Every record a transform keeps arrives
//! once, changed; every record it drops is settled (the cursor and the offset move
//! past it) and counted; a transform that fails, traps or breaks the rule of one
//! answer per record holds its batch back, loses nothing, and the chain recovers.

use std::collections::BTreeMap;
use std::path::Path;

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site, ferry};
use ferry::engine::status::{read_status_file, status_file_path};
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{FAULTY_SOURCE, FAULTY_TRANSFORM, FILE_SINK};

const COUNT: u64 = 600;

/// Every payload the file sink wrote under `out`, by `seq`, with how many times.
pub(crate) fn written(out: &Path) -> BTreeMap<u64, (Value, usize)> {
    let mut written: BTreeMap<u64, (Value, usize)> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(out) else { return written };
    for entry in entries.filter_map(Result::ok) {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        // A torn last line is not written yet.
        for line in text.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()) {
            let payload: Value = serde_json::from_str(line["payload"].as_str().unwrap()).unwrap();
            let seq = payload["seq"].as_u64().unwrap();
            written.entry(seq).or_insert((payload, 0)).1 += 1;
        }
    }
    written
}

#[test]
fn transform_components_change_and_drop_records_on_both_sides_and_recover_from_their_faults() {
    let site = Site::new();
    std::fs::create_dir_all(site.path("archive-out")).unwrap();
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
path = "{FAULTY_SOURCE}"
poll_interval = "2ms"
nack_backoff = {{ initial = "1ms", max = "5ms" }}
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {COUNT}, messages_per_batch = 4 }}
benchmark = true

# A field transform, then a component: multiples of 3 dropped; the batch holding
# seq 100 refused twice; every instance traps on its 7th call.
[sources.transforms.add_fields]
enabled = true
fields = [{{ key = "via", value.static = "ferry" }}]

[sources.transforms.thirds]
enabled = true
component = "{FAULTY_TRANSFORM}"
plugin_config = {{ drop_multiples_of = 3, fail_on_seq = 100, fail_times = 2, trap_on_call = 7 }}

[[sinks]]
key = "archive"
path = "{FILE_SINK}"
poll_interval = "2ms"
batch_length = 1
retry_backoff = {{ initial = "1ms", max = "5ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
grants = {{ dirs = [{{ host = "archive-out", guest = "/out", writable = true }}] }}
plugin_config = {{ directory = "/out" }}
benchmark = true

# One record a batch: a multiple of 5 is a batch dropped whole.
[sinks.transforms.fifths]
enabled = true
component = "{FAULTY_TRANSFORM}"
plugin_config = {{ drop_multiples_of = 5, tag = "sunk" }}
"#
        ),
    );
    let kept = |seq: &u64| !seq.is_multiple_of(3) && !seq.is_multiple_of(5);
    let expected: Vec<u64> = (0..COUNT).filter(kept).collect();
    let mut run = Ferry::start(&config, &[]);
    until("the sink to write every record the transforms keep", || {
        written(&site.path("archive-out")).len() >= expected.len()
    });
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let log = run.log();

    // The source side: delivered once each, changed by both transforms, in order.
    let records = LocalLog::read_all(&site.log_dir(), "demo", "feed").unwrap();
    let delivered: Vec<Value> = records.iter().map(|r| serde_json::from_slice(&r.payload).unwrap()).collect();
    let seqs: Vec<u64> = delivered.iter().map(|v| v["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (0..COUNT).filter(|s| !s.is_multiple_of(3)).collect::<Vec<_>>(),
        "each kept record once, in order"
    );
    assert!(delivered.iter().all(|v| v["via"] == "ferry" && v.get("tag").is_none()), "{:?}", delivered[0]);
    // Its faults were said, and held the batch back until they passed.
    assert!(log.contains("transform `thirds` failed") && log.contains("refusing the batch with seq 100"), "{log}");
    assert!(log.contains("transform `thirds` failed") && log.contains("trapping on call 7"), "{log}");

    // The sink side: every record kept by both, once, tagged; the dropped ones settled.
    let written = written(&site.path("archive-out"));
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), expected);
    assert!(
        written.values().all(|(payload, times)| *times == 1 && payload["tag"] == "sunk" && payload["via"] == "ferry")
    );

    // Counted, and the offsets moved past the dropped records too.
    let status = read_status_file(&status_file_path(&site.path("state"))).unwrap();
    let of = |key: &str| status.connectors.iter().find(|c| c.key == key).unwrap().clone();
    let (feed, archive) = (of("feed"), of("archive"));
    assert_eq!(feed.messages_filtered, COUNT.div_ceil(3), "the source's multiples of 3");
    assert_eq!(feed.messages_delivered, COUNT - COUNT.div_ceil(3));
    let fifths = (0..COUNT).filter(|s| !s.is_multiple_of(3) && s.is_multiple_of(5)).count() as u64;
    assert_eq!(archive.messages_filtered, fifths, "the sink's multiples of 5 among what it read");
    assert_eq!(archive.messages_delivered, expected.len() as u64);
    assert!(feed.nacks >= 3, "two refusals and at least one trap NACKed: {feed:?}");
    // Iggy's `benchmark`: a line per settled batch, its records counted with those
    // its transforms dropped, and the time of each stage it went through.
    let lines = |kind: &str| -> Vec<String> {
        let marker = format!("connector_type=\"{kind}\"");
        log.lines()
            .filter(|l| l.contains("iggy_connectors::benchmark") && l.contains(&marker))
            .map(str::to_string)
            .collect()
    };
    let field = |line: &str, name: &str| -> u64 {
        let value = line.split(&format!(" {name}=")).nth(1).unwrap_or_else(|| panic!("{name} in {line}"));
        value.split(' ').next().unwrap().parse().unwrap()
    };
    let (sources, sinks) = (lines("source"), lines("sink"));
    assert_eq!(sources.iter().map(|l| field(l, "batch_size")).sum::<u64>(), COUNT, "{sources:?}");
    assert_eq!(sources.iter().map(|l| field(l, "sent_count")).sum::<u64>(), feed.messages_delivered);
    assert!(sources.iter().all(|l| {
        ["prepare_us", "deliver_us", "state_save_us", "total_us"].iter().all(|f| l.contains(&format!(" {f}=")))
    }));
    assert_eq!(sinks.len() as u64, seqs.len() as u64, "one line per record read: batch_length = 1");
    assert_eq!(sinks.iter().map(|l| field(l, "processed_count")).sum::<u64>(), expected.len() as u64);
    let dropped_whole = sinks.iter().filter(|l| field(l, "processed_count") == 0).collect::<Vec<_>>();
    assert_eq!(dropped_whole.len() as u64, fifths, "a batch dropped whole is settled, and said");
    assert!(dropped_whole.iter().all(|l| !l.contains(" write_us=")), "not written: {dropped_whole:?}");

    let positions = crate::process::Site::states(&site).read("archive").unwrap().expect("the sink's positions");
    let stored = ferry_tests::records::positions(&positions.state);
    assert_eq!(stored.values().copied().max(), Some(seqs.len() as u64), "the offset past every record read");
}

#[test]
fn a_transform_that_answers_for_fewer_records_holds_its_batch_back_and_delivers_nothing() {
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
path = "{FAULTY_SOURCE}"
poll_interval = "2ms"
nack_backoff = {{ initial = "1ms", max = "5ms" }}
max_consecutive_nacks = 1000000
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = 10, messages_per_batch = 4 }}

[sources.transforms.short]
enabled = true
component = "{FAULTY_TRANSFORM}"
plugin_config = {{ answer_one_less = true }}
"#
        ),
    );
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["transform `short` failed: it answered 3 entries for 4 records"]);
    run.wait_for_line(&["transform `short` failed: it answered 3 entries for 4 records"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let records = LocalLog::read_all(&site.log_dir(), "demo", "feed").unwrap_or_default();
    assert!(records.is_empty(), "nothing delivered past a broken transform: {} records", records.len());
    assert!(site.states().read("feed").unwrap().is_none(), "no cursor committed");
}

#[test]
fn a_record_a_transform_grows_past_the_message_limit_holds_its_batch_and_is_named() {
    // The records come in well under limits.max_message_bytes; the field added takes
    // every one over it.
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
path = "{FAULTY_SOURCE}"
poll_interval = "2ms"
nack_backoff = {{ initial = "1ms", max = "5ms" }}
max_consecutive_nacks = 1000000
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = 10, messages_per_batch = 4 }}
limits = {{ max_message_bytes = 600 }}

[sources.transforms.add_fields]
enabled = true
fields = [{{ key = "padding", value.static = "{padding}" }}]
"#,
            padding = "x".repeat(600)
        ),
    );
    let mut run = Ferry::start(&config, &[]);
    let line = run.wait_for_line(&["key=feed", "after the connector's transforms"]);
    assert!(line.contains("message 0 is") && line.contains("over limits.max_message_bytes (600 B)"), "{line}");
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let records = LocalLog::read_all(&site.log_dir(), "demo", "feed").unwrap_or_default();
    assert!(records.is_empty(), "nothing over the limit delivered: {} records", records.len());
    assert!(site.states().read("feed").unwrap().is_none(), "no cursor committed");
}

#[test]
fn a_component_that_is_not_a_transform_is_refused_at_start_naming_the_file_and_the_kind() {
    let site = Site::new();
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[[sources]]
key = "feed"
path = "{FAULTY_SOURCE}"
streams = [{{ stream = "demo", topic = "feed" }}]

[sources.transforms.wrong]
enabled = true
component = "{FAULTY_SOURCE}"
"#
        ),
    );
    let output = ferry(&["run", config.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(FAULTY_SOURCE)
            && stderr.contains("iggy:connector/transform@")
            && stderr.contains("not a Ferry transform"),
        "{stderr}"
    );
    assert!(site.states().read("feed").unwrap().is_none(), "nothing taken or committed");

    let inspected = ferry(&["inspect", FAULTY_TRANSFORM]);
    let stdout = String::from_utf8_lossy(&inspected.stdout);
    assert!(stdout.contains("transform: yes: implements iggy:connector/transform-component@"), "{stdout}");
}

/// A record whose stream's schema cannot hold it: the source's batch is NACKed
/// `rejected` naming the record, and nothing is delivered; a stored record that is
/// not what the sink's stream's schema says, with no dead letters to take it, holds
/// its partition (said, with its offset and why), and nothing is written or skipped.
#[test]
fn records_that_are_not_what_their_streams_schema_says_hold_their_batch_and_are_named() {
    let site = Site::new();
    std::fs::create_dir_all(site.path("out")).unwrap();
    // `seq` as a string: the sources' JSON numbers do not fit.
    let schema = r#"{"type": "record", "name": "R", "fields": [{"name": "seq", "type": "string"}]}"#;
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "strict"
path = "{FAULTY_SOURCE}"
poll_interval = "2ms"
nack_backoff = {{ initial = "1ms", max = "5ms" }}
max_consecutive_nacks = 1000000
streams = [{{ stream = "demo", topic = "strict", schema = "avro", avro_schema_json = '{schema}' }}]
plugin_config = {{ max_count = 10, messages_per_batch = 5 }}

[[sources]]
key = "plain"
path = "{FAULTY_SOURCE}"
poll_interval = "2ms"
streams = [{{ stream = "demo", topic = "plain" }}]
plugin_config = {{ max_count = 10, messages_per_batch = 5 }}

[[sinks]]
key = "archive"
path = "{FILE_SINK}"
poll_interval = "2ms"
retry_backoff = {{ initial = "1ms", max = "5ms" }}
max_consecutive_nacks = 1000000
streams = [{{ stream = "demo", topics = ["plain"], schema = "proto" }}]
grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }}
plugin_config = {{ directory = "/out" }}
"#
        ),
    );
    let mut run = Ferry::start(&config, &[]);
    let nack = run.wait_for_line(&["key=strict", "NACK"]);
    assert!(
        nack.contains("rejected")
            && nack.contains("record 0 of the batch is not encodable as avro, its stream's schema")
            && nack.contains("does not fit the Avro schema"),
        "{nack}"
    );
    let held = run.wait_for_line(&["key=archive", "no dead_letters are configured"]);
    assert!(
        held.contains("the message at offset 0 is not proto as its stream's schema says: not a protobuf Any"),
        "{held}"
    );
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    // Nothing of the strict source was delivered, its cursor never moved; the plain
    // one's records are all in the log, none written by the sink, its offset unmoved.
    assert!(LocalLog::read_all(&site.log_dir(), "demo", "strict").unwrap_or_default().is_empty());
    assert_eq!(LocalLog::read_all(&site.log_dir(), "demo", "plain").unwrap().len(), 10);
    assert!(written(&site.path("out")).is_empty());
    let status = read_status_file(&status_file_path(&site.path("state"))).unwrap();
    let strict = status.connectors.iter().find(|c| c.key == "strict").unwrap();
    assert_eq!(strict.messages_delivered, 0, "{strict:?}");
    let archive = status.connectors.iter().find(|c| c.key == "archive").unwrap();
    assert_eq!(archive.messages_delivered, 0, "{archive:?}");
}
