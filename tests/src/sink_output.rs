//! What the sinks under test wrote, read back from their files: the file sink's
//! numbered data files, and the `written.jsonl` the faulty sink keeps of what it
//! claims to have written.

use std::path::Path;

use crate::records::seq_of;

/// One complete line of the file sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSinkLine {
    pub stream: String,
    pub topic: String,
    pub offset: u64,
    pub id: u128,
    pub seq: u64,
}

/// Everything the file sink wrote in a directory.
#[derive(Debug, Default)]
pub struct FileSinkOutput {
    /// Complete lines, in the order written (file after file).
    pub lines: Vec<FileSinkLine>,
    /// Bytes after the last complete line of the newest file: a line torn by a kill,
    /// never acknowledged, which the sink cuts off when it opens again.
    pub torn_bytes: usize,
}

/// What the file sink (with the default `file = "sink.jsonl"`) wrote in `dir`. A
/// torn line anywhere but at the end of the newest file fails the test: the sink
/// appends to that file only.
pub fn file_sink_output(dir: &Path) -> FileSinkOutput {
    let mut files: Vec<(u64, std::path::PathBuf)> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|entry| entry.expect("listing the sink's directory").path())
            .filter_map(|path| {
                let name = path.file_name()?.to_str()?;
                let number = name.strip_prefix("sink.")?.strip_suffix(".jsonl")?.parse().ok()?;
                Some((number, path))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("listing {}: {e}", dir.display()),
    };
    files.sort();
    let mut output = FileSinkOutput::default();
    for (index, (_, path)) in files.iter().enumerate() {
        let text = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
        if complete < text.len() {
            assert_eq!(index, files.len() - 1, "a torn line in {}, which is not the newest file", path.display());
            output.torn_bytes = text.len() - complete;
        }
        for line in text[..complete].split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            output.lines.push(parse_line(path, line));
        }
    }
    output
}

fn parse_line(path: &Path, line: &[u8]) -> FileSinkLine {
    let bad = |why: &str| -> ! { panic!("{}: {why}: {}", path.display(), String::from_utf8_lossy(line)) };
    let value: serde_json::Value = serde_json::from_slice(line).unwrap_or_else(|_| bad("not JSON"));
    let text = |key: &str| value[key].as_str().unwrap_or_else(|| bad(key)).to_string();
    FileSinkLine {
        stream: text("stream"),
        topic: text("topic"),
        offset: value["offset"].as_u64().unwrap_or_else(|| bad("offset")),
        id: text("id").parse().unwrap_or_else(|_| bad("id")),
        seq: seq_of(text("payload").as_bytes()),
    }
}

/// The `seq`s the faulty sink recorded in `<dir>/written.jsonl`, in the order it
/// wrote them (none when it wrote nothing).
pub fn faulty_sink_written(dir: &Path) -> Vec<u64> {
    let path = dir.join("written.jsonl");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("reading {}: {e}", path.display()),
    };
    text.lines().map(|line| seq_of(line.as_bytes())).collect()
}
