//! A file's complete lines made records: as they are, as JSON values, or as the
//! JSON objects of CSV rows under the file's header. A line without its newline yet
//! is left for a later poll.

use ferry_guest::{Error, Fields, HeaderValue, PackedMessages};
use serde_json::{Map, Value};

use crate::config::Format;

/// Where a line is, for its headers and for errors.
pub struct At<'a> {
    pub file: &'a str,
    pub offset: u64,
}

impl At<'_> {
    fn error(&self, problem: impl std::fmt::Display) -> Error {
        Error::msg(format!("`{}` at byte {}: {problem}", self.file, self.offset))
    }
}

/// Append the record of `line` (without its newline) to `batch` with `headers`,
/// unless the line holds none (a blank JSON line); an error names the file and the
/// byte. Written straight into the batch's buffer: no message of its own per line.
pub fn record(
    format: Format,
    header: Option<&[String]>,
    line: &[u8],
    at: &At,
    headers: &[(String, HeaderValue)],
    batch: &mut PackedMessages,
) -> Result<(), Error> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let fields = Fields { headers, ..Fields::default() };
    match format {
        Format::Lines => batch.push_with(fields, |payload| payload.extend_from_slice(line)),
        Format::JsonLines => {
            if line.iter().all(u8::is_ascii_whitespace) {
                return Ok(());
            }
            serde_json::from_slice::<serde::de::IgnoredAny>(line).map_err(|e| at.error(format!("not JSON ({e})")))?;
            batch.push_with(fields, |payload| payload.extend_from_slice(line));
        }
        Format::Csv => {
            let header = header.expect("a CSV file's header is read before its rows");
            let values = self::fields(line).map_err(|e| at.error(e))?;
            if values.len() != header.len() {
                return Err(at.error(format!("{} field(s), and the header names {}", values.len(), header.len())));
            }
            let row: Map<String, Value> = header.iter().cloned().zip(values.into_iter().map(Value::String)).collect();
            batch.push_with(fields, |payload| serde_json::to_writer(payload, &row).expect("a JSON object serializes"));
        }
    }
    Ok(())
}

/// The fields of one CSV line.
pub fn fields(line: &[u8]) -> Result<Vec<String>, String> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(line);
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => Ok(record.iter().map(str::to_string).collect()),
        Ok(false) => Ok(Vec::new()),
        Err(e) => Err(format!("not a CSV row ({e})")),
    }
}
