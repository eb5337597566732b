//! `[sources.secrets]`: the host reads a secret from its environment (or a file) and
//! hands it to the guest inside `plugin_config`; the host itself never prints it, and
//! a missing one stops `ferry run` with an error that names the secret, not a value.

use nix::sys::signal::Signal;

use crate::process::{Ferry, Site};
use ferry_tests::components::HOSTILE_SOURCE;

const SECRET: &str = "s3cr3t-7f1e-never-in-the-host-log";

/// A hostile-source probe that writes its `contents` (the secret) to a granted
/// directory, so the test can see that the guest received it.
fn config(site: &Site) -> std::path::PathBuf {
    std::fs::create_dir(site.path("out")).unwrap();
    let text = format!(
        r#"
[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "secret-writer"
path = "{HOSTILE_SOURCE}"
poll_interval = "5ms"
streams = [{{ stream = "demo", topic = "secret" }}]
plugin_config = {{ mode = "write_file", path = "/out/received.txt" }}
grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }}

[sources.secrets]
contents = {{ env = "FERRY_TEST_SECRET_VALUE" }}
"#
    );
    site.config("ferry.toml", &text)
}

#[test]
fn a_secret_reaches_the_guest_and_never_the_host_log() {
    let site = Site::new();
    let config = config(&site);
    let mut run = Ferry::start(&config, &[("FERRY_TEST_SECRET_VALUE", SECRET), ("FERRY_LOG", "debug")]);
    run.wait_for_line(&["secret-writer", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success());
    assert_eq!(std::fs::read_to_string(site.path("out/received.txt")).unwrap(), SECRET, "the guest got the secret");
    let log = run.log();
    // The guest may print what it was given (this one logs what it wrote); the host's
    // own lines, config and all, must not.
    let host_lines: Vec<&str> = log.lines().filter(|l| l.contains(SECRET) && !l.contains("ferry::guest")).collect();
    assert!(host_lines.is_empty(), "the host printed the secret: {host_lines:#?}");
}

#[test]
fn a_missing_secret_is_named_and_nothing_starts() {
    let site = Site::new();
    let config = config(&site);
    let mut run = Ferry::start(&config, &[]);
    let status = run.wait();
    let log = run.log();
    assert!(!status.success(), "ferry run should refuse to start; its log:\n{log}");
    for words in ["ferry.toml", "secret-writer", "secrets.contents", "FERRY_TEST_SECRET_VALUE is not set"] {
        assert!(log.contains(words), "the error says {words:?}:\n{log}");
    }
    assert!(!site.path("out/received.txt").exists(), "no connector ran");
}

/// What the guests below are handed as a secret and repeat everywhere they can.
const ECHOED: &str = "Tr0ub4dor-x9Secret-8c2d";

/// Whether `text` holds the echoed secret or a piece of it a guest split it into, in
/// any case: the `channel` it came through is named when it does.
fn assert_clean(channel: &str, text: &str) {
    let lower = text.to_lowercase();
    for piece in [ECHOED, &ECHOED[..11], &ECHOED[11..]] {
        assert!(!lower.contains(&piece.to_lowercase()), "{channel} shows {piece:?}:\n{text}");
    }
}

#[test]
fn a_guest_echoing_its_secret_into_every_channel_gets_it_into_none() {
    use crate::http_api::head;
    use ferry::store::local_log::LocalLog;
    use ferry_tests::components::{FAULTY_SINK, FAULTY_SOURCE};
    use ferry_tests::free_port;
    use ferry_tests::http_client::{get, get_until};

    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let secret = r#"secrets = { echo = { env = "FERRY_TEST_ECHO" } }"#;
    // `echoer` logs its secret (whole, split across two lines, in upper case, on
    // stderr) and traps with it; `failing` fails with it in its error; `sink` answers
    // a retry and a reject with it, the reject going to the dead letters.
    let text = format!(
        r#"{head}
[[sources]]
key = "echoer"
path = "{FAULTY_SOURCE}"
poll_interval = "5ms"
streams = [{{ stream = "demo", topic = "echoer" }}]
plugin_config = {{ max_count = 20, trap_on_poll = 2 }}
restart_backoff = {{ initial = "10ms", max = "10ms" }}
{secret}

[[sources]]
key = "failing"
path = "{FAULTY_SOURCE}"
streams = [{{ stream = "demo", topic = "failing" }}]
plugin_config = {{ max_count = 20, fail_from_poll = 1 }}
restart_backoff = {{ initial = "1day", max = "1day" }}
{secret}

[[sinks]]
key = "sink"
path = "{FAULTY_SINK}"
poll_interval = "5ms"
plugin_config = {{ record = false, retry_times = 1, reject_seqs = [1] }}
{secret}
[[sinks.streams]]
stream = "demo"
topics = ["echoer"]
[sinks.dead_letters]
stream = "dead"
topic = "echo"
"#,
        head = head(port, "")
    );
    let config = site.config("ferry.toml", &text);
    let mut run = Ferry::start(&config, &[("FERRY_TEST_ECHO", ECHOED), ("FERRY_LOG", "debug")]);

    let sink = get_until(&address, "/sinks/sink", &[], |r| {
        let body = r.json();
        body["dead_lettered"] == 1 && body["messages_delivered"].as_u64() >= Some(19) && body["status"] == "idle"
    })
    .json();
    let echoer = get_until(&address, "/sources/echoer", &[], |r| r.json()["traps"].as_u64() >= Some(1)).json();
    let failing = get_until(&address, "/sources/failing", &[], |r| r.json()["status"] == "failed").json();
    // The guests did say it: each channel shows where it was taken out.
    assert!(failing["last_error"].as_str().unwrap().contains("[redacted]"), "{failing}");
    for (channel, answer) in [("/sinks/sink", &sink), ("/sources/echoer", &echoer), ("/sources/failing", &failing)] {
        assert_clean(channel, &answer.to_string());
    }
    for path in ["/sources", "/sinks", "/metrics", "/sources/echoer/state", "/sinks/sink/state"] {
        assert_clean(path, &get(&address, path, &[]).unwrap().body);
    }
    let status = crate::process::ferry(&["status", config.to_str().unwrap()]);
    assert_clean("ferry status", &String::from_utf8_lossy(&status.stdout));
    assert!(String::from_utf8_lossy(&status.stdout).contains("[redacted]"), "{status:?}");
    let top = crate::process::ferry(&["top", config.to_str().unwrap(), "--once"]);
    assert_clean("ferry top", &String::from_utf8_lossy(&top.stdout));
    assert_clean("status.json", &std::fs::read_to_string(site.path("state/status.json")).unwrap());
    let dead = LocalLog::read_all(&site.log_dir(), "dead", "echo").unwrap();
    assert_eq!(dead.len(), 1, "seq 1 dead-lettered");
    let headers = dead[0].headers.as_ref().unwrap().to_string();
    assert!(headers.contains("poison seq 1: [redacted]"), "{headers}");
    assert_clean("the dead letter's headers", &headers);

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let log = run.log();
    for said in ["echo: [redacted]", "echo, split across lines: [redacted]", "[redacted] <- the rest"] {
        assert!(log.contains(said), "the guest's line {said:?} is in the log:\n{log}");
    }
    assert!(log.contains("echo, louder: [redacted]") && log.contains("echo on stderr: [redacted]"), "{log}");
    assert!(log.contains("trap on poll 2: [redacted]") && log.contains("the batch at offset 0: [redacted]"), "{log}");
    assert_clean("the log", &log);
}
