//! `[[sinks]]`: a sink connector, what it reads, and where what it cannot write goes.
//!
//! ```toml
//! [[sinks]]
//! key = "archive"
//! path = "file_sink.wasm"
//! batch_length = 100              # messages handed to the guest at once, at most
//! consumer_group = "archive"      # Iggy only: share the partitions with other ferries
//!
//! [[sinks.streams]]               # what it reads: every topic of every entry
//! stream = "orders"
//! topics = ["created", "paid"]
//!
//! [sinks.dead_letters]            # optional; without it a rejected message is retried
//! stream = "dead"
//! topic = "archive"
//! ```
//!
//! Names follow Iggy's connectors runtime where the concept is the same (`topics`,
//! `batch_length`, `consumer_group`).

use std::path::PathBuf;

use serde::Deserialize;

use super::connector::connector_config;
use ferry_contract::Role;

use super::schema::{Schema, StreamSchema, stream_schema};
use super::{BackoffConfig, StreamConfig};

connector_config! {
    /// `[[sinks]]`: one sink connector.
    pub struct SinkConfig (Role::Sink) {
        /// What it reads.
        #[serde(default)]
        pub streams: Vec<SinkStreamConfig>,
        /// The most messages handed to the guest in one batch.
        #[serde(default = "default_batch_length")]
        pub batch_length: u32,
        /// The Iggy consumer group it reads in. Every ferry running a sink with this
        /// group shares the topics' partitions. Without it the sink reads alone, as the
        /// consumer `ferry-<key>`, every partition itself.
        #[serde(default)]
        pub consumer_group: Option<String>,
        /// The pause after the guest answered `retry` before writing the batch again.
        #[serde(default = "super::connector::default_retry_backoff")]
        pub retry_backoff: BackoffConfig,
        /// Where messages the guest can never write go, with headers saying why and
        /// where they came from. Without it they are retried, never dropped.
        #[serde(default)]
        pub dead_letters: Option<StreamConfig>,
    }
}

impl SinkConfig {
    /// The Iggy consumer it reads alone as, without a `consumer_group`.
    pub fn consumer_name(&self) -> String {
        format!("ferry-{}", self.key)
    }

    /// Every stream/topic it reads, in the order the config lists them.
    pub fn topics(&self) -> impl Iterator<Item = (&str, &str)> {
        self.streams.iter().flat_map(|s| s.topics.iter().map(move |t| (s.stream.as_str(), t.as_str())))
    }
}

/// `[[sinks.streams]]`: topics of one stream a sink reads.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SinkStreamConfig {
    pub stream: String,
    pub topics: Vec<String>,
    /// What its records are decoded from before the guest gets them (Iggy's
    /// `schema`; see `schema.rs`). Without it the guest gets them as stored.
    #[serde(default)]
    pub schema: Option<Schema>,
    /// The Avro schema for `schema = "avro"`, itself.
    #[serde(default)]
    pub avro_schema_json: Option<String>,
    /// The Avro schema for `schema = "avro"`, in a file.
    #[serde(default)]
    pub avro_schema_path: Option<PathBuf>,
}

impl SinkStreamConfig {
    /// Its schema, checked (see [`stream_schema`]).
    pub fn schema(&self) -> Result<Option<StreamSchema>, (&'static str, String)> {
        stream_schema(self.schema, self.avro_schema_json.as_deref(), self.avro_schema_path.as_deref())
    }
}

fn default_batch_length() -> u32 {
    100
}
