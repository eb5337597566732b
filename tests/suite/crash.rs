//! `kill -9` at random moments: whatever instant the host dies at, the committed
//! cursor never runs ahead of the log, no torn record is ever read back, and a
//! restarted host finishes the job with every `seq` present exactly once: the local
//! log keeps each batch's cursor in the transaction that appends it, so a kill between
//! the append and the commit to the state file duplicates nothing.
//!
//! `FERRY_CRASH_ROUNDS` sets the number of kills (default 20), `FERRY_CRASH_SEED` the
//! seed of the moments (printed, so a failing run can be repeated).

use ferry::store::local_log::LocalLog;
use ferry_tests::records::{assert_complete, next_seq, seqs};
use nix::sys::signal::Signal;

use crate::process::{Ferry, Site, crash_plan, random_source_config};

const MAX_COUNT: u64 = 3000;

#[test]
fn kill_9_at_random_moments_loses_nothing() {
    kill_loop("crash test", "");
}

/// With `[state] sync = "interval"` a commit is not fsynced, but it is in the
/// operating system's hands: killing ferry loses none of it.
#[test]
fn kill_9_at_random_moments_loses_nothing_with_the_cursor_synced_at_an_interval() {
    kill_loop("crash test, sync = interval", "sync = \"interval\"\nsync_interval = \"50ms\"\n");
}

/// Kill ferry at random moments, with `state` added to its `[state]`, checking the
/// invariant after each kill; then let it finish and check every `seq` is there.
fn kill_loop(test: &str, state: &str) {
    let (rounds, mut rng) = crash_plan(test);

    let site = Site::new();
    let with_state = |text: String| text.replace("[state]\n", &format!("[state]\n{state}"));
    // About one batch every 2 ms: slow enough that every kill lands mid-flow.
    let plugin_config = format!("messages_per_batch = 3\ninterval = \"2ms\"\nmax_count = {MAX_COUNT}");
    let config = site.config("ferry.toml", &with_state(random_source_config("crashy", &plugin_config)));

    let mut progress = Vec::new();
    for round in 0..rounds {
        Ferry::start(&config, &[]).kill_9_at_a_random_moment(&mut rng, &["key=crashy", "running"]);
        let committed = check_invariant(&site, "crashy", round);
        progress.push(committed);
    }
    eprintln!("committed cursor after each kill: {progress:?}");

    // The last run finishes the job at full speed. Without an interval, the source is
    // idle only once it has produced everything, so "idle" is the event to wait for.
    let unpaced =
        site.config("finish.toml", &with_state(random_source_config("crashy", &format!("max_count = {MAX_COUNT}"))));
    let mut ferry = Ferry::start(&unpaced, &[]);
    ferry.wait_for_line(&["key=crashy", "idle"]);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    let records = LocalLog::read_all(&site.log_dir(), "demo", "crashy").unwrap();
    let duplicates = assert_complete(&seqs(&records), MAX_COUNT);
    eprintln!("{test}: {} records for {MAX_COUNT} seqs ({duplicates} duplicates)", records.len());
    assert_eq!(duplicates, 0, "delivery into the local log is exactly-once, across kills too");
    let committed = site.states().read("crashy").unwrap().unwrap();
    assert_eq!(next_seq(&committed.state), MAX_COUNT);
}

/// After a kill: every record of source `key` in `demo/<key>` parses (no torn
/// record), and every `seq` below its committed cursor is in the log (the cursor never
/// ran ahead of delivery). The committed `next_seq`. Shared by the crash tests of every
/// guest language.
pub(crate) fn check_invariant(site: &Site, key: &str, round: u32) -> u64 {
    let committed = match site.states().read(key) {
        Ok(Some(committed)) => next_seq(&committed.state),
        Ok(None) => 0,
        Err(e) => panic!("round {round}: the state is unreadable after kill -9: {e}"),
    };
    let records = if LocalLog::topic_file(&site.log_dir(), "demo", key).exists() {
        LocalLog::read_all(&site.log_dir(), "demo", key).unwrap_or_else(|e| panic!("round {round}: {e}"))
    } else {
        Vec::new()
    };
    let present: std::collections::HashSet<u64> = seqs(&records).into_iter().collect();
    if let Some(missing) = (0..committed).find(|s| !present.contains(s)) {
        panic!("round {round}: the cursor is committed at {committed}, but seq {missing} is not in the log");
    }
    committed
}
