//! A connector's side of the host's `nats` import: the import's errors in words for
//! an operator. (`Connection::open` and `publish` are the import's own, in
//! [`crate::bindings::iggy::connector::nats`].)

use crate::bindings::iggy::connector::nats::Error as NatsError;

/// The import's error, for people.
pub fn describe(error: &NatsError) -> String {
    match error {
        NatsError::NotGranted(detail) => format!("not granted ({detail})"),
        NatsError::Connection(detail) => format!("no connection ({detail})"),
        NatsError::TimedOut(detail) => format!("timed out ({detail})"),
    }
}
