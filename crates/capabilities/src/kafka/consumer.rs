//! A consumer of assigned partitions, for the `kafka` interface's reads: assigned from
//! the starts a guest gives (else its group's committed offsets), read in packed
//! batches, and committed only when the guest says so.
//!
//! A commit is sent and not awaited: the guest's cursor, committed by the host before,
//! is what a source resumes from, so a source need not wait a round trip per batch for
//! the group (that wait was 1 ms of a 2.6 ms batch of 100 here). A consumer's commits
//! are cumulative: one that fails is logged, and the next covers it.
//!
//! Why assigned partitions and not a subscription: a ferry source is run by one host
//! at a time, and the guest's own cursor, committed by the host after each delivery,
//! is where a partition resumes; the group's offsets, committed after that, are what
//! Kafka's tools show and where a source without a cursor starts (a Kafka consumer
//! group being moved to ferry resumes where it stopped). A subscription would also
//! depend on the broker's group membership, which the broker we test with (tansu 0.6)
//! does not clean up after a killed member.
//!
//! librdkafka's metadata and committed-offset calls block their thread: each runs on
//! tokio's blocking pool, bounded by the call's budget.

use std::sync::Arc;
use std::time::Duration;

use ferry_contract::wit::kafka::{Error, Position};
use futures::FutureExt;
use rdkafka::config::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{CommitMode, Consumer as _, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::{Offset, TopicPartitionList};

use super::clusters::Served;
use super::login::Login;
use super::packed::pack;

/// The most messages one fetch takes.
pub const MAX_FETCH_MESSAGES: u32 = 10_000;
/// The most bytes one fetch takes.
pub const MAX_FETCH_BYTES: usize = 16 << 20;

/// A consumer and the group and start policy it was made with.
pub struct Consumer {
    group: String,
    from_earliest: bool,
    inner: Arc<StreamConsumer<Answers>>,
}

/// Where librdkafka's answers to a consumer's commits go, which nothing awaits: a
/// failure into the host log, naming the cluster. Its global errors go to the
/// connection's [`Login`].
struct Answers {
    cluster: String,
    login: Login,
}

impl ClientContext for Answers {
    fn error(&self, error: KafkaError, reason: &str) {
        self.login.error(error, reason);
    }
}

impl ConsumerContext for Answers {
    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        if let Err(error) = result {
            tracing::warn!("kafka `{}`: committing a group's offsets failed ({error}); the next commit covers them", self.cluster);
        }
    }
}

/// Assign every partition of `topics` to `existing` (or a new consumer when it reads
/// for another group, or with another start policy), each from its start in `starts`,
/// else the group's committed offset; answers the consumer and where each partition
/// starts (-1: the reset policy's, not known until the first message).
#[allow(clippy::too_many_arguments)]
pub async fn assign(
    cluster: &str,
    served: &Served,
    login: &Login,
    existing: Option<Consumer>,
    group: &str,
    topics: &[String],
    starts: &[Position],
    from_earliest: bool,
    budget: Duration,
) -> Result<Result<(Consumer, Vec<Position>), String>, Error> {
    let (consumer, fresh) = match existing {
        Some(consumer) if consumer.group == group && consumer.from_earliest == from_earliest => (consumer, false),
        other => {
            if let Some(old) = other {
                drop_aside(old);
            }
            match make(cluster, served, login, group, from_earliest) {
                Ok(consumer) => (consumer, true),
                Err(refused) => return Ok(Err(refused)),
            }
        }
    };
    let inner = Arc::clone(&consumer.inner);
    let topics = topics.to_vec();
    let starts = starts.to_vec();
    let asking = login.clone();
    let work = blocking(move || -> Result<Result<Vec<Position>, String>, Error> {
        let mut wanted = TopicPartitionList::new();
        for topic in &topics {
            let metadata = metadata(&inner, topic, budget, &asking)
                .map_err(|e| Error::Connection(format!("reading the metadata of the topic {topic:?} failed: {e}")))?;
            let Some(found) = metadata.topics().iter().find(|found| found.name() == topic) else {
                return Ok(Err(format!("the cluster says nothing of the topic {topic:?}")));
            };
            if let Some(error) = found.error() {
                return Ok(Err(format!("the topic {topic:?}: {:?}", rdkafka::types::RDKafkaErrorCode::from(error))));
            }
            if found.partitions().is_empty() {
                return Ok(Err(format!("the topic {topic:?} has no partitions")));
            }
            for partition in found.partitions() {
                wanted.add_partition(topic, partition.id());
            }
        }
        // The group's committed offsets, for the partitions the guest gave no start.
        let committed = inner
            .committed_offsets(wanted.clone(), budget)
            .map_err(|e| Error::Connection(format!("reading the group's committed offsets failed: {e}")))?;
        let mut assignment = TopicPartitionList::new();
        let mut positions = Vec::new();
        for element in committed.elements() {
            let (topic, partition) = (element.topic(), element.partition());
            let given = starts.iter().find(|start| start.topic == topic && start.partition == partition);
            let offset = match (given, element.offset()) {
                (Some(start), _) => Offset::Offset(start.offset),
                (None, Offset::Offset(committed)) => Offset::Offset(committed),
                (None, _) => Offset::Stored,
            };
            assignment
                .add_partition_offset(topic, partition, offset)
                .map_err(|e| Error::Connection(format!("assigning {topic}/{partition} failed: {e}")))?;
            let offset = match offset {
                Offset::Offset(offset) => offset,
                _ => -1,
            };
            positions.push(Position { topic: topic.to_string(), partition, offset });
        }
        inner.assign(&assignment).map_err(|e| Error::Connection(format!("assigning the partitions failed: {e}")))?;
        Ok(Ok(positions))
    });
    let assigned = if fresh {
        // Nothing is assigned to it yet: what its queue holds are errors.
        tokio::select! {
            assigned = work => assigned,
            never = pass_errors(&consumer, login) => match never {},
        }
    } else {
        work.await
    };
    // On failure the consumer goes: the next assign makes one afresh.
    Ok(assigned?.map(|positions| (consumer, positions)))
}

/// How long one metadata request may wait before it is asked again.
const METADATA_SLICE: Duration = Duration::from_secs(1);

/// The metadata of `topic`, asked again each time a [`METADATA_SLICE`] is waited out
/// while `budget` lasts, unless the login is refused: a request to a cluster that refuses it waits
/// out its whole time-out (or fails as a transport failure).
fn metadata(
    consumer: &StreamConsumer<Answers>,
    topic: &str,
    budget: Duration,
    login: &Login,
) -> KafkaResult<rdkafka::metadata::Metadata> {
    let until = std::time::Instant::now() + budget;
    loop {
        let asked = std::time::Instant::now();
        let left = until.saturating_duration_since(asked);
        match consumer.fetch_metadata(Some(topic), left.min(METADATA_SLICE)) {
            // Asked again only after a slice waited out: a failure that comes at once
            // (a transport failure) is the answer, not a reason to spin.
            Err(_) if asked.elapsed() >= METADATA_SLICE && left > METADATA_SLICE && login.last_refusal().is_none() => {
                continue;
            }
            answer => return answer,
        }
    }
}

/// A new consumer's refused login comes to no request, only to its queue as an error
/// event: read and given to the connection's [`Login`], which fails the call waiting.
async fn pass_errors(consumer: &Consumer, login: &Login) -> std::convert::Infallible {
    loop {
        if let Err(error) = consumer.inner.recv().await {
            let reason = error.to_string();
            login.error(error, &reason);
        }
    }
}

/// A new consumer of `cluster` for `group`, committing nothing by itself.
fn make(cluster: &str, served: &Served, login: &Login, group: &str, from_earliest: bool) -> Result<Consumer, String> {
    let mut config = ClientConfig::new();
    for (name, value) in &served.properties {
        config.set(name, value);
    }
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", if from_earliest { "earliest" } else { "latest" });
    let answers = Answers { cluster: cluster.to_string(), login: login.clone() };
    let inner = config.create_with_context(answers).map_err(|e| format!("cannot make a consumer: {e}"))?;
    Ok(Consumer { group: group.to_string(), from_earliest, inner: Arc::new(inner) })
}

/// Up to `max_messages` of what `consumer` reads, waiting at most `max_wait` for the
/// first and not at all for the rest; packed as the interface's `fetch` says.
pub async fn fetch(consumer: &Consumer, max_messages: u32, max_wait: Duration) -> Result<Result<Vec<u8>, String>, Error> {
    let wanted = max_messages.clamp(1, MAX_FETCH_MESSAGES) as usize;
    let mut packed = Vec::new();
    let first = match tokio::time::timeout(max_wait, consumer.inner.recv()).await {
        Err(_) => return Ok(Ok(packed)),
        Ok(Err(error)) => return Ok(Err(format!("reading failed: {error}"))),
        Ok(Ok(message)) => message,
    };
    packed.reserve(wanted * (48 + first.payload_len()));
    pack(&mut packed, &first);
    drop(first);
    for _ in 1..wanted {
        if packed.len() >= MAX_FETCH_BYTES {
            break;
        }
        // What librdkafka has fetched already; a message not yet here is the next
        // fetch's (recv is cancellation-safe).
        match consumer.inner.recv().now_or_never() {
            Some(Ok(message)) => pack(&mut packed, &message),
            Some(Err(_)) | None => break,
        }
    }
    Ok(Ok(packed))
}

/// Send `positions` to be committed to the consumer's group; not awaited (see the
/// module's doc).
pub fn commit(consumer: &Consumer, positions: &[Position]) -> Result<(), String> {
    let mut offsets = TopicPartitionList::new();
    for Position { topic, partition, offset } in positions {
        offsets
            .add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .map_err(|error| format!("{topic}/{partition} at {offset}: {error}"))?;
    }
    consumer.inner.commit(&offsets, CommitMode::Async).map_err(|e| format!("committing failed: {e}"))
}

/// Drop `clients` (librdkafka's) on a thread of their own. Dropping one waits for its
/// threads, and a consumer's close for its cluster, without a bound when the cluster
/// is gone: not on a runtime's thread, nor on tokio's blocking pool, which a runtime
/// shutting down waits for (a test's runtime hung there, its broker already killed).
pub fn drop_aside<T: Send + 'static>(clients: T) {
    let spawned = std::thread::Builder::new().name("kafka-drop".into()).spawn(move || drop(clients));
    if let Err(error) = spawned {
        tracing::warn!("kafka: no thread to close a client on ({error}): it was closed where it was dropped");
    }
}

/// `call` on tokio's blocking pool.
async fn blocking<R: Send + 'static>(call: impl FnOnce() -> Result<R, Error> + Send + 'static) -> Result<R, Error> {
    tokio::task::spawn_blocking(call).await.map_err(|e| Error::Connection(format!("a Kafka call failed: {e}")))?
}
