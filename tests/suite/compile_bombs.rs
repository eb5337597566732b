//! Components built to exhaust the compiler: they pass every check made before
//! compiling (they honour the contract), and then make Cranelift allocate gigabytes
//! or work for minutes. `ferry run` compiles each component in a child process
//! bounded by `[runtime] compile_memory` and `compile_timeout`: a bomb fails its own
//! connector with an error naming the bound, the host does not abort, and the other
//! connectors start without waiting for it.

use std::path::PathBuf;

use ferry::store::local_log::LocalLog;
use ferry_tests::raw_component::{many_functions, many_locals, source_with};
use ferry_tests::records::seqs;
use nix::sys::signal::Signal;

use crate::process::{Ferry, Site, ferry};

/// A site with two connectors: `bomb`, running the component `bomb` (written into the
/// site), and `neighbour`, a random source delivering 50 records.
fn site_with_bomb(bomb: &[u8], runtime: &str) -> (Site, PathBuf) {
    let site = Site::new();
    std::fs::write(site.path("bomb.wasm"), bomb).expect("writing the bomb");
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[runtime]
shutdown_grace_period = "20s"
{runtime}

[[sources]]
key = "neighbour"
path = "{random}"
poll_interval = "2ms"
[[sources.streams]]
stream = "demo"
topic = "neighbour"
[sources.plugin_config]
messages_per_batch = 10
max_count = 50

[[sources]]
key = "bomb"
path = "bomb.wasm"
[[sources.streams]]
stream = "demo"
topic = "bomb"
"#,
            random = ferry_tests::components::RANDOM_SOURCE
        ),
    );
    (site, config)
}

/// Run the site until the bomb's connector is refused with a line containing
/// `bound`; the neighbour meanwhile delivers everything. Returns ferry's log.
fn bomb_is_refused(site: &Site, config: &std::path::Path, bound: &str) -> String {
    let mut run = Ferry::start(config, &[]);
    let refusal = run.wait_for_line(&["key=bomb", "will not run", bound]);
    assert!(refusal.contains("bomb.wasm"), "the refusal names the file: {refusal}");
    run.wait_until_logged(&["key=neighbour", "idle"]);
    run.signal(Signal::SIGINT);
    let status = run.wait();
    let log = run.log();
    assert!(status.success(), "ferry survives the bomb and stops cleanly: {status:?}\n{log}");
    let records = LocalLog::read_all(&site.log_dir(), "demo", "neighbour").expect("the neighbour's records");
    assert_eq!(seqs(&records), (0..50).collect::<Vec<_>>(), "the neighbour delivered everything");
    let status = ferry(&["status", config.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&status.stdout);
    let bomb = table.lines().find(|l| l.starts_with("bomb ")).unwrap_or_else(|| panic!("{table}"));
    assert!(bomb.contains("refused") && bomb.contains(bound), "ferry status shows why: {bomb}");
    log
}

#[test]
fn a_function_with_ten_thousand_live_locals_is_stopped_at_compile_memory() {
    // 160 KB of component; compiling it takes about 600 MiB (and 20,000 locals
    // across 5,000 branches, 350 KB, would take gigabytes).
    let bomb = source_with(&many_locals(10_000, 2_000));
    let (site, config) = site_with_bomb(&bomb, "compile_memory = \"256MiB\"\ncompile_timeout = \"600s\"");
    bomb_is_refused(&site, &config, "[runtime] compile_memory");
}

#[test]
fn a_component_too_slow_to_compile_is_stopped_at_compile_timeout_without_delaying_the_others() {
    // 100,000 tiny functions: about ten seconds of compiling on two cores.
    let bomb = source_with(&many_functions(100_000));
    let (site, config) = site_with_bomb(&bomb, "compile_timeout = \"2s\"");
    let log = bomb_is_refused(&site, &config, "[runtime] compile_timeout");
    // The neighbour started and delivered while the bomb was still compiling.
    let position = |needles: &[&str]| {
        log.lines()
            .position(|l| needles.iter().all(|n| l.contains(n)))
            .unwrap_or_else(|| panic!("no line with {needles:?}:\n{log}"))
    };
    assert!(
        position(&["key=neighbour", "idle"]) < position(&["key=bomb", "will not run"]),
        "the neighbour must not wait for the bomb:\n{log}"
    );
}

#[test]
fn an_ordinary_raw_component_compiles_in_the_child_and_runs() {
    // The same path as the bombs, with nothing extra: the child's artifact loads and
    // the connector runs (it has nothing to deliver, so it goes idle).
    let (_site, config) = site_with_bomb(&source_with(""), "");
    let mut run = Ferry::start(&config, &[]);
    run.wait_until_logged(&["key=bomb", "component compiled"]);
    run.wait_until_logged(&["key=bomb", "idle"]);
    run.signal(Signal::SIGINT);
    assert!(run.wait().success(), "{}", run.log());
}
