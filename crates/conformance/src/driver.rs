//! A source instance driven as the source loop drives one, with the committed
//! cursor kept by the kit in memory: poll (asked again a bounded number of times
//! while it has nothing), ACK (the staged cursor becomes the committed one) or NACK
//! (it does not), close; or simply dropped, as a trap or a crash of the host loses
//! an instance.

use std::fmt;

use super::Subject;
use ferry_contract::{Batch, BatchResult, Message, Nack, NackReason};
use ferry_engine::batch;
use ferry_runtime::{CallError, SourceInstance, SourceWorld};

/// How many polls in a row may return nothing (or an error) before the kit gives
/// up waiting for a batch.
pub const MAX_POLLS: u32 = 20;

/// Why a scenario could not go on.
pub enum Stop {
    /// A call trapped, or `open` returned an error.
    Broke(CallError),
    /// The source produced nothing within [`MAX_POLLS`] polls; the text says so.
    Dry(String),
}

impl From<CallError> for Stop {
    fn from(error: CallError) -> Self {
        Stop::Broke(error)
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Broke(error) => write!(f, "{error}"),
            Stop::Dry(why) => f.write_str(why),
        }
    }
}

/// A batch as the kit took it: its messages out of whichever form the guest sent
/// them in.
pub struct Polled {
    pub id: u64,
    pub messages: Vec<Message>,
    pub staged_state: Option<Vec<u8>>,
}

/// A source instance under test.
pub struct Source {
    instance: SourceInstance,
    /// The cursor the kit committed: what `open` got, then the staged cursor of
    /// every batch ACKed since.
    committed: Option<Vec<u8>>,
    /// The batch polled and not settled yet: its id and staged cursor.
    outstanding: Option<(u64, Option<Vec<u8>>)>,
    poll_interval: std::time::Duration,
    /// The connector's limits, which a packed batch is unpacked within.
    limits: ferry_config::Limits,
}

impl Subject<'_, SourceWorld> {
    /// A fresh instance, opened with `committed`.
    pub async fn open(&self, committed: Option<Vec<u8>>) -> Result<Source, CallError> {
        let mut instance = self.instance().await?;
        instance.open(&self.setup.plugin_config, committed.as_deref()).await?;
        Ok(Source {
            instance,
            committed,
            outstanding: None,
            poll_interval: self.setup.poll_interval,
            limits: self.setup.sandbox.limits.clone(),
        })
    }

    /// A fresh instance opened with no cursor, its first `batches` batches polled and
    /// ACKed: a source with a committed prefix.
    pub async fn advanced(&self, batches: usize) -> Result<Source, Stop> {
        let mut source = self.open(None).await?;
        for _ in 0..batches {
            source.poll().await?;
            source.ack().await?;
        }
        Ok(source)
    }

    /// A fresh instance opened with `committed`, and its first batch (outstanding).
    pub async fn first_batch(&self, committed: Option<Vec<u8>>) -> Result<(Source, Polled), Stop> {
        let mut source = self.open(committed).await?;
        let batch = source.poll().await?;
        Ok((source, batch))
    }

    /// A fresh instance with its first `acked` batches ACKed, and the batch after
    /// them (outstanding).
    pub async fn batch_after(&self, acked: usize) -> Result<(Source, Polled), Stop> {
        let mut source = self.advanced(acked).await?;
        let batch = source.poll().await?;
        Ok((source, batch))
    }
}

impl Source {
    pub fn committed(&self) -> Option<&[u8]> {
        self.committed.as_deref()
    }

    /// The next batch. A poll that returns nothing, or an error (which the host
    /// counts like a NACK and backs off from), is made again after the poll
    /// interval, up to [`MAX_POLLS`] polls.
    pub async fn poll(&mut self) -> Result<Polled, Stop> {
        assert!(self.outstanding.is_none(), "the kit polled with a batch outstanding (rule 2)");
        let mut last_error = None;
        for _ in 0..MAX_POLLS {
            match self.instance.poll().await {
                Ok(Some(batch)) => {
                    let Batch { id, messages, packed, staged_state } = batch;
                    self.outstanding = Some((id, staged_state.clone()));
                    // The kit compares messages, whichever form the guest sent them in.
                    return match batch::messages(messages, packed, &self.limits) {
                        Ok(messages) => Ok(Polled { id, messages, staged_state }),
                        Err(rule) => {
                            let message = format!("the host would refuse the batch (nack(rejected)): {rule}");
                            Err(Stop::Broke(CallError::Failed { call: "poll", message }))
                        }
                    };
                }
                Ok(None) => {}
                Err(CallError::Failed { message, .. }) => last_error = Some(message),
                Err(trap) => return Err(Stop::Broke(trap)),
            }
            tokio::time::sleep(self.poll_interval).await;
        }
        let mut why = format!("produced nothing within {MAX_POLLS} polls");
        if let Some(error) = last_error {
            why.push_str(&format!(" (the last poll returned an error: {error})"));
        }
        Err(Stop::Dry(why))
    }

    /// The outstanding batch was delivered and its cursor committed.
    pub async fn ack(&mut self) -> Result<(), CallError> {
        let (id, staged) = self.outstanding.take().expect("the kit settles only a batch it polled");
        if let Some(staged) = staged {
            self.committed = Some(staged);
        }
        self.instance.on_batch_result(id, &BatchResult::Ack).await
    }

    /// The outstanding batch was not acknowledged: the committed cursor stays.
    pub async fn nack(&mut self, reason: NackReason) -> Result<(), CallError> {
        let (id, _) = self.outstanding.take().expect("the kit settles only a batch it polled");
        let detail = format!("ferry test: nack({}) on purpose", reason.as_str());
        self.instance.on_batch_result(id, &BatchResult::Nack(Nack { reason, detail })).await
    }

    /// Settle the outstanding batch with an ACK, then close: how a scenario that
    /// got what it came for ends.
    pub async fn ack_and_close(mut self) -> Result<(), CallError> {
        self.ack().await?;
        self.close().await
    }

    /// Stop gracefully (rule 5): after this, nothing is called on the instance.
    pub async fn close(mut self) -> Result<(), CallError> {
        self.instance.close().await
    }
}
