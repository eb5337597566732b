//! Tenants (`[[tenants]]`, `tenant = "..."` on a connector) and `ferry inspect
//! --config --key`, without an Iggy server: a tenant's cursors live in a namespace of
//! their own that the state commands find, status and every log line carry the
//! tenant, a config breaking a tenant's limits is refused before anything runs, and
//! `inspect` tells, import by import, what one connector's grants let it reach.
//!
//! `ferry` runs as a process where the test is about what an operator sees (files,
//! command output, the log on stderr); the status board is read from a host built by
//! `Host::from_config`, the same path `ferry run` takes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferry::config::Config;
use ferry::engine::cursor::CursorStore;
use ferry::engine::status::Event;
use ferry::host::Host;
use ferry::runtime::Compiler;
use ferry::store::local_log::LocalLog;
use ferry::store::state::StateDir;
use ferry_tests::components::{HOSTILE_SOURCE, POSTGRES_SOURCE, RANDOM_SOURCE};
use ferry_tests::harness::Running;
use ferry_tests::records::{next_seq, seqs};
use nix::sys::signal::Signal;

use crate::process::{Ferry, Site, ferry};

/// The top of every config here: state and log next to the file, and progress lines
/// often enough that a short run logs some.
const HEAD: &str = r#"
[runtime]
shutdown_grace_period = "20s"
progress_interval = "100ms"

[state]
path = "state"

[local_log]
path = "log"
"#;

/// A `[[tenants]]` entry; `extra` are more of its lines (`max_connectors = 2`).
fn tenant(key: &str, extra: &str) -> String {
    format!("\n[[tenants]]\nkey = \"{key}\"\n{extra}\n")
}

/// A random source `key` delivering to the local log topic `demo/<key>`; `extra` are
/// more of its top-level lines (`tenant = "acme"`, `enabled = false`, inline
/// `limits` or `grants` tables).
fn source(key: &str, extra: &str, plugin_config: &str) -> String {
    format!(
        r#"
[[sources]]
key = "{key}"
path = "{RANDOM_SOURCE}"
poll_interval = "2ms"
{extra}

[[sources.streams]]
stream = "demo"
topic = "{key}"

[sources.plugin_config]
{plugin_config}
"#
    )
}

/// Tenant `acme` with connector `acme-feed` (50 records), beside `plain` (20
/// records), which belongs to no tenant.
fn acme_and_plain() -> String {
    [
        HEAD.to_string(),
        tenant("acme", ""),
        source("acme-feed", r#"tenant = "acme""#, "messages_per_batch = 5\nmax_count = 50"),
        source("plain", "", "messages_per_batch = 10\nmax_count = 20"),
    ]
    .concat()
}

/// Whether a log line is about connector `key` (its span, or a `key=` field), and
/// not about another connector whose key merely begins the same.
fn names_key(line: &str, key: &str) -> bool {
    [' ', '}', ':'].iter().any(|end| line.contains(&format!("key={key}{end}"))) || line.ends_with(&format!("key={key}"))
}

/// Read ferry's log until every one of `wanted` (each a connector key and a text)
/// has appeared on some line, in whatever order they come.
fn wait_for_all(ferry: &mut Ferry, wanted: &[(&str, &str)]) {
    let mut missing: Vec<(&str, &str)> = wanted.to_vec();
    while !missing.is_empty() {
        let line = ferry.wait_for_line(&[]);
        missing.retain(|(key, text)| !(names_key(&line, key) && line.contains(text)));
    }
}

/// `ferry run` on `config` until both connectors of [`acme_and_plain`] went idle (so
/// they delivered everything), then SIGTERM; returns ferry's log.
fn run_both_to_the_end(config: &Path) -> String {
    let mut ferry = Ferry::start(config, &[]);
    wait_for_all(&mut ferry, &[("acme-feed", "idle"), ("plain", "idle")]);
    ferry.signal(Signal::SIGTERM);
    let status = ferry.wait();
    let log = ferry.log();
    assert!(status.success(), "ferry run should stop cleanly; its log:\n{log}");
    log
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every file under `dir` with its content: what "nothing was touched" is checked
/// against.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    files
}

#[test]
fn a_tenant_connectors_cursor_lives_in_its_tenants_namespace_and_state_show_finds_it() {
    let site = Site::new();
    let config = site.config("ferry.toml", &acme_and_plain());
    run_both_to_the_end(&config);

    // Where each cursor landed: the tenant's one under tenants/acme/ only, the other
    // at the top only. A file in both places would mean two cursors for one connector.
    let state = site.path("state");
    let acme = StateDir::new(state.join("tenants").join("acme"));
    assert_eq!(acme.keys().unwrap(), ["acme-feed"], "the tenant connector's cursor is under state/tenants/acme/");
    assert_eq!(site.states().keys().unwrap(), ["plain"], "a connector without tenant keeps its cursor at the top");
    assert_eq!(next_seq(&acme.read("acme-feed").unwrap().expect("a cursor").state), 50);
    assert_eq!(next_seq(&site.states().read("plain").unwrap().expect("a cursor").state), 20);
    // The cursor agrees with what was delivered: every seq, once, in order.
    let delivered = LocalLog::read_all(&site.log_dir(), "demo", "acme-feed").unwrap();
    assert_eq!(seqs(&delivered), (0..50).collect::<Vec<_>>());

    let config_arg = config.to_str().unwrap();
    let one = ferry(&["state", "show", config_arg, "acme-feed"]);
    assert!(one.status.success(), "{}", stderr(&one));
    assert!(stdout(&one).contains(r#"acme-feed: generation 10, "#), "{}", stdout(&one));
    assert!(stdout(&one).contains(r#"cursor {"next_seq":50}"#), "{}", stdout(&one));
    let all = ferry(&["state", "show", config_arg]);
    assert!(all.status.success(), "{}", stderr(&all));
    let all = stdout(&all);
    assert!(all.contains(r#"acme-feed: generation 10, "#) && all.contains(r#"cursor {"next_seq":50}"#), "{all}");
    assert!(all.contains(r#"plain: generation 2, "#) && all.contains(r#"cursor {"next_seq":20}"#), "{all}");
    let json = ferry(&["state", "show", config_arg, "acme-feed", "--json"]);
    let line: serde_json::Value = serde_json::from_str(stdout(&json).trim()).expect("one JSON line");
    assert_eq!((line["key"].as_str(), line["generation"].as_u64()), (Some("acme-feed"), Some(10)), "{line}");
}

#[test]
fn state_reset_of_a_tenant_connector_moves_its_file_aside_in_the_tenants_namespace() {
    let site = Site::new();
    let config = site.config("ferry.toml", &acme_and_plain());
    run_both_to_the_end(&config);
    let acme_dir = site.path("state/tenants/acme");
    let acme = StateDir::new(&acme_dir);
    let before = acme.read("acme-feed").unwrap().expect("a cursor");
    let plain_before = site.states().read("plain").unwrap();

    let reset = ferry(&["state", "reset", config.to_str().unwrap(), "acme-feed", "--yes"]);
    assert!(reset.status.success(), "{}{}", stdout(&reset), stderr(&reset));
    assert!(stdout(&reset).contains(r#"was: generation 10"#), "{}", stdout(&reset));
    assert_eq!(acme.read("acme-feed").unwrap(), None, "the tenant connector's cursor is forgotten");
    // Kept aside where it was, in the tenant's database, not deleted and not moved
    // anywhere else.
    assert!(stdout(&reset).contains(&format!("in the `reset` table of {}", acme_dir.join("cursors.db").display())));
    let database = rusqlite::Connection::open(acme_dir.join("cursors.db")).unwrap();
    let (kept, generation): (Vec<u8>, u64) = database
        .query_row("SELECT state, generation FROM reset WHERE connector = 'acme-feed'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("the old state is kept in the tenant's database");
    assert_eq!((kept, generation), (before.state.clone(), before.generation), "the kept row is the old state");
    assert!(site.states().keys().unwrap().iter().all(|k| k != "acme-feed"), "nothing of it moves to the top");
    assert_eq!(site.states().read("plain").unwrap(), plain_before, "the neighbour's cursor is untouched");
    let show = ferry(&["state", "show", config.to_str().unwrap(), "acme-feed"]);
    assert!(stdout(&show).contains("acme-feed: no committed cursor"), "{}", stdout(&show));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_carries_the_tenant_on_the_board_and_in_ferry_status() {
    ferry_tests::logs::capture();
    let site = Site::new();
    let config_path = site.config("ferry.toml", &acme_and_plain());
    let config = Config::load(&config_path).unwrap_or_else(|e| panic!("{e}"));
    let host = Host::from_config(&config, Compiler::InProcess).unwrap_or_else(|e| panic!("{e}"));
    let mut running = Running::start(host);
    // Both idle, in whichever order they get there: then both delivered everything.
    let mut busy = vec!["acme-feed", "plain"];
    running
        .wait_for("both connectors to be idle", |e| {
            busy.retain(|key| !matches!(e, Event::Idle { key: k } if &**k == *key));
            busy.is_empty()
        })
        .await;
    let tenant_of = |key: &str| running.status.get(key).unwrap_or_else(|| panic!("{key} on the board")).tenant;
    assert_eq!(tenant_of("acme-feed").as_deref(), Some("acme"));
    assert_eq!(tenant_of("plain"), None);
    running.stop().await;

    // The status file the host wrote on stopping, as `ferry status --json` shows it.
    let status =
        tokio::task::spawn_blocking(move || ferry(&["status", config_path.to_str().unwrap(), "--json"])).await.unwrap();
    assert!(status.status.success(), "{}{}", stdout(&status), stderr(&status));
    let file: serde_json::Value = serde_json::from_str(&stdout(&status)).expect("the status as JSON");
    let connectors = file["connectors"].as_array().expect("connectors");
    let tenant_in_file = |key: &str| {
        let entry = connectors.iter().find(|c| c["key"] == key).unwrap_or_else(|| panic!("{key} in {file}"));
        entry["tenant"].clone()
    };
    assert_eq!(tenant_in_file("acme-feed"), serde_json::json!("acme"), "{file}");
    assert_eq!(tenant_in_file("plain"), serde_json::Value::Null, "{file}");
}

#[test]
fn every_log_line_of_a_tenant_connector_carries_the_tenant() {
    let site = Site::new();
    let config = site.config("ferry.toml", &acme_and_plain());
    let mut ferry = Ferry::start(&config, &[]);
    // Lines of every kind a connector has: the host's (starting, running, idle), its
    // guest's, the periodic progress line, and on shutdown closing and stopped.
    wait_for_all(&mut ferry, &[("acme-feed", "idle"), ("plain", "idle"), ("acme-feed", "delivered")]);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    let log = ferry.log();

    let about_acme: Vec<&str> = log.lines().filter(|l| names_key(l, "acme-feed")).collect();
    for kind in ["starting", "random source:", "running", "idle", "delivered", "closing at committed cursor", "stopped"]
    {
        assert!(about_acme.iter().any(|l| l.contains(kind)), "no `{kind}` line of acme-feed; the log:\n{log}");
    }
    let without: Vec<&str> = about_acme.iter().copied().filter(|l| !l.contains("tenant=acme")).collect();
    assert!(without.is_empty(), "lines about acme-feed without its tenant:\n{}", without.join("\n"));
    // The tenant is the connector's, not the host's: its neighbour carries none.
    let leaked: Vec<&str> = log.lines().filter(|l| names_key(l, "plain") && l.contains("tenant=")).collect();
    assert!(leaked.is_empty(), "lines about plain with a tenant:\n{}", leaked.join("\n"));
}

/// Configs that break a tenant rule, each with the words its error must contain.
fn bad_tenant_configs() -> Vec<(&'static str, String, Vec<&'static str>)> {
    let plain = source("plain", "", "max_count = 10");
    vec![
        (
            "an unknown tenant",
            [HEAD.into(), tenant("acme", ""), plain.clone(), source("lost", r#"tenant = "nobody""#, "")].concat(),
            vec!["key `lost`", "tenant", "no [[tenants]] entry has key `nobody`"],
        ),
        (
            "more connectors than max_connectors",
            [
                HEAD.into(),
                tenant("acme", "max_connectors = 2"),
                plain.clone(),
                source("a1", r#"tenant = "acme""#, ""),
                source("a2", r#"tenant = "acme""#, ""),
                source("a3", r#"tenant = "acme""#, ""),
            ]
            .concat(),
            vec!["tenant `acme` has 3 enabled connectors", "max_connectors (2)"],
        ),
        (
            "limits.memory summed over max_memory",
            [
                HEAD.into(),
                tenant("acme", r#"max_memory = "100MiB""#),
                plain.clone(),
                source("a1", "tenant = \"acme\"\nlimits = { memory = \"60MiB\" }", ""),
                source("a2", "tenant = \"acme\"\nlimits = { memory = \"50MiB\" }", ""),
            ]
            .concat(),
            vec!["tenant `acme`", "limits.memory add up to 110 MiB", "max_memory (100 MiB)"],
        ),
        (
            "[tenants.iggy] without [iggy]",
            [
                HEAD.into(),
                tenant("acme", r#"iggy = { username = "acme", password = "secret" }"#),
                plain.clone(),
                source("a1", r#"tenant = "acme""#, ""),
            ]
            .concat(),
            vec!["key `acme`", "[tenants.iggy] needs an [iggy] section"],
        ),
    ]
}

#[test]
fn bad_tenant_configs_are_refused_before_anything_runs_and_touch_no_state() {
    for (case, text, words) in bad_tenant_configs() {
        let site = Site::new();
        // A cursor a previous run committed, which a refused start must leave alone.
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let store = site.states().open("plain").unwrap();
            store.commit(br#"{"next_seq":10}"#.to_vec(), Default::default()).await.unwrap();
        });
        let before = snapshot(&site.path("state"));
        let config = site.config("ferry.toml", &text);

        let mut run = Ferry::start(&config, &[]);
        let status = run.wait();
        let log = run.log();
        assert!(!status.success(), "{case}: ferry run should have refused the config; its log:\n{log}");
        assert!(log.contains("ferry.toml"), "{case}: the error names the file:\n{log}");
        for word in &words {
            assert!(log.contains(word), "{case}: the error should say {word:?}:\n{log}");
        }
        assert!(!log.contains("connector{") && !log.contains("compiling"), "{case}: nothing may start:\n{log}");
        assert_eq!(snapshot(&site.path("state")), before, "{case}: the state directory must not be touched");
        assert!(!site.path("state/tenants").exists(), "{case}: no tenant namespace is created");
        assert!(!site.log_dir().exists(), "{case}: nothing is delivered");
        // The same config is refused by every command that reads it.
        let show = ferry(&["state", "show", config.to_str().unwrap()]);
        assert!(!show.status.success(), "{case}: state show should refuse it too");
        assert!(words.iter().all(|w| stderr(&show).contains(w)), "{case}: {}", stderr(&show));
    }
}

#[test]
fn tenant_limits_are_inclusive_and_count_only_enabled_connectors() {
    // The edge of each limit is allowed, and a disabled connector takes no share:
    // the refusals above are about the limits, not about tenants as such.
    let site = Site::new();
    let text = [
        HEAD.into(),
        tenant("acme", "max_connectors = 2\nmax_memory = \"100MiB\""),
        source("a1", "tenant = \"acme\"\nlimits = { memory = \"60MiB\" }", ""),
        source("a2", "tenant = \"acme\"\nlimits = { memory = \"40MiB\" }", ""),
        source("a3", "tenant = \"acme\"\nenabled = false", ""),
    ]
    .concat();
    let config = Config::load(&site.config("ferry.toml", &text)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.sources.iter().filter(|s| s.tenant.as_deref() == Some("acme")).count(), 3);
}

/// `ferry inspect COMPONENT --config CONFIG --key KEY`: each import with its verdict
/// (`granted`, `denied` or `unavailable`), from the `grants of` section.
fn verdicts(component: &str, config: &Path, key: &str) -> Vec<(String, String)> {
    let output = ferry(&["inspect", component, "--config", config.to_str().unwrap(), "--key", key]);
    let text = stdout(&output);
    assert!(output.status.success(), "inspect {component} --key {key} failed:\n{text}{}", stderr(&output));
    let section = text
        .split_once(&format!("grants of `{key}` in {}:\n", config.display()))
        .unwrap_or_else(|| panic!("no grants section for `{key}`:\n{text}"))
        .1;
    let verdicts: Vec<(String, String)> = section
        .lines()
        .take_while(|line| line.starts_with("  "))
        .map(|line| {
            let mut words = line.split_whitespace();
            let verdict = words.next().unwrap().to_string();
            (words.next().expect("an import after the verdict").to_string(), verdict)
        })
        .collect();
    assert!(!verdicts.is_empty(), "no verdicts:\n{text}");
    verdicts
}

/// The verdicts of the imports starting with `prefix`; at least one must exist, or
/// the check below it would check nothing.
fn of<'a>(verdicts: &'a [(String, String)], prefix: &str) -> Vec<&'a (String, String)> {
    let found: Vec<_> = verdicts.iter().filter(|(import, _)| import.starts_with(prefix)).collect();
    assert!(!found.is_empty(), "the component imports nothing under {prefix}: {verdicts:?}");
    found
}

fn assert_all(verdicts: &[&(String, String)], expected: &str) {
    for (import, verdict) in verdicts {
        assert_eq!(verdict, expected, "{import}");
    }
}

/// Two connectors of the same component: `closed` with no grant, `open` granted a
/// directory, an environment variable and an address.
fn closed_and_open(site: &Site) -> PathBuf {
    std::fs::create_dir(site.path("data")).unwrap();
    let grants = r#"grants = { env = ["TZ"], dirs = [{ host = "data", guest = "/data" }], network = ["127.0.0.1:9"] }"#;
    let text = [HEAD.into(), source("closed", "", ""), source("open", grants, "")].concat();
    site.config("ferry.toml", &text)
}

#[test]
fn inspect_without_grants_denies_files_sockets_and_environment() {
    let site = Site::new();
    let config = closed_and_open(&site);
    let random = verdicts(RANDOM_SOURCE, &config, "closed");
    assert_all(&of(&random, "wasi:filesystem/"), "denied");
    assert_all(&of(&random, "wasi:cli/environment"), "denied");
    assert_all(&of(&random, "wasi:clocks/"), "granted");
    assert_all(&of(&random, "iggy:connector/logging"), "granted");
    // Neither guest here imports wasi:random; whatever does must be granted it.
    let random_imports: Vec<_> = random.iter().filter(|(i, _)| i.starts_with("wasi:random/")).collect();
    assert_all(&random_imports, "granted");
    // The random source opens no socket, so its world has none; the hostile guest's
    // network probes do.
    let hostile = verdicts(HOSTILE_SOURCE, &config, "closed");
    assert_all(&of(&hostile, "wasi:sockets/"), "denied");
    assert_all(&of(&hostile, "wasi:filesystem/"), "denied");
}

#[test]
fn inspect_with_grants_says_granted_for_what_the_connector_was_granted() {
    let site = Site::new();
    let config = closed_and_open(&site);
    let random = verdicts(RANDOM_SOURCE, &config, "open");
    assert_all(&of(&random, "wasi:filesystem/"), "granted");
    assert_all(&of(&random, "wasi:cli/environment"), "granted");
    // Grants open what they name and nothing else.
    assert_all(&of(&random, "wasi:cli/stdin"), "denied");
    let hostile = verdicts(HOSTILE_SOURCE, &config, "open");
    assert_all(&of(&hostile, "wasi:sockets/"), "granted");
}

#[test]
fn inspect_calls_nothing_unavailable_in_a_component_that_links() {
    // `unavailable` means the host does not provide the import, so the component
    // will not link; a component that `inspect` itself says links cannot have one.
    let site = Site::new();
    let config = closed_and_open(&site);
    let output = ferry(&["inspect", RANDOM_SOURCE, "--config", config.to_str().unwrap(), "--key", "closed"]);
    let text = stdout(&output);
    assert!(text.contains("source: yes"), "{text}");
    let unavailable: Vec<_> =
        verdicts(RANDOM_SOURCE, &config, "closed").into_iter().filter(|(_, v)| v == "unavailable").collect();
    assert!(unavailable.is_empty(), "imports called unavailable in a component that links: {unavailable:?}\n{text}");
}

#[test]
fn inspect_with_an_unknown_key_is_an_error_naming_it() {
    let site = Site::new();
    let config = closed_and_open(&site);
    let output = ferry(&["inspect", RANDOM_SOURCE, "--config", config.to_str().unwrap(), "--key", "nope"]);
    assert!(!output.status.success(), "{}", stdout(&output));
    let error = stderr(&output);
    assert!(error.contains("no connector has key `nope`") && error.contains("ferry.toml"), "{error}");
    assert!(error.contains("closed") && error.contains("open"), "the error lists the keys there are: {error}");
    assert!(!stdout(&output).contains("grants of"), "no verdicts for a connector that is not there");
}

#[test]
fn inspect_with_config_but_no_key_or_key_but_no_config_is_a_usage_error() {
    let site = Site::new();
    let config = closed_and_open(&site);
    let config = config.to_str().unwrap();
    for (args, missing) in [(["--config", config], "--key"), (["--key", "closed"], "--config")] {
        let output = ferry(&[&["inspect", RANDOM_SOURCE][..], &args[..]].concat());
        // clap's usage errors exit 2, distinct from a component that cannot run (1).
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}{}", stdout(&output), stderr(&output));
        assert!(stderr(&output).contains(missing), "{args:?}: the error names {missing}: {}", stderr(&output));
        assert!(stdout(&output).is_empty(), "{args:?}: nothing is inspected: {}", stdout(&output));
    }
}

#[test]
fn a_connector_moved_into_a_tenant_takes_its_cursor_along_rather_than_starting_from_scratch() {
    let site = Site::new();
    // `feed` committed a cursor before it belonged to a tenant.
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let committed = runtime.block_on(async {
        let store = site.states().open("feed").unwrap();
        store.commit(br#"{"next_seq":30}"#.to_vec(), Default::default()).await.unwrap()
    });
    let text = [HEAD.into(), tenant("acme", ""), source("feed", r#"tenant = "acme""#, "max_count = 50")].concat();
    let config = site.config("ferry.toml", &text);
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=feed", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let log = run.log();
    assert!(log.contains("moved the connector's committed state into its tenant's state directory"), "{log}");
    let acme = StateDir::new(site.path("state/tenants/acme"));
    let moved = acme.read("feed").unwrap().expect("its cursor is in the tenant's namespace now");
    assert_eq!(next_seq(&moved.state), 50, "it went on from 30 to its max_count");
    assert_eq!(moved.generation, committed.generation + 2, "from the generation it had: 30..50 in batches of 10");
    let delivered = LocalLog::read_all(&site.log_dir(), "demo", "feed").unwrap();
    assert_eq!(seqs(&delivered), (30..50).collect::<Vec<_>>(), "nothing before 30 delivered again");
    assert_eq!(site.states().read("feed").unwrap(), None, "the top keeps no second cursor of it");
}

#[test]
fn inspect_says_whether_a_connector_may_open_a_postgres_server() {
    let site = Site::new();
    let server = "\n[postgres.db]\nhost = \"127.0.0.1\"\ndatabase = \"app\"\nuser = \"ferry\"\n";
    let granted = "grants = { postgres = [\"db\"] }";
    let text = [HEAD.into(), server.into(), source("closed", "", ""), source("open", granted, "")].concat();
    let config = site.config("ferry.toml", &text);
    // The PostgreSQL source imports the contract's postgres interface.
    assert_all(&of(&verdicts(POSTGRES_SOURCE, &config, "closed"), "iggy:connector/postgres"), "denied");
    assert_all(&of(&verdicts(POSTGRES_SOURCE, &config, "open"), "iggy:connector/postgres"), "granted");
}
