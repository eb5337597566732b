//! Sink connectors: the loop that hands them what they read, and each instance's
//! life. A sibling of `crate::source`: the same runtime, sandbox, supervisor, status
//! and state store, the other direction.
//!
//! * [`sink_loop`]: one instance, batch after batch: read, transform, write, store
//!   the offset;
//!   retry, dead-letter, bisect, back off.
//! * [`round`]: one instance's life, from the committed positions to the end of its
//!   loop; the shared supervisor (`crate::supervisor`) runs round after round.
//! * [`input`]: where the messages come from (the local log, an Iggy server).
//! * [`dead_letters`]: where messages the guest can never write go.

pub mod dead_letters;
pub mod input;
mod round;
mod sink_loop;

use std::sync::Arc;
use std::time::Duration;

pub use dead_letters::DeadLetters;
use ferry_config::{BackoffConfig, ConnectorConfig, SinkConfig};
use ferry_runtime::{PendingComponent, Sandbox, SinkWorld};
pub use input::{Budget, Input, InputError, OpenError, Reader};

/// Everything needed to run one sink connector.
#[derive(Clone)]
pub struct SinkConnector {
    pub key: Arc<str>,
    /// The tenant it belongs to, if any.
    pub tenant: Option<Arc<str>>,
    /// Its component, compiled or on its way.
    pub component: PendingComponent<SinkWorld>,
    /// The guest's `plugin_config`, as the JSON its `open` receives.
    pub plugin_config: String,
    pub settings: SinkSettings,
    /// Its limits and grants.
    pub sandbox: Sandbox,
    /// What it reads.
    pub input: Arc<dyn Input>,
    /// Its transforms, between the input and the guest; none without any.
    pub transforms: Option<Arc<crate::transform::Chain>>,
    /// Where what it can never write goes; without it, such messages are retried.
    pub dead_letters: Option<DeadLetters>,
}

/// The knobs of the loop and the supervisor.
#[derive(Debug, Clone, Copy)]
pub struct SinkSettings {
    pub poll_interval: Duration,
    /// The most messages in one batch.
    pub batch_length: u32,
    /// How long a delivery of dead letters may take.
    pub delivery_timeout: Duration,
    pub max_consecutive_nacks: u32,
    pub retry_backoff: BackoffConfig,
    pub restart_backoff: BackoffConfig,
    /// Each batch logged at info level.
    pub verbose: bool,
    /// A line per settled batch with its stage times (Iggy's `benchmark`).
    pub benchmark: bool,
}

impl SinkSettings {
    pub fn from_config(config: &SinkConfig) -> Self {
        SinkSettings {
            poll_interval: config.poll_interval(),
            batch_length: config.batch_length,
            delivery_timeout: config.delivery_timeout(),
            max_consecutive_nacks: config.max_consecutive_nacks(),
            retry_backoff: config.retry_backoff,
            restart_backoff: config.restart_backoff(),
            verbose: config.verbose(),
            benchmark: config.benchmark,
        }
    }
}
