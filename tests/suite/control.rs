//! Steering a running `ferry run` (a process, its HTTP API on a free port): pause,
//! resume and restart one connector, reset its state, reload the config by SIGHUP
//! and by `POST /reload`.
//!
//! What each proves, from the records in the local log and the committed cursors:
//! a paused connector's outstanding batch settled (its cursor covers every record)
//! and it delivers nothing more while a neighbour goes on; a resumed or restarted one
//! goes on from its cursor with no gap and no duplicate; a state is reset only while
//! its connector is paused, and the old one is kept; a reload starts what was added,
//! stops what was removed, restarts what changed (config, or only the component's
//! bytes) from its committed cursor, and does not touch the rest; a broken config or
//! component (or a grant reaching ferry's own files) is refused whole while
//! everything runs on; a sink paused and reset
//! reads its topic again from the start (the file sink writes nothing twice); a pause does not outlive ferry.

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::http_api::{head, start};
use crate::process::{Ferry, Site, file_sink_table};
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{CONTRACT_0_1_SOURCE, FAULTY_SOURCE, HOSTILE_SOURCE};
use ferry_tests::free_port;
use ferry_tests::http_client::{Response, get, get_until, request};
use ferry_tests::records::{assert_complete, next_seq, seqs};
use ferry_tests::sink_output::file_sink_output;

/// A faulty source `key` of component `path` delivering `{"seq":N}` records to
/// `demo/<key>`, 5 per batch, every 5 ms, up to `max_count`.
fn source(key: &str, path: &str, max_count: u64) -> String {
    format!(
        r#"
[[sources]]
key = "{key}"
path = "{path}"
poll_interval = "5ms"
streams = [{{ stream = "demo", topic = "{key}" }}]
plugin_config = {{ max_count = {max_count} }}
"#
    )
}

const ENDLESS: u64 = 1 << 40;

fn post(address: &str, path: &str) -> Response {
    request(address, "POST", path, &[]).unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// `/sources/{key}` once `done` holds for it.
fn source_until(address: &str, key: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
    get_until(address, &format!("/sources/{key}"), &[], |r| r.status == 200 && done(&r.json())).json()
}

fn delivered(status: &Value) -> u64 {
    status["messages_delivered"].as_u64().unwrap_or_else(|| panic!("no messages_delivered in {status}"))
}

/// Wait until `key` delivered `more` messages beyond what it had: proof that time
/// passed for everyone, taken from an event rather than a clock.
fn wait_for_more(address: &str, key: &str, more: u64) -> Value {
    let before = delivered(&get(address, &format!("/sources/{key}"), &[]).unwrap().json());
    source_until(address, key, |s| delivered(s) >= before + more)
}

/// The committed `next_seq` of `key` (0 without a cursor).
fn committed_seq(site: &Site, key: &str) -> u64 {
    site.states().read(key).unwrap().map_or(0, |c| next_seq(&c.state))
}

fn records_of(site: &Site, key: &str) -> Vec<u64> {
    seqs(&LocalLog::read_all(&site.log_dir(), "demo", key).unwrap_or_else(|e| panic!("{e}")))
}

/// The faulty source copied to `own.wasm` of the site (a test may change the
/// file), and its bytes.
fn own_copy(site: &Site) -> (std::path::PathBuf, Vec<u8>) {
    let wasm = site.path("own.wasm");
    let original = std::fs::read(FAULTY_SOURCE).unwrap();
    std::fs::write(&wasm, &original).unwrap();
    (wasm, original)
}

/// `component` with a custom section appended: the same code in other bytes.
fn with_a_custom_section(component: &[u8]) -> Vec<u8> {
    let mut bytes = component.to_vec();
    bytes.extend([0, 5, 4, b'n', b'o', b't', b'e']);
    bytes
}

fn stop(mut run: Ferry) {
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}

#[test]
fn a_pause_settles_the_batch_and_stops_polling_until_resumed_and_a_reset_waits_for_it() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!(
        "{}{}{}",
        head(port, ""),
        source("feed", FAULTY_SOURCE, ENDLESS),
        source("other", FAULTY_SOURCE, ENDLESS)
    );
    let run = start(&site, &text, &[]);
    source_until(&address, "feed", |s| delivered(s) >= 100);

    // Pause: answered once the outstanding batch has settled.
    let paused = post(&address, "/sources/feed/pause");
    assert_eq!(paused.status, 200, "{paused:?}");
    assert_eq!(paused.json()["status"], "paused", "{paused:?}");
    let at_pause = delivered(&get(&address, "/sources/feed", &[]).unwrap().json());
    let cursor_at_pause = committed_seq(&site, "feed");
    assert_eq!(cursor_at_pause, at_pause, "every delivered batch is committed: nothing is outstanding");

    // The neighbour goes on; `feed` delivers nothing more, and commits nothing.
    wait_for_more(&address, "other", 500);
    let feed = get(&address, "/sources/feed", &[]).unwrap().json();
    assert_eq!((feed["status"].as_str(), delivered(&feed)), (Some("paused"), at_pause), "{feed}");
    assert_eq!(feed["running"], false);
    assert_eq!(committed_seq(&site, "feed"), cursor_at_pause);
    // Its instance is gone with its memory; the neighbour's holds some.
    assert_eq!(feed["memory_in_use"], 0, "{feed}");
    let metrics = get(&address, "/metrics", &[]).unwrap().body;
    let memory_of = |key: &str| {
        let prefix = format!("ferry_connector_memory_bytes{{connector_key=\"{key}\",");
        let line = metrics.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{prefix} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    assert_eq!(memory_of("feed"), 0);
    let held = memory_of("other");
    assert!(held > 0 && held <= 64 << 20, "within the default limits.memory: {held}");
    let health = get(&address, "/health", &[]).unwrap();
    assert_eq!(health.status, 200, "a pause is what the operator asked for, not a fault: {health:?}");
    let again = post(&address, "/sources/feed/pause");
    assert_eq!((again.status, again.json()["message"].as_str()), (200, Some("already paused")));

    // Orders that cannot be carried out say why.
    for (method, path, status, words) in [
        ("DELETE", "/sources/other/state", 409, "`other` is running: its state can only be reset while it is paused"),
        ("POST", "/sinks/feed/pause", 404, "`feed` is a source, not a sink"),
        ("POST", "/sources/nope/restart", 404, "no source has the key `nope`"),
        ("POST", "/sources/other/resume", 200, "already running"),
    ] {
        let answer = request(&address, method, path, &[]).unwrap();
        assert_eq!(answer.status, status, "{method} {path}: {answer:?}");
        let said = answer.json();
        let text = said["error"].as_str().or(said["message"].as_str()).unwrap().to_string();
        assert!(text.contains(words), "{method} {path}: {text}");
    }

    // Resume: on from the cursor.
    let resumed = post(&address, "/sources/feed/resume");
    assert_eq!(resumed.status, 200, "{resumed:?}");
    // The answer says the state after the action.
    let after = |answer: &Response| answer.json()["status"].as_str().unwrap().to_string();
    assert!(["starting", "running", "idle"].contains(&after(&resumed).as_str()), "{resumed:?}");
    source_until(&address, "feed", |s| delivered(s) >= at_pause + 100);
    // Restart: a fresh instance, from the cursor.
    let restarted = post(&address, "/sources/feed/restart");
    assert_eq!(restarted.status, 200, "{restarted:?}");
    assert!(["starting", "running", "idle"].contains(&after(&restarted).as_str()), "{restarted:?}");
    // (The resume started the second instance, the restart the third.)
    let feed = source_until(&address, "feed", |s| s["instances"] == 3 && delivered(s) >= at_pause + 300);
    assert_eq!(feed["restarts"], 2, "{feed}");

    // Reset: only while paused; the old state is kept beside it.
    assert_eq!(post(&address, "/sources/feed/pause").status, 200);
    let before_reset = committed_seq(&site, "feed");
    let reset = request(&address, "DELETE", "/sources/feed/state", &[]).unwrap();
    assert_eq!(reset.status, 200, "{reset:?}");
    assert!(
        reset.json()["message"].as_str().unwrap().contains("the old state is kept in the `reset` table"),
        "{reset:?}"
    );
    let database = rusqlite::Connection::open(site.path("state/cursors.db")).unwrap();
    let kept: Vec<u8> = database
        .query_row("SELECT state FROM reset WHERE connector = 'feed'", [], |row| row.get(0))
        .expect("the old state is kept");
    assert_eq!(next_seq(&kept), before_reset, "what is kept is the cursor it had");
    assert_eq!(get(&address, "/sources/feed/state", &[]).unwrap().json()["committed"], Value::Null);
    let records = records_of(&site, "feed");
    assert_eq!(assert_complete(&records, before_reset), 0, "no gap, no duplicate through pause, resume, restart");

    // Resumed after the reset, it starts from scratch: seq 0 comes again.
    assert_eq!(post(&address, "/sources/feed/resume").status, 200);
    get_until(&address, "/sources/feed/state", &[], |r| {
        r.json()["committed"]["state_text"].as_str().is_some_and(|t| next_seq(t.as_bytes()) >= 50)
    });
    stop(run);
    let records = records_of(&site, "feed");
    assert_eq!(records.iter().filter(|&&seq| seq == 0).count(), 2, "from scratch after the reset");
    assert_complete(&records_of(&site, "other"), committed_seq(&site, "other"));
}

#[test]
fn a_reload_starts_stops_and_restarts_only_what_changed_each_from_its_cursor() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let config = |changing_max: u64, last: &str| {
        format!(
            "{}{}{}{}",
            head(port, ""),
            source("steady", FAULTY_SOURCE, ENDLESS),
            source("changing", FAULTY_SOURCE, changing_max),
            source(last, FAULTY_SOURCE, ENDLESS),
        )
    };
    let mut run = start(&site, &config(ENDLESS, "leaving"), &[]);
    for key in ["steady", "changing", "leaving"] {
        source_until(&address, key, |s| delivered(s) >= 100);
    }

    // `changing` gets a max_count a little ahead of where it is: with the new config
    // it delivers exactly up to there, then idles; with the old one it would go on.
    let limit = committed_seq(&site, "changing") + 1000;
    site.config("ferry.toml", &config(limit, "arriving"));
    run.signal(Signal::SIGHUP);
    let line = run.wait_for_line(&["config reloaded"]);
    assert!(line.contains("added=1") && line.contains("removed=1") && line.contains("changed=1"), "{line}");

    source_until(&address, "arriving", |s| delivered(s) >= 100);
    let changing = source_until(&address, "changing", |s| s["status"] == "idle" && delivered(s) == limit);
    assert_eq!(changing["instances"], 2, "restarted once, for the change: {changing}");
    let steady = wait_for_more(&address, "steady", 500);
    assert_eq!(steady["instances"], 1, "an unchanged neighbour is not touched: {steady}");
    let leaving = get(&address, "/sources/leaving", &[]).unwrap();
    assert_eq!(leaving.status, 404, "removed: {leaving:?}");
    let health = get(&address, "/health", &[]).unwrap();
    assert_eq!(health.status, 200, "{health:?}");

    // A reload with nothing changed touches nothing.
    let same = post(&address, "/reload").json();
    assert_eq!(same["changed"], Value::Array(vec![]), "{same}");
    assert_eq!(same["unchanged"].as_array().unwrap().len(), 3, "{same}");

    stop(run);
    assert_eq!(assert_complete(&records_of(&site, "changing"), limit), 0, "no gap, no duplicate across the reload");
    for key in ["steady", "leaving", "arriving"] {
        let records = records_of(&site, key);
        assert_eq!(assert_complete(&records, committed_seq(&site, key)), 0, "{key}");
    }
    assert!(site.states().read("leaving").unwrap().is_some(), "a removed connector's cursor stays");
}

#[test]
fn a_broken_config_or_component_is_refused_whole_while_everything_runs_on() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let (wasm, original) = own_copy(&site);
    let own = wasm.to_str().unwrap();
    let text =
        format!("{}{}{}", head(port, ""), source("own", own, ENDLESS), source("neighbour", FAULTY_SOURCE, ENDLESS));
    let run = start(&site, &text, &[]);
    source_until(&address, "own", |s| delivered(s) >= 100);

    // A component that is not one, with a change to the neighbour's config: refused
    // whole, naming the file; the neighbour is not restarted.
    std::fs::write(&wasm, b"not a component").unwrap();
    let changed_neighbour =
        format!("{}{}{}", head(port, ""), source("own", own, ENDLESS), source("neighbour", FAULTY_SOURCE, 99_999_999));
    site.config("ferry.toml", &changed_neighbour);
    let refused = post(&address, "/reload");
    assert_eq!(refused.status, 422, "{refused:?}");
    let error = refused.json()["error"].as_str().unwrap().to_string();
    assert!(error.contains(own) && error.contains("nothing was reloaded"), "{error}");

    // A config that does not parse, or changes what needs a restart: refused too.
    for (broken, words) in [
        (format!("{text}\n[[sources]\n"), "ferry.toml"),
        (text.replace("path = \"state\"", "path = \"elsewhere\""), "[state] changed, which needs a restart of ferry"),
        // A grant widened into the local log: a guest could rewrite its neighbour's topic.
        (
            format!("{text}[sources.grants]\ndirs = [{{ host = \"log\", guest = \"/log\", writable = true }}]\n"),
            "sources[1] (key `neighbour`): grants.dirs:",
        ),
        (
            format!("{text}[sources.grants]\ndirs = [{{ host = \"log/demo\", guest = \"/log\", writable = true }}]\n"),
            "writable is inside the local log ([local_log] path)",
        ),
    ] {
        std::fs::write(&wasm, &original).unwrap();
        site.config("ferry.toml", &broken);
        let refused = post(&address, "/reload");
        assert_eq!(refused.status, 422, "{refused:?}");
        let error = refused.json()["error"].as_str().unwrap().to_string();
        assert!(error.contains(words), "{words}: {error}");
    }
    for key in ["own", "neighbour"] {
        let status = wait_for_more(&address, key, 200);
        assert_eq!(status["instances"], 1, "still running as before: {status}");
    }

    // The same code with other bytes (a custom section appended) is a change: `own`
    // restarts from its cursor; the same bytes rewritten are not.
    site.config("ferry.toml", &text);
    let other_bytes = with_a_custom_section(&original);
    std::fs::write(&wasm, &other_bytes).unwrap();
    let reloaded = post(&address, "/reload");
    assert_eq!(reloaded.status, 200, "{reloaded:?}");
    assert_eq!(reloaded.json()["changed"], serde_json::json!(["own"]), "{reloaded:?}");
    assert_eq!(reloaded.json()["unchanged"], serde_json::json!(["neighbour"]), "{reloaded:?}");
    std::fs::write(&wasm, &other_bytes).unwrap();
    let again = post(&address, "/reload").json();
    assert_eq!(again["unchanged"].as_array().unwrap().len(), 2, "rewritten with the same bytes: {again}");
    let own_status = wait_for_more(&address, "own", 200);
    assert_eq!(own_status["instances"], 2, "{own_status}");
    assert_eq!(wait_for_more(&address, "neighbour", 1)["instances"], 1);

    stop(run);
    for key in ["own", "neighbour"] {
        assert_eq!(assert_complete(&records_of(&site, key), committed_seq(&site, key)), 0, "{key}");
    }
}

/// A hostile source `key` in `mode` (after two good batches, each instance), restarted
/// 10 ms after it fails, with `limits` and `grants` (TOML tables' bodies).
fn hostile(key: &str, mode: &str, extra: &str, limits: &str, grants: &str) -> String {
    format!(
        r#"
[[sources]]
key = "{key}"
path = "{HOSTILE_SOURCE}"
poll_interval = "5ms"
restart_backoff = {{ initial = "10ms", max = "10ms" }}
streams = [{{ stream = "demo", topic = "{key}" }}]
plugin_config = {{ mode = "{mode}", good_batches = 2, messages_per_batch = 5 {extra} }}
limits = {{ {limits} }}
grants = {{ {grants} }}
"#
    )
}

/// A reload that changes a connector's limits or grants restarts it with them: its
/// next instance runs within the new memory and call deadline and reaches what the
/// new grants give, while the neighbour whose table did not change runs on untouched.
#[test]
fn a_reload_applies_changed_limits_and_grants_to_the_new_instance() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let config = |memory: &str, timeout: &str, env: &str| {
        format!(
            "{}{}{}{}",
            head(port, ""),
            hostile("hungry", "allocate", "", &format!("memory = \"{memory}\""), ""),
            hostile("spinner", "spin", "", &format!("call_timeout = \"{timeout}\""), ""),
            hostile("prober", "env", ", name = \"FERRY_TEST_PROBED\"", "", &format!("env = [{env}]")),
        )
    };
    let env = [("FERRY_TEST_PROBED", "the host's value")];
    let last_error = |key: &str, words: &str| {
        let status = source_until(&address, key, |s| s["last_error"].as_str().is_some_and(|e| e.contains(words)));
        status["last_error"].as_str().unwrap().to_string()
    };
    let probed = |site: &Site| {
        let records = LocalLog::read_all(&site.log_dir(), "demo", "prober").unwrap();
        records.iter().map(|r| String::from_utf8_lossy(&r.payload).to_string()).collect::<Vec<_>>()
    };

    let mut run = start(&site, &config("20MiB", "1s", ""), &env);
    last_error("hungry", "limits.memory is 20 MiB");
    last_error("spinner", "limits.call_timeout (1s)");
    source_until(&address, "prober", |s| delivered(s) == 1);
    assert!(probed(&site)[0].contains(r#""ok":false"#), "not granted yet: {:?}", probed(&site));

    // The prober's one record is behind its cursor: reset it, so that the instance
    // the reload starts probes again (it stays paused through the reload).
    assert_eq!(post(&address, "/sources/prober/pause").status, 200);
    assert_eq!(request(&address, "DELETE", "/sources/prober/state", &[]).unwrap().status, 200);
    site.config("ferry.toml", &config("40MiB", "2s", "\"FERRY_TEST_PROBED\""));
    run.signal(Signal::SIGHUP);
    let line = run.wait_for_line(&["config reloaded"]);
    assert!(line.contains("changed=3"), "{line}");
    assert_eq!(post(&address, "/sources/prober/resume").status, 200);

    let error = last_error("hungry", "limits.memory is 40 MiB");
    assert!(!error.contains("20 MiB"), "{error}");
    last_error("spinner", "limits.call_timeout (2s)");
    // (Its counters go on across instances: the second record.)
    source_until(&address, "prober", |s| delivered(s) == 2);
    let records = probed(&site);
    assert!(records.last().unwrap().contains("the host's value"), "granted now: {records:?}");
    stop(run);
}

/// A restart reads the component file again (as a reload does, by its fingerprint):
/// a changed file is compiled and runs; one that fails its checks leaves the loaded
/// one running, and the answer says which.
#[test]
fn a_restart_runs_the_component_file_as_it_is_now_or_says_it_kept_the_loaded_one() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let (wasm, original) = own_copy(&site);
    let text = format!("{}{}", head(port, ""), source("own", wasm.to_str().unwrap(), ENDLESS));
    let run = start(&site, &text, &[]);
    source_until(&address, "own", |s| delivered(s) >= 100);
    // Compiles of own.wasm so far: the log says each.
    let compiles =
        |run: &Ferry| run.log().lines().filter(|l| l.contains("compiling component") && l.contains("own.wasm")).count();
    let restart = |instances: u64| {
        let answer = post(&address, "/sources/own/restart");
        assert_eq!(answer.status, 200, "{answer:?}");
        let before = delivered(&get(&address, "/sources/own", &[]).unwrap().json());
        source_until(&address, "own", |s| s["instances"] == instances && delivered(s) >= before + 100);
        answer.json()["message"].as_str().unwrap().to_string()
    };
    let first = compiles(&run);

    // A file that is not a component of this contract: the loaded one runs on.
    std::fs::write(&wasm, std::fs::read(CONTRACT_0_1_SOURCE).unwrap()).unwrap();
    let message = restart(2);
    assert!(message.contains("fail their checks") && message.contains("the ones loaded before run"), "{message}");
    assert!(message.contains("0.1"), "the reason, naming the contract version: {message}");
    assert_eq!(compiles(&run), first);

    // Other bytes (a custom section appended): compiled, and they run.
    let other_bytes = with_a_custom_section(&original);
    std::fs::write(&wasm, &other_bytes).unwrap();
    let message = restart(3);
    assert!(message.contains("changed since it was started, and run as they are now"), "{message}");
    assert_eq!(compiles(&run), first + 1, "the new bytes were compiled:\n{}", run.log());

    // Unchanged since: a plain restart.
    let message = restart(4);
    assert_eq!(message, "restarted: a fresh instance starts from its committed state");
    assert_eq!(compiles(&run), first + 1);

    stop(run);
    assert_eq!(assert_complete(&records_of(&site, "own"), committed_seq(&site, "own")), 0);
}

#[test]
fn a_sink_paused_and_reset_reads_its_topic_again_and_a_pause_does_not_outlive_ferry() {
    let site = Site::new();
    std::fs::create_dir(site.path("archive-out")).unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text =
        format!("{}{}{}", head(port, ""), source("feed", FAULTY_SOURCE, 500), file_sink_table("archive", "", ""));
    let offset_is = |want: u64| {
        move |r: &Response| r.status == 200 && r.json()["committed"]["offsets"]["demo/feed"].as_u64() == Some(want)
    };
    let run = start(&site, &text, &[]);
    get_until(&address, "/sinks/archive/state", &[], offset_is(500));

    let paused = post(&address, "/sinks/archive/pause");
    assert_eq!((paused.status, paused.json()["status"].as_str()), (200, Some("paused")), "{paused:?}");
    let reset = request(&address, "DELETE", "/sinks/archive/state", &[]).unwrap();
    assert_eq!(reset.status, 200, "{reset:?}");
    assert_eq!(get(&address, "/sinks/archive/state", &[]).unwrap().json()["committed"], Value::Null);
    assert_eq!(post(&address, "/sinks/archive/resume").status, 200);
    get_until(&address, "/sinks/archive/state", &[], offset_is(500));
    let archive = get(&address, "/sinks/archive", &[]).unwrap().json();
    assert_eq!(archive["messages_polled"], 1000, "the topic was read twice: {archive}");

    // Paused when ferry stops, it runs at the next start: a pause is not kept.
    assert_eq!(post(&address, "/sinks/archive/pause").status, 200);
    stop(run);
    let run = start(&site, &text, &[]);
    let archive = get_until(&address, "/sinks/archive", &[], |r| r.json()["status"] == "idle").json();
    assert_eq!(archive["running"], true, "{archive}");
    stop(run);

    // The file sink itself skips what it already wrote (by offset): read twice,
    // written once.
    let written = file_sink_output(&site.path("archive-out")).lines;
    let seqs: Vec<u64> = written.iter().map(|line| line.seq).collect();
    assert_eq!(seqs, (0..500).collect::<Vec<_>>());
}
