//! A connector's chain of transforms, run on a whole batch: a sink's stream schemas
//! first (decoding), Iggy's field and converting transforms record by record,
//! transform components on the records still in the batch, a source's stream schema
//! last (encoding). What comes out keeps each record's id (and a sink's offset); a
//! record a component dropped is left out, and counted; a record a codec or
//! converter cannot read is left out and reported, with why, to be dead-lettered
//! (a sink's) or NACKed (a source's).

use std::collections::HashMap;

use ferry_config::transforms::{ComponentTransform, Transform, Transforms};
use ferry_contract::wit::transform_export::{Incoming, Outgoing};
use ferry_contract::{Message, Uint128};

use super::Pipeline;
use super::codec::Codec;
use super::component::ComponentLink;
use super::convert::Convert;
use crate::sink::input::{SinkBatch, StoredMessage};

/// One link of a chain.
#[derive(Debug)]
pub enum Link {
    /// A sink's stream schemas: each record decoded by its stream/topic's codec.
    Decode(HashMap<(String, String), Codec>),
    /// Consecutive field transforms, applied to each record alone.
    Fields(Pipeline),
    /// A converting transform, applied to each record alone.
    Convert(Convert),
    /// A source's stream schema: each record encoded.
    Encode(Codec),
    /// A transform component, handed the batch's records at once.
    Component(Box<ComponentLink>),
}

/// A connector's transforms, ready to run.
#[derive(Debug)]
pub struct Chain {
    links: Vec<Link>,
}

/// A batch after the chain: the records that go on, how many were dropped, and
/// which could not be read or written as their schema says (their indexes in the
/// batch handed to the chain, in order, and why).
#[derive(Debug)]
pub struct Transformed<T> {
    pub records: T,
    pub dropped: usize,
    pub rejected: Vec<(usize, String)>,
}

/// What a codec or converter does to one payload: `None` leaves it as it is; an
/// error says why it cannot be read or written.
type RecordStep<'a> = &'a dyn Fn(&[u8]) -> Result<Option<Vec<u8>>, String>;

/// The stream schemas a chain decodes or encodes with.
#[derive(Debug, Default)]
pub enum Schemas {
    /// Payloads as they are.
    #[default]
    None,
    /// A source's: every record encoded with this codec, after its transforms.
    Encode(Codec),
    /// A sink's: each record decoded by the codec of its stream/topic, before its
    /// transforms (one without a codec as it is).
    Decode(HashMap<(String, String), Codec>),
}

/// A transform component failed on a batch: the batch is not delivered (a source's
/// is NACKed, a sink's transformed again later).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transform `{name}` failed: {problem}")]
pub struct TransformError {
    pub name: String,
    pub problem: String,
}

/// What the chain needs of a record, on either side of the log.
trait Record {
    fn payload(&self) -> &[u8];
    fn set_payload(&mut self, payload: Vec<u8>);
    fn incoming(&self) -> Incoming;
    fn take(&mut self, outgoing: Outgoing);
}

impl Record for Message {
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    fn set_payload(&mut self, payload: Vec<u8>) {
        self.payload = payload.into();
    }
    fn incoming(&self) -> Incoming {
        Incoming {
            // Ids are assigned before the chain runs (see `batch::assign_ids`).
            id: self.id.unwrap_or(Uint128 { high: 0, low: 0 }),
            headers: self.headers.clone(),
            payload: self.payload.to_vec(),
            origin_timestamp: self.origin_timestamp,
        }
    }
    fn take(&mut self, outgoing: Outgoing) {
        let Outgoing { headers, payload, origin_timestamp } = outgoing;
        (self.headers, self.payload, self.origin_timestamp) = (headers, payload.into(), origin_timestamp);
    }
}

impl Record for StoredMessage {
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    fn set_payload(&mut self, payload: Vec<u8>) {
        self.payload = payload;
    }
    fn incoming(&self) -> Incoming {
        Incoming {
            id: self.id,
            headers: self.headers.clone(),
            payload: self.payload.clone(),
            origin_timestamp: self.origin_timestamp,
        }
    }
    fn take(&mut self, outgoing: Outgoing) {
        let Outgoing { headers, payload, origin_timestamp } = outgoing;
        (self.headers, self.payload, self.origin_timestamp) = (headers, payload, origin_timestamp);
    }
}

impl Chain {
    /// The chain of a connector's stream `schemas` and `transforms`, each component
    /// made a link by `component`; none when there is nothing to do; or why a
    /// converting transform's schema is unusable.
    pub fn new(
        schemas: Schemas,
        transforms: &Transforms,
        mut component: impl FnMut(&ComponentTransform) -> ComponentLink,
    ) -> Result<Option<Chain>, String> {
        let mut links = Vec::new();
        let mut encode = None;
        match schemas {
            Schemas::None => {}
            Schemas::Decode(codecs) => links.push(Link::Decode(codecs)),
            Schemas::Encode(codec) => encode = Some(Link::Encode(codec)),
        }
        let mut fields = Vec::new();
        for transform in &transforms.0 {
            let link = match transform {
                Transform::Component(transform) => Link::Component(Box::new(component(transform))),
                Transform::Convert(convert) => Link::Convert(Convert::new(convert)?),
                field => {
                    fields.push(field.clone());
                    continue;
                }
            };
            links.extend(Pipeline::new(&std::mem::take(&mut fields)).map(Link::Fields));
            links.push(link);
        }
        links.extend(Pipeline::new(&fields).map(Link::Fields));
        links.extend(encode);
        Ok((!links.is_empty()).then_some(Chain { links }))
    }

    /// A source's messages after the chain, in order.
    pub async fn messages(&self, messages: Vec<Message>) -> Result<Transformed<Vec<Message>>, TransformError> {
        // A source's records are encoded by one codec, whatever their stream.
        self.run(messages, ("", "")).await
    }

    /// A sink's batch after the chain: the same partition, the records that go on
    /// with their offsets (possibly none).
    pub async fn batch(&self, batch: &SinkBatch) -> Result<Transformed<SinkBatch>, TransformError> {
        let place = (batch.stream.as_str(), batch.topic.as_str());
        let Transformed { records, dropped, rejected } = self.run(batch.messages.clone(), place).await?;
        let batch = SinkBatch {
            stream: batch.stream.clone(),
            topic: batch.topic.clone(),
            partition: batch.partition,
            messages: records,
        };
        Ok(Transformed { records: batch, dropped, rejected })
    }

    async fn run<R: Record>(
        &self,
        records: Vec<R>,
        (stream, topic): (&str, &str),
    ) -> Result<Transformed<Vec<R>>, TransformError> {
        let total = records.len();
        let mut records: Vec<Option<R>> = records.into_iter().map(Some).collect();
        let mut rejected = Vec::new();
        // Each record through `step` (`None`: unchanged), or reported with why.
        let mut each = |records: &mut Vec<Option<R>>, step: RecordStep| {
            for (index, slot) in records.iter_mut().enumerate() {
                let Some(record) = slot else { continue };
                match step(record.payload()) {
                    Ok(Some(payload)) => record.set_payload(payload),
                    Ok(None) => {}
                    Err(problem) => {
                        rejected.push((index, problem));
                        *slot = None;
                    }
                }
            }
        };
        for link in &self.links {
            match link {
                Link::Decode(codecs) => {
                    let Some(codec) = codecs.get(&(stream.to_string(), topic.to_string())) else { continue };
                    let name = codec.name();
                    each(&mut records, &|payload| {
                        codec
                            .decode(payload)
                            .map_err(|problem| format!("not {name} as its stream's schema says: {problem}"))
                    });
                }
                Link::Encode(codec) => {
                    let name = codec.name();
                    each(&mut records, &|payload| {
                        codec
                            .encode(payload)
                            .map_err(|problem| format!("not encodable as {name}, its stream's schema: {problem}"))
                    });
                }
                Link::Convert(convert) => {
                    each(&mut records, &|payload| {
                        convert
                            .apply(payload)
                            .map_err(|problem| format!("not convertible by `{}`: {problem}", convert.name))
                    });
                }
                Link::Fields(pipeline) => {
                    for record in records.iter_mut().flatten() {
                        if let Some(payload) = pipeline.apply(record.payload()) {
                            record.set_payload(payload);
                        }
                    }
                }
                Link::Component(component) => {
                    let incoming: Vec<Incoming> = records.iter().flatten().map(Record::incoming).collect();
                    if incoming.is_empty() {
                        break;
                    }
                    let failed = |problem| TransformError { name: component.name.clone(), problem };
                    let mut outgoing = component.apply(&incoming).await.map_err(failed)?.into_iter();
                    for slot in records.iter_mut().filter(|slot| slot.is_some()) {
                        match outgoing.next().flatten() {
                            Some(out) => slot.as_mut().expect("filtered on").take(out),
                            None => *slot = None,
                        }
                    }
                }
            }
        }
        let records: Vec<R> = records.into_iter().flatten().collect();
        rejected.sort_unstable_by_key(|(index, _)| *index);
        Ok(Transformed { dropped: total - records.len() - rejected.len(), records, rejected })
    }
}
