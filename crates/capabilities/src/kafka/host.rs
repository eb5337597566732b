//! The `kafka` interface of the contract, served to one instance through its
//! [`KafkaView`]: the clusters its connector was granted, its table of handles, its
//! log and the time left of the call.
//!
//! A produce enqueues every message before it awaits any delivery report (librdkafka
//! batches what is queued), on an idempotent producer: its own retries store each
//! message once. A read goes through a consumer of assigned partitions
//! (`consumer.rs`). Every call runs within what is left of the guest's call (less a
//! margin, so that the guest can still answer); past it the call is `timed-out`.
//! librdkafka reconnects by itself, so a client is kept across failures. What the
//! cluster refuses (a message, a request) is a value of the call; every failure of the
//! connection is a value for the guest and a warning in the log under the connector's
//! key.

use std::time::Duration;

use ferry_contract::wit::kafka::{self as contract, Connection, Error, Host, HostConnection, Position, Produced};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _, PurgeConfig};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::KafkaState;
use super::clusters::Served;
use super::consumer::{self, Consumer};
use super::login::Login;
use super::packed::Packed;
use crate::GuestData;
use crate::deadline::Deadline;
use crate::handles::hold;
use crate::logging::GuestLog;

/// A guest's open connection: its producer and its consumer, each made when first
/// used. Kept in the instance's table; the guest holds a handle to it.
struct KafkaConnection {
    name: String,
    served: Served,
    login: Login,
    producer: Option<FutureProducer<Login>>,
    consumer: Option<Consumer>,
}

// Closed aside (`consumer::drop_aside`) whether the guest drops its handle or the
// instance goes with its table: never on the thread that drops it.
impl Drop for KafkaConnection {
    fn drop(&mut self) {
        let clients = (self.producer.take(), self.consumer.take());
        if clients.0.is_some() || clients.1.is_some() {
            consumer::drop_aside(clients);
        }
    }
}

/// What a Kafka call sees of the store.
pub struct KafkaView<'a> {
    state: &'a mut KafkaState,
    table: &'a mut ResourceTable,
    log: &'a GuestLog,
    /// What is left of the guest's call.
    remaining: Duration,
}

struct KafkaHost;

impl HasData for KafkaHost {
    type Data<'a> = KafkaView<'a>;
}

pub(super) fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    contract::add_to_linker::<T, KafkaHost>(linker, |data| {
        let guest = data.guest();
        let states = guest.states;
        KafkaView { state: &mut states.kafka, table: guest.table, log: &states.logging, remaining: guest.remaining }
    })
}

/// The connection behind a guest's handle (the contract's `Connection` is bindgen's
/// placeholder; the table holds a `KafkaConnection` under the handle's number).
fn ours(handle: &Resource<Connection>) -> Resource<KafkaConnection> {
    Resource::new_borrow(handle.rep())
}

impl Host for KafkaView<'_> {}

impl HostConnection for KafkaView<'_> {
    async fn open(&mut self, name: String) -> Result<Resource<Connection>, Error> {
        let Some(served) = self.state.clusters.get(&name) else {
            let problem = format!("the cluster `{name}` is not in this connector's grants.kafka");
            self.log.host_warning(&format!("kafka: {problem}"));
            return Err(Error::NotGranted(problem));
        };
        let login = Login::of(served);
        let connection = KafkaConnection { name, served: served.clone(), login, producer: None, consumer: None };
        hold(self.table, connection).map_err(|problem| {
            self.log.host_warning(&format!("kafka: {problem}"));
            Error::Connection(problem)
        })
    }

    async fn produce(&mut self, this: Resource<Connection>, messages: Vec<u8>) -> Result<Vec<Result<Produced, String>>, Error> {
        let what = format!("producing a batch of {} bytes", messages.len());
        let answers = self.within(&this, what, async |connection, _| {
            if connection.producer.is_none() {
                connection.producer = Some(producer(&connection.served, &connection.login)?);
            }
            let producer = connection.producer.as_ref().expect("made just now");
            // Every message read before any is queued: a buffer cut short sends none.
            let messages: Vec<_> = Packed::new(&messages).collect::<Result<_, _>>().map_err(Error::Invalid)?;
            // Every message queued first; then each delivery report.
            let mut pending = Vec::with_capacity(messages.len());
            for message in messages {
                let mut headers = OwnedHeaders::new_with_capacity(message.headers.len());
                for &(key, value) in &message.headers {
                    headers = headers.insert(Header { key, value: Some(value) });
                }
                let mut record = FutureRecord::<[u8], [u8]>::to(message.topic).payload(message.payload).headers(headers);
                record.key = message.key;
                record.partition = message.partition;
                record.timestamp = message.timestamp;
                pending.push(producer.send_result(record).map_err(|(error, _)| error));
            }
            let mut answers = Vec::with_capacity(pending.len());
            for queued in pending {
                answers.push(match queued {
                    Ok(delivery) => match delivery.await {
                        Ok(Ok(delivered)) => Ok(Produced { partition: delivered.partition, offset: delivered.offset }),
                        Ok(Err((error, _))) => Err(refusal(error)?),
                        Err(_) => return Err(Error::Connection("the producer was closed before it answered".into())),
                    },
                    Err(error) => Err(refusal(error)?),
                });
            }
            Ok(answers)
        })
        .await;
        // What a failed call (timed out, refused) left queued would be sent with the
        // retry's copies: dropped, unsent (what was in flight may still be stored, at
        // most once more).
        if answers.is_err()
            && let Ok(KafkaConnection { producer: Some(producer), .. }) = self.table.get(&ours(&this))
        {
            producer.purge(PurgeConfig::default().queue().non_blocking());
        }
        answers
    }

    async fn assign(
        &mut self,
        this: Resource<Connection>,
        group: String,
        topics: Vec<String>,
        starts: Vec<Position>,
        from_earliest: bool,
    ) -> Result<Result<Vec<Position>, String>, Error> {
        let what = format!("assigning the partitions of {} to the group {group:?}", named(&topics));
        self.within(&this, what, async |connection, budget| {
            let existing = connection.consumer.take();
            let assigned =
                consumer::assign(
                    &connection.name,
                    &connection.served,
                    &connection.login,
                    existing,
                    &group,
                    &topics,
                    &starts,
                    from_earliest,
                    budget,
                )
                .await?;
            Ok(assigned.map(|(consumer, positions)| {
                connection.consumer = Some(consumer);
                positions
            }))
        })
        .await
    }

    async fn fetch(
        &mut self,
        this: Resource<Connection>,
        max_messages: u32,
        max_wait_ms: u32,
    ) -> Result<Result<Vec<u8>, String>, Error> {
        self.within(&this, "fetching".into(), async |connection, budget| {
            let Some(consumer) = &connection.consumer else {
                return Ok(Err("nothing is assigned to this connection: call assign first".into()));
            };
            let wait = Duration::from_millis(u64::from(max_wait_ms)).min(budget / 2);
            consumer::fetch(consumer, max_messages, wait).await
        })
        .await
    }

    async fn commit(&mut self, this: Resource<Connection>, positions: Vec<Position>) -> Result<Result<(), String>, Error> {
        let what = format!("committing {} offset(s)", positions.len());
        self.within(&this, what, async |connection, _| {
            let Some(consumer) = &connection.consumer else {
                return Ok(Err("nothing is assigned to this connection: call assign first".into()));
            };
            Ok(consumer::commit(consumer, &positions))
        })
        .await
    }

    async fn drop(&mut self, this: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(Resource::<KafkaConnection>::new_own(this.rep()))?;
        Ok(())
    }
}

impl KafkaView<'_> {
    /// Run `call` on the connection behind `this` within what is left of the guest's
    /// call (given to it, for librdkafka's own time-outs), failing it at once if the
    /// cluster refuses the login meanwhile; a failure is logged.
    async fn within<R>(
        &mut self,
        this: &Resource<Connection>,
        what: String,
        call: impl AsyncFnOnce(&mut KafkaConnection, Duration) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let deadline = Deadline::of_call(self.remaining);
        let connection = self.table.get_mut(&ours(this)).map_err(|e| Error::Connection(e.to_string()))?;
        let login = connection.login.clone();
        let refusal = login.refusal();
        let result = tokio::select! {
            result = deadline.run(&what, call(connection, deadline.budget())) => {
                result.unwrap_or_else(|late| Err(Error::TimedOut(late)))
            }
            refused = refusal => Err(Error::Connection(refused)),
        };
        // A connection that failed (or a call that waited for one) while the login is
        // refused failed for that.
        let result = match result {
            Err(Error::Connection(_) | Error::TimedOut(_)) if let Some(refused) = login.last_refusal() => {
                Err(Error::Connection(refused))
            }
            other => other,
        };
        if result.is_ok() {
            login.worked();
        }
        let connection = self.table.get(&ours(this)).map_err(|e| Error::Connection(e.to_string()))?;
        if let Err(error) = &result {
            self.log.host_warning(&format!("kafka `{}`: {}", connection.name, describe(error)));
        }
        result
    }
}

/// An idempotent producer of `served` (acks from every in-sync replica; its own
/// retries store a message once), sending what is queued at once.
fn producer(served: &Served, login: &Login) -> Result<FutureProducer<Login>, Error> {
    let mut config = ClientConfig::new();
    // A batch is awaited whole: waiting for more to fill librdkafka's own batches only
    // adds latency. An operator's `properties` may say otherwise.
    config.set("linger.ms", "0");
    for (name, value) in &served.properties {
        config.set(name, value);
    }
    config.set("enable.idempotence", "true").set("acks", "all");
    config
        .create_with_context(login.clone())
        .map_err(|e| Error::Connection(format!("cannot make a producer for {}: {e}", served.brokers)))
}

/// A failed message: its own refusal (`Ok`: too large, invalid), or the
/// connection's failure (`Err`: the cluster unreachable, no such topic, timed out),
/// which fails the whole call, so that the batch is tried again.
fn refusal(error: KafkaError) -> Result<String, Error> {
    use RDKafkaErrorCode::*;
    match error.rdkafka_error_code() {
        Some(MessageSizeTooLarge | InvalidMessage | InvalidMessageSize | InvalidRecord | PolicyViolation) => {
            Ok(error.to_string())
        }
        _ => Err(Error::Connection(format!("producing failed: {error}"))),
    }
}

/// How many topics a warning names before it only counts the rest.
const NAMED_TOPICS: usize = 5;

/// `["a", "b"]`, or the first [`NAMED_TOPICS`] and how many more: a warning a line long.
fn named(topics: &[String]) -> String {
    match topics.len().checked_sub(NAMED_TOPICS) {
        Some(more) if more > 0 => format!("{:?} and {more} more topic(s)", &topics[..NAMED_TOPICS]),
        _ => format!("{topics:?}"),
    }
}

fn describe(error: &Error) -> String {
    match error {
        Error::NotGranted(p) => format!("not granted: {p}"),
        Error::Connection(p) => p.clone(),
        Error::Invalid(p) => format!("invalid: {p}"),
        Error::TimedOut(p) => format!("timed out: {p}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_warning_names_a_few_topics_and_counts_the_rest() {
        let topics: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
        assert_eq!(super::named(&topics[..2]), r#"["t0", "t1"]"#);
        assert_eq!(super::named(&topics[..5]), r#"["t0", "t1", "t2", "t3", "t4"]"#);
        assert_eq!(super::named(&topics), r#"["t0", "t1", "t2", "t3", "t4"] and 3 more topic(s)"#);
    }
}
