//! Bad input to `ferry`: each case must be a clear error that names what is wrong and
//! where, a non-zero exit, and no change to what was already committed.

use ferry::engine::cursor::{Committed, CursorStore};
use ferry_tests::components::{CONTRACT_0_1_SOURCE, MISTYPED_SOURCE, NOT_A_SOURCE, RANDOM_SOURCE};

use crate::process::{Ferry, Site, ferry, random_source_config};

/// A site whose connector `key` already committed a cursor, as a previous run would
/// have left it.
fn site_with_committed_state(key: &str) -> (Site, Committed) {
    let site = Site::new();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let committed = runtime.block_on(async {
        let store = site.states().open(key).unwrap();
        store.commit(br#"{"next_seq":40}"#.to_vec(), Default::default()).await.unwrap();
        store.commit(br#"{"next_seq":50}"#.to_vec(), Default::default()).await.unwrap()
    });
    (site, committed)
}

/// `ferry run` on this config fails (and does not hang instead); returns its log.
pub fn run_fails(config: &std::path::Path) -> String {
    let mut run = Ferry::start(config, &[]);
    let status = run.wait();
    let log = run.log();
    assert!(!status.success(), "ferry run should have failed; its log:\n{log}");
    log
}

fn assert_unchanged(site: &Site, key: &str, committed: &Committed) {
    assert_eq!(
        site.states().read(key).unwrap().as_ref(),
        Some(committed),
        "the committed state must survive bad input"
    );
}

#[test]
fn a_missing_config_file_is_named() {
    let stderr = run_fails(std::path::Path::new("/nonexistent/ferry.toml"));
    assert!(stderr.contains("/nonexistent/ferry.toml: cannot read the file"), "{stderr}");
}

#[test]
fn malformed_toml_names_the_file_and_line_and_commits_nothing() {
    let (site, committed) = site_with_committed_state("random");
    let text = random_source_config("random", "max_count = 10").replace("[[sources.streams]]", "[[sources.streams]");
    let config = site.config("broken.toml", &text);
    let stderr = run_fails(&config);
    assert!(stderr.contains("broken.toml") && stderr.contains("line"), "{stderr}");
    assert_unchanged(&site, "random", &committed);
}

#[test]
fn an_unknown_key_is_named() {
    let (site, committed) = site_with_committed_state("random");
    let text = random_source_config("random", "max_count = 10").replace("poll_interval", "pol_interval");
    let config = site.config("ferry.toml", &text);
    let stderr = run_fails(&config);
    assert!(stderr.contains("ferry.toml") && stderr.contains("unknown field `pol_interval`"), "{stderr}");
    assert_unchanged(&site, "random", &committed);
}

#[test]
fn a_component_of_another_world_is_refused_with_what_it_exports() {
    let (site, committed) = site_with_committed_state("random");
    let text = random_source_config("random", "max_count = 10").replace(RANDOM_SOURCE, NOT_A_SOURCE);
    let stderr = run_fails(&site.config("ferry.toml", &text));
    assert!(stderr.contains("connector `random`") && stderr.contains("not_a_source.wasm"), "{stderr}");
    assert!(stderr.contains("does not export the interface `iggy:connector/source@0.2.1`"), "{stderr}");
    assert!(stderr.contains("example:hello/greeter"), "{stderr}");
    assert_unchanged(&site, "random", &committed);
}

#[test]
fn a_component_built_against_the_previous_contract_is_refused_naming_both_versions() {
    let (site, committed) = site_with_committed_state("random");
    let text = random_source_config("random", "max_count = 10").replace(RANDOM_SOURCE, CONTRACT_0_1_SOURCE);
    let stderr = run_fails(&site.config("ferry.toml", &text));
    let both = "it was built against the contract iggy:connector 0.1.0 (it exports \
                `iggy:connector/source@0.1.0`), and this host speaks 0.2.1: rebuild it";
    assert!(stderr.contains("connector `random`") && stderr.contains(both), "{stderr}");
    assert_unchanged(&site, "random", &committed);
    // The tools say the same before anything runs.
    let inspect = ferry(&["inspect", CONTRACT_0_1_SOURCE]);
    assert!(!inspect.status.success());
    assert!(String::from_utf8_lossy(&inspect.stdout).contains(both), "{}", String::from_utf8_lossy(&inspect.stdout));
    let test = ferry(&["test", CONTRACT_0_1_SOURCE]);
    assert!(!test.status.success());
    let said = format!("{}{}", String::from_utf8_lossy(&test.stdout), String::from_utf8_lossy(&test.stderr));
    assert!(said.contains(both), "{said}");
}

#[test]
fn a_mistyped_export_is_refused_naming_the_function() {
    let (site, committed) = site_with_committed_state("random");
    let text = random_source_config("random", "max_count = 10").replace(RANDOM_SOURCE, MISTYPED_SOURCE);
    let stderr = run_fails(&site.config("ferry.toml", &text));
    assert!(stderr.contains("function `poll`") && stderr.contains("expected `batch`, found `u32`"), "{stderr}");
    assert_unchanged(&site, "random", &committed);
}

#[test]
fn a_file_that_is_not_wasm_is_refused() {
    let (site, committed) = site_with_committed_state("random");
    let fake = site.path("fake.wasm");
    std::fs::write(&fake, "#!/bin/sh\necho not wasm\n").unwrap();
    let text = random_source_config("random", "max_count = 10").replace(RANDOM_SOURCE, fake.to_str().unwrap());
    let stderr = run_fails(&site.config("ferry.toml", &text));
    assert!(stderr.contains("fake.wasm: not a WebAssembly file"), "{stderr}");
    let missing = random_source_config("random", "max_count = 10").replace(RANDOM_SOURCE, "/nowhere/gone.wasm");
    let stderr = run_fails(&site.config("missing.toml", &missing));
    assert!(stderr.contains("/nowhere/gone.wasm: the component: cannot open it: No such file"), "{stderr}");
    assert_eq!(stderr.matches("No such file").count(), 1, "the reason is said once: {stderr}");
    assert_unchanged(&site, "random", &committed);
}

#[test]
fn a_component_path_that_is_not_a_regular_file_is_refused_at_once() {
    let (site, committed) = site_with_committed_state("random");
    let fifo = site.path("pipe.wasm");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(status.success());
    // A device that reads forever, a pipe nobody writes to, a directory: none is read.
    for (path, kind) in [
        ("/dev/zero", "a character device, not a regular file"),
        (fifo.to_str().unwrap(), "a named pipe, not a regular file"),
        (site.path("").to_str().unwrap(), "a directory, not a regular file"),
    ] {
        let text = random_source_config("random", "max_count = 10").replace(RANDOM_SOURCE, path);
        let stderr = run_fails(&site.config("ferry.toml", &text));
        assert!(stderr.contains("connector `random`") && stderr.contains(kind), "{path}: {stderr}");
    }
    assert_unchanged(&site, "random", &committed);
}

#[test]
fn a_component_over_max_component_bytes_is_refused_naming_the_setting() {
    let (site, committed) = site_with_committed_state("random");
    let size = std::fs::metadata(RANDOM_SOURCE).unwrap().len();
    let text = random_source_config("random", "max_count = 10")
        .replace("[runtime]", &format!("[runtime]\nmax_component_bytes = {}", size - 1));
    let stderr = run_fails(&site.config("ferry.toml", &text));
    let expected = format!("it is {size} bytes, over [runtime] max_component_bytes ({} bytes)", size - 1);
    assert!(stderr.contains(&expected), "{stderr}");
    assert_unchanged(&site, "random", &committed);
}

#[test]
fn a_corrupt_state_file_stops_the_start_and_is_left_as_it_was() {
    let (site, _) = site_with_committed_state("random");
    let file = site.states().file_of("random");
    // Damage the stored cursor itself, as a bad disk would: 50 becomes 90.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.windows(15).position(|w| w == br#"{"next_seq":50}"#).expect("the cursor is in the file");
    bytes[at + 12] = b'9';
    std::fs::write(&file, &bytes).unwrap();
    let config = site.config("ferry.toml", &random_source_config("random", "max_count = 10"));

    let log = run_fails(&config);
    assert!(log.contains("connector `random`") && log.contains("corrupt state"), "{log}");
    assert!(log.contains("cursors.db") && log.contains("checksum mismatch"), "{log}");
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "a corrupt state file must not be rewritten or reset");

    let show = ferry(&["state", "show", config.to_str().unwrap(), "random"]);
    assert!(!show.status.success());
    assert!(String::from_utf8_lossy(&show.stdout).contains("checksum mismatch"));
}

#[test]
fn a_state_file_of_garbage_or_truncated_to_nothing_is_corrupt() {
    for damage in [&b""[..], &b"definitely not a database, just some text"[..]] {
        let (site, _) = site_with_committed_state("random");
        let file = site.states().file_of("random");
        for companion in ferry::store::sqlite::companion_files(&file) {
            let _ = std::fs::remove_file(companion);
        }
        std::fs::write(&file, damage).unwrap();
        let config = site.config("ferry.toml", &random_source_config("random", "max_count = 10"));
        let stderr = run_fails(&config);
        assert!(stderr.contains("corrupt"), "{stderr}");
        assert_eq!(std::fs::read(&file).unwrap(), damage);
    }
}

#[test]
fn state_reset_is_refused_while_the_connector_runs_and_keeps_the_old_state() {
    let site = Site::new();
    let config = site.config("ferry.toml", &random_source_config("busy", "messages_per_batch = 5\nmax_count = 20"));
    let config_arg = config.to_str().unwrap();
    let mut running = Ferry::start(&config, &[]);
    running.wait_for_line(&["key=busy", "idle"]);

    let reset = ferry(&["state", "reset", config_arg, "busy", "--yes"]);
    assert!(!reset.status.success());
    let stderr = String::from_utf8_lossy(&reset.stderr);
    assert!(stderr.contains("in use by process") && stderr.contains("still running"), "{stderr}");
    // `show` works while it runs.
    let show = ferry(&["state", "show", config_arg, "busy"]);
    assert!(String::from_utf8_lossy(&show.stdout).contains(r#"cursor {"next_seq":20}"#));

    running.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(running.wait().success());
    let without_yes = ferry(&["state", "reset", config_arg, "busy"]);
    assert!(!without_yes.status.success(), "reset needs --yes");
    assert!(site.states().read("busy").unwrap().is_some());
    let reset = ferry(&["state", "reset", config_arg, "busy", "--yes"]);
    assert!(reset.status.success(), "{}", String::from_utf8_lossy(&reset.stderr));
    assert_eq!(site.states().read("busy").unwrap(), None);
    assert!(String::from_utf8_lossy(&reset.stdout).contains("old state kept in the `reset` table"));
}

#[test]
fn inspect_says_what_a_component_is() {
    let good = ferry(&["inspect", RANDOM_SOURCE]);
    assert!(good.status.success());
    let stdout = String::from_utf8_lossy(&good.stdout);
    assert!(stdout.contains("iggy:connector/logging@0.2.1") && stdout.contains("source: yes"), "{stdout}");
    let bad = ferry(&["inspect", NOT_A_SOURCE]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stdout).contains("source: no: it does not export"));
}

#[test]
fn a_second_ferry_on_the_same_state_is_refused() {
    let site = Site::new();
    let config = site.config("ferry.toml", &random_source_config("single", "max_count = 5"));
    let mut first = Ferry::start(&config, &[]);
    first.wait_for_line(&["key=single", "running"]);
    let stderr = run_fails(&config);
    assert!(stderr.contains("connector `single`") && stderr.contains("in use by process"), "{stderr}");
    drop(first);
}
