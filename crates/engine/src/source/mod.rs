//! Source connectors: the loop that moves their batches, and each instance's life.
//!
//! * [`source_loop`]: one instance, batch after batch: poll, deliver, commit,
//!   ack / nack, back off. The heart of Ferry.
//! * [`round`]: one instance's life, from the committed cursor to the end of its
//!   loop; the shared supervisor (`crate::supervisor`) runs round after round,
//!   restarting after a trap or too many NACKs.

mod round;
mod source_loop;

use std::sync::Arc;
use std::time::Duration;

use crate::cursor::CursorStore;
use crate::delivery::Target;
use crate::transform::Chain;
use ferry_config::{BackoffConfig, SourceConfig, StreamConfig};
use ferry_runtime::{PendingComponent, Sandbox, SourceWorld};

/// Everything needed to run one source connector.
#[derive(Clone)]
pub struct SourceConnector {
    pub key: Arc<str>,
    /// The tenant it belongs to, if any.
    pub tenant: Option<Arc<str>>,
    /// Its component, compiled or on its way.
    pub component: PendingComponent<SourceWorld>,
    /// The guest's `plugin_config`, as the JSON its `open` receives.
    pub plugin_config: String,
    pub streams: Arc<[StreamConfig]>,
    pub settings: SourceSettings,
    /// Its limits and grants.
    pub sandbox: Sandbox,
    pub target: Arc<dyn Target>,
    /// Its transforms, between the guest and the target; none without any.
    pub transforms: Option<Arc<Chain>>,
    pub cursor: Arc<dyn CursorStore>,
}

/// The knobs of the loop and the supervisor.
#[derive(Debug, Clone, Copy)]
pub struct SourceSettings {
    pub poll_interval: Duration,
    pub delivery_timeout: Duration,
    pub max_consecutive_nacks: u32,
    pub nack_backoff: BackoffConfig,
    pub restart_backoff: BackoffConfig,
    /// Each batch logged at info level.
    pub verbose: bool,
    /// A line per settled batch with its stage times (Iggy's `benchmark`).
    pub benchmark: bool,
}

impl SourceSettings {
    pub fn from_config(config: &SourceConfig) -> Self {
        SourceSettings {
            poll_interval: config.poll_interval,
            delivery_timeout: config.delivery_timeout,
            max_consecutive_nacks: config.max_consecutive_nacks,
            nack_backoff: config.nack_backoff,
            restart_backoff: config.restart_backoff,
            verbose: config.verbose,
            benchmark: config.benchmark,
        }
    }
}
