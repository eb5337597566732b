//! The sink loop: one guest instance, batch after batch.
//!
//! ```text
//!   read ──none──▶ wait poll_interval ─────────────────────────────────────────────────┐
//!    │                                                                                  │
//!  batch ─▶ transform ─▶ write ─ack──────────────────────────────▶ store the offset ────┤
//!             │  │ all dropped ──────────────────────────────────────────▲              │
//!             │  │ undecodable ─▶ dead letters (with the written ones) ──┤              │
//!             │  │        │ reject(poison) ─▶ dead letters ──ok──────────┤              │
//!             │  │        │ unwritable ─▶ split in halves, write each ───┘              │
//!             │  │        │ retry ─▶ back off, write the same messages again            │
//!             │ fail ─▶ back off, transform the same batch again                        │
//! ```
//!
//! The rules it keeps: the offset past a batch is stored only after the guest
//! answered for every message of it, and every message it could never write was
//! delivered to the dead letters; until then the offset does not move, so a trap, a
//! crash or a restart hands the same messages again. There is one batch in the
//! guest's hands at a time. A rejection with nowhere to put the rejected messages
//! (no `dead_letters` configured) is a retry: nothing is ever silently dropped.
//! Shutdown is looked at between calls, so a call in flight always returns. A record
//! the connector's transforms drop is not written, and the offset moves past it
//! with the rest of its batch. A record its stream's schema cannot decode (or a
//! converting transform cannot convert) is never handed to the guest: it goes to the
//! dead letters as it was stored, with why; with none configured the batch is tried
//! again after a backoff, as a rejection is.
//!
//! A stored message the reader cannot hand over as it is (see `Unreadable`) never
//! reaches the guest: it goes to the dead letters, with its reason, and the offset
//! moves past it; with no dead letters its partition stops there, the error saying
//! how an operator skips it, while the other partitions go on.

use std::borrow::Cow;
use std::ops::Range;

use super::SinkConnector;
use super::input::{Budget, Read, Reader, SinkBatch, Unreadable, end_of};
use crate::exit::{Exit, FailureStreak};
use crate::shutdown::Shutdown;
use crate::status::{Polled, Reporter, Stage, Written};
use ferry_contract::settings::Backoff;
use ferry_contract::wit::sink_export::WriteResult;
use ferry_runtime::SinkInstance;

pub(super) struct SinkLoop<'a> {
    pub connector: &'a SinkConnector,
    pub instance: &'a mut SinkInstance,
    pub reader: &'a mut dyn Reader,
    pub status: &'a Reporter,
    pub shutdown: Shutdown,
    /// Batches this instance settled: a restart after progress starts its backoff
    /// afresh.
    pub settled: u64,
}

/// What became of one part of a batch, after the guest answered for it.
enum Step {
    /// Written.
    Written,
    /// These messages (indexes in the batch) can never be written, for these reasons.
    Dead(Vec<(usize, String)>),
    /// Something in this part can never be written: try each half alone.
    Split,
    /// Write it again later.
    Retry(String),
}

impl SinkLoop<'_> {
    pub async fn run(&mut self) -> Exit {
        let settings = self.connector.settings;
        let mut backoff = Backoff::new(settings.retry_backoff);
        let mut streak = FailureStreak::new(settings.max_consecutive_nacks, "retries or read failures");
        let budget =
            Budget { messages: settings.batch_length, bytes: self.connector.sandbox.limits.max_batch_bytes.bytes() };

        while !self.shutdown.is_requested() {
            // 1. Read the next batch.
            let batch = match self.status.polled(self.reader.next(budget)).await {
                Ok(Some(Read::Batch(batch, checksums))) => {
                    self.instance.hand_checksums(checksums);
                    batch
                }
                Ok(Some(Read::Unreadable(unreadable))) => {
                    if let Err(exit) = self.settle_unreadable(unreadable, &mut backoff, &mut streak).await {
                        return exit;
                    }
                    continue;
                }
                Ok(None) => {
                    self.status.idle();
                    self.shutdown.pause(settings.poll_interval).await;
                    continue;
                }
                Err(error) => {
                    let detail = format!("cannot read the input: {error}");
                    self.status.input_failed(&detail);
                    if let Some(exit) = streak.failed(&detail) {
                        return exit;
                    }
                    self.shutdown.pause(backoff.next_delay()).await;
                    continue;
                }
            };

            // 2 to 4. Transform, write, store the offset.
            let status = self.status;
            if let Err(exit) = status.timed(Stage::Total, self.settle(&batch, &mut backoff, &mut streak)).await {
                return exit;
            }
            self.settled += 1;
            streak.reset();
            backoff.reset();
        }
        Exit::Shutdown
    }

    /// Transform `batch`, write it, dead-letter what can never be written, and store
    /// the offset past it (past what was read: dropped records too).
    async fn settle(
        &mut self,
        batch: &SinkBatch,
        backoff: &mut Backoff,
        streak: &mut FailureStreak,
    ) -> Result<(), Exit> {
        // 2. Transform it: what the guest gets, possibly nothing, and what cannot be
        //    read as its schema says.
        let (transformed, dropped, unreadable) = self.transform(batch, backoff, streak).await?;

        // 3. Write it, and dead-letter what can never be written.
        let mut dead = Vec::new();
        if !transformed.messages.is_empty() {
            dead = self.write(&transformed, backoff, streak).await?;
            self.deliver_dead_letters(&transformed, &dead, backoff, streak).await?;
        }
        self.deliver_dead_letters(batch, &unreadable, backoff, streak).await?;

        // 4. Store the offset past it: past what was read, dropped records too.
        let generation = self.commit(batch, backoff, streak).await?;
        // Bytes written by the guest: a dead letter's were delivered elsewhere.
        let bytes = transformed
            .messages
            .iter()
            .enumerate()
            .filter(|(index, _)| dead.binary_search_by_key(index, |(at, _)| *at).is_err())
            .map(|(_, m)| m.payload.len())
            .sum();
        let at = Written {
            stream: &batch.stream,
            topic: &batch.topic,
            partition: batch.partition,
            end: end_of(batch),
            messages: transformed.messages.len() + unreadable.len(),
            dead: dead.len() + unreadable.len(),
            generation,
        };
        self.status.filtered(dropped);
        self.status.written(at, bytes);
        Ok(())
    }

    /// `batch` after the connector's transforms (the same batch without any), how
    /// many records they dropped, and the records its schemas cannot read (indexes
    /// in `batch`, and why) for the dead letters; a failure, or such records with no
    /// dead letters to take them, is tried again after a backoff.
    #[allow(clippy::type_complexity)]
    async fn transform<'b>(
        &mut self,
        batch: &'b SinkBatch,
        backoff: &mut Backoff,
        streak: &mut FailureStreak,
    ) -> Result<(Cow<'b, SinkBatch>, usize, Vec<(usize, String)>), Exit> {
        let Some(chain) = self.connector.transforms.clone() else { return Ok((Cow::Borrowed(batch), 0, Vec::new())) };
        loop {
            let problem = match self.status.timed(Stage::Transform, chain.batch(batch)).await {
                Ok(transformed) if transformed.rejected.is_empty() || self.connector.dead_letters.is_some() => {
                    return Ok((Cow::Owned(transformed.records), transformed.dropped, transformed.rejected));
                }
                Ok(transformed) => {
                    let (index, problem) = &transformed.rejected[0];
                    let offset = batch.messages[*index].offset;
                    format!(
                        "the message at offset {offset} is {problem} ({} such in the batch), and no dead_letters are \
                         configured to take it",
                        transformed.rejected.len()
                    )
                }
                Err(error) => error.to_string(),
            };
            self.retry_later(problem, backoff, streak).await?;
        }
    }

    /// A message that cannot be handed to the guest: to the dead letters, and the
    /// offset past it; or, with none configured, said, its partition held where it is.
    async fn settle_unreadable(
        &mut self,
        unreadable: Unreadable,
        backoff: &mut Backoff,
        streak: &mut FailureStreak,
    ) -> Result<(), Exit> {
        let Unreadable { batch, reason, skip } = &unreadable;
        let offset = unreadable.offset();
        let place = (batch.stream.as_str(), batch.topic.as_str(), batch.partition, offset);
        if self.connector.dead_letters.is_none() {
            let detail = format!(
                "{reason}; with no dead_letters configured to take it, nothing more of that partition is read past \
                 it (the others go on): {skip}"
            );
            self.status.unreadable(place, &detail);
            return Ok(());
        }
        self.status.unreadable(place, &format!("{reason}; it goes to the dead letters"));
        let dead = [(0, reason.clone())];
        self.deliver_dead_letters(batch, &dead, backoff, streak).await?;
        let generation = self.commit(batch, backoff, streak).await?;
        let at = Written {
            stream: &batch.stream,
            topic: &batch.topic,
            partition: batch.partition,
            end: end_of(batch),
            messages: 1,
            dead: 1,
            generation,
        };
        self.status.written(at, 0);
        self.settled += 1;
        streak.reset();
        backoff.reset();
        Ok(())
    }

    /// Hand `batch` to the guest, and then the parts of it the guest could not write,
    /// until every message is written or known to be unwritable; the latter, with
    /// their reasons, are what this returns.
    async fn write(
        &mut self,
        batch: &SinkBatch,
        backoff: &mut Backoff,
        streak: &mut FailureStreak,
    ) -> Result<Vec<(usize, String)>, Exit> {
        let mut dead = Vec::new();
        // Parts still to write, the next one last: at first, the whole batch.
        let mut parts: Vec<Range<usize>> = Vec::new();
        parts.push(0..batch.messages.len());
        while let Some(part) = parts.pop() {
            let messages =
                if part.len() == batch.messages.len() { Cow::Borrowed(batch) } else { Cow::Owned(slice(batch, &part)) };
            loop {
                let answer =
                    self.status.timed(Stage::Write, self.instance.write(&messages)).await.map_err(Exit::Trapped)?;
                match self.judge(answer, &part) {
                    Step::Written => break,
                    Step::Dead(poison) => {
                        dead.extend(poison);
                        break;
                    }
                    Step::Split => {
                        let middle = part.start + part.len() / 2;
                        parts.push(middle..part.end);
                        parts.push(part.start..middle);
                        break;
                    }
                    Step::Retry(reason) => {
                        self.status.retried(&reason);
                        if let Some(exit) = streak.failed(&format!("retry: {reason}")) {
                            return Err(exit);
                        }
                        self.shutdown.pause(backoff.next_delay()).await;
                        if self.shutdown.is_requested() {
                            return Err(Exit::Shutdown);
                        }
                    }
                }
            }
        }
        dead.sort_unstable_by_key(|(index, _)| *index);
        Ok(dead)
    }

    /// What the guest's answer about the messages of `batch` in `part` means.
    fn judge(&self, answer: WriteResult, part: &Range<usize>) -> Step {
        let dead_letters = self.connector.dead_letters.is_some();
        match answer {
            WriteResult::Ack => Step::Written,
            WriteResult::Retry(reason) => Step::Retry(reason),
            WriteResult::Reject(rejected) if rejected.is_empty() => Step::Written,
            WriteResult::Reject(rejected) => {
                if let Some(wrong) = rejected.iter().find(|r| r.index as usize >= part.len()) {
                    return Step::Retry(format!(
                        "the sink rejected message {} of a batch of {} (a bug in the sink)",
                        wrong.index,
                        part.len()
                    ));
                }
                if !dead_letters {
                    return Step::Retry(format!(
                        "the sink can never write {} message(s) (the first: {}), and no dead_letters are configured \
                         to take them",
                        rejected.len(),
                        rejected[0].reason
                    ));
                }
                Step::Dead(rejected.into_iter().map(|r| (part.start + r.index as usize, r.reason)).collect())
            }
            WriteResult::Unwritable(reason) if !dead_letters => Step::Retry(format!(
                "the sink can never write some message of the batch ({reason}), and no dead_letters are configured \
                 to take it"
            )),
            WriteResult::Unwritable(reason) if part.len() == 1 => Step::Dead(vec![(part.start, reason)]),
            WriteResult::Unwritable(_) => Step::Split,
        }
    }

    /// Deliver the dead letters of `batch`, trying again until they are delivered.
    async fn deliver_dead_letters(
        &mut self,
        batch: &SinkBatch,
        dead: &[(usize, String)],
        backoff: &mut Backoff,
        streak: &mut FailureStreak,
    ) -> Result<(), Exit> {
        let Some(dead_letters) = &self.connector.dead_letters else { return Ok(()) };
        if dead.is_empty() {
            return Ok(());
        }
        let timeout = self.connector.settings.delivery_timeout;
        loop {
            let delivery = dead_letters.deliver(&self.connector.key, batch, dead);
            let problem = match self.status.timed(Stage::DeadLetters, tokio::time::timeout(timeout, delivery)).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!("it took longer than {timeout:?}"),
            };
            let reason = format!("cannot deliver {} dead letter(s): {problem}", dead.len());
            self.retry_later(reason, backoff, streak).await?;
        }
    }

    /// Store the offset past `batch`, trying again until it is stored.
    async fn commit(
        &mut self,
        batch: &SinkBatch,
        backoff: &mut Backoff,
        streak: &mut FailureStreak,
    ) -> Result<Option<u64>, Exit> {
        loop {
            match self.status.timed(Stage::StateSave, self.reader.commit(batch)).await {
                Ok(generation) => return Ok(generation),
                Err(error) => {
                    let reason = format!("written, but the offset was not stored: {error}");
                    self.retry_later(reason, backoff, streak).await?;
                }
            }
        }
    }

    /// Something after the guest's answer failed: say so, count it, and back off.
    async fn retry_later(
        &mut self,
        reason: String,
        backoff: &mut Backoff,
        streak: &mut FailureStreak,
    ) -> Result<(), Exit> {
        self.status.input_failed(&reason);
        if let Some(exit) = streak.failed(&reason) {
            return Err(exit);
        }
        self.shutdown.pause(backoff.next_delay()).await;
        if self.shutdown.is_requested() { Err(Exit::Shutdown) } else { Ok(()) }
    }
}

/// The messages of `batch` in `part`, as a batch of their own.
fn slice(batch: &SinkBatch, part: &Range<usize>) -> SinkBatch {
    SinkBatch {
        stream: batch.stream.clone(),
        topic: batch.topic.clone(),
        partition: batch.partition,
        messages: batch.messages[part.clone()].to_vec(),
    }
}

impl Polled for Read {
    fn messages(&self) -> usize {
        match self {
            Read::Batch(batch, _) => batch.messages.len(),
            Read::Unreadable(unreadable) => unreadable.batch.messages.len(),
        }
    }
}
