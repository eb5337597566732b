//! Batches beyond the host's limits: each one is well formed, just too big, so the
//! host must refuse it (NACK) rather than deliver it or choke on it.
//!
//! Their records carry `"oversized":true`, so a test can tell if one ever reached
//! the log.

use ferry_guest::{Batch, Message};

use crate::Cursor;

pub enum Oversize {
    /// `n` messages in one batch.
    Messages { n: u64 },
    /// One message of `bytes` bytes.
    Message { bytes: u64 },
    /// `n` messages of `bytes` bytes each.
    Batch { n: u64, bytes: u64 },
    /// Ordinary messages, and a staged cursor of `bytes` bytes.
    State { bytes: u64 },
}

impl Oversize {
    /// The oversized batch after `next_seq`; `per_batch` is the ordinary batch size.
    pub fn batch(&self, next_seq: u64, per_batch: u64) -> Batch<Cursor> {
        match *self {
            Oversize::Messages { n } => records(next_seq, n, 0),
            Oversize::Message { bytes } => records(next_seq, 1, bytes),
            Oversize::Batch { n, bytes } => records(next_seq, n, bytes),
            Oversize::State { bytes } => {
                let mut batch = records(next_seq, per_batch, 0);
                batch.next.padding = "x".repeat(bytes as usize);
                batch
            }
        }
    }
}

/// `n` records from `next_seq`, each padded to at least `bytes` bytes.
fn records(next_seq: u64, n: u64, bytes: u64) -> Batch<Cursor> {
    let messages = (next_seq..next_seq + n).map(|seq| Message::new(padded(seq, bytes as usize))).collect();
    Batch::new(messages, Cursor::at(next_seq + n))
}

fn padded(seq: u64, bytes: usize) -> String {
    let bare = format!("{{\"seq\":{seq},\"oversized\":true,\"pad\":\"\"}}");
    let pad = "x".repeat(bytes.saturating_sub(bare.len()));
    format!("{{\"seq\":{seq},\"oversized\":true,\"pad\":\"{pad}\"}}")
}
