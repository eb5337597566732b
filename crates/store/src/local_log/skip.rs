//! Skipping a record a sink cannot read (`ferry log skip`): its headers, as the log
//! stores them, do not parse, so the sink cannot hand it to its guest, and with no
//! dead letters to take it the sink stops at it (see `input.rs`). An operator moves
//! the sink's position past it, explicitly, by offset.
//!
//! Only that record can be skipped: the position must be at it (where the sink
//! stopped), checked against the topic file as a sink's start checks it, and the
//! record must be one that cannot be read. The record itself stays in the log (a
//! skip moves a position and deletes nothing), and the position after the skip is
//! committed as the next generation, with the file's identity in its mark.

use std::collections::BTreeMap;
use std::path::Path;

use super::positions::{self, name_of};
use super::{Record, headers_from_json};
use crate::state::ConnectorState;
use ferry_engine::cursor::Committed;
use ferry_engine::delivery::{LogMark, Receipt};
use ferry_engine::status::now_micros;

/// What was skipped.
#[derive(Debug)]
pub struct Skipped {
    /// The record, still in the log.
    pub record: Record,
    /// Why it cannot be read.
    pub problem: String,
    /// The generation of the positions committed past it.
    pub generation: u64,
}

/// Move sink `key`'s position in `stream`/`topic` of the log in `dir` past the record
/// at `offset`, which it cannot read; `state` is the sink's state, held by the caller
/// (so no ferry runs the sink meanwhile). `config_file` is for the words of an error.
pub fn skip_unreadable(
    dir: &Path,
    state: &ConnectorState,
    key: &str,
    config_file: &Path,
    (stream, topic): (&str, &str),
    offset: u64,
) -> Result<Skipped, String> {
    let committed = state.committed().map_err(|e| e.to_string())?;
    let mut at: BTreeMap<String, u64> = match &committed {
        None => BTreeMap::new(),
        Some(c) => positions::parse(&c.state).map_err(|problem| {
            format!("its committed state is not a sink's positions ({problem}): {}", String::from_utf8_lossy(&c.state))
        })?,
    };
    let topics = [(stream.to_string(), topic.to_string())];
    let checked = positions::check(dir, committed.as_ref(), &at, &topics)
        .map_err(|untrusted| untrusted.explain(key, Some(config_file)))?;
    let name = name_of(stream, topic);
    let position = checked[0].at;
    if position != offset {
        return Err(format!(
            "its position in {name} is offset {position}, not {offset}: only the record the sink stopped at can be \
             skipped"
        ));
    }
    let reader = match &checked[0].reader {
        Some(reader) => reader,
        None => return Err(format!("the topic {name} has no file yet: there is nothing to skip")),
    };
    let record = reader.read(offset, 1).map_err(|e| e.to_string())?.into_iter().next();
    let record =
        record.ok_or_else(|| format!("{name} holds no record at offset {offset}: there is nothing to skip"))?;
    let problem = record.headers.as_ref().and_then(|json| headers_from_json(json).err()).ok_or_else(|| {
        format!(
            "the record at {name} offset {offset} reads fine: there is nothing to skip (a record the sink can never \
             write goes to its dead letters)"
        )
    })?;

    at.insert(name, offset + 1);
    let mut marks: Vec<LogMark> = committed.as_ref().map(|c| c.receipt.marks.clone()).unwrap_or_default();
    marks.retain(|mark| (mark.stream.as_str(), mark.topic.as_str()) != (stream, topic));
    marks.push(LogMark {
        log_id: checked[0].log_id.map(|id| id.to_string()),
        ..LogMark::new(stream, topic, offset + 1)
    });
    let generation = committed.as_ref().map_or(0, |c| c.generation) + 1;
    let state_bytes = serde_json::to_vec(&at).expect("a map of numbers serializes");
    let past =
        Committed { state: state_bytes, generation, committed_at_micros: now_micros(), receipt: Receipt { marks } };
    state.restore(&past).map_err(|e| format!("cannot store the position past it: {e}"))?;
    Ok(Skipped { record, problem, generation })
}
