//! The trait a transform author implements: one record in, the record as it goes on
//! (or nothing, to drop it) out. The SDK hands it a batch's records one by one and
//! answers the host with exactly one entry per record, in order, which is the rule
//! of `wit/transform.wit` an author should not have to keep by hand.

use serde::de::DeserializeOwned;

use crate::Error;
use crate::bindings::iggy::connector::types::Header;
use crate::bindings::transform::exports::iggy::connector::transform as wire;

/// A transform: it changes, or drops, the records of a connector, between a source
/// and delivery or between a sink's input and the sink.
///
/// The host keeps each record's id (and a sink's offset): what you change is its
/// payload, headers and origin timestamp. A record you drop is settled like a
/// delivered one and counted (`messages_filtered`). An `Err` fails the whole batch:
/// a source's batch is produced again, a sink's transformed again after a backoff,
/// so keep `transform` deterministic.
pub trait Transform: Sized + 'static {
    /// The transform's settings, deserialized from its `plugin_config` (JSON).
    type Config: DeserializeOwned;

    /// Prepare the transform. An error fails the batch it was opened for.
    fn open(config: Self::Config) -> Result<Self, Error>;

    /// The record as it goes on, or `None` to drop it.
    fn transform(&mut self, record: Record) -> Result<Option<Record>, Error>;
}

/// A record on its way through a transform.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Its stable id; read-only (the host keeps the id it had).
    pub id: u128,
    pub headers: Vec<Header>,
    pub payload: Vec<u8>,
    /// When it came into being at its origin, in microseconds since the Unix epoch.
    pub origin_timestamp: Option<u64>,
}

impl Record {
    /// The payload as JSON, if it is JSON.
    pub fn json(&self) -> Result<serde_json::Value, Error> {
        serde_json::from_slice(&self.payload).map_err(|e| Error::msg(format!("the payload is not JSON: {e}")))
    }

    /// Replace the payload by `value`, as compact JSON.
    pub fn set_json(&mut self, value: &serde_json::Value) {
        self.payload = serde_json::to_vec(value).expect("a JSON value serializes");
    }
}

/// Runs a [`Transform`] for the host: what [`crate::export_transform!`] calls.
pub struct TransformDriver<T: Transform> {
    transform: T,
}

impl<T: Transform> TransformDriver<T> {
    pub fn open(config_json: &str) -> Result<Self, Error> {
        let config =
            serde_json::from_str(config_json).map_err(|e| Error::msg(format!("invalid plugin_config: {e}")))?;
        Ok(TransformDriver { transform: T::open(config)? })
    }

    /// One entry per record of `records`, in order.
    pub fn transform(&mut self, records: Vec<wire::Incoming>) -> Result<Vec<Option<wire::Outgoing>>, Error> {
        records
            .into_iter()
            .map(|incoming| {
                let id = (u128::from(incoming.id.high) << 64) | u128::from(incoming.id.low);
                let record = Record {
                    id,
                    headers: incoming.headers,
                    payload: incoming.payload,
                    origin_timestamp: incoming.origin_timestamp,
                };
                let out = self.transform.transform(record).map_err(|e| e.context(format!("record {id:032x}")))?;
                Ok(out.map(|record| wire::Outgoing {
                    headers: record.headers,
                    payload: record.payload,
                    origin_timestamp: record.origin_timestamp,
                }))
            })
            .collect()
    }
}
