//! A connector author's path, outside this workspace, as the README gives it:
//! `ferry new` writes a crate, `ferry build` turns it into a component and checks it,
//! `ferry run` runs the crate's own ferry.toml; and the errors for a directory that is
//! not a connector crate, a crate that does not compile, and a name already taken.
//!
//! Building a new crate compiles the standard library for wasm (over a minute with
//! the fallback toolchain), so one test does the whole path and the crates after the
//! first share its target directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nix::sys::signal::Signal;

use crate::iggy_sinks::until;
use crate::process::{Ferry, ferry, ferry_binary};

/// `ferry build DIR [ARGS...]`, with the compiler's files in `target_dir` (the crate's
/// own `target/` when `None`).
fn build(dir: &Path, target_dir: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(ferry_binary());
    command.arg("build").arg(dir).args(args);
    match target_dir {
        Some(target_dir) => command.env("CARGO_TARGET_DIR", target_dir),
        None => command.env_remove("CARGO_TARGET_DIR"),
    };
    command.output().expect("ferry runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn new_crate(kind: &str, name: &str, parent: &Path) {
    let output = ferry(&["new", kind, name, "--path", parent.to_str().unwrap()]);
    assert!(output.status.success(), "ferry new {kind} {name}: {}", text(&output.stderr));
}

/// `project`, as `ferry new` wrote it, moved to another directory (as a clone on
/// another machine would be), after checking that none of its files names this
/// checkout: a Python or JavaScript project carries its helper and names no path
/// outside itself.
pub fn moved_elsewhere(project: &Path) -> PathBuf {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().canonicalize().unwrap();
    let checkout = checkout.to_str().unwrap();
    for entry in std::fs::read_dir(project).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains(checkout), "{} names this checkout ({checkout}):\n{text}", path.display());
    }
    let elsewhere = project.parent().unwrap().join("moved").join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let moved = elsewhere.join(project.file_name().unwrap());
    std::fs::rename(project, &moved).unwrap();
    moved
}

/// The `seq` in the payload of a message as `ferry log read` or the sink's log line
/// prints it (`"payload":"{\"seq\":N}"`).
fn seq_in(line: &str) -> u64 {
    let unescaped = line.replace('\\', "");
    let at = unescaped.find("\"seq\":").unwrap_or_else(|| panic!("no seq in {line}")) + "\"seq\":".len();
    let digits: String = unescaped[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no seq in {line}"))
}

#[test]
fn a_new_source_and_sink_build_and_run_outside_the_workspace() {
    let home = tempfile::tempdir().unwrap();
    new_crate("source", "demo", home.path());
    new_crate("sink", "demo-sink", home.path());
    let (source, sink) = (home.path().join("demo"), home.path().join("demo-sink"));

    // The source, with its compiler's files in its own target/ (the default), and the
    // component also copied where --out says.
    let copy = home.path().join("copy.wasm");
    let output = build(&source, None, &["--out", copy.to_str().unwrap()]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "ferry build: {stdout}\n{}", text(&output.stderr));
    let component = source.join("target/components/demo.wasm");
    assert!(stdout.contains(&format!("component: {}", copy.display())), "{stdout}");
    assert!(stdout.contains("source: yes: implements iggy:connector/source-connector"), "{stdout}");
    assert_eq!(std::fs::read(&component).unwrap(), std::fs::read(&copy).unwrap());
    let compiled_here = ["wasm32-wasip1", "wasm32-wasip2"].iter().any(|t| source.join("target").join(t).is_dir());
    assert!(compiled_here, "the compiler's files are not in {}", source.join("target").display());

    // The sink, sharing the source's target directory (and its standard library).
    let shared = source.join("target");
    let output = build(&sink, Some(&shared), &[]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "ferry build: {stdout}\n{}", text(&output.stderr));
    let sink_component = sink.join("target/components/demo_sink.wasm");
    assert!(stdout.contains(&format!("component: {}", sink_component.display())), "{stdout}");
    assert!(stdout.contains("sink: yes: implements iggy:connector/sink-connector"), "{stdout}");

    // The source's ferry.toml as it stands: 100 records, seq 0 to 99, in the local log.
    let config = source.join("ferry.toml");
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=demo}", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let read = ferry(&["log", "read", config.to_str().unwrap()]);
    assert!(read.status.success(), "{}", text(&read.stderr));
    let seqs: Vec<u64> = text(&read.stdout).lines().map(seq_in).collect();
    assert_eq!(seqs, (0..100).collect::<Vec<_>>());

    // The sink's ferry.toml, on the source's log: every record reaches its log.
    let log = source.join("data/log");
    let mut run = Ferry::start(&sink.join("ferry.toml"), &[("FERRY__LOCAL_LOG__PATH", log.to_str().unwrap())]);
    run.wait_for_line(&["demo-sink received", "\"offset\":99"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let mut received: Vec<u64> = run.log().lines().filter(|l| l.contains("demo-sink received")).map(seq_in).collect();
    received.sort();
    received.dedup();
    assert_eq!(received, (0..100).collect::<Vec<_>>(), "{}", run.log());

    // A transform, sharing the target directory too, in the chain of the source: its
    // ferry.toml as written, pointed at this source (it names `../my-source`).
    new_crate("transform", "demo-transform", home.path());
    let transform = home.path().join("demo-transform");
    let output = build(&transform, Some(&shared), &[]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "ferry build: {stdout}\n{}", text(&output.stderr));
    assert!(stdout.contains("transform: yes: implements iggy:connector/transform-component"), "{stdout}");
    let config = transform.join("ferry.toml");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("../my-source/target/components/my_source.wasm"), "{written}");
    std::fs::write(
        &config,
        written
            .replace("../my-source/target/components/my_source.wasm", "../demo/target/components/demo.wasm")
            .replace("key = \"my-source\"", "key = \"demo\""),
    )
    .unwrap();
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=demo}", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let read = ferry(&["log", "read", config.to_str().unwrap()]);
    assert!(read.status.success(), "{}", text(&read.stderr));
    let lines = text(&read.stdout);
    let seqs: Vec<u64> = lines.lines().map(seq_in).collect();
    assert_eq!(seqs, (0..100u64).filter(|s| !s.is_multiple_of(3)).collect::<Vec<_>>(), "drop_every = 3");
    assert!(lines.lines().all(|l| l.contains("transformed_by") && l.contains("demo-transform")), "{lines}");

    // An HTTP sink from `ferry new sink --http`, on the source's log: every record
    // reaches the endpoint its ferry.toml grants.
    let endpoint = crate::http_sink::Endpoint::start(0, false);
    let url = format!("http://{}/ingest", endpoint.address);
    let output = ferry(&["new", "sink", "hooks", "--http", &url, "--path", home.path().to_str().unwrap()]);
    assert!(output.status.success(), "ferry new: {}", text(&output.stderr));
    let hooks = home.path().join("hooks");
    let output = build(&hooks, Some(&shared), &[]);
    assert!(output.status.success(), "ferry build: {}\n{}", text(&output.stdout), text(&output.stderr));
    let mut run = Ferry::start(&hooks.join("ferry.toml"), &[("FERRY__LOCAL_LOG__PATH", log.to_str().unwrap())]);
    until("every record at the endpoint", || endpoint.seqs().len() == 100);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert_eq!(endpoint.seqs().keys().copied().collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());

    // An HTTP source from `ferry new source --http`, against an endpoint serving 250
    // records as JSON arrays from `?offset=N`, 40 at a time: every record once.
    let records = axum::Router::new().route(
        "/items",
        axum::routing::get(|axum::extract::Query(query): axum::extract::Query<HashMap<String, u64>>| async move {
            let from = query["offset"];
            let items: Vec<serde_json::Value> =
                (from..(from + 40).min(250)).map(|seq| serde_json::json!({ "seq": seq })).collect();
            axum::Json(items)
        }),
    );
    let server = tokio::runtime::Runtime::new().unwrap();
    let listener = server.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}/items", listener.local_addr().unwrap());
    server.spawn(async move { axum::serve(listener, records).await.unwrap() });
    let output = ferry(&["new", "source", "feed", "--http", &url, "--path", home.path().to_str().unwrap()]);
    assert!(output.status.success(), "ferry new: {}", text(&output.stderr));
    let feed = home.path().join("feed");
    let output = build(&feed, Some(&shared), &[]);
    assert!(output.status.success(), "ferry build: {}\n{}", text(&output.stdout), text(&output.stderr));
    let config = feed.join("ferry.toml");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("poll_interval = \"1s\""), "{written}");
    std::fs::write(&config, written.replace("poll_interval = \"1s\"", "poll_interval = \"10ms\"")).unwrap();
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=feed}", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let read = ferry(&["log", "read", config.to_str().unwrap()]);
    assert!(read.status.success(), "{}", text(&read.stderr));
    let seqs: Vec<u64> = text(&read.stdout).lines().map(seq_in).collect();
    assert_eq!(seqs, (0..250).collect::<Vec<_>>());

    // A crate that does not compile: the error names it, the compiler says why.
    new_crate("source", "broken", home.path());
    let broken = home.path().join("broken");
    std::fs::write(broken.join("src/lib.rs"), "pub fn oops() -> u32 { \"not a number\" }\n").unwrap();
    let output = build(&broken, Some(&shared), &[]);
    let stderr = text(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains(&format!("{}: building failed", broken.join("Cargo.toml").display())), "{stderr}");
    assert!(stderr.contains("mismatched types"), "{stderr}");
}

#[test]
fn ferry_build_refuses_what_is_not_a_connector_crate() {
    let home = tempfile::tempdir().unwrap();
    let refused = |dir: &Path, wanted: &str| {
        let output = build(dir, None, &[]);
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{}: {stderr}", dir.display());
        assert!(stderr.contains(wanted), "wanted {wanted:?}; got: {stderr}");
    };

    refused(&home.path().join("nowhere"), &format!("{}: not a directory", home.path().join("nowhere").display()));
    refused(home.path(), &format!("{}: no Cargo.toml", home.path().display()));

    // A crate, but a library for Rust, not a cdylib: refused before anything compiles.
    let plain = home.path().join("plain");
    std::fs::create_dir_all(plain.join("src")).unwrap();
    std::fs::write(
        plain.join("Cargo.toml"),
        "[package]\nname = \"plain\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(plain.join("src/lib.rs"), "").unwrap();
    let manifest = plain.join("Cargo.toml").canonicalize().unwrap();
    refused(&plain, &format!("{}: `plain` is not a connector crate", manifest.display()));
    assert!(!plain.join("target").exists(), "nothing was to be compiled");

    // A manifest cargo cannot read.
    std::fs::write(plain.join("Cargo.toml"), "[package\n").unwrap();
    refused(&plain, &format!("{}: cannot read the crate", manifest.display()));
}

#[test]
fn ferry_new_refuses_an_existing_directory_a_bad_name_and_other_languages() {
    let home = tempfile::tempdir().unwrap();
    let taken = home.path().join("demo");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("notes.txt"), "mine").unwrap();
    let at = home.path().to_str().unwrap();

    let output = ferry(&["new", "source", "demo", "--path", at]);
    let stderr = text(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains(&format!("{}: already exists", taken.display())), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&taken).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["notes.txt"]);
    assert_eq!(std::fs::read_to_string(taken.join("notes.txt")).unwrap(), "mine");

    let output = ferry(&["new", "sink", "../escape", "--path", at]);
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("\"../escape\" cannot name a connector"), "{}", text(&output.stderr));

    let output = ferry(&["new", "source", "cob", "--lang", "cobol", "--path", at]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("invalid value 'cobol' for '--lang <LANG>'"), "{stderr}");
    assert!(stderr.contains("[possible values: rust, python, js]"), "{stderr}");
    assert!(!home.path().join("cob").exists());

    // The help lists both commands.
    let help = text(&ferry(&["--help"]).stdout);
    for command in ["  new ", "  build "] {
        assert!(help.lines().any(|l| l.starts_with(command)), "{help}");
    }
}
