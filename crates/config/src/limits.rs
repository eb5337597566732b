//! `[sources.limits]`: what one connector's instances may use. (What they may reach,
//! `[sources.grants]`, is each capability's own, in `ferry-capabilities`; the
//! secrets handed to the guest, `[sources.secrets]`, are read by the connector's
//! config.)
//!
//! ```toml
//! [sources.limits]
//! memory = "64MiB"              # all linear memories of an instance together
//! call_timeout = "5s"           # any one call into the guest
//! fuel = 1_000_000_000          # optional: instructions (roughly) per call
//! max_messages_per_batch = 10000
//! max_batch_bytes = "16MiB"
//! max_message_bytes = "1MiB"
//! max_headers_per_message = 64
//! max_header_bytes = "64KiB"
//! max_state_bytes = "1MiB"
//! log_lines_per_second = 100    # guest log lines; a burst of `log_burst` is allowed
//!
//! [sources.grants]
//! env = ["TZ"]                                              # passed through from the host
//! dirs = [{ host = "data/in", guest = "/in" }]              # read-only unless writable = true
//! network = ["db.internal:5432"]                           # outbound TCP, checked per address
//!
//! [sources.secrets]
//! api_token = { env = "ACME_TOKEN" }                        # or { file = "secrets/token" }
//! ```
//!
//! Defaults are the safe side: modest limits, and no grant at all. The limits are
//! not a suggestion to the guest; the host enforces every one of them.

use std::time::Duration;

use ferry_contract::settings::{ByteSize, duration};
use serde::Deserialize;

/// `[sources.limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// All linear memories of one instance together. A guest that grows past it gets
    /// a failed allocation (which a Rust guest turns into a trap).
    pub memory: ByteSize,
    /// Elements of all tables together.
    pub table_elements: u64,
    /// Core instances, tables and memories one component may create.
    pub instances: u32,
    pub tables: u32,
    pub memories: u32,
    /// How long one call into the guest may run, computing or waiting in a host call.
    /// Past it the call is interrupted and counts as a trap.
    #[serde(with = "duration")]
    pub call_timeout: Duration,
    /// Fuel (wasm instructions, roughly) one call may burn; absent means unmetered.
    /// Running out is a trap. Metering costs every guest some speed, so it is only
    /// switched on in the engine when some connector asks for it.
    pub fuel: Option<u64>,
    pub max_messages_per_batch: u32,
    pub max_batch_bytes: ByteSize,
    pub max_message_bytes: ByteSize,
    /// Headers one message may carry; checked before anything else looks at them.
    pub max_headers_per_message: u32,
    /// Bytes of header keys and values in one message.
    pub max_header_bytes: ByteSize,
    pub max_state_bytes: ByteSize,
    /// Guest log lines (logging import and stdout/stderr) per second, on average.
    pub log_lines_per_second: u32,
    /// Lines that may come at once before the rate applies.
    pub log_burst: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: ByteSize::mib(64),
            table_elements: 100_000,
            instances: 64,
            tables: 64,
            memories: 16,
            call_timeout: Duration::from_secs(5),
            fuel: None,
            max_messages_per_batch: 10_000,
            max_batch_bytes: ByteSize::mib(16),
            max_message_bytes: ByteSize::mib(1),
            max_headers_per_message: 64,
            max_header_bytes: ByteSize::kib(64),
            max_state_bytes: ByteSize::mib(1),
            log_lines_per_second: 100,
            log_burst: 1000,
        }
    }
}
