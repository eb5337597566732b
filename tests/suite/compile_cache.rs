//! The compile cache: `ferry run` keeps what it compiled in `<state>/compiled` and
//! loads it on the next start without running the compiler (no child process); a
//! changed component or another fuel setting is a miss; a damaged entry is detected,
//! said so, compiled again and replaced; a cache ferry cannot use is a warning, never
//! a refused connector; `ferry compile` fills the cache for `ferry run`.

use std::path::{Path, PathBuf};

use ferry::store::local_log::LocalLog;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::faults::Immutable;
use ferry_tests::records::seqs;
use nix::sys::signal::Signal;

use crate::process::{Ferry, Site, ferry};

/// A site with the random source `random` (30 records) running `component`, with
/// `runtime` added to `[runtime]` and `limits` as its `[sources.limits]`.
fn site_running(component: &str, runtime: &str, limits: &str) -> (Site, PathBuf) {
    let site = Site::new();
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[runtime]
shutdown_grace_period = "20s"
{runtime}

[[sources]]
key = "random"
path = "{component}"
poll_interval = "2ms"
[[sources.streams]]
stream = "demo"
topic = "random"
[sources.plugin_config]
messages_per_batch = 10
max_count = 30
[sources.limits]
{limits}
"#
        ),
    );
    (site, config)
}

/// `ferry run config` until the source has delivered everything and gone idle, then
/// SIGINT; checks it stopped cleanly with all 30 records in the log. Returns the log.
fn run_to_idle(site: &Site, config: &Path) -> String {
    let mut run = Ferry::start(config, &[]);
    run.wait_until_logged(&["key=random", "idle"]);
    run.signal(Signal::SIGINT);
    let status = run.wait();
    let log = run.log();
    assert!(status.success(), "ferry stops cleanly: {status:?}\n{log}");
    let records = LocalLog::read_all(&site.log_dir(), "demo", "random").expect("the records");
    assert_eq!(seqs(&records), (0..30).collect::<Vec<_>>(), "every record once:\n{log}");
    log
}

fn line<'a>(log: &'a str, needles: &[&str]) -> Option<&'a str> {
    log.lines().find(|l| needles.iter().all(|n| l.contains(n)))
}

/// The run loaded the component from the cache and never compiled it: no compiler
/// process was started.
fn assert_hit(log: &str) -> &str {
    let hit = line(log, &["key=random", "component loaded from the compile cache in", "(cache hit)"])
        .unwrap_or_else(|| panic!("no cache hit logged:\n{log}"));
    assert!(line(log, &["compiling in a child process"]).is_none(), "a hit runs no compiler:\n{log}");
    assert!(line(log, &["compiling component"]).is_none(), "a hit compiles nothing:\n{log}");
    hit
}

/// The run compiled the component in a child process and cached it.
fn assert_compiled_and_cached(log: &str) {
    assert!(line(log, &["key=random", "compiling component (not in the compile cache)"]).is_some(), "{log}");
    assert!(line(log, &["key=random", "compiling in a child process", "pid="]).is_some(), "{log}");
    assert!(line(log, &["key=random", "component compiled in", "and cached", "entry="]).is_some(), "{log}");
}

/// The cache's entries.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(listing) => listing.map(|e| e.expect("a directory entry").path()).collect(),
        Err(_) => Vec::new(),
    };
    entries.sort();
    entries
}

#[test]
fn a_second_run_loads_the_component_from_the_cache_without_compiling() {
    let (site, config) = site_running(RANDOM_SOURCE, "", "");
    let first = run_to_idle(&site, &config);
    assert_compiled_and_cached(&first);
    let cached = entries(&site.path("state/compiled"));
    assert_eq!(cached.len(), 1, "one entry, in <state>/compiled by default: {cached:?}");
    assert!(cached[0].extension().is_some_and(|e| e == "cwasm"), "{cached:?}");

    let second = run_to_idle(&site, &config);
    let hit = assert_hit(&second);
    assert!(hit.contains(&cached[0].display().to_string()), "the hit names its entry: {hit}");
    assert_eq!(entries(&site.path("state/compiled")), cached, "nothing added");
}

#[test]
fn a_changed_component_is_a_miss_and_the_old_one_still_hits() {
    let (site, config) = site_running("random.wasm", "", "");
    let original = std::fs::read(RANDOM_SOURCE).expect("the random source");
    std::fs::write(site.path("random.wasm"), &original).unwrap();
    assert_compiled_and_cached(&run_to_idle(&site, &config));

    // The same code with one more custom section: other bytes, so another key.
    let mut changed = original.clone();
    changed.extend_from_slice(&[0x00, 0x05, 0x04, b'n', b'o', b't', b'e']);
    std::fs::write(site.path("random.wasm"), &changed).unwrap();
    assert_compiled_and_cached(&run_to_idle(&site, &config));
    assert_eq!(entries(&site.path("state/compiled")).len(), 2, "an entry for each version");

    std::fs::write(site.path("random.wasm"), &original).unwrap();
    assert_hit(&run_to_idle(&site, &config));
}

#[test]
fn another_fuel_setting_is_a_miss() {
    let (site, config) = site_running(RANDOM_SOURCE, "", "");
    assert_compiled_and_cached(&run_to_idle(&site, &config));
    // The same site with fuel metering: the engine compiles other code.
    let (_metered_site, metered) = site_running(RANDOM_SOURCE, "", "fuel = 1_000_000_000");
    std::fs::copy(&metered, &config).unwrap();
    let log = run_to_idle(&site, &config);
    assert_compiled_and_cached(&log);
    assert_eq!(entries(&site.path("state/compiled")).len(), 2, "an entry for each engine");
    assert_hit(&run_to_idle(&site, &config));
}

#[test]
fn a_damaged_entry_is_said_so_compiled_again_and_replaced_and_the_connector_runs() {
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage, &str); 3] = [
        ("truncated", |entry| entry.truncate(entry.len() / 2), "truncated or overlong: its header announces"),
        (
            "a byte flipped",
            |entry| {
                let middle = entry.len() / 2;
                entry[middle] ^= 0x40
            },
            "the checksum of its compiled code does not match",
        ),
        ("a wrong header", |entry| entry[..8].copy_from_slice(b"not-ours"), "not a compile cache entry (wrong magic"),
    ];
    let (site, config) = site_running(RANDOM_SOURCE, "", "");
    assert_compiled_and_cached(&run_to_idle(&site, &config));
    let [entry] = entries(&site.path("state/compiled")).try_into().expect("one entry");
    for (what, damage, said) in damages {
        let mut bytes = std::fs::read(&entry).unwrap();
        damage(&mut bytes);
        std::fs::write(&entry, &bytes).unwrap();

        let log = run_to_idle(&site, &config);
        let warning = line(&log, &["WARN", "key=random", "compile cache entry is damaged", said])
            .unwrap_or_else(|| panic!("{what}: the damage is not logged as such:\n{log}"));
        assert!(warning.contains("compiling again, and replacing it"), "{what}: {warning}");
        assert_compiled_and_cached(&log);
        assert_ne!(std::fs::read(&entry).unwrap(), bytes, "{what}: the entry was replaced");
        assert_hit(&run_to_idle(&site, &config));
    }
}

#[test]
fn a_cache_ferry_cannot_use_is_a_warning_and_the_connector_runs() {
    // Its place is taken by a file.
    let (site, config) = site_running(RANDOM_SOURCE, "compile_cache = \"blocker/compiled\"", "");
    std::fs::write(site.path("blocker"), b"").unwrap();
    let log = run_to_idle(&site, &config);
    let warning = line(&log, &["WARN", "key=random", "component compiled in", "but not cached"])
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(warning.contains("blocker/compiled") && warning.contains("Not a directory"), "{warning}");

    // Writable by others: whoever can write it could run code in ferry.
    let (site, config) = site_running(RANDOM_SOURCE, "compile_cache = \"shared\"", "");
    std::fs::create_dir(site.path("shared")).unwrap();
    let everyone = std::os::unix::fs::PermissionsExt::from_mode(0o777);
    std::fs::set_permissions(site.path("shared"), everyone).unwrap();
    let log = run_to_idle(&site, &config);
    let warning = line(&log, &["WARN", "key=random", "but not cached"]).unwrap_or_else(|| panic!("{log}"));
    assert!(warning.contains("writable by its group or by others (mode 777)"), "{warning}");
    assert!(warning.contains("run native code in ferry"), "{warning}");
    assert!(entries(&site.path("shared")).is_empty(), "nothing written there");

    // A directory nothing can be created in.
    let (site, config) = site_running(RANDOM_SOURCE, "compile_cache = \"sealed\"", "");
    std::fs::create_dir(site.path("sealed")).unwrap();
    let test = "a_cache_ferry_cannot_use_is_a_warning_and_the_connector_runs";
    let Some(_sealed) = Immutable::set(&site.path("sealed"), test) else { return };
    let log = run_to_idle(&site, &config);
    let warning = line(&log, &["WARN", "key=random", "but not cached"]).unwrap_or_else(|| panic!("{log}"));
    assert!(warning.contains("cannot write") && warning.contains("sealed/"), "{warning}");
}

#[test]
fn ferry_compile_fills_the_cache_so_that_ferry_run_hits() {
    // With fuel: `ferry compile` must build the engine the config implies.
    let (site, config) = site_running(RANDOM_SOURCE, "", "fuel = 1_000_000_000");
    let config_arg = config.to_str().unwrap();
    let output = ferry(&["compile", RANDOM_SOURCE, "--config", config_arg]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("fuel metering on"), "{stdout}");
    let [entry] = entries(&site.path("state/compiled")).try_into().expect("one entry");
    let filled = stdout.lines().find(|l| l.starts_with(RANDOM_SOURCE)).unwrap_or_else(|| panic!("{stdout}"));
    assert!(filled.contains("cache miss, compiled in"), "{filled}");
    assert!(filled.contains(&format!("cached in {}", entry.display())), "{filled}");

    let again = ferry(&["compile", RANDOM_SOURCE, "--config", config_arg]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success() && stdout.contains("cache hit, loaded in"), "{stdout}");

    assert_hit(&run_to_idle(&site, &config));
}

#[test]
fn ferry_compile_says_what_it_cannot_do() {
    let output = ferry(&["compile", RANDOM_SOURCE]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--config CONFIG") && stderr.contains("--cache DIR"), "{stderr}");

    let (site, config) = site_running(RANDOM_SOURCE, "compile_cache = false", "");
    let output = ferry(&["compile", RANDOM_SOURCE, "--config", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("compile_cache = false") && stderr.contains("ferry.toml"), "{stderr}");

    // One component that is no component: said, the others still cached, exit 1.
    std::fs::write(site.path("junk.wasm"), b"not wasm").unwrap();
    let cache = site.path("elsewhere");
    let junk = site.path("junk.wasm");
    let output = ferry(&["compile", junk.to_str().unwrap(), RANDOM_SOURCE, "--cache", cache.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("junk.wasm: not compiled:")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with(RANDOM_SOURCE) && l.contains("cached in")), "{stdout}");
    assert_eq!(entries(&cache).len(), 1);
}

#[test]
fn with_the_cache_off_nothing_is_kept() {
    let (site, config) = site_running(RANDOM_SOURCE, "compile_cache = false", "");
    let log = run_to_idle(&site, &config);
    assert!(line(&log, &["key=random", "component compiled in", "(compile cache off)"]).is_some(), "{log}");
    assert!(!site.path("state/compiled").exists());
    let log = run_to_idle(&site, &config);
    assert!(line(&log, &["compiling in a child process"]).is_some(), "compiled again:\n{log}");
}
