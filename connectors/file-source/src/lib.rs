//! A source that tails the files matching a glob in a granted directory and
//! delivers each complete line once: as it is, as a JSON value, or as the JSON
//! object of a CSV row.
//!
//! The cursor (`cursor.rs`) holds, for each file being read, which file it is (its
//! identity: device and inode, which a rename keeps), its name, and the byte offset
//! after its last delivered line; the host commits it only after the batch was
//! delivered, and into the local log in the same transaction as the batch, so every
//! line arrives exactly once there (at least once into Iggy, with the same ids).
//!
//! What happens to a file, said in the log once each:
//!
//! * **new**: read from its beginning (or its end, with `start_at = "end"`);
//! * **rotated** (renamed, a new file under the old name): the renamed file is read to
//!   its end under its new name, even one the pattern no longer matches, then let go;
//!   the new file is a new file;
//! * **truncated** (smaller than the offset reached): read again from its beginning;
//! * **deleted**: let go once missing from three listings over a second (a listing
//!   taken mid-rename can miss a file under both names); what was not delivered of it
//!   is gone with it, and the log says from which byte.
//!
//! A line without its newline yet is left until its newline arrives.
//!
//! `plugin_config`:
//!
//! | key              | default     | meaning                                                              |
//! |------------------|-------------|----------------------------------------------------------------------|
//! | `path`           | required    | the files: a directory and a file-name glob, `/logs/app-*.log`        |
//! | `format`         | `"lines"`   | `lines`, `json_lines` (a line that is not JSON is an error naming it), `csv` (one row a line, the first line the header) |
//! | `batch_size`     | 1000        | records per batch, at most (1 to 10,000)                             |
//! | `max_line_bytes` | 1 MiB       | a longer line is an error naming the file and the byte               |
//! | `start_at`       | `"beginning"` | where a file first seen is read from: `beginning` or `end`         |
//!
//! Each record has the headers `file` (its name) and `offset` (the byte its line
//! starts at).

mod config;
mod cursor;
mod identity;
mod records;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_guest::{Batch, Error, HeaderValue, PackedMessages, Source};

use crate::config::{Config, Format, StartAt};
use crate::cursor::{Cursor, Tracked};
use crate::records::At;

/// A file of the cursor not found is let go once it was missing in this many scans
/// and for this long: a rename in flight is over by then.
const MISSING_SCANS: u32 = 3;
const MISSING_FOR: Duration = Duration::from_secs(1);

/// A batch reads a file in chunks from this size, doubling up to the last.
const FIRST_CHUNK: u64 = 16 * 1024;
const LAST_CHUNK: u64 = 1024 * 1024;

struct FileSource {
    config: Config,
    /// Where a file first seen, not yet in the committed cursor, starts: fixed when
    /// first seen, so that `start_at = "end"` means that moment's end.
    first_seen: HashMap<String, u64>,
    /// The CSV header of each file, by identity.
    headers: HashMap<String, Vec<String>>,
    /// What was said in the log already, so that a poll repeated says it once.
    said: HashSet<String>,
    /// The file the last batch filled up in, open (see `read_on`).
    open: Option<Open>,
    /// Files of the cursor not found, by identity: since when, and in how many scans.
    missing: HashMap<String, (Instant, u32)>,
    /// How long one must be missing to be let go ([`MISSING_FOR`]; tests shorten it).
    missing_for: Duration,
    /// Files let go that the committed cursor still holds.
    gone: HashSet<String>,
}

/// A file a batch filled up in, open at the offset after it, and the cursor that
/// batch carried: while batches come back acknowledged and full, the next one is
/// read from here, without listing the directory and looking at every file again
/// (a rotation is seen once the file has nothing more).
struct Open {
    identity: String,
    name: String,
    file: std::fs::File,
    offset: u64,
    after: Cursor,
}

/// A file in the directory, as a poll finds it.
struct Found {
    name: String,
    path: PathBuf,
    identity: String,
    size: u64,
}

impl Source for FileSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        std::fs::read_dir(&config.directory).map_err(|e| {
            Error::msg(format!("cannot read the directory {} (is it granted?): {e}", config.directory.display()))
        })?;
        ferry_guest::info!(
            "file source: reading {}/{} as {:?}, {} file(s) in its cursor",
            config.directory.display(),
            config.pattern,
            config.format,
            cursor.files.len()
        );
        Ok(FileSource {
            config,
            first_seen: HashMap::new(),
            headers: HashMap::new(),
            said: HashSet::new(),
            open: None,
            missing: HashMap::new(),
            missing_for: MISSING_FOR,
            gone: HashSet::new(),
        })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        // A file's first start is kept until a committed cursor holds it (a NACKed
        // batch must not move `start_at = "end"` on).
        self.first_seen.retain(|identity, _| cursor.get(identity).is_none());
        if let Some(batch) = self.read_on(cursor)? {
            return Ok(Some(batch));
        }
        let (matching, renamed_away) = self.scan(cursor)?;
        let mut next = Cursor::default();
        let mut messages = PackedMessages::new();
        for (found, matches) in matching.iter().map(|f| (f, true)).chain(renamed_away.iter().map(|f| (f, false))) {
            let start = self.start(cursor, found);
            let offset =
                if messages.len() < self.config.batch_size { self.read(found, start, &mut messages)? } else { start };
            if !matches && offset == found.size {
                self.say(format!("`{}` (rotated out of the pattern) was read to its end: letting it go", found.name));
                if offset == start {
                    continue;
                }
            }
            next.files.push(Tracked { identity: found.identity.clone(), name: found.name.clone(), offset });
        }
        // A file of the cursor not found may be in the middle of a rename (a listing
        // is not atomic): it stays in the cursor until it has been missing for a
        // while, so that it is not read again from its start under its new name.
        let now = Instant::now();
        let mut still_missing = HashMap::new();
        for tracked in &cursor.files {
            let here = |f: &Found| f.identity == tracked.identity;
            if matching.iter().any(here) || renamed_away.iter().any(here) {
                continue;
            }
            let (since, scans) = self.missing.get(&tracked.identity).map_or((now, 1), |(since, n)| (*since, n + 1));
            if self.gone.contains(&tracked.identity) {
                // Let go already; the committed cursor still has it until a batch.
                continue;
            }
            if scans >= MISSING_SCANS && now.duration_since(since) >= self.missing_for {
                self.gone.insert(tracked.identity.clone());
                self.say(format!(
                    "`{}` was deleted: letting it go (it had been delivered up to byte {})",
                    tracked.name, tracked.offset
                ));
            } else {
                still_missing.insert(tracked.identity.clone(), (since, scans));
                next.files.push(tracked.clone());
            }
        }
        self.missing = still_missing;
        self.gone.retain(|identity| cursor.get(identity).is_some());
        if messages.is_empty() {
            return Ok(None);
        }
        if let Some(open) = &mut self.open {
            open.after = next.clone();
        }
        Ok(Some(Batch::from_packed(messages, next)))
    }
}

impl FileSource {
    /// The files matching the pattern, by name; and the files of the cursor that no
    /// longer match it under their new name (rotated away) but have not been read
    /// to their end.
    fn scan(&mut self, cursor: &Cursor) -> Result<(Vec<Found>, Vec<Found>), Error> {
        let directory = &self.config.directory;
        let entries = std::fs::read_dir(directory)
            .map_err(|e| Error::msg(format!("cannot read the directory {}: {e}", directory.display())))?;
        let mut matching = Vec::new();
        let mut others = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let Ok(name) = entry.file_name().into_string() else { continue };
            if entry.file_type().map(|t| !t.is_file()).unwrap_or(true) {
                continue;
            }
            if self.config.pattern.matches(&name) { matching.push(name) } else { others.push(name) }
        }
        matching.sort();
        let found = |name: String| -> Option<Found> {
            let path = directory.join(&name);
            // A file gone between the listing and now is simply not there; one
            // renamed over while it was looked at is looked at again next time.
            let identity = identity::identity(&path).ok()?;
            let size = std::fs::metadata(&path).ok()?.len();
            (identity::identity(&path).ok()? == identity).then_some(Found { name, path, identity, size })
        };
        let matching: Vec<Found> = matching.into_iter().filter_map(found).collect();
        let missing: Vec<&Tracked> =
            cursor.files.iter().filter(|t| !matching.iter().any(|f| f.identity == t.identity)).collect();
        let mut renamed_away = Vec::new();
        if !missing.is_empty() {
            others.sort();
            for other in others.into_iter().filter_map(found) {
                if missing.iter().any(|t| t.identity == other.identity) {
                    renamed_away.push(other);
                }
            }
        }
        Ok((matching, renamed_away))
    }

    /// Where to read `found` from: its offset in the cursor (a rename and a
    /// truncation said), or for a file first seen, its beginning or end.
    fn start(&mut self, cursor: &Cursor, found: &Found) -> u64 {
        let Some(tracked) = cursor.get(&found.identity) else {
            let start = match self.config.start_at {
                StartAt::Beginning => 0,
                StartAt::End => found.size,
            };
            let start = *self.first_seen.entry(found.identity.clone()).or_insert(start);
            self.say(format!("`{}` is new: reading it from byte {start}", found.name));
            return start;
        };
        if tracked.name != found.name {
            self.say(format!(
                "`{}` was renamed to `{}` (rotated): reading on from byte {}",
                tracked.name, found.name, tracked.offset
            ));
        }
        if found.size < tracked.offset {
            self.say(format!(
                "`{}` was truncated to {} bytes (below the {} delivered): reading it again from its beginning",
                found.name, found.size, tracked.offset
            ));
            self.headers.remove(&found.identity);
            return 0;
        }
        tracked.offset
    }

    /// Append the records of `found`'s complete lines from `start` to `messages`,
    /// up to the batch size; the offset after the last line taken. A file that fills
    /// the batch is kept open for the next poll (see [`Open`]).
    fn read(&mut self, found: &Found, start: u64, messages: &mut PackedMessages) -> Result<u64, Error> {
        if found.size <= start {
            return Ok(start);
        }
        let cannot = |e: std::io::Error| Error::msg(format!("cannot read `{}`: {e}", found.name));
        let mut file = std::fs::File::open(&found.path).map_err(cannot)?;
        // The name may have moved to another file since the scan: read it next time.
        if identity::identity(&found.path).ok().as_ref() != Some(&found.identity) {
            return Ok(start);
        }
        let header = match self.config.format {
            Format::Csv if start > 0 => Some(self.header(found, &mut file)?),
            _ => None,
        };
        file.seek(SeekFrom::Start(start)).map_err(cannot)?;
        let offset = self.lines(&mut file, (&found.name, &found.identity), start, header, messages)?;
        if messages.len() >= self.config.batch_size {
            let after = Cursor::default();
            self.open = Some(Open { identity: found.identity.clone(), name: found.name.clone(), file, offset, after });
        }
        Ok(offset)
    }

    /// Records of the complete lines of `file` (`name`, `identity`), positioned at
    /// `start`, appended to `messages` up to the batch size; the offset after the
    /// last line taken. It reads in chunks that grow, so that a small batch reads
    /// little of a big file, until the batch is full or the file ends.
    fn lines(
        &mut self,
        file: &mut std::fs::File,
        (name, identity): (&str, &str),
        start: u64,
        mut header: Option<Vec<String>>,
        messages: &mut PackedMessages,
    ) -> Result<u64, Error> {
        let cannot = |e: std::io::Error| Error::msg(format!("cannot read `{name}`: {e}"));
        let too_long = |offset: u64| {
            Error::msg(format!(
                "`{name}` at byte {offset}: a line longer than max_line_bytes ({}); raise it to read this file",
                self.config.max_line_bytes
            ))
        };
        let max_line = self.config.max_line_bytes as u64;
        let (mut buffer, mut chunk, mut ended) = (Vec::new(), FIRST_CHUNK, false);
        let mut taken = 0usize;
        // The headers of every record of this file: only the offset changes.
        let mut headers =
            [("file".to_string(), HeaderValue::from(name)), ("offset".to_string(), HeaderValue::from(0u64))];
        loop {
            while messages.len() < self.config.batch_size {
                let rest = &buffer[taken..];
                let offset = start + taken as u64;
                let Some(end) = rest.iter().position(|b| *b == b'\n') else { break };
                if end as u64 > max_line {
                    return Err(too_long(offset));
                }
                let line = &rest[..end];
                let at = At { file: name, offset };
                if self.config.format == Format::Csv && header.is_none() {
                    // The first line of the file: the header.
                    let names = records::fields(line.strip_suffix(b"\r").unwrap_or(line))
                        .map_err(|e| Error::msg(format!("`{name}`: the header: {e}")))?;
                    self.headers.insert(identity.to_string(), names.clone());
                    header = Some(names);
                } else {
                    headers[1].1 = HeaderValue::from(offset);
                    records::record(self.config.format, header.as_deref(), line, &at, &headers, messages)?;
                }
                taken += end + 1;
            }
            if (buffer.len() - taken) as u64 > max_line {
                return Err(too_long(start + taken as u64));
            }
            if messages.len() >= self.config.batch_size || ended {
                break;
            }
            let got = read_chunk(file, &mut buffer, chunk as usize).map_err(cannot)?;
            ended = (got as u64) < chunk;
            chunk = (chunk * 2).min(LAST_CHUNK);
        }
        Ok(start + taken as u64)
    }

    /// The next batch of the file the last batch filled up in, when that batch was
    /// acknowledged (`cursor` is the one it carried): read on from the open file,
    /// without listing the directory. `None` when there is no such file or it has
    /// no complete line now: the poll then looks at every file.
    fn read_on(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let Some(mut open) = self.open.take() else { return Ok(None) };
        if open.after != *cursor {
            return Ok(None);
        }
        let header = match self.config.format {
            Format::Csv => match self.headers.get(&open.identity) {
                Some(header) => Some(header.clone()),
                None => return Ok(None),
            },
            _ => None,
        };
        let cannot = |e: std::io::Error| Error::msg(format!("cannot read `{}`: {e}", open.name));
        open.file.seek(SeekFrom::Start(open.offset)).map_err(cannot)?;
        let mut messages = PackedMessages::new();
        let offset = self.lines(&mut open.file, (&open.name, &open.identity), open.offset, header, &mut messages)?;
        if messages.is_empty() {
            return Ok(None);
        }
        let mut next = cursor.clone();
        if let Some(tracked) = next.files.iter_mut().find(|tracked| tracked.identity == open.identity) {
            tracked.offset = offset;
        }
        if messages.len() >= self.config.batch_size {
            self.open = Some(Open { offset, after: next.clone(), ..open });
        }
        Ok(Some(Batch::from_packed(messages, next)))
    }

    /// The CSV header of `found` (its first line), read once.
    fn header(&mut self, found: &Found, file: &mut std::fs::File) -> Result<Vec<String>, Error> {
        if let Some(header) = self.headers.get(&found.identity) {
            return Ok(header.clone());
        }
        let mut first = Vec::new();
        file.by_ref()
            .take(self.config.max_line_bytes as u64 + 1)
            .read_to_end(&mut first)
            .map_err(|e| Error::msg(format!("cannot read `{}`: {e}", found.name)))?;
        let end = first.iter().position(|b| *b == b'\n').ok_or_else(|| {
            Error::msg(format!(
                "`{}`: its header line is longer than max_line_bytes ({})",
                found.name, self.config.max_line_bytes
            ))
        })?;
        let line = &first[..end];
        let names = records::fields(line.strip_suffix(b"\r").unwrap_or(line))
            .map_err(|e| Error::msg(format!("`{}`: the header: {e}", found.name)))?;
        self.headers.insert(found.identity.clone(), names.clone());
        Ok(names)
    }

    /// Say `what` in the log, once for this instance.
    fn say(&mut self, what: String) {
        if self.said.insert(what.clone()) {
            ferry_guest::info!("file source: {what}");
        }
    }
}

/// Append up to `chunk` bytes of `file` to `buffer`, in as few reads as the file
/// allows (`read_to_end` starts with small reads, and each is a WASI call); fewer
/// only at the end of the file.
fn read_chunk(file: &mut std::fs::File, buffer: &mut Vec<u8>, chunk: usize) -> std::io::Result<usize> {
    let start = buffer.len();
    buffer.resize(start + chunk, 0);
    let mut filled = 0;
    while filled < chunk {
        match file.read(&mut buffer[start + filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                buffer.truncate(start + filled);
                return Err(e);
            }
        }
    }
    buffer.truncate(start + filled);
    Ok(filled)
}

ferry_guest::export_source!(FileSource);

#[cfg(test)]
mod tests;
