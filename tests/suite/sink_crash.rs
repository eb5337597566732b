//! `kill -9` of a ferry running a source and the file sink reading what it delivers,
//! at random moments: whatever instant the host dies at, the sink's committed
//! position never runs ahead of what is in its files, and its files hold every
//! message of the log once, in offset order (the file sink skips what a replay hands
//! it again). A final clean run finishes the job: every `seq` is in the files, and a
//! `seq` the source delivered twice (a source is at-least-once) carries one id.
//!
//! `FERRY_CRASH_ROUNDS` sets the number of kills (default 20), `FERRY_CRASH_SEED` the
//! seed of the moments (printed, so a failing run can be repeated).

use std::collections::HashMap;

use ferry::store::local_log::{LocalLog, Record};
use ferry_tests::records::{assert_complete, positions, seq_of};
use ferry_tests::sink_output::file_sink_output;
use nix::sys::signal::Signal;

use crate::process::{Ferry, Site, crash_plan, file_sink_table, random_source_config};

/// Enough for the source to be still delivering at the last kill.
const MAX_COUNT: u64 = 5000;
/// The position the sink's state names.
const TOPIC: &str = "demo/feed";

/// The config: the source `feed` with `source`, and the file sink `archive` reading
/// its topic in batches of 7 (not a multiple of the source's 3), rotating its files
/// every 20 kB or so, so that kills land in rotations too.
fn config(site: &Site, name: &str, source: &str) -> std::path::PathBuf {
    let sink = file_sink_table("archive", "batch_length = 7", "rotate_bytes = 20000");
    site.config(name, &format!("{}{sink}", random_source_config("feed", source)))
}

#[test]
fn kill_9_at_random_moments_writes_every_message_once() {
    let (rounds, mut rng) = crash_plan("sink crash test");
    let site = Site::new();
    std::fs::create_dir(site.path("archive-out")).unwrap();
    // About one batch every 2 ms: the source is still delivering at every kill.
    let paced =
        config(&site, "ferry.toml", &format!("messages_per_batch = 3\ninterval = \"2ms\"\nmax_count = {MAX_COUNT}"));

    let mut progress = Vec::new();
    for round in 0..rounds {
        Ferry::start(&paced, &[]).kill_9_at_a_random_moment(&mut rng, &["key=archive", "running"]);
        progress.push(check_invariant(&site, round));
    }
    eprintln!("sink crash test: (committed position, lines in the files, torn bytes) after each kill: {progress:?}");

    // The last run finishes the job at full speed: the source is idle only once it has
    // produced everything; then the sink has to reach the end of the log.
    let unpaced = config(&site, "finish.toml", &format!("max_count = {MAX_COUNT}"));
    let mut ferry = Ferry::start(&unpaced, &[("FERRY_LOG", "info,ferry_engine::status=debug")]);
    ferry.wait_for_line(&["key=feed", "idle"]);
    let end = log_records(&site).len() as u64;
    if committed(&site) < end {
        // The sink only moves forward, so this line comes (or came) exactly once.
        ferry.wait_until_logged(&["key=archive", "offset stored", &format!(" end={end} ")]);
    }
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());

    let (committed, lines, torn) = check_invariant(&site, rounds);
    assert_eq!((committed, lines, torn), (end, end, 0), "the final run wrote and committed the whole log");
    let output = file_sink_output(&site.path("archive-out"));
    let seqs: Vec<u64> = output.lines.iter().map(|l| l.seq).collect();
    let duplicates = assert_complete(&seqs, MAX_COUNT);
    // A batch the source delivered again after a kill carries the ids it had the first
    // time, so a reader can drop the duplicates by id: one id per seq, one seq per id.
    let mut ids: HashMap<u64, u128> = HashMap::new();
    for line in &output.lines {
        let id = *ids.entry(line.seq).or_insert(line.id);
        assert_eq!(id, line.id, "seq {} came with two ids (offset {})", line.seq, line.offset);
    }
    let distinct: std::collections::HashSet<u128> = ids.values().copied().collect();
    assert_eq!(distinct.len() as u64, MAX_COUNT, "one id per seq");
    eprintln!(
        "sink crash test: {end} messages written once each for {MAX_COUNT} seqs ({duplicates} delivered twice by the source)"
    );
}

/// The sink's committed position in its topic (0 before its first commit).
fn committed(site: &Site) -> u64 {
    match site.states().read("archive") {
        Ok(Some(committed)) => positions(&committed.state).get(TOPIC).copied().unwrap_or(0),
        Ok(None) => 0,
        Err(e) => panic!("the sink's state is unreadable: {e}"),
    }
}

fn log_records(site: &Site) -> Vec<Record> {
    if !LocalLog::topic_file(&site.log_dir(), "demo", "feed").exists() {
        return Vec::new();
    }
    LocalLog::read_all(&site.log_dir(), "demo", "feed").unwrap_or_else(|e| panic!("{e}"))
}

/// After a kill: the sink's files hold the log's messages from offset 0 on, each once
/// and in order, each line the message at its offset (its id and `seq`); and the
/// committed position is not beyond them. Returns the position, the line count and
/// the bytes of a torn last line.
fn check_invariant(site: &Site, round: u32) -> (u64, u64, usize) {
    let committed = committed(site);
    let output = file_sink_output(&site.path("archive-out"));
    let records = log_records(site);
    for (index, line) in output.lines.iter().enumerate() {
        assert_eq!(
            line.offset, index as u64,
            "round {round}: line {index} of the sink's files is offset {}: a message written twice or skipped",
            line.offset
        );
        assert_eq!((line.stream.as_str(), line.topic.as_str()), ("demo", "feed"), "round {round}");
        let record = records.get(index).unwrap_or_else(|| {
            panic!("round {round}: the sink wrote offset {index}, which is not in the log ({} records)", records.len())
        });
        assert_eq!(
            (line.id, line.seq),
            (record.id.expect("the source's messages have ids"), seq_of(&record.payload)),
            "round {round}: the line at offset {index} is not the log's message there"
        );
    }
    let lines = output.lines.len() as u64;
    assert!(
        committed <= lines,
        "round {round}: the sink's position is committed at {committed}, but its files end at offset {lines}"
    );
    (committed, lines, output.torn_bytes)
}
