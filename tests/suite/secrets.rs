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
