//! Reading from Iggy for a sink, with an offset stored on the server only after the
//! sink settled the batch. Two ways to read, as the operator chooses:
//!
//! * **Alone** (the default): a consumer of the sink's own, `ferry-<key>`, reading
//!   every partition of its topics itself, with an offset per partition. Nothing on
//!   the server is shared or assigned, so nothing there can go stale: after a crash
//!   of the server or of ferry, the sink reads on from its stored offsets.
//! * **In a consumer group** (`consumer_group`): every ferry running a sink with the
//!   same group joins it on each topic, so the server divides the topics' partitions
//!   among them (how a sink scales past one machine). A member that goes away
//!   (killed) leaves its partitions to the others, who read them from the stored
//!   offsets. The server keeps a group's members through its own crash, so a member
//!   that died with it would keep its partitions for good: on joining, ferry clears
//!   such members ([`super::group`]).
//!
//! In a group, a rebalance can move a partition while a member holds a batch of it
//! written but not yet stored. The server then refuses that member's offset (the
//! partition is no longer its own), and the new owner reads the batch again from the
//! stored offset: the member leaves it at that, rather than retrying the store until
//! the partition perhaps comes back to it and the old offset would move the group's
//! stored offset *back*, under everything the other member stored meanwhile (every
//! message after it would be read a second time). For the same reason a member never
//! stores an offset below the one stored: it reads the stored offset first. So a
//! partition that moves costs at most the batch in flight, written by both.
//!
//! Either way messages are polled with auto-commit off: the server hands out the
//! messages after the stored offset, and the offset moves only when the sink loop
//! commits a batch it settled. At-least-once, never a loss. The stored offset is the
//! offset of the last message settled (Iggy's convention: the next poll starts after
//! it).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use iggy::prelude::{
    Consumer, ConsumerGroupClient, ConsumerOffsetClient, Identifier, IggyClient, IggyError, MessageClient,
    PollingStrategy, TopicClient,
};

use super::connection::{Connection, Live};
use super::error::RequestError;
use super::group::{GroupOnTopic, clear_ghosts, keep_offset, kept_offset};
use super::messages::from_iggy;
use ferry_contract::StoredChecksums;
use ferry_engine::sink::input::{Budget, Input, InputError, OpenError, Read, Reader, SinkBatch};
use ferry_engine::status::StartingFrom;

/// A sink's input from an Iggy server.
pub struct IggyInput {
    connection: Arc<Connection>,
    /// Stream and topic of each topic read, in the order they are read.
    topics: Vec<(String, String)>,
    reading: Reading,
}

/// Who the server sees reading, and so whose offsets it keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// A consumer of this name, reading every partition itself.
    Alone(String),
    /// A member of the consumer group of this name.
    InGroup(String),
}

impl Reading {
    fn name(&self) -> &str {
        match self {
            Reading::Alone(name) | Reading::InGroup(name) => name,
        }
    }
}

impl IggyInput {
    /// Reading `topics` over `connection` as `reading` says.
    pub fn new(connection: Arc<Connection>, topics: Vec<(String, String)>, reading: Reading) -> Self {
        IggyInput { connection, topics, reading }
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
        let name = self.reading.name();
        let id = Identifier::named(name).map_err(|e| InputError(format!("consumer name {name:?}: {e}")))?;
        let consumer = match self.reading {
            Reading::Alone(_) => Consumer::new(id),
            Reading::InGroup(_) => Consumer::group(id),
        };
        // Partitions are listed (or the group joined) on the first read, once the
        // connection is up: the host starts while the server may still be down.
        Ok(Box::new(IggyReader {
            connection: self.connection.clone(),
            topics,
            reading: self.reading.clone(),
            consumer,
            slots: Vec::new(),
            next: 0,
            ready_on: None,
            checked: HashSet::new(),
            settled: HashMap::new(),
            listed: None,
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
    reading: Reading,
    consumer: Consumer,
    /// What one poll asks for: a topic (by index) and, read alone, a partition (in a
    /// group the server picks among the member's).
    slots: Vec<(usize, Option<u32>)>,
    /// The slot to poll first next time: slots take turns.
    next: usize,
    /// The connection on which `slots` were made (the group joined): a new
    /// connection is a new member, which must join again.
    ready_on: Option<u64>,
    /// The partitions (by topic index) whose first batch since the connection was
    /// made was checked against the offsets known settled ([`Self::behind_settled`]).
    checked: HashSet<(usize, u32)>,
    /// The highest offset this reader stored, per partition (by topic index).
    settled: HashMap<(usize, u32), u64>,
    /// When the partitions were last listed (read alone): a topic may gain some.
    listed: Option<Instant>,
}

/// How often a sink reading alone, finding nothing, looks for new partitions.
const RELIST_PARTITIONS: Duration = Duration::from_secs(30);

impl IggyReader {
    /// The live connection, with the slots made on it.
    async fn live(&mut self) -> Result<Live, InputError> {
        if self.ready_on != self.connection.current().ok().map(|live| live.generation) {
            let live = self.connection.current().map_err(InputError)?;
            self.slots = match self.reading {
                Reading::Alone(_) => self.list_partitions(&live).await?,
                Reading::InGroup(_) => self.join(&live).await?,
            };
            self.checked.clear();
            self.ready_on = Some(live.generation);
        }
        self.connection.current().map_err(InputError)
    }

    /// One slot per partition of every topic.
    async fn list_partitions(&mut self, live: &Live) -> Result<Vec<(usize, Option<u32>)>, InputError> {
        let mut slots = Vec::new();
        for (index, topic) in self.topics.iter().enumerate() {
            let doing = format!("listing the partitions of {}/{}", topic.stream, topic.topic);
            let details = live
                .client
                .get_topic(&topic.stream_id, &topic.topic_id)
                .await
                .map_err(|e| self.failed(live, e, &doing))?
                .ok_or_else(|| InputError(format!("{doing}: there is no such topic")))?;
            slots.extend(details.partitions.iter().map(|partition| (index, Some(partition.id))));
        }
        if self.listed.is_none() {
            tracing::info!(
                "reading {} partition(s) of {} topic(s) as consumer `{}`",
                slots.len(),
                self.topics.len(),
                self.reading.name()
            );
        }
        self.listed = Some(Instant::now());
        Ok(slots)
    }

    /// Join the consumer group on every topic, creating the group where it is
    /// missing: one slot per topic.
    async fn join(&self, live: &Live) -> Result<Vec<(usize, Option<u32>)>, InputError> {
        let Consumer { id: group_id, .. } = &self.consumer;
        let group = self.reading.name();
        for topic in &self.topics {
            let at = |what: &str| format!("{what} consumer group `{group}` on {}/{}", topic.stream, topic.topic);
            let client = &live.client;
            let exists = client
                .get_consumer_group(&topic.stream_id, &topic.topic_id, group_id)
                .await
                .map_err(|e| self.failed(live, e, &at("looking up the")))?
                .is_some();
            if !exists {
                match client.create_consumer_group(&topic.stream_id, &topic.topic_id, group).await {
                    Ok(_) => tracing::info!("created the {}", at("")),
                    // Another member was quicker: fine.
                    Err(IggyError::ConsumerGroupNameAlreadyExists(..)) => {}
                    Err(e) => return Err(self.failed(live, e, &at("creating the"))),
                }
            }
            client
                .join_consumer_group(&topic.stream_id, &topic.topic_id, group_id)
                .await
                .map_err(|e| self.failed(live, e, &at("joining the")))?;
            let on_topic = self.on_topic(topic);
            clear_ghosts(client, &on_topic)
                .await
                .map_err(|e| self.failed(live, e, &at("clearing stale members of the")))?;
        }
        tracing::info!("joined consumer group `{group}` on {} topic(s)", self.topics.len());
        Ok((0..self.topics.len()).map(|index| (index, None)).collect())
    }

    /// Whether `polled`, the first batch of its partition since this reader
    /// (re)connected, comes from before an offset known to be settled: then that
    /// offset is stored on the server again and the batch dropped, to be polled
    /// again from there. Known settled: what this reader stored itself, and in a
    /// group the offset kept beside the group's at every store and when the group
    /// was recreated (see [`super::group`]).
    ///
    /// The server we can run does not keep every stored offset through its own
    /// `kill -9`: now and then it comes back with none for a partition (about one
    /// partition in ten kills in our probes, a plain consumer's or a group's), and
    /// would hand the partition out from its start. Checked once per partition per
    /// connection: one request, two in a group.
    async fn behind_settled(
        &mut self,
        live: &Live,
        index: usize,
        polled: &iggy::prelude::PolledMessages,
    ) -> Result<bool, InputError> {
        let Some(first) = polled.messages.first().map(|m| m.header.offset) else { return Ok(false) };
        let slot = (index, polled.partition_id);
        if self.checked.contains(&slot) {
            return Ok(false);
        }
        let behind = match self.restore_settled(live, index, polled.partition_id, first).await {
            Ok(behind) => behind,
            // The group is gone, or the partition moved, meanwhile: the next poll
            // joins again and checks anew.
            Err(e) if group_gone(&e) || matches!(e, IggyError::ResourceNotFound(_)) => return Ok(true),
            Err(e) => {
                let topic = &self.topics[index];
                let doing = format!("checking the stored offset of {}/{}", topic.stream, topic.topic);
                return Err(self.failed(live, e, &doing));
            }
        };
        if !behind {
            self.checked.insert(slot);
        }
        Ok(behind)
    }

    /// [`Self::behind_settled`]'s requests.
    async fn restore_settled(&self, live: &Live, index: usize, partition: u32, first: u64) -> Result<bool, IggyError> {
        let topic = &self.topics[index];
        let client = &live.client;
        let stored = client.get_consumer_offset(&self.consumer, &topic.stream_id, &topic.topic_id, Some(partition));
        if stored.await?.is_some_and(|stored| stored.stored_offset >= first) {
            // Stored meanwhile (another member restored it while this poll ran).
            return Ok(true);
        }
        let mut settled = self.settled.get(&(index, partition)).copied();
        if matches!(self.reading, Reading::InGroup(_)) {
            settled = settled.max(kept_offset(client, &self.on_topic(topic), partition).await?);
        }
        let Some(settled) = settled.filter(|settled| *settled >= first) else { return Ok(false) };
        client
            .store_consumer_offset(&self.consumer, &topic.stream_id, &topic.topic_id, Some(partition), settled)
            .await?;
        tracing::warn!(
            "{}/{} partition {partition}: the server hands it out from offset {first}, but it was settled up to \
             offset {settled} (the server lost that offset in a crash, or the group was recreated): stored it \
             again; reads on after offset {settled}",
            topic.stream,
            topic.topic,
        );
        Ok(true)
    }

    /// The group on one topic.
    fn on_topic<'a>(&'a self, topic: &'a TopicIds) -> GroupOnTopic<'a> {
        let group = self.reading.name();
        GroupOnTopic {
            stream_id: &topic.stream_id,
            topic_id: &topic.topic_id,
            group_id: &self.consumer.id,
            name: group,
            at: format!("consumer group `{group}` on {}/{}", topic.stream, topic.topic),
        }
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
        StartingFrom::Elsewhere(match self.reading {
            Reading::Alone(_) => "the consumer's offsets on the Iggy server",
            Reading::InGroup(_) => "the consumer group's offsets on the Iggy server",
        })
    }

    async fn next(&mut self, budget: Budget) -> Result<Option<Read>, InputError> {
        let live = self.live().await?;
        for turn in 0..self.slots.len() {
            let slot = (self.next + turn) % self.slots.len();
            let (index, partition) = self.slots[slot];
            let topic = &self.topics[index];
            let polled = match poll(&live.client, topic, partition, &self.consumer, budget.messages).await {
                Ok(polled) => polled,
                // The server forgot this member (it restarted, or rebalanced), or the
                // group was recreated (see `group`): join again.
                Err(e) if group_gone(&e) => {
                    self.ready_on = None;
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
            if self.behind_settled(&live, index, &polled).await? {
                continue;
            }
            let topic = &self.topics[index];
            let messages = polled.messages.iter().map(from_iggy).collect::<Result<_, _>>().map_err(|e| {
                InputError(format!("{}/{} partition {}: {e}", topic.stream, topic.topic, polled.partition_id))
            })?;
            self.next = slot + 1;
            let mut batch = SinkBatch {
                stream: topic.stream.clone(),
                topic: topic.topic.clone(),
                partition: polled.partition_id,
                messages,
            };
            // What is trimmed off comes again: the stored offset has not moved.
            budget.trim(&mut batch);
            let mut checksums =
                StoredChecksums::new(polled.messages.iter().map(|m| (m.header.offset, m.header.checksum)).collect());
            checksums.truncate(batch.messages.len());
            return Ok(Some(Read::Batch(batch, checksums)));
        }
        // Nothing anywhere: a good moment to look for partitions added meanwhile.
        if self.listed.is_some_and(|at| at.elapsed() > RELIST_PARTITIONS) {
            self.ready_on = None;
        }
        Ok(None)
    }

    async fn commit(&mut self, batch: &SinkBatch) -> Result<Option<u64>, InputError> {
        let Some(last) = batch.messages.last() else { return Ok(None) };
        // Through a member of the group on the current connection: after a reconnect
        // (the server restarted while the batch was being written), the offset is
        // stored by the member that joins now, not by one the server no longer knows.
        let live = self.live().await?;
        let index =
            self.topics.iter().position(|t| t.stream == batch.stream && t.topic == batch.topic).ok_or_else(|| {
                InputError(format!("{}/{} is not a topic this sink reads", batch.stream, batch.topic))
            })?;
        let topic = &self.topics[index];
        let at = format!("{}/{} partition {}", batch.stream, batch.topic, batch.partition);
        let grouped = matches!(self.reading, Reading::InGroup(_));
        if grouped {
            let stored = live
                .client
                .get_consumer_offset(&self.consumer, &topic.stream_id, &topic.topic_id, Some(batch.partition))
                .await;
            let stored = match stored {
                Ok(stored) => stored,
                Err(e) if group_gone(&e) => {
                    tracing::info!(
                        "{at}: group `{}` was recreated before this batch's offset was stored: its new members read \
                         the batch again",
                        self.reading.name(),
                    );
                    return Ok(None);
                }
                Err(e) => return Err(self.failed(&live, e, &format!("reading the stored offset of {at}"))),
            };
            if let Some(stored) = stored.filter(|info| info.stored_offset >= last.offset) {
                tracing::info!(
                    "{at}: another member of group `{}` stored offset {} already, past this batch (to offset {}): \
                     not moved back",
                    self.reading.name(),
                    stored.stored_offset,
                    last.offset,
                );
                return Ok(None);
            }
        }
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
        match stored {
            Ok(()) => {
                let settled = self.settled.entry((index, batch.partition)).or_default();
                *settled = last.offset.max(*settled);
                if grouped {
                    // A safety net only (the group's offset is stored): a failure is
                    // said, and the next request meets whatever caused it.
                    let kept = keep_offset(&live.client, &self.on_topic(topic), batch.partition, last.offset).await;
                    if let Err(e) = kept {
                        tracing::warn!("{at}: keeping a copy of the stored offset {} failed: {e}", last.offset);
                    }
                }
                Ok(None)
            }
            Err(e) if grouped && (matches!(e, IggyError::ResourceNotFound(_)) || group_gone(&e)) => {
                // A rebalance gave the partition to another member (or the group was
                // recreated): it reads this batch again from the stored offset.
                // Storing later would move that back.
                tracing::info!(
                    "{at} moved to another member of group `{}` before this batch's offset was stored: left to it, \
                     which reads the batch again",
                    self.reading.name(),
                );
                Ok(None)
            }
            Err(e) => Err(self.failed(&live, e, &format!("storing the offset of {at}"))),
        }
    }
}

/// The server no longer has this member in the group, or the group at all.
fn group_gone(error: &IggyError) -> bool {
    matches!(
        error,
        IggyError::ConsumerGroupMemberNotFound(..)
            | IggyError::ConsumerGroupIdNotFound(..)
            | IggyError::ConsumerGroupNameNotFound(..)
    )
}

/// The messages after the stored offset, in `partition` (or, in a group, one the
/// server picks among the member's), without moving the offset.
async fn poll(
    client: &IggyClient,
    topic: &TopicIds,
    partition: Option<u32>,
    consumer: &Consumer,
    max: u32,
) -> Result<iggy::prelude::PolledMessages, IggyError> {
    let strategy = PollingStrategy::next();
    client.poll_messages(&topic.stream_id, &topic.topic_id, partition, consumer, &strategy, max, false).await
}
