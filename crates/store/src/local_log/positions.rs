//! A sink's committed positions in the local log, and whether the log can be read
//! from them.
//!
//! The positions are one JSON object, `{"stream/topic": next offset}` (what `ferry
//! state show` prints); the receipt committed with them holds a mark per topic read:
//! the same offset, and the identity of the topic file it was taken in (see
//! `identity.rs`). Before a sink reads, each position of a topic it reads must be
//! one of the file now at the topic's path: a position past the file's end would
//! skip the records appended up to it, a position taken in another file (one deleted
//! and created anew, whose offsets restarted; another topic's, moved or copied in)
//! would skip or read again records it never counted, and a position that is not
//! the one its mark says (a state edited behind ferry's back) would do either. None
//! of that is done silently: the sink is refused, with every problem named, and an
//! operator decides. A mark with no identity (an older ferry's) is taken as it is;
//! the next commit stores the identity with it.

use std::collections::BTreeMap;
use std::path::Path;

use super::identity::LogId;
use super::{LocalLog, TopicReader};
use ferry_engine::cursor::Committed;
use ferry_engine::delivery::LogMark;

/// Committed positions, `{"stream/topic": offset}`: anything else (a source's
/// cursor under this key, say) is not a sink's and must not be overwritten.
pub fn parse(state: &[u8]) -> Result<BTreeMap<String, u64>, String> {
    let positions: BTreeMap<String, u64> = serde_json::from_slice(state).map_err(|e| e.to_string())?;
    match positions.keys().find(|name| name.split_once('/').is_none_or(|(s, t)| s.is_empty() || t.is_empty())) {
        Some(name) => Err(format!("{name:?} does not name a stream/topic")),
        None => Ok(positions),
    }
}

/// The name a topic's position is kept under.
pub fn name_of(stream: &str, topic: &str) -> String {
    format!("{stream}/{topic}")
}

/// One topic's position, checked against its file.
pub struct Checked {
    /// The offset to read next.
    pub at: u64,
    /// The file, opened (none while it does not exist, at position 0).
    pub reader: Option<TopicReader>,
    /// Its identity, for the marks of the commits to come.
    pub log_id: Option<LogId>,
}

/// Positions that cannot be applied to the log as it is: each problem, worded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    pub generation: u64,
    pub problems: Vec<String>,
}

impl Untrusted {
    /// The whole refusal of sink `key`, with what the operator can do; the command
    /// names `config_file` when it is known.
    pub fn explain(&self, key: &str, config_file: Option<&Path>) -> String {
        let config = config_file.map_or_else(|| "CONFIG".to_string(), |file| file.display().to_string());
        format!(
            "the committed positions of sink `{key}` (generation {}) do not fit the local log: {}; it reads nothing \
             from them and they are left as they are. Put the topic file they were taken in back at its path (with \
             its -wal) and start again; or `ferry state reset {config} {key} --yes` forgets the positions (kept in \
             the reset table), and `{key}` reads its topics again from their start (writing again what it wrote \
             before)",
            self.generation,
            self.problems.join("; ")
        )
    }
}

/// Check `committed` (already [`parse`]d into `positions`) against the log in `dir`
/// for each of `topics`; what each topic reads from.
pub fn check(
    dir: &Path,
    committed: Option<&Committed>,
    positions: &BTreeMap<String, u64>,
    topics: &[(String, String)],
) -> Result<Vec<Checked>, Untrusted> {
    let marks = committed.map_or(&[][..], |c| &c.receipt.marks[..]);
    let mut checked = Vec::new();
    let mut problems = Vec::new();
    for (stream, topic) in topics {
        let at = positions.get(&name_of(stream, topic)).copied().unwrap_or(0);
        let mark = marks.iter().find(|m| m.stream == *stream && m.topic == *topic);
        match check_topic(dir, stream, topic, at, mark) {
            Ok(topic) => checked.push(topic),
            Err(problem) => problems.push(problem),
        }
    }
    match problems.is_empty() {
        true => Ok(checked),
        false => Err(Untrusted { generation: committed.map_or(0, |c| c.generation), problems }),
    }
}

/// Check the position `at` in `stream`/`topic`, kept with `mark`.
fn check_topic(dir: &Path, stream: &str, topic: &str, at: u64, mark: Option<&LogMark>) -> Result<Checked, String> {
    let path = LocalLog::topic_file(dir, stream, topic);
    let position = format!("its position in {stream}/{topic} is offset {at}");
    if !path.exists() {
        if at > 0 {
            return Err(format!(
                "{position}, but the topic file {} does not exist: the records it read are in no file, and a new \
                 file would count its offsets from 0 again",
                path.display()
            ));
        }
        return Ok(Checked { at, reader: None, log_id: None });
    }
    let reader = TopicReader::open(dir, stream, topic).map_err(|e| format!("{position}, but {e}"))?;
    let (end, log_id) = reader
        .end()
        .and_then(|end| Ok((end, reader.identity()?)))
        .map_err(|e| format!("{position}, but the topic file cannot be read: {e}"))?;
    let file = format!("the topic file {} (identity {}) ends at offset {end}", path.display(), shown(log_id));
    if let Some(taken_in) = mark.and_then(|m| m.log_id.as_deref())
        && Some(taken_in) != log_id.map(|id| id.to_string()).as_deref()
    {
        let whose = match LogId::parse(taken_in).and_then(|id| whose_file(dir, id)) {
            Some((s, t)) => format!(
                "{taken_in} is the identity of {s}/{t} ({}): the position belongs to another topic",
                LocalLog::topic_file(dir, &s, &t).display()
            ),
            None => format!(
                "no topic file of the local log has the identity {taken_in}: the file it was taken in was deleted \
                 and created anew, or replaced, and offsets here count other records"
            ),
        };
        return Err(format!("{position}, taken in the topic file of identity {taken_in}, but {file}; {whose}"));
    }
    if at > end {
        return Err(format!(
            "{position}, past the end of the log: {file}, so the records appended at offsets {end}..={} would be \
             skipped unread",
            at - 1
        ));
    }
    if let Some(mark) = mark
        && mark.end != at
    {
        return Err(format!(
            "{position}, but the receipt committed with it says offsets below {} were read: the state was \
             changed behind ferry's back",
            mark.end
        ));
    }
    Ok(Checked { at, reader: Some(reader), log_id })
}

/// The stream and topic of the file under `dir` whose identity is `id`, if any (to
/// say where a position that is not this file's came from).
fn whose_file(dir: &Path, id: LogId) -> Option<(String, String)> {
    let topics = LocalLog::topics(dir).ok()?;
    topics.into_iter().map(|t| (t.stream, t.topic)).find(|(stream, topic)| {
        TopicReader::open(dir, stream, topic).ok().and_then(|reader| reader.identity().ok().flatten()) == Some(id)
    })
}

/// An identity as an error shows it.
fn shown(id: Option<LogId>) -> String {
    id.map_or_else(|| "none: a file of an older ferry".to_string(), |id| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_log::FORMAT;
    use crate::sqlite;
    use ferry_engine::delivery::Receipt;

    /// A log whose topic `s/<topic>` holds offsets `0..records`; the file's identity.
    fn topic_of(dir: &Path, topic: &str, records: u64) -> LogId {
        let database = sqlite::open_or_create(&LocalLog::topic_file(dir, "s", topic), &FORMAT).unwrap();
        for offset in 0..records {
            let insert =
                r#"INSERT INTO records ("offset", payload, appended_at, connector) VALUES (?1, x'00', 0, 'c')"#;
            database.connection().execute(insert, [offset]).unwrap();
        }
        crate::local_log::identity::of(&database).unwrap().unwrap()
    }

    /// Check sink positions `at` in `s/t`, committed with a mark at `mark` taken in
    /// file `log_id`: where it reads from, or the problem.
    fn check_t(dir: &Path, at: u64, mark: Option<(u64, Option<LogId>)>) -> Result<u64, String> {
        let marks =
            mark.map(|(end, id)| LogMark { log_id: id.map(|id| id.to_string()), ..LogMark::new("s", "t", end) });
        let receipt = Receipt { marks: marks.into_iter().collect() };
        let committed = Committed { state: vec![], generation: 9, committed_at_micros: 0, receipt };
        let positions = BTreeMap::from([("s/t".to_string(), at)]);
        match check(dir, Some(&committed), &positions, &[("s".into(), "t".into())]) {
            Ok(checked) => Ok(checked[0].at),
            Err(untrusted) => Err(untrusted.problems.join("; ")),
        }
    }

    #[test]
    fn a_position_of_the_file_there_within_its_end_is_read_from() {
        let dir = tempfile::tempdir().unwrap();
        let id = topic_of(dir.path(), "t", 10);
        assert_eq!(check_t(dir.path(), 10, Some((10, Some(id)))), Ok(10));
        assert_eq!(check_t(dir.path(), 4, Some((4, None))), Ok(4), "an older ferry's mark, with no identity");
        assert_eq!(check_t(dir.path(), 4, None), Ok(4), "an older ferry's positions, with no mark");
    }

    #[test]
    fn a_position_past_the_end_is_refused_naming_the_file_and_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let id = topic_of(dir.path(), "t", 10);
        let problem = check_t(dir.path(), 25, Some((25, Some(id)))).unwrap_err();
        let path = LocalLog::topic_file(dir.path(), "s", "t");
        assert_eq!(
            problem,
            format!(
                "its position in s/t is offset 25, past the end of the log: the topic file {} (identity {id}) ends at \
                 offset 10, so the records appended at offsets 10..=24 would be skipped unread",
                path.display()
            )
        );
    }

    #[test]
    fn a_position_taken_in_another_file_is_refused_naming_whose_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let here = topic_of(dir.path(), "t", 10);
        let other = topic_of(dir.path(), "other", 10);
        let problem = check_t(dir.path(), 5, Some((5, Some(other)))).unwrap_err();
        assert!(
            problem.contains(&format!("taken in the topic file of identity {other}, but the topic file")),
            "{problem}"
        );
        assert!(problem.contains(&format!("(identity {here}) ends at offset 10")), "{problem}");
        assert!(problem.contains(&format!("{other} is the identity of s/other")), "{problem}");
        assert!(problem.ends_with("the position belongs to another topic"), "{problem}");
        let gone = LogId(42);
        let problem = check_t(dir.path(), 5, Some((5, Some(gone)))).unwrap_err();
        assert!(problem.contains("was deleted and created anew, or replaced"), "{problem}");
    }

    #[test]
    fn a_position_its_mark_does_not_vouch_for_or_of_a_missing_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let id = topic_of(dir.path(), "t", 10);
        let problem = check_t(dir.path(), 2, Some((8, Some(id)))).unwrap_err();
        assert!(
            problem.contains("offset 2, but the receipt committed with it says offsets below 8 were read"),
            "{problem}"
        );
        let empty = tempfile::tempdir().unwrap();
        let problem = check_t(empty.path(), 3, Some((3, Some(id)))).unwrap_err();
        assert!(problem.contains("does not exist"), "{problem}");
        assert_eq!(check_t(empty.path(), 0, None), Ok(0), "nothing read yet from a topic not there yet");
    }
}
