//! The source loop: one guest instance, batch after batch.
//!
//! ```text
//!   poll ──none──▶ wait poll_interval ──────────────────────────────────────────┐
//!    │                                                                           │
//!  batch ─▶ transform ─▶ deliver ─ok─▶ commit staged cursor ─ok─▶ ACK ───────────┤
//!               │           │                   │                                │
//!             fail      fail/timeout          fail                               │
//!               └───────────┴─────────▶ NACK ◀──┘ ─▶ back off ───────────────────┘
//! ```
//!
//! The rules it keeps: the cursor is committed only after the delivery succeeded;
//! ACK only after both; a NACK leaves the committed cursor where it was; `poll` is
//! never called while a batch is outstanding (the next poll comes only after
//! `on-batch-result`). Shutdown is looked at only between batches, so a batch in
//! flight always settles. The delivery carries the staged cursor too, for a target
//! that keeps it in the same transaction as the batch (the local log does, which makes
//! it exactly-once); the commit to the cursor store is still what an ACK waits for.
//! A record the connector's transforms drop is not delivered, and the cursor moves
//! past it with the rest of its batch; one its stream's schema cannot encode (or a
//! converting transform cannot convert) makes the batch a NACK `rejected` naming it.

use std::sync::Arc;

use super::SourceConnector;
use crate::batch::{self, IdSource};
use crate::delivery::{Delivery, DeliveryError, StagedCursor};
use crate::exit::{Exit, FailureStreak};
use crate::shutdown::Shutdown;
use crate::status::{Polled, Reporter, Stage};
use ferry_contract::settings::Backoff;
use ferry_contract::{Batch, BatchResult, Nack, NackReason};
use ferry_runtime::{CallError, SourceInstance};

pub(super) struct SourceLoop<'a> {
    pub connector: &'a SourceConnector,
    pub instance: &'a mut SourceInstance,
    pub status: &'a Reporter,
    pub shutdown: Shutdown,
    /// The committed cursor: what the guest produces from, and what the ids of its
    /// next batch derive from.
    pub committed: Option<Vec<u8>>,
    /// The committed cursor's generation (0 before the first commit).
    pub generation: u64,
    /// Batches acknowledged by this instance: a restart after progress starts its
    /// backoff afresh.
    pub acked: u64,
}

impl SourceLoop<'_> {
    pub async fn run(&mut self) -> Exit {
        let settings = self.connector.settings;
        let mut backoff = Backoff::new(settings.nack_backoff);
        let mut streak = FailureStreak::new(settings.max_consecutive_nacks, "NACKs or guest errors");

        while !self.shutdown.is_requested() {
            // 1. Poll.
            let batch = match self.status.polled(self.instance.poll()).await {
                Ok(Some(batch)) => batch,
                Ok(None) => {
                    self.status.idle();
                    self.shutdown.pause(settings.poll_interval).await;
                    continue;
                }
                Err(CallError::Failed { message, .. }) => {
                    self.status.guest_error(&message);
                    if let Some(exit) = streak.failed(&format!("guest error: {message}")) {
                        return exit;
                    }
                    self.shutdown.pause(backoff.next_delay()).await;
                    continue;
                }
                Err(trap) => return Exit::Trapped(trap),
            };
            let id = batch.id;

            // 2 and 3. Deliver, then commit.
            let status = self.status;
            let result = status.timed(Stage::Total, self.settle(batch)).await;

            // 4. ACK or NACK.
            if let Err(trap) = self.status.timed(Stage::Ack, self.instance.on_batch_result(id, &result)).await {
                return Exit::Trapped(trap);
            }
            match result {
                BatchResult::Ack => {
                    self.acked += 1;
                    streak.reset();
                    backoff.reset();
                }
                BatchResult::Nack(nack) => {
                    if let Some(exit) = streak.failed(&format!("NACK {}: {}", nack.reason.as_str(), nack.detail)) {
                        return exit;
                    }
                    // 5. Back off before the guest produces the batch again.
                    self.shutdown.pause(backoff.next_delay()).await;
                }
            }
        }
        Exit::Shutdown
    }

    /// Deliver the batch and commit its cursor; the verdict for `on-batch-result`.
    async fn settle(&mut self, batch: Batch) -> BatchResult {
        let id = batch.id;
        let nack = |reason: NackReason, detail: String| {
            self.status.nacked(id, reason, &detail);
            BatchResult::Nack(Nack { reason, detail })
        };
        let (mut messages, staged_state) = match batch::admit(batch, &self.connector.sandbox.limits) {
            Ok(admitted) => admitted,
            Err(rule) => return nack(NackReason::Rejected, rule),
        };
        let ids = match staged_state {
            Some(_) => IdSource::Cursor { connector: &self.connector.key, committed_before: self.committed.as_deref() },
            None => IdSource::Random,
        };
        batch::assign_ids(&mut messages, ids);
        let mut dropped = 0;
        if let Some(chain) = &self.connector.transforms {
            match self.status.timed(Stage::Transform, chain.messages(messages)).await {
                Ok(transformed) if !transformed.rejected.is_empty() => {
                    let (index, problem) = &transformed.rejected[0];
                    let more = transformed.rejected.len() - 1;
                    return nack(
                        NackReason::Rejected,
                        format!("record {index} of the batch is {problem} ({more} more like it)"),
                    );
                }
                Ok(transformed) => (messages, dropped) = (transformed.records, transformed.dropped),
                Err(error) => return nack(NackReason::DeliveryFailed, error.to_string()),
            }
            // What the chain made (fields added, a component's answers, a schema's
            // encoding) is held to the limits the guest's batch was held to.
            if let Err(rule) = batch::check(&messages, None, &self.connector.sandbox.limits) {
                return nack(NackReason::Rejected, format!("after the connector's transforms, {rule}"));
            }
        }
        let (count, bytes) = (messages.len(), messages.iter().map(|m| m.payload.len()).sum());
        let delivery = Delivery {
            connector: self.connector.key.clone(),
            streams: self.connector.streams.clone(),
            messages: Arc::new(messages),
            cursor: staged_state.as_ref().map(|state| StagedCursor {
                lineage: self.connector.cursor.lineage(),
                generation: self.generation + 1,
                state: state.clone(),
            }),
        };
        let timeout = self.connector.settings.delivery_timeout;
        let delivered = tokio::time::timeout(timeout, self.connector.target.deliver(delivery));
        let receipt = match self.status.timed(self.connector.target.stage(), delivered).await {
            Ok(Ok(receipt)) => receipt,
            Ok(Err(DeliveryError::Failed(detail))) => return nack(NackReason::DeliveryFailed, detail),
            Ok(Err(DeliveryError::Rejected(detail))) => return nack(NackReason::Rejected, detail),
            Err(_) => return nack(NackReason::TimedOut, format!("delivery took longer than {timeout:?}")),
        };
        let generation = match staged_state {
            None => None,
            Some(state) => {
                match self.status.timed(Stage::StateSave, self.connector.cursor.commit(state.clone(), receipt)).await {
                    Ok(committed) => {
                        self.committed = Some(state);
                        self.generation = committed.generation;
                        Some(committed.generation)
                    }
                    Err(error) => {
                        return nack(
                            NackReason::StateSaveFailed,
                            format!("delivered, but the cursor was not saved: {error}"),
                        );
                    }
                }
            }
        };
        self.status.filtered(dropped);
        self.status.acked(id, count, bytes, generation);
        BatchResult::Ack
    }
}

impl Polled for Batch {
    fn messages(&self) -> usize {
        self.messages.len() + batch::packed_count(&self.packed)
    }
}
