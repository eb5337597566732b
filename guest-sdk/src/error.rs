//! The error a connector reports to the host: a message for the operator's log.

use std::fmt;

/// An error from a connector. The host logs its message under the connector's key.
///
/// Any `std::error::Error` converts into it, so `?` works on the usual suspects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
}

impl Error {
    /// An error with this message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Error { message: message.to_string() }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prefix the message with what was being done, as in `reading config: ...`.
    pub fn context(self, what: impl fmt::Display) -> Self {
        Error { message: format!("{what}: {}", self.message) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        Error::msg(error)
    }
}

impl From<Error> for crate::bindings::iggy::connector::types::Error {
    fn from(error: Error) -> Self {
        Self { message: error.message }
    }
}
