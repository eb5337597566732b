//! When a committed cursor is on disk: the one choice between speed and what a power
//! loss can take back. The configuration chooses it (`[state] sync`), the state store
//! keeps it.

use std::time::Duration;

/// When a committed cursor is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Before the commit returns (`synchronous=FULL`: its transaction is fsynced,
    /// together with whatever other connectors committed at the same time).
    EveryCommit,
    /// Within this long of the commit, while connectors commit, and when the state
    /// directory is closed (`synchronous=NORMAL`, and a checkpoint, which fsyncs, at
    /// most this often).
    Interval(Duration),
}
