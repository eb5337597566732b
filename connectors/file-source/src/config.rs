//! The connector's `plugin_config`, checked: every mistake is an error that names
//! the key, before a file is read.

use std::path::PathBuf;

use ferry_guest::Error;
use serde::Deserialize;

/// `plugin_config` as the operator writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    path: String,
    #[serde(default)]
    format: Format,
    #[serde(default = "default_batch_size")]
    batch_size: usize,
    #[serde(default = "default_max_line_bytes")]
    max_line_bytes: usize,
    #[serde(default)]
    start_at: StartAt,
}

/// How a file's lines become records.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Each line, as it is (without its newline).
    #[default]
    Lines,
    /// Each line a JSON value; a line that is not is an error naming it.
    JsonLines,
    /// The first line names the columns; each later line is a JSON object of them.
    Csv,
}

/// Where a file first seen is read from.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StartAt {
    #[default]
    Beginning,
    /// Its end as it is when first seen: only lines written later.
    End,
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The directory holding the files (the literal part of `path`).
    pub directory: PathBuf,
    /// The file names to read (the last part of `path`).
    pub pattern: glob::Pattern,
    pub format: Format,
    pub batch_size: usize,
    pub max_line_bytes: usize,
    pub start_at: StartAt,
}

fn default_batch_size() -> usize {
    1000
}

fn default_max_line_bytes() -> usize {
    1024 * 1024
}

/// The most records a batch may hold (the host's own bound is 10,000 messages).
const MAX_BATCH_SIZE: usize = 10_000;

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        Config::check(raw).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        let path = PathBuf::from(&raw.path);
        let (Some(directory), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
            return Err(Error::msg(format!(
                "plugin_config.path {:?} names no files: write a directory and a file-name pattern, `/logs/*.log`",
                raw.path
            )));
        };
        let wild = |part: &str| part.contains(['*', '?', '[']);
        if directory.to_str().is_none_or(wild) {
            return Err(Error::msg(format!(
                "plugin_config.path {:?}: only the file name may hold wildcards; the directory is read as it is",
                raw.path
            )));
        }
        let pattern = glob::Pattern::new(name)
            .map_err(|e| Error::msg(format!("plugin_config.path {:?}: not a glob pattern: {e}", raw.path)))?;
        if raw.batch_size == 0 || raw.batch_size > MAX_BATCH_SIZE {
            return Err(Error::msg(format!(
                "plugin_config.batch_size {} is not within 1 to {MAX_BATCH_SIZE}",
                raw.batch_size
            )));
        }
        if raw.max_line_bytes == 0 {
            return Err(Error::msg("plugin_config.max_line_bytes must be at least 1"));
        }
        let directory = if directory.as_os_str().is_empty() { PathBuf::from(".") } else { directory.to_path_buf() };
        Ok(Config {
            directory,
            pattern,
            format: raw.format,
            batch_size: raw.batch_size,
            max_line_bytes: raw.max_line_bytes,
            start_at: raw.start_at,
        })
    }
}
