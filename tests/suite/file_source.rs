//! The file source against files a writer is appending to and rotating (a rename,
//! a new file under the old name), then truncating and deleting, while ferry is
//! killed with `kill -9` at random moments: every line written reaches the local
//! log exactly once, and what happened to each file is said in the log.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::Signal;

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site, crash_plan};
use ferry::store::local_log::LocalLog;
use ferry_tests::components::FILE_SOURCE;

/// Lines the writer writes in all, and how many go into a file before it rotates.
const LINES: u64 = 3000;
const PER_FILE: u64 = 400;

fn config(site: &Site) -> std::path::PathBuf {
    site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "tail"
path = "{FILE_SOURCE}"
poll_interval = "2ms"
grants = {{ dirs = [{{ host = "in", guest = "/in" }}] }}
streams = [{{ stream = "demo", topic = "lines" }}]
# The rotated names match too: a file rotated while ferry is down is still read.
plugin_config = {{ path = "/in/app.log*", format = "json_lines", batch_size = 50 }}
"#
        ),
    )
}

/// Append `{"seq": N}` lines to `in/app.log`, each in two writes (so the source
/// sees half lines), rotating to `app.log.K` every `PER_FILE` lines.
fn write_lines(dir: &Path, done: &AtomicBool) {
    let log = dir.join("app.log");
    let mut file = std::fs::File::create(&log).unwrap();
    for seq in 0..LINES {
        if seq > 0 && seq % PER_FILE == 0 {
            std::fs::rename(&log, dir.join(format!("app.log.{}", seq / PER_FILE))).unwrap();
            file = std::fs::File::create(&log).unwrap();
        }
        let line = format!("{{\"seq\": {seq}}}\n");
        let (head, tail) = line.split_at(line.len() / 2);
        file.write_all(head.as_bytes()).unwrap();
        file.flush().unwrap();
        file.write_all(tail.as_bytes()).unwrap();
        // Paced (about 3 s in all), so that the kills land while lines are written.
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    done.store(true, Ordering::SeqCst);
}

/// How many times each seq is in the local log.
fn delivered(site: &Site) -> BTreeMap<u64, usize> {
    let mut seen = BTreeMap::new();
    for record in LocalLog::read_all(&site.log_dir(), "demo", "lines").unwrap_or_default() {
        let value: serde_json::Value = serde_json::from_slice(&record.payload).unwrap();
        *seen.entry(value["seq"].as_u64().unwrap()).or_insert(0) += 1;
    }
    seen
}

#[test]
fn every_line_of_rotating_files_arrives_exactly_once_across_kill_9s() {
    let (rounds, mut rng) = crash_plan("file source");
    let site = Site::new();
    std::fs::create_dir_all(site.path("in")).unwrap();
    let config = config(&site);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (dir, done) = (site.path("in"), done.clone());
        std::thread::spawn(move || write_lines(&dir, &done))
    };
    for _ in 0..rounds.min(8) {
        Ferry::start(&config, &[]).kill_9_at_a_random_moment(&mut rng, &["key=tail", "running"]);
        assert!(delivered(&site).values().all(|times| *times == 1), "a duplicate after a kill");
    }
    writer.join().unwrap();
    assert!(done.load(Ordering::SeqCst));

    let mut run = Ferry::start(&config, &[]);
    until("every line in the local log", || delivered(&site).len() as u64 == LINES);
    // A truncated file is read again from its start.
    std::fs::write(site.path("in/app.log"), "{\"seq\": 3000}\n").unwrap();
    until("the line after the truncation", || delivered(&site).len() as u64 == LINES + 1);
    // A deleted file is let go, said.
    std::fs::remove_file(site.path("in/app.log")).unwrap();
    run.wait_for_line(&["key=tail", "`app.log` was deleted"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let seen = delivered(&site);
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), (0..=LINES).collect::<Vec<_>>());
    let duplicates: Vec<_> = seen.iter().filter(|(_, times)| **times > 1).collect();
    assert!(duplicates.is_empty(), "exactly once into the local log: {duplicates:?}");
    let log = run.log();
    assert!(log.contains("was truncated to 14 bytes"), "{log}");
}
