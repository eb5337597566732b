//! `ferry test`, the conformance kit: the real connectors pass every check, and
//! sources that break a rule on purpose (the faulty source's switches) fail exactly
//! the check of that rule, with the rule named and the exit code 1; a component or a
//! config that cannot be tested exits 2.

use std::path::Path;
use std::process::Output;

use ferry_tests::components::{FAULTY_SINK, FAULTY_SOURCE, FILE_SINK, NOT_A_SOURCE, RANDOM_SOURCE, STDOUT_SINK};

use crate::process::{ferry, file_sink_table, random_source_config};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `ferry test COMPONENT [ARGS...]`: its exit code and standard output.
fn test(component: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["test", component];
    all.extend_from_slice(args);
    let Output { status, stdout, stderr } = ferry(&all);
    (status.code(), text(&stdout), text(&stderr))
}

/// `ferry test` on the faulty source, as connector `faulty` of a config in `dir`
/// whose plugin_config holds `plugin_config`.
fn test_faulty(dir: &Path, plugin_config: &str) -> (Option<i32>, String, String) {
    let config = dir.join("ferry.toml");
    let text = random_source_config("faulty", &format!("max_count = 1000\n{plugin_config}"))
        .replace(RANDOM_SOURCE, FAULTY_SOURCE);
    std::fs::write(&config, text).unwrap();
    test(FAULTY_SOURCE, &["--config", config.to_str().unwrap(), "--key", "faulty"])
}

/// The lines of `stdout` that report a check.
fn checks(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| ["ok ", "FAIL ", "warn "].iter().any(|v| l.starts_with(v))).collect()
}

/// The one line reporting check `name`.
fn check<'a>(stdout: &'a str, name: &str) -> &'a str {
    let found: Vec<&str> = checks(stdout).into_iter().filter(|l| l[6..].starts_with(&format!("{name} ("))).collect();
    assert_eq!(found.len(), 1, "one line for check `{name}` in:\n{stdout}");
    found[0]
}

const SOURCE_CHECKS: [&str; 10] = [
    "open",
    "ack",
    "batch ids",
    "close",
    "nack(delivery-failed)",
    "nack(state-save-failed)",
    "nack(timed-out)",
    "nack(rejected)",
    "restart from the cursor",
    "crash before commit",
];

#[test]
fn the_random_source_passes_every_check() {
    let (code, stdout, stderr) = test(RANDOM_SOURCE, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.starts_with(&format!(
        "testing {RANDOM_SOURCE} as a source, with plugin_config {{}}, default limits, no grants\n"
    )));
    for name in SOURCE_CHECKS {
        assert!(check(&stdout, name).starts_with("ok "), "{stdout}");
    }
    assert_eq!(checks(&stdout).len(), SOURCE_CHECKS.len(), "{stdout}");
    assert!(check(&stdout, "ack").contains("3 batches ACKed (10, 10, 10 records), 3 staged a cursor"), "{stdout}");
    assert!(
        check(&stdout, "restart from the cursor").ends_with(
            "opened again with the cursor committed after batch 2, it went on with the same records (10 compared)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("10 checks: 10 ok, 0 FAIL, 0 warn"), "{stdout}");
}

#[test]
fn the_stdout_sink_and_the_file_sink_pass_every_check() {
    let (code, stdout, stderr) = test(STDOUT_SINK, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        checks(&stdout),
        [
            "ok    open (rule 1): opened",
            "ok    write (rule 3): answered ack for a batch of 3 messages",
            "ok    write again (rule 3): the same batch written again was answered as the first time",
            "ok    close (rule 5): closed after its last batch was answered; no call followed",
        ]
    );

    // The file sink needs its directory granted: the config's grants and plugin_config
    // are the ones it runs with.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("archive-out")).unwrap();
    let config = dir.path().join("ferry.toml");
    let text = random_source_config("feed", "max_count = 10") + &file_sink_table("archive", "", "");
    std::fs::write(&config, text).unwrap();
    let (code, stdout, stderr) = test(FILE_SINK, &["--config", config.to_str().unwrap(), "--key", "archive"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("4 checks: 4 ok, 0 FAIL, 0 warn"), "{stdout}");
    let written: String = std::fs::read_dir(dir.path().join("archive-out"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default())
        .collect();
    for seq in 0..3 {
        assert!(written.contains(&format!("{{\\\"seq\\\":{seq},")), "seq {seq} not written: {written}");
    }
}

#[test]
fn a_sink_that_rejects_a_message_passes_when_it_rejects_it_again_on_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    let sink = format!(
        r#"
[[sinks]]
key = "picky"
path = "{FAULTY_SINK}"

[[sinks.streams]]
stream = "demo"
topics = ["feed"]

[sinks.plugin_config]
record = false
reject_seqs = [1]
"#
    );
    std::fs::write(&config, random_source_config("feed", "max_count = 10") + &sink).unwrap();
    let (code, stdout, stderr) = test(FAULTY_SINK, &["--config", config.to_str().unwrap(), "--key", "picky"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        check(&stdout, "write"),
        "ok    write (rule 3): answered reject for messages 1 of a batch of 3; the rest written"
    );
    assert_eq!(
        check(&stdout, "write again"),
        "ok    write again (rule 3): the same batch written again was answered as the first time"
    );
}

#[test]
fn a_source_that_ignores_its_committed_cursor_fails_the_restart_checks_only() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = test_faulty(dir.path(), "ignore_cursor_on_open = true");
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert_eq!(
        check(&stdout, "restart from the cursor"),
        "FAIL  restart from the cursor (rule 4/1): it ignored its committed cursor on open: opened again with the \
         cursor committed after batch 2, record 0: payload was `{\"seq\":10}`, now `{\"seq\":0}`"
    );
    assert_eq!(
        check(&stdout, "crash before commit"),
        "FAIL  crash before commit (rule 4): after a crash between delivery and commit, the instance opened at the \
         committed cursor did not produce the same records again: record 0: payload was `{\"seq\":5}`, now \
         `{\"seq\":0}`"
    );
    // Its NACKs are replayed: those checks pass.
    for name in &SOURCE_CHECKS[..8] {
        assert!(check(&stdout, name).starts_with("ok "), "{stdout}");
    }
    assert!(stdout.contains("10 checks: 8 ok, 2 FAIL, 0 warn"), "{stdout}");
    assert!(stdout.ends_with("FAILS the contract's checks\n"), "{stdout}");
}

#[test]
fn a_source_that_does_not_replay_after_a_nack_fails_each_nack_check() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = test_faulty(dir.path(), "advance_on_nack = true");
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    for reason in ["delivery-failed", "state-save-failed", "timed-out", "rejected"] {
        assert_eq!(
            check(&stdout, &format!("nack({reason})")),
            format!(
                "FAIL  nack({reason}) (rule 3): after nack({reason}) it did not produce the same records again: \
                 record 0: payload was `{{\"seq\":5}}`, now `{{\"seq\":10}}`"
            )
        );
    }
    for name in ["open", "ack", "restart from the cursor", "crash before commit"] {
        assert!(check(&stdout, name).starts_with("ok "), "{stdout}");
    }
}

#[test]
fn a_source_that_traps_on_poll_fails_naming_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = test_faulty(dir.path(), "trap_on_poll = 2");
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let ack = check(&stdout, "ack");
    assert!(ack.starts_with("FAIL  ack (rule 3): the guest trapped in `poll`: "), "{stdout}");
    assert!(ack.ends_with("(after 1 batch ACKed)"), "{stdout}");
    // Every later instance traps on its second poll too.
    assert!(
        check(&stdout, "nack(timed-out)").starts_with("FAIL  nack(timed-out) (rule 3): the guest trapped in `poll`")
    );
}

#[test]
fn a_source_with_nothing_to_produce_is_warned_about_not_failed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    let text = random_source_config("empty", "max_count = 0").replace(RANDOM_SOURCE, FAULTY_SOURCE);
    std::fs::write(&config, text).unwrap();
    let (code, stdout, stderr) = test(FAULTY_SOURCE, &["--config", config.to_str().unwrap(), "--key", "empty"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        check(&stdout, "ack"),
        "warn  ack (rule 3): produced nothing within 20 polls; cannot check replay (give it a plugin_config under \
         which it has records to produce)"
    );
    assert!(stdout.contains("3 checks: 2 ok, 0 FAIL, 1 warn"), "{stdout}");
}

#[test]
fn what_cannot_be_tested_exits_2_saying_why() {
    let (code, _, stderr) = test(NOT_A_SOURCE, &[]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("neither a source nor a sink"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    std::fs::write(&config, random_source_config("feed", "max_count = 10")).unwrap();
    let config = config.to_str().unwrap();
    let (code, _, stderr) = test(RANDOM_SOURCE, &["--config", config, "--key", "nope"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no connector has key `nope` (keys: feed)"), "{stderr}");

    let (code, _, stderr) = test(STDOUT_SINK, &["--config", config, "--key", "feed"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("a sink, but the connector given by --key is a source"), "{stderr}");

    let (code, _, stderr) = test(RANDOM_SOURCE, &["--config", config]);
    assert_eq!(code, Some(2), "--config without --key is a usage error: {stderr}");
}
