//! `[[sources]]`: a source connector, and where its batches go.
//!
//! ```toml
//! [[sources]]
//! key = "random"
//! path = "random_source.wasm"
//!
//! [[sources.streams]]
//! stream = "demo"
//! topic = "random"
//! partitioning = "balanced"
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::connector::connector_config;
use ferry_contract::Role;
use ferry_contract::settings::duration;

use super::BackoffConfig;
use super::schema::{Schema, StreamSchema, stream_schema};

connector_config! {
    /// `[[sources]]`: one source connector.
    pub struct SourceConfig (Role::Source) {
        /// Where its batches go. Every batch goes to every entry.
        #[serde(default)]
        pub streams: Vec<StreamConfig>,
        /// The pause after a NACK before polling again.
        #[serde(default = "super::connector::default_retry_backoff")]
        pub nack_backoff: BackoffConfig,
    }
}

/// `[[sources.streams]]`: a stream and topic a source delivers to.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    pub stream: String,
    pub topic: String,
    /// Which partition of the topic each message goes to (Iggy only).
    #[serde(default)]
    pub partitioning: Partitioning,
    /// Create the stream and topic when they do not exist (Iggy only). Without it, a
    /// missing stream or topic is an error.
    #[serde(default)]
    pub create: Option<CreateTopic>,
    /// What the guest's records are encoded to before delivery (Iggy's `schema`;
    /// see `schema.rs`). Without it they are delivered as the guest made them.
    #[serde(default)]
    pub schema: Option<Schema>,
    /// The Avro schema for `schema = "avro"`, itself.
    #[serde(default)]
    pub avro_schema_json: Option<String>,
    /// The Avro schema for `schema = "avro"`, in a file.
    #[serde(default)]
    pub avro_schema_path: Option<PathBuf>,
}

impl StreamConfig {
    /// A stream/topic with default partitioning and no auto-creation.
    pub fn new(stream: impl Into<String>, topic: impl Into<String>) -> Self {
        StreamConfig {
            stream: stream.into(),
            topic: topic.into(),
            partitioning: Partitioning::Balanced,
            create: None,
            schema: None,
            avro_schema_json: None,
            avro_schema_path: None,
        }
    }

    /// Its schema, checked (see [`stream_schema`]).
    pub fn schema(&self) -> Result<Option<StreamSchema>, (&'static str, String)> {
        stream_schema(self.schema, self.avro_schema_json.as_deref(), self.avro_schema_path.as_deref())
    }
}

/// `partitioning = "balanced" | "message_id" | { partition_id = N } | { header = "KEY" }`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Partitioning {
    /// The server spreads batches over the partitions.
    #[default]
    Balanced,
    /// Every message to this partition.
    PartitionId(u32),
    /// The message id is the partitioning key: the same id, the same partition.
    MessageId,
    /// The value of this header is the partitioning key; a message without it is
    /// refused.
    Header(String),
}

/// `create = { partitions = 3, retention = "7d" }`: what to create when missing.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CreateTopic {
    #[serde(default = "one")]
    pub partitions: u32,
    /// How long messages are kept; absent means the server's default.
    #[serde(default, with = "duration::optional")]
    pub retention: Option<Duration>,
    /// Whether the server fsyncs what it writes to the topic (absent: the server's
    /// default, no).
    #[serde(default)]
    pub enforce_fsync: Option<bool>,
    /// After how many messages the server writes the topic to disk (absent: the
    /// server's default, 1024). The server acknowledges a send once it holds it in
    /// memory, so only with `enforce_fsync = true` and `messages_required_to_save = 1`
    /// does every delivered batch survive the *server* being killed.
    #[serde(default)]
    pub messages_required_to_save: Option<u32>,
}

fn one() -> u32 {
    1
}
