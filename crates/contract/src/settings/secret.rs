//! Secrets the operator gives the host to hand on (a password, a token): never
//! written in the config itself, but read from where it says, an environment
//! variable or a file. Errors name where a secret was looked for, never a byte of it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::files;

/// The most a secret's or a token's file may hold: a secret is a line, not a document.
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// Where the host reads a secret it hands to the guest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum SecretSource {
    /// An environment variable of the host.
    Env(String),
    /// A file (relative to the config file); one trailing newline is dropped.
    File(PathBuf),
}

impl SecretSource {
    /// The secret's value: the variable's, or the file's without one trailing
    /// newline. The error names the variable or the file, never a byte of the value.
    pub fn read(&self) -> Result<String, String> {
        match self {
            SecretSource::Env(variable) => {
                std::env::var(variable).map_err(|_| format!("the environment variable {variable} is not set"))
            }
            SecretSource::File(path) => {
                let text = read_secret_file(path)?;
                Ok(text.strip_suffix('\n').unwrap_or(&text).to_string())
            }
        }
    }
}

/// Read a file holding a secret (`secrets.x = { file = ... }`, `token_file`): a
/// regular file, at most [`MAX_SECRET_BYTES`], UTF-8. The error names the path and
/// the problem, never a byte of what the file holds.
pub fn read_secret_file(path: &Path) -> Result<String, String> {
    files::read_regular_text(path, MAX_SECRET_BYTES, "secret", "the limit for a secret's file")
        .map_err(|e| format!("{}: {}", e.path.display(), e.problem))
}
