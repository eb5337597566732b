//! Before a connector that delivers to the local log starts: does the log still hold
//! everything its committed cursor says was delivered there?
//!
//! The cursor's receipt names, for each topic, where the log ended after the last
//! committed batch. A log that ends earlier, or has holes below that mark, lost
//! records that were acknowledged: SQLite drops the write-ahead log's frames after a
//! bad checksum without a word, a file can be truncated, deleted, or restored from an
//! older backup. Starting anyway would append after the loss as if nothing happened,
//! so the start is refused, naming what is missing, and the operator decides.
//!
//! A sink reading the local log keeps such marks with its positions (what it read
//! there): a log that lost records below them was damaged too, and is named the same
//! way, in a sink's words. Its positions must also fit the files now there (see
//! `positions.rs`: not past their end, taken in the same file): positions that do
//! not are named here too, before anything starts.

use std::ops::RangeInclusive;
use std::path::Path;

use super::{LocalLog, positions};
use crate::sqlite::StoreError;
use ferry_config::Config;
use ferry_contract::Role;
use ferry_engine::cursor::{Committed, StateError};
use ferry_engine::delivery::LogMark;

use crate::state::ConnectorState;

/// How many missing ranges of one topic an error lists.
const RANGES_LISTED: usize = 5;

/// Why a connector's committed cursor and the local log disagree, or could not be
/// compared. (The errors inside are part of the message, not sources: printed as a
/// chain, they would be said twice.)
#[derive(Debug, thiserror::Error)]
pub enum LogCheckError {
    /// Records the committed cursor counts as delivered are not in the log.
    #[error("{0}")]
    Missing(String),
    #[error("cannot check the local log against the committed cursor: {0}")]
    Unreadable(StoreError),
    #[error("cannot check the local log against the committed cursor: {0}")]
    State(StateError),
    /// A sink's positions do not fit the files of the log (see `positions.rs`).
    #[error("{0}")]
    Positions(String),
}

impl LocalLog {
    /// Check that the local log of `config` holds everything connector `key`'s
    /// committed cursor says was delivered to it. Nothing to check when the config
    /// delivers to Iggy.
    /// Each topic is opened (and checked) once, and kept for appending.
    pub fn verify_cursor(
        &self,
        config: &Config,
        key: &str,
        role: Role,
        cursor: &ConnectorState,
    ) -> Result<(), LogCheckError> {
        if config.iggy.is_some() {
            return Ok(());
        }
        let Some(committed) = cursor.committed().map_err(LogCheckError::State)? else { return Ok(()) };
        if let Some(sink) = config.sink(key).filter(|_| role == Role::Sink)
            // State that is not positions at all refuses the sink when it opens its input.
            && let Ok(at) = positions::parse(&committed.state)
        {
            let topics: Vec<(String, String)> = sink.topics().map(|(s, t)| (s.to_string(), t.to_string())).collect();
            positions::check(self.dir(), Some(&committed), &at, &topics)
                .map_err(|untrusted| LogCheckError::Positions(untrusted.explain(key, Some(&config.file))))?;
        }
        verify_receipt(self, &config.file, key, role, &committed)
    }
}

/// Check every mark of `committed`'s receipt against `log`;
/// `config_file`, `key` and its `role` are for the words and the advice of the error.
pub fn verify_receipt(
    log: &LocalLog,
    config_file: &Path,
    key: &str,
    role: Role,
    committed: &Committed,
) -> Result<(), LogCheckError> {
    let (state, says, did, after_reset) = match role {
        Role::Source => (
            "cursor",
            "says",
            "delivered",
            "starts over from scratch (what it produces again is appended after what the log still holds)",
        ),
        Role::Sink => {
            ("positions", "say", "read", "reads the topics again from their start (writing again what it wrote before)")
        }
    };
    let mut problems = Vec::new();
    for mark in &committed.receipt.marks {
        if let Some(shortfall) = shortfall(log, mark).map_err(LogCheckError::Unreadable)? {
            problems.push(format!(
                "the local log {}/{} {}, but its committed {state} (generation {}) {says} offsets up to {} were \
                 {did}: {} (the log was damaged, truncated or deleted)",
                mark.stream,
                mark.topic,
                shortfall.log,
                committed.generation,
                mark.end - 1,
                describe(&shortfall.missing),
            ));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(LogCheckError::Missing(format!(
        "{}; nothing was started. If a backup holds those records, restore the topic file (with its -wal) from it \
         and start again; to accept the loss instead, `ferry state reset {} {key} --yes` forgets the {state}, and \
         `{key}` {after_reset}",
        problems.join("; "),
        config_file.display(),
    )))
}

/// What the log lacks below a mark.
struct Shortfall {
    /// How the log is, for the error: "ends at offset 1040".
    log: String,
    missing: Vec<RangeInclusive<u64>>,
}

/// The offsets below `mark` that the log does not hold, if any.
fn shortfall(log: &LocalLog, mark: &LogMark) -> Result<Option<Shortfall>, StoreError> {
    if mark.end == 0 {
        return Ok(None);
    }
    let path = LocalLog::topic_file(log.dir(), &mark.stream, &mark.topic);
    if matches!(std::fs::symlink_metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
        let log = format!("does not exist ({})", path.display());
        return Ok(Some(Shortfall { log, missing: vec![0..=mark.end - 1] }));
    }
    let database = log.topic(&mark.stream, &mark.topic)?;
    let database = database.lock().unwrap_or_else(|e| e.into_inner());
    let fail = |e: rusqlite::Error| database.error("cannot read the local log topic", e);
    let connection = database.connection();
    let (end, held): (u64, u64) = connection
        .query_row(
            r#"SELECT coalesce(max("offset") + 1, 0),
                      (SELECT count(*) FROM records WHERE "offset" >= 0 AND "offset" < ?1)
               FROM records"#,
            [mark.end],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map_err(fail)?;
    if held == mark.end {
        return Ok(None);
    }
    // Some are missing: find which, walking the offsets below the mark.
    let mut statement = connection
        .prepare(r#"SELECT "offset" FROM records WHERE "offset" >= 0 AND "offset" < ?1 ORDER BY "offset""#)
        .map_err(fail)?;
    let mut rows = statement.query([mark.end]).map_err(fail)?;
    let mut missing = Vec::new();
    let mut next = 0;
    while let Some(row) = rows.next().map_err(fail)? {
        let offset: u64 = row.get(0).map_err(fail)?;
        if offset > next {
            missing.push(next..=offset - 1);
        }
        next = offset + 1;
    }
    if next < mark.end {
        missing.push(next..=mark.end - 1);
    }
    Ok(Some(Shortfall { log: format!("ends at offset {end}"), missing }))
}

/// "records 1040..=2859 are missing", listing a few ranges at most.
fn describe(missing: &[RangeInclusive<u64>]) -> String {
    let count: u64 = missing.iter().map(|r| r.end() - r.start() + 1).sum();
    let mut listed: Vec<String> = missing
        .iter()
        .take(RANGES_LISTED)
        .map(|r| if r.start() == r.end() { r.start().to_string() } else { format!("{}..={}", r.start(), r.end()) })
        .collect();
    if missing.len() > RANGES_LISTED {
        listed.push(format!("and {} more ranges", missing.len() - RANGES_LISTED));
    }
    match count {
        1 => format!("record {} is missing", listed[0]),
        _ => format!("records {} are missing ({count} records)", listed.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_engine::delivery::Receipt;

    fn committed(marks: &[(&str, &str, u64)]) -> Committed {
        let marks = marks.iter().map(|(s, t, end)| LogMark::new(*s, *t, *end));
        Committed { state: vec![], generation: 52, committed_at_micros: 0, receipt: Receipt { marks: marks.collect() } }
    }

    /// A log whose topic `s/t` holds exactly `offsets`.
    fn log_with(offsets: impl IntoIterator<Item = u64>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let path = LocalLog::topic_file(dir.path(), "s", "t");
        let database = crate::sqlite::open_or_create(&path, &super::super::FORMAT).unwrap();
        for offset in offsets {
            database
                .connection()
                .execute(
                    r#"INSERT INTO records ("offset", payload, appended_at, connector) VALUES (?1, x'00', 0, 'c')"#,
                    [offset],
                )
                .unwrap();
        }
        dir
    }

    fn verify(dir: &Path, marks: &[(&str, &str, u64)]) -> Result<(), LogCheckError> {
        verify_receipt(&LocalLog::new(dir), Path::new("ferry.toml"), "random", Role::Source, &committed(marks))
    }

    #[test]
    fn a_log_holding_everything_below_the_marks_passes() {
        let dir = log_with(0..100);
        verify(dir.path(), &[("s", "t", 100)]).unwrap();
        verify(dir.path(), &[("s", "t", 40)]).unwrap();
        verify(dir.path(), &[("s", "t", 0), ("never", "written", 0)]).unwrap();
        verify(dir.path(), &[]).unwrap();
    }

    #[test]
    fn a_log_that_ends_early_names_the_range_and_what_to_do() {
        let dir = log_with(0..1040);
        let error = verify(dir.path(), &[("s", "t", 2860)]).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "the local log s/t ends at offset 1040, but its committed cursor (generation 52) says offsets up to \
                 2859 were delivered: records 1040..=2859 are missing (1820 records) (the log was damaged, \
                 truncated or deleted); nothing was started."
            ),
            "{error}"
        );
        assert!(error.contains("`ferry state reset ferry.toml random --yes`"), "{error}");
    }

    #[test]
    fn a_sinks_positions_past_the_log_are_named_in_a_sinks_words() {
        let dir = log_with(0..10);
        let error = verify_receipt(
            &LocalLog::new(dir.path()),
            Path::new("ferry.toml"),
            "archive",
            Role::Sink,
            &committed(&[("s", "t", 20)]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with(
                "the local log s/t ends at offset 10, but its committed positions (generation 52) say offsets up to \
                 19 were read: records 10..=19 are missing (10 records)"
            ),
            "{error}"
        );
        assert!(
            error.contains("forgets the positions, and `archive` reads the topics again from their start"),
            "{error}"
        );
    }

    #[test]
    fn holes_below_the_mark_are_listed() {
        let dir = log_with((0..10).chain(20..40).chain([41]).chain(50..60));
        let error = verify(dir.path(), &[("s", "t", 60)]).unwrap_err().to_string();
        assert!(error.contains("ends at offset 60"), "{error}");
        assert!(error.contains("records 10..=19, 40, 42..=49 are missing (19 records)"), "{error}");
        let single = log_with((0..5).chain(6..10));
        let error = verify(single.path(), &[("s", "t", 10)]).unwrap_err().to_string();
        assert!(error.contains("record 5 is missing"), "{error}");
        let many = log_with((0..40).step_by(2));
        let error = verify(many.path(), &[("s", "t", 40)]).unwrap_err().to_string();
        assert!(error.contains("records 1, 3, 5, 7, 9, and 15 more ranges are missing (20 records)"), "{error}");
    }

    #[test]
    fn a_missing_topic_file_misses_everything_below_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let error = verify(dir.path(), &[("s", "t", 300)]).unwrap_err().to_string();
        let path = LocalLog::topic_file(dir.path(), "s", "t");
        assert!(error.contains(&format!("s/t does not exist ({})", path.display())), "{error}");
        assert!(error.contains("records 0..=299 are missing"), "{error}");
        assert!(!path.exists(), "checking creates nothing");
    }

    #[test]
    fn every_topic_short_of_its_mark_is_named() {
        let dir = log_with(0..10);
        let error = verify(dir.path(), &[("s", "t", 12), ("s", "gone", 3)]).unwrap_err().to_string();
        assert!(error.contains("s/t ends at offset 10") && error.contains("records 10..=11"), "{error}");
        assert!(error.contains("s/gone does not exist") && error.contains("records 0..=2"), "{error}");
    }

    #[test]
    fn an_unreadable_topic_is_not_a_pass() {
        let dir = tempfile::tempdir().unwrap();
        let path = LocalLog::topic_file(dir.path(), "s", "t");
        std::fs::create_dir_all(&path).unwrap();
        let error = verify(dir.path(), &[("s", "t", 1)]).unwrap_err();
        assert!(matches!(error, LogCheckError::Unreadable(_)), "{error}");
        assert!(error.to_string().contains("a directory, not a regular file"), "{error}");
    }
}
