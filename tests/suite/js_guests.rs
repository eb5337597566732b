//! Connectors written in JavaScript: the examples in examples/js/, built through the
//! real `ferry build` (componentize-js, as scripts/setup-js-guest installs it) once
//! per run of the suite, keep the contract as the Rust ones do: every `seq`
//! delivered, the same records again after a NACK, nothing lost over `kill -9`s, and
//! a sink that writes every message once through a `retry`. Then the author's path:
//! `ferry new --lang js`, `ferry build`, `ferry run`.
//!
//! Without the tools these tests fail, naming the setup script: CI installs them,
//! and a skipped test would hide a broken setup.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use ferry::capabilities::dirs::DirGrant;
use ferry::config::ByteSize;
use ferry::contract::NackReason;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::faults::FaultyTarget;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::{assert_complete, next_seq, seq_messages, seq_of, seqs};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::faults::{is_nack, wait_generation};
use crate::process::{Ferry, Site, crash_plan, ferry, ferry_binary};

/// What a JavaScript guest needs: the engine's heap on top of what the Rust guests
/// use (see the README, "JavaScript").
const JS_MEMORY_MIB: u64 = 128;

/// The component of `examples/js/<example>`, built by `ferry build` the first time a
/// test asks for it, into the suite's temporary directory.
fn example(example: &str) -> PathBuf {
    static SOURCE: OnceLock<PathBuf> = OnceLock::new();
    static SINK: OnceLock<PathBuf> = OnceLock::new();
    let once = match example {
        "source" => &SOURCE,
        "sink" => &SINK,
        other => panic!("no example {other}"),
    };
    once.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/js").join(example);
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("js_{example}.wasm"));
        ferry_build(&dir, &["--out", out.to_str().unwrap()]);
        out
    })
    .clone()
}

/// `ferry build DIR ARGS...`, which must succeed.
fn ferry_build(dir: &Path, args: &[&str]) -> String {
    let output = Command::new(ferry_binary()).arg("build").arg(dir).args(args).output().expect("ferry runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "ferry build {} failed (is componentize-js installed? scripts/setup-js-guest installs it):\n{stdout}\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// One test for the in-process path, as compiling the engine takes seconds: every
/// `seq` comes, a refused delivery is a NACK after which the guest produces the same
/// records from the committed cursor, and when the fault clears the flow finishes
/// with every `seq` exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_source_delivers_every_seq_and_produces_the_same_records_after_a_nack() {
    let component = example("source");
    let h = Harness::new();
    let target = FaultyTarget::new(h.log.clone());
    let plugin_config = json!({ "messages_per_batch": 7, "max_count": 700 });
    let mut source = h.source("js", component.to_str().unwrap(), plugin_config);
    source.sandbox.limits.memory = ByteSize::mib(JS_MEMORY_MIB);
    source.target = target.clone() as Arc<_>;
    let mut running = h.start(vec![source]);

    wait_generation(&mut running, "js", 3).await;
    target.set_failing(true);
    running.wait_for("a NACK", is_nack("js", NackReason::DeliveryFailed)).await;
    let before = h.committed("js");
    for _ in 0..3 {
        running.wait_for("more NACKs", is_nack("js", NackReason::DeliveryFailed)).await;
    }
    assert_eq!(before, h.committed("js"), "NACKs must leave the committed cursor where it was");
    let refused = target.refused();
    assert!(refused.len() >= 4, "{refused:?}");
    assert!(refused.windows(2).all(|w| w[0] == w[1]), "the guest must produce the same records again: {refused:?}");
    let committed = next_seq(&before.expect("committed before the fault").state);
    assert_eq!(refused[0], (committed..committed + 7).collect::<Vec<_>>(), "from the committed cursor");
    let heard = capture().guest_lines("js");
    assert!(heard.iter().any(|l| l.contains("not acknowledged (delivery-failed")), "the guest heard it: {heard:?}");

    target.set_failing(false);
    running.wait_idle("js").await;
    assert_eq!(seqs(&h.records("js")), (0..700).collect::<Vec<_>>(), "nothing lost, nothing doubled");
    assert_eq!(next_seq(&h.committed("js").unwrap().state), 700);
    running.stop().await;
}

/// The example sink on 200 messages, answering `retry` for every third batch after
/// writing it: the host hands each such batch again, the sink skips what it wrote,
/// and the file holds every message exactly once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_sink_writes_every_message_once_through_retries() {
    let component = example("sink");
    let h = Harness::new();
    h.append("feed", seq_messages(0..200)).await;
    let out = h.dir.path().join("jsink-out");
    std::fs::create_dir_all(&out).unwrap();
    let plugin_config = json!({ "directory": "/out", "file": "sink.jsonl", "fail_every": 3 });
    let mut sink = h.sink("jsink", component.to_str().unwrap(), plugin_config, &["feed"]);
    sink.sandbox.limits.memory = ByteSize::mib(JS_MEMORY_MIB);
    sink.sandbox.grants.dirs.push(DirGrant { host: out.clone(), guest: "/out".into(), writable: true });
    let mut running = Running::start(h.host_with(vec![], vec![sink]));

    let retried = running.wait_for("a retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "jsink")).await;
    let done = |e: &Event| matches!(e, Event::Written { key, end: 200, .. } if &**key == "jsink");
    running.wait_for("every message written", done).await;
    running.stop().await;

    let Event::Retried { reason, .. } = retried else { unreachable!() };
    assert!(reason.contains("fail_every = 3"), "{reason}");
    let heard = capture().guest_lines("jsink");
    assert!(heard.iter().any(|l| l.contains("already written (a replay)")), "the replays were skipped: {heard:?}");
    let text = std::fs::read_to_string(out.join("sink.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let offsets: Vec<u64> = lines.iter().map(|l| l["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, (0..200).collect::<Vec<_>>(), "every message once, in order");
    let payloads: Vec<u64> = lines.iter().map(|l| seq_of(l["payload"].as_str().unwrap().as_bytes())).collect();
    assert_eq!(payloads, (0..200).collect::<Vec<_>>());
}

/// A ferry.toml running the example source as `key`, into `demo/<key>`.
fn source_config(key: &str, plugin_config: &str) -> String {
    format!(
        r#"
[runtime]
shutdown_grace_period = "20s"
compile_timeout = "180s"

[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "{key}"
path = "{component}"
poll_interval = "2ms"
limits.memory = "{JS_MEMORY_MIB}MiB"

[[sources.streams]]
stream = "demo"
topic = "{key}"

[sources.plugin_config]
{plugin_config}
"#,
        component = example("source").display()
    )
}

/// `kill -9` at random moments: after each, every `seq` below the committed cursor is
/// in the log; at the end every `seq` is there, duplicates bounded by what the kills
/// can have caught in flight.
#[test]
fn a_js_source_loses_nothing_over_kill_9s() {
    const MAX_COUNT: u64 = 2000;
    const PER_BATCH: u64 = 4;
    let (rounds, mut rng) = crash_plan("js kill loop");
    // Each start loads the engine from the compile cache; fewer rounds than the Rust
    // crash test keep this one short.
    let rounds = rounds.min(10);
    let site = Site::new();
    let paced = format!("messages_per_batch = {PER_BATCH}\ninterval_ms = 2\nmax_count = {MAX_COUNT}");
    let config = site.config("ferry.toml", &source_config("crashy", &paced));
    let read = |round: u32| -> (u64, Vec<u64>) {
        let committed = site.states().read("crashy").unwrap_or_else(|e| panic!("round {round}: {e}"));
        let committed = committed.map_or(0, |c| next_seq(&c.state));
        let records = match LocalLog::topic_file(&site.log_dir(), "demo", "crashy").exists() {
            true => LocalLog::read_all(&site.log_dir(), "demo", "crashy").unwrap_or_else(|e| panic!("{e}")),
            false => Vec::new(),
        };
        (committed, seqs(&records))
    };
    let mut progress = Vec::new();
    for round in 0..rounds {
        Ferry::start(&config, &[]).kill_9_at_a_random_moment(&mut rng, &["key=crashy", "running"]);
        progress.push(crate::crash::check_invariant(&site, "crashy", round));
    }
    eprintln!("committed cursor after each kill: {progress:?}");

    let unpaced = site.config("finish.toml", &source_config("crashy", &format!("max_count = {MAX_COUNT}")));
    let mut run = Ferry::start(&unpaced, &[]);
    run.wait_for_line(&["key=crashy", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let (committed, present) = read(rounds);
    assert_eq!(committed, MAX_COUNT);
    let duplicates = assert_complete(&present, MAX_COUNT);
    // A kill loses at most the batch in flight's commit: its records come again. The
    // paced runs make one batch at a time, the finishing run 10 per batch.
    assert!(duplicates as u64 <= u64::from(rounds) * 10, "{duplicates} duplicates over {rounds} kills");
    eprintln!("js kill loop: {} records for {MAX_COUNT} seqs ({duplicates} duplicates)", present.len());
}

#[test]
fn ferry_build_without_the_tools_names_the_setup_script() {
    let home = tempfile::tempdir().unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/js/source");
    // A home where nothing is installed, and a PATH with only the system's tools.
    let output = Command::new(ferry_binary())
        .arg("build")
        .arg(&dir)
        .env("HOME", home.path())
        .env_remove("XDG_DATA_HOME")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("ferry runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/setup-js-guest").canonicalize().unwrap();
    assert!(stderr.contains("componentize-js 0.23.0"), "{stderr}");
    assert!(stderr.contains(&format!("{} installs them", setup.display())), "{stderr}");
}

/// The README's steps for a JavaScript author: `ferry new --lang js`, `ferry build`,
/// `ferry run ferry.toml`, and the records are in the log; from wherever the project
/// was moved (or cloned) to: it names no path outside itself.
#[test]
fn a_new_js_source_builds_and_runs() {
    let home = tempfile::tempdir().unwrap();
    let output = ferry(&["new", "source", "demo-js", "--lang", "js", "--path", home.path().to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let project = crate::authors::moved_elsewhere(&home.path().join("demo-js"));
    let stdout = ferry_build(&project, &[]);
    assert!(stdout.contains("source: yes: implements iggy:connector/source-connector"), "{stdout}");
    assert!(project.join("target/components/demo_js.wasm").is_file());

    let config = project.join("ferry.toml");
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=demo-js}", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let records = LocalLog::read_all(&project.join("data/log"), "demo", "records").unwrap();
    assert_eq!(seqs(&records), (0..100).collect::<Vec<_>>());
}

/// `ferry new transform --lang js` builds, and the transform runs in a sink's chain:
/// the file sink writes every record it keeps once, changed; the records it drops
/// are settled (the sink's offset moves past them) and counted.
#[test]
fn a_js_transform_from_ferry_new_runs_in_a_sinks_chain() {
    let home = tempfile::tempdir().unwrap();
    let output = ferry(&["new", "transform", "jstrans", "--lang", "js", "--path", home.path().to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let project = home.path().join("jstrans");
    let stdout = ferry_build(&project, &[]);
    assert!(stdout.contains("transform: yes: implements iggy:connector/transform-component"), "{stdout}");

    let site = Site::new();
    std::fs::create_dir_all(site.path("out")).unwrap();
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
path = "{source}"
poll_interval = "2ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = 300, messages_per_batch = 10 }}

[[sinks]]
key = "archive"
path = "{sink}"
poll_interval = "2ms"
batch_length = 8
streams = [{{ stream = "demo", topics = ["feed"] }}]
grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }}
plugin_config = {{ directory = "/out" }}
limits = {{ memory = "{JS_MEMORY_MIB}MiB" }}

[sinks.transforms.jstrans]
enabled = true
component = "{component}"
plugin_config = {{ drop_every = 5 }}
"#,
            source = ferry_tests::components::FAULTY_SOURCE,
            sink = ferry_tests::components::FILE_SINK,
            component = project.join("target/components/jstrans.wasm").display(),
        ),
    );
    let kept: Vec<u64> = (0..300u64).filter(|s| !s.is_multiple_of(5)).collect();
    let mut run = Ferry::start(&config, &[]);
    crate::iggy_sinks::until("the sink to write what the transform keeps", || {
        crate::transforms::written(&site.path("out")).len() >= kept.len()
    });
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let written = crate::transforms::written(&site.path("out"));
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), kept);
    assert!(written.values().all(|(payload, times)| *times == 1 && payload["transformed_by"] == "jstrans"));
    let status = ferry(&["status", config.to_str().unwrap(), "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let archive = status["connectors"].as_array().unwrap().iter().find(|c| c["key"] == "archive").unwrap().clone();
    assert_eq!(archive["messages_filtered"], 60, "{archive}");
}
