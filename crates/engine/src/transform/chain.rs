//! A connector's chain of transforms, run on a whole batch: Iggy's field transforms
//! record by record, transform components on the records still in the batch. What
//! comes out keeps each record's id (and a sink's offset); a record a component
//! dropped is left out, and counted.

use ferry_config::transforms::{ComponentTransform, Transform, Transforms};
use ferry_contract::wit::transform_export::{Incoming, Outgoing};
use ferry_contract::{Message, Uint128};

use super::Pipeline;
use super::component::ComponentLink;
use crate::sink::input::{SinkBatch, StoredMessage};

/// One link of a chain.
#[derive(Debug)]
pub enum Link {
    /// Consecutive field transforms, applied to each record alone.
    Fields(Pipeline),
    /// A transform component, handed the batch's records at once.
    Component(Box<ComponentLink>),
}

/// A connector's transforms, ready to run.
#[derive(Debug)]
pub struct Chain {
    links: Vec<Link>,
}

/// A batch after the chain: the records that go on, and how many were dropped.
#[derive(Debug)]
pub struct Transformed<T> {
    pub records: T,
    pub dropped: usize,
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
    /// The chain of a connector's `transforms`, each component made a link by
    /// `component`; none when there are no transforms.
    pub fn new(
        transforms: &Transforms,
        mut component: impl FnMut(&ComponentTransform) -> ComponentLink,
    ) -> Option<Chain> {
        let mut links = Vec::new();
        let mut fields = Vec::new();
        for transform in &transforms.0 {
            match transform {
                Transform::Component(transform) => {
                    links.extend(Pipeline::new(&std::mem::take(&mut fields)).map(Link::Fields));
                    links.push(Link::Component(Box::new(component(transform))));
                }
                field => fields.push(field.clone()),
            }
        }
        links.extend(Pipeline::new(&fields).map(Link::Fields));
        (!links.is_empty()).then_some(Chain { links })
    }

    /// A source's messages after the chain, in order.
    pub async fn messages(&self, messages: Vec<Message>) -> Result<Transformed<Vec<Message>>, TransformError> {
        self.run(messages).await
    }

    /// A sink's batch after the chain: the same partition, the records that go on
    /// with their offsets (possibly none).
    pub async fn batch(&self, batch: &SinkBatch) -> Result<Transformed<SinkBatch>, TransformError> {
        let Transformed { records, dropped } = self.run(batch.messages.clone()).await?;
        let batch = SinkBatch {
            stream: batch.stream.clone(),
            topic: batch.topic.clone(),
            partition: batch.partition,
            messages: records,
        };
        Ok(Transformed { records: batch, dropped })
    }

    async fn run<R: Record>(&self, records: Vec<R>) -> Result<Transformed<Vec<R>>, TransformError> {
        let total = records.len();
        let mut records: Vec<Option<R>> = records.into_iter().map(Some).collect();
        for link in &self.links {
            match link {
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
        Ok(Transformed { dropped: total - records.len(), records })
    }
}
