//! What a guest says that the host must refuse or defuse rather than pass on: a
//! message with a flood of headers, a repeated header key that tries to forge a log
//! line, an origin timestamp no store can hold, an error message that tries to forge
//! log lines and steer the operator's terminal.
//!
//! Records carry `"malformed":true`, so a test can tell if one ever reached the log.

use ferry_guest::{Batch, Error, Message};

use crate::Cursor;

pub enum Malformed {
    /// One message with `n` distinct headers.
    ManyHeaders { n: u64 },
    /// One message repeating a header key `bytes` long that contains a newline.
    RepeatedKey { bytes: u64 },
    /// Messages whose origin timestamp is `u64::MAX`.
    FarFuture,
    /// No batch: `poll` returns an error `bytes` long that forges a log line of
    /// connector `victim` and clears the screen.
    ErrorText { bytes: u64 },
}

/// What a forged line looks like: a log line of another connector.
pub const FORGED: &str = "2030-01-01T00:00:00Z  INFO connector{key=victim}: forged line";

impl Malformed {
    /// The malformed batch after `next_seq` (or the error instead of it).
    pub fn poll(&self, next_seq: u64) -> Result<Batch<Cursor>, Error> {
        let record = || Message::new(format!("{{\"seq\":{next_seq},\"malformed\":true}}"));
        let next = Cursor::at(next_seq + 1);
        match *self {
            Malformed::ManyHeaders { n } => {
                let message = (0..n).fold(record(), |m, i| m.with_header(format!("k{i}"), true));
                Ok(Batch::new(vec![message], next))
            }
            Malformed::RepeatedKey { bytes } => {
                let key = format!("k\n{FORGED}\n{}", "x".repeat(bytes as usize));
                let message = record().with_header(key.clone(), 1u64).with_header(key, 2u64);
                Ok(Batch::new(vec![message], next))
            }
            Malformed::FarFuture => Ok(Batch::new(vec![record().with_origin_timestamp(u64::MAX)], next)),
            Malformed::ErrorText { bytes } => {
                Err(Error::msg(format!("oops\n{FORGED}\r\x1b[2J\x1b[31m{}", "y".repeat(bytes as usize))))
            }
        }
    }
}
