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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::iggy::connector::types::{HeaderValue, Uint128};

    /// Drops odd payloads, upper-cases the others, fails on "boom".
    struct Scripted;

    impl Transform for Scripted {
        type Config = serde_json::Value;

        fn open(config: serde_json::Value) -> Result<Self, Error> {
            if config.get("refuse").is_some() {
                return Err(Error::msg("configured to refuse"));
            }
            Ok(Scripted)
        }

        fn transform(&mut self, mut record: Record) -> Result<Option<Record>, Error> {
            if record.payload == b"boom" {
                return Err(Error::msg("boom"));
            }
            if record.payload.len() % 2 == 1 {
                return Ok(None);
            }
            record.payload.make_ascii_uppercase();
            Ok(Some(record))
        }
    }

    fn incoming(id: u64, payload: &str) -> wire::Incoming {
        let header = Header { key: "k".into(), value: HeaderValue::Bool(true) };
        wire::Incoming {
            id: Uint128 { high: 1, low: id },
            headers: vec![header],
            payload: payload.into(),
            origin_timestamp: Some(id),
        }
    }

    #[test]
    fn one_answer_per_record_in_order_with_drops_as_none_and_headers_kept() {
        let mut driver = TransformDriver::<Scripted>::open("{}").unwrap();
        let out = driver.transform(vec![incoming(1, "ab"), incoming(2, "odd"), incoming(3, "cd")]).unwrap();
        assert_eq!(out.len(), 3);
        assert!(out[1].is_none());
        let first = out[0].as_ref().unwrap();
        assert_eq!((first.payload.as_slice(), first.origin_timestamp, first.headers.len()), (&b"AB"[..], Some(1), 1));
        assert_eq!(out[2].as_ref().unwrap().payload, b"CD");
    }

    #[test]
    fn an_error_names_the_record_and_a_bad_config_is_refused() {
        let mut driver = TransformDriver::<Scripted>::open("{}").unwrap();
        let error = driver.transform(vec![incoming(1, "ab"), incoming(7, "boom")]).unwrap_err();
        assert_eq!(error.message(), format!("record {:032x}: boom", (1u128 << 64) | 7));
        assert!(TransformDriver::<Scripted>::open("{\"refuse\": 1}").is_err());
        let error = TransformDriver::<Scripted>::open("not json").err().unwrap();
        assert!(error.message().starts_with("invalid plugin_config"), "{error}");
    }
}
