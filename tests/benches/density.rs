//! `cargo bench -p ferry-tests --bench density`: how many connectors one `ferry`
//! holds, and how fast it starts them.
//!
//! For each count N (`FERRY_BENCH_CONNECTORS`, comma-separated, `1000,10000` by
//! default) it writes a config of N random sources into the local log (ten topics,
//! one message each, then idle), and runs `ferry run` on it twice as a process:
//!
//! * **first start**: an empty state directory (the compile cache is kept apart and
//!   warmed first, so that this is starting, not compiling);
//! * **restart**: the same directory, every connector with a committed cursor that
//!   the start checks against the log.
//!
//! Start time is from spawning the process to the log line of the last connector
//! saying `running` (its guest instantiated and opened). Once every connector has
//! delivered its message and gone idle it prints the resident memory of the process
//! and its count of memory mappings (the kernel allows 65,530 by default,
//! `vm.max_map_count`), then stops it with SIGTERM and checks that it exits cleanly.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferry_tests::components::RANDOM_SOURCE;

const TOPICS: usize = 10;

fn main() {
    let counts: Vec<usize> = std::env::var("FERRY_BENCH_CONNECTORS")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("FERRY_BENCH_CONNECTORS: numbers, comma-separated"))
        .collect();
    let cache = tempfile::tempdir().unwrap();
    warm(cache.path());
    println!(
        "{:>11} {:>9} {:>14} {:>12} {:>9} {:>12}",
        "connectors", "run", "all running s", "idle RSS MiB", "KiB each", "mappings"
    );
    for count in counts {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("ferry.toml");
        std::fs::write(&config, config_text(count, cache.path())).unwrap();
        for run in ["first", "restart"] {
            let figures = start_and_stop(&config, count);
            println!(
                "{count:>11} {run:>9} {:>14.2} {:>12.1} {:>9.1} {:>12}",
                figures.all_running.as_secs_f64(),
                figures.rss_kib as f64 / 1024.0,
                figures.rss_kib as f64 / count as f64,
                figures.mappings
            );
        }
    }
}

/// Compile the random source into the cache once, with one connector.
fn warm(cache: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    std::fs::write(&config, config_text(1, cache)).unwrap();
    start_and_stop(&config, 1);
}

fn config_text(count: usize, cache: &Path) -> String {
    let mut text = format!(
        "[runtime]\ncompile_cache = {:?}\nprogress_interval = \"1h\"\n\n[state]\npath = \"state\"\n\n\
         [local_log]\npath = \"log\"\n",
        cache.display().to_string()
    );
    for n in 0..count {
        text.push_str(&format!(
            "\n[[sources]]\nkey = \"s{n}\"\npath = {:?}\npoll_interval = \"1s\"\n\
             [[sources.streams]]\nstream = \"density\"\ntopic = \"t{}\"\n\
             [sources.plugin_config]\nmessages_per_batch = 1\nmax_count = 1\n",
            RANDOM_SOURCE,
            n % TOPICS
        ));
    }
    text
}

struct Figures {
    all_running: Duration,
    rss_kib: u64,
    mappings: usize,
}

/// Start `ferry run config`, wait until its `count` connectors run and then idle,
/// measure, stop it.
fn start_and_stop(config: &Path, count: usize) -> Figures {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("run")
        .arg(config)
        .current_dir(config.parent().unwrap())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut running, mut idle) = (0, 0);
    let mut all_running = None;
    while idle < count {
        let line = match lines.next() {
            Some(line) => line.unwrap(),
            None => fail(&mut child, "ferry exited before every connector went idle"),
        };
        if line.contains(" ERROR ") {
            fail(&mut child, &format!("ferry logged an error: {line}"));
        }
        if line.ends_with("status::reporter: running") {
            running += 1;
            if running == count {
                all_running = Some(started.elapsed());
            }
        }
        idle += line.contains("status::reporter: idle") as usize;
    }
    let pid = child.id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let mappings = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap().lines().count();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    // Drain the log, so that ferry never blocks writing it while it stops.
    for _ in lines.by_ref() {}
    assert!(child.wait().unwrap().success(), "ferry did not stop cleanly");
    Figures { all_running: all_running.expect("every connector ran"), rss_kib, mappings }
}

fn fail(child: &mut Child, why: &str) -> ! {
    let _ = child.kill();
    panic!("{why}");
}
