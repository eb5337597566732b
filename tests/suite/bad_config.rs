//! A hostile config given to `ferry run` (issue 8): a config "file" that is a device
//! or a pipe, a log directory that is `/dev/null`, a duration that overflows the
//! host's arithmetic, an environment override that could reach another tenant's
//! connector, a secret "file" that never ends. Each must stop ferry at once with exit
//! code 1 and an error naming the file, the key and the problem: never a hang, never a
//! panic (exit code 101), never a secret in the log.

use std::path::Path;

use crate::process::{Ferry, Site, random_source_config};

/// `ferry run config` with `env`; it must fail (and not hang: `wait` gives up and
/// fails the test after a while) with exit code 1. Returns its log.
pub fn refused(config: &Path, env: &[(&str, &str)]) -> String {
    let mut run = Ferry::start(config, env);
    let status = run.wait();
    let log = run.log();
    assert_eq!(status.code(), Some(1), "ferry should have refused the config, without a panic; its log:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    log
}

#[test]
fn a_config_that_is_a_device_or_a_pipe_is_refused_at_once() {
    let log = refused(Path::new("/dev/zero"), &[]);
    assert!(log.contains("/dev/zero: cannot read the file: it is a character device, not a regular file"), "{log}");
    let site = Site::new();
    let pipe = site.path("ferry.toml");
    let status = std::process::Command::new("mkfifo").arg(&pipe).status().expect("mkfifo runs");
    assert!(status.success());
    // Nothing ever writes to the pipe: opening it for reading the usual way would block.
    let log = refused(&pipe, &[]);
    assert!(log.contains("ferry.toml: cannot read the file: it is a named pipe, not a regular file"), "{log}");
}

#[test]
fn a_log_directory_that_is_a_device_is_named_and_nothing_is_written() {
    let site = Site::new();
    let text = random_source_config("random", "max_count = 10").replace("path = \"log\"", "path = \"/dev/null\"");
    let log = refused(&site.config("ferry.toml", &text), &[]);
    assert!(
        log.contains("ferry.toml: [local_log] path: /dev/null: it is a character device, not a directory"),
        "{log}"
    );
    assert!(!site.path("state").exists(), "a refused config must not touch the state directory");
}

#[test]
fn a_grace_period_past_the_maximum_is_refused_instead_of_panicking_at_sigint() {
    let site = Site::new();
    let text = random_source_config("random", "max_count = 10")
        .replace("shutdown_grace_period = \"20s\"", "shutdown_grace_period = \"10000000000000000000s\"");
    let log = refused(&site.config("ferry.toml", &text), &[]);
    assert!(log.contains("ferry.toml: [runtime] shutdown_grace_period: "), "{log}");
    assert!(log.contains("is more than the maximum, 1day"), "{log}");
    assert!(!site.path("state").exists());
}

#[test]
fn an_override_that_could_reach_another_tenants_connector_is_refused() {
    let site = Site::new();
    // `a_b` is ours; `a-b` belongs to tenant `evil`. Both are `A_B` to a variable.
    let ours = random_source_config("a_b", "max_count = 10");
    let theirs = random_source_config("a-b", "max_count = 10");
    let theirs = &theirs[theirs.find("[[sources]]").unwrap()..];
    let theirs = theirs.replace("path = \"", "tenant = \"evil\"\npath = \"");
    let text = format!("[[tenants]]\nkey = \"evil\"\n{ours}\n{theirs}");
    let config = site.config("ferry.toml", &text);
    let secret = "s3cret-meant-for-a_b-only";
    let log = refused(&config, &[("FERRY__SOURCES__A_B__PLUGIN_CONFIG__TOKEN", secret)]);
    assert!(
        log.contains("environment variable FERRY__SOURCES__A_B__PLUGIN_CONFIG__TOKEN: A_B matches both [[sources]] entries `a_b` and `a-b`"),
        "{log}"
    );
    assert!(!log.contains(secret), "{log}");
    // Without the override the two keys are refused all the same.
    let log = refused(&config, &[]);
    assert!(log.contains("sources[1] (key `a-b`): key: `a-b` and `a_b` (sources[0])"), "{log}");
    assert!(!site.path("state").exists());
}

#[test]
fn a_secret_file_that_never_ends_is_named_and_nothing_runs() {
    let site = Site::new();
    let text = format!(
        "{}\n[sources.secrets]\ntoken = {{ file = \"/dev/zero\" }}\n",
        random_source_config("random", "max_count = 10")
    );
    let log = refused(&site.config("ferry.toml", &text), &[]);
    assert!(
        log.contains("sources (key `random`): secrets.token: /dev/zero: it is a character device, not a regular file"),
        "{log}"
    );
    assert!(!site.log_dir().exists(), "nothing was delivered");
}
