//! Reading from Iggy for a sink: a consumer group per sink, and an offset stored on
//! the server only after the sink settled the batch.
//!
//! Every ferry running a sink with the same consumer group joins it on each topic, so
//! the server divides the topics' partitions among them (how a sink scales past one
//! machine). Messages are polled with auto-commit off: the server hands out the
//! messages after the group's stored offset, and the offset moves only when the
//! sink loop commits a batch it settled. A member that goes away (killed) leaves its
//! partitions to the others, who read them from the stored offsets: at-least-once,
//! never a loss.
//!
//! The stored offset is the offset of the last message settled (Iggy's convention:
//! the next poll starts after it).

use std::sync::Arc;

use async_trait::async_trait;
use iggy::prelude::{
    Consumer, ConsumerGroupClient, ConsumerOffsetClient, Identifier, IggyClient, IggyError, MessageClient,
    PollingStrategy,
};

use super::connection::{Connection, Live};
use super::error::RequestError;
use super::messages::from_iggy;
use crate::sink::input::{Budget, Input, InputError, OpenError, Reader, SinkBatch};
use crate::status::StartingFrom;

/// A sink's input from an Iggy server.
pub struct IggyInput {
    connection: Arc<Connection>,
    /// Stream and topic of each topic read, in the order they are read.
    topics: Vec<(String, String)>,
    group: String,
}

impl IggyInput {
    /// Reading `topics` over `connection` as consumer group `group`.
    pub fn new(connection: Arc<Connection>, topics: Vec<(String, String)>, group: String) -> Self {
        IggyInput { connection, topics, group }
    }
}

#[async_trait]
impl Input for IggyInput {
    async fn open(&self) -> Result<Box<dyn Reader>, OpenError> {
        let topics = self
            .topics
            .iter()
            .map(|(stream, topic)| {
                let named = |name: &str, what: &str| {
                    Identifier::named(name).map_err(|e| InputError(format!("{what} name {name:?}: {e}")))
                };
                Ok(TopicIds {
                    stream: stream.clone(),
                    topic: topic.clone(),
                    stream_id: named(stream, "stream")?,
                    topic_id: named(topic, "topic")?,
                })
            })
            .collect::<Result<_, InputError>>()?;
        let group_id =
            Identifier::named(&self.group).map_err(|e| InputError(format!("consumer_group {:?}: {e}", self.group)))?;
        // The group is joined on the first read, once the connection is up: the host
        // starts while the server may still be down.
        Ok(Box::new(IggyReader {
            connection: self.connection.clone(),
            topics,
            consumer: Consumer::group(group_id.clone()),
            group_id,
            group: self.group.clone(),
            next: 0,
            joined: None,
        }))
    }
}

struct TopicIds {
    stream: String,
    topic: String,
    stream_id: Identifier,
    topic_id: Identifier,
}

struct IggyReader {
    connection: Arc<Connection>,
    topics: Vec<TopicIds>,
    consumer: Consumer,
    group_id: Identifier,
    group: String,
    /// The topic to poll first next time: topics take turns.
    next: usize,
    /// The connection on which the group was joined: a new connection is a new
    /// member, which must join again.
    joined: Option<u64>,
}

impl IggyReader {
    /// The live connection, joined to the group on every topic.
    async fn live(&mut self) -> Result<Live, InputError> {
        if self.joined != self.connection.current().ok().map(|live| live.generation) {
            self.join().await?;
        }
        self.connection.current().map_err(InputError)
    }

    /// Join the consumer group on every topic, creating the group where it is missing.
    async fn join(&mut self) -> Result<(), InputError> {
        let live = self.connection.current().map_err(InputError)?;
        for topic in &self.topics {
            let at = |what: &str| format!("{what} consumer group `{}` on {}/{}", self.group, topic.stream, topic.topic);
            let client = &live.client;
            let exists = client
                .get_consumer_group(&topic.stream_id, &topic.topic_id, &self.group_id)
                .await
                .map_err(|e| self.failed(&live, e, &at("looking up the")))?
                .is_some();
            if !exists {
                match client.create_consumer_group(&topic.stream_id, &topic.topic_id, &self.group).await {
                    Ok(_) => tracing::info!("created the {}", at("")),
                    // Another member was quicker: fine.
                    Err(IggyError::ConsumerGroupNameAlreadyExists(..)) => {}
                    Err(e) => return Err(self.failed(&live, e, &at("creating the"))),
                }
            }
            client
                .join_consumer_group(&topic.stream_id, &topic.topic_id, &self.group_id)
                .await
                .map_err(|e| self.failed(&live, e, &at("joining the")))?;
        }
        tracing::info!("joined consumer group `{}` on {} topic(s)", self.group, self.topics.len());
        self.joined = Some(live.generation);
        Ok(())
    }

    /// A failed request as an input error, retiring a connection it broke.
    fn failed(&self, live: &Live, error: IggyError, doing: &str) -> InputError {
        let error = RequestError::from_iggy(error).context(doing.to_string());
        if error.breaks_connection {
            self.connection.report_broken(live.generation, error.message.clone());
        }
        InputError(error.message)
    }
}

#[async_trait]
impl Reader for IggyReader {
    fn starting_from(&self) -> StartingFrom {
        StartingFrom::Elsewhere("the consumer group's offsets on the Iggy server")
    }

    async fn next(&mut self, budget: Budget) -> Result<Option<SinkBatch>, InputError> {
        let live = self.live().await?;
        for turn in 0..self.topics.len() {
            let index = (self.next + turn) % self.topics.len();
            let topic = &self.topics[index];
            let polled = match poll(&live.client, topic, &self.consumer, budget.messages).await {
                Ok(polled) => polled,
                // The server forgot this member (it restarted, or rebalanced): join again.
                Err(IggyError::ConsumerGroupMemberNotFound(..)) => {
                    self.joined = None;
                    return Ok(None);
                }
                Err(e) => {
                    let doing = format!("polling {}/{}", topic.stream, topic.topic);
                    return Err(self.failed(&live, e, &doing));
                }
            };
            if polled.messages.is_empty() {
                continue;
            }
            let messages = polled.messages.iter().map(from_iggy).collect::<Result<_, _>>().map_err(|e| {
                InputError(format!("{}/{} partition {}: {e}", topic.stream, topic.topic, polled.partition_id))
            })?;
            self.next = index + 1;
            let mut batch = SinkBatch {
                stream: topic.stream.clone(),
                topic: topic.topic.clone(),
                partition: polled.partition_id,
                messages,
            };
            // What is trimmed off comes again: the group's offset has not moved.
            budget.trim(&mut batch);
            return Ok(Some(batch));
        }
        Ok(None)
    }

    async fn commit(&mut self, batch: &SinkBatch) -> Result<Option<u64>, InputError> {
        let Some(last) = batch.messages.last() else { return Ok(None) };
        // Through a member of the group on the current connection: after a reconnect
        // (the server restarted while the batch was being written), the offset is
        // stored by the member that joins now, not by one the server no longer knows.
        let live = self.live().await?;
        let topic =
            self.topics.iter().find(|t| t.stream == batch.stream && t.topic == batch.topic).ok_or_else(|| {
                InputError(format!("{}/{} is not a topic this sink reads", batch.stream, batch.topic))
            })?;
        let stored = live
            .client
            .store_consumer_offset(
                &self.consumer,
                &topic.stream_id,
                &topic.topic_id,
                Some(batch.partition),
                last.offset,
            )
            .await;
        stored.map(|()| None).map_err(|e| {
            let doing = format!("storing the offset of {}/{} partition {}", batch.stream, batch.topic, batch.partition);
            self.failed(&live, e, &doing)
        })
    }
}

/// The messages after the group's stored offset, in a partition the server picks
/// among this member's, without moving the offset.
async fn poll(
    client: &IggyClient,
    topic: &TopicIds,
    consumer: &Consumer,
    max: u32,
) -> Result<iggy::prelude::PolledMessages, IggyError> {
    client.poll_messages(&topic.stream_id, &topic.topic_id, None, consumer, &PollingStrategy::next(), max, false).await
}
