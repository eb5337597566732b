//! The `nats` interface of the contract, served to one instance through its
//! [`NatsView`]: the servers its connector was granted, its table of handles, its log
//! and the time left of the call.
//!
//! A publish sends every message before it awaits any acknowledgement (JetStream
//! answers each on its own); a read goes through a durable pull consumer
//! (`consumers.rs`). Every call runs within what is left of the guest's call (less a
//! margin, so that the guest can still answer); past it the call is `timed-out` and
//! its connection is dropped. What the server refuses (a message, a request) is a
//! value of the call; every failure of the connection is a value for the guest and a
//! warning in the log under the connector's key.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::{self, Context};
use async_nats::{ConnectOptions, HeaderMap};
use ferry_contract::wit::nats::{
    self as contract, Connection, ConsumerState, Error, Host, HostConnection, Outgoing, Published, PullConsumer as Wanted,
};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::consumers;
use super::servers::Served;
use super::{Credentials, NatsState};
use crate::GuestData;
use crate::deadline::Deadline;
use crate::handles::hold;
use crate::logging::GuestLog;

/// A guest's open connection: connected when first used, and again after it broke or
/// timed out. Kept in the instance's table; the guest holds a handle to it.
struct NatsConnection {
    name: String,
    served: Served,
    jetstream: Option<Context>,
    /// The pull consumers read through this connection, by stream and durable name;
    /// forgotten with the connection.
    consumers: HashMap<(String, String), PullConsumer>,
}

impl NatsConnection {
    /// The JetStream context, connecting first if there is none.
    async fn jetstream(&mut self) -> Result<&Context, Error> {
        if self.jetstream.is_none() {
            self.consumers.clear();
            self.jetstream = Some(connect(&self.served).await?);
        }
        Ok(self.jetstream.as_ref().expect("connected just now"))
    }
}

/// What a NATS call sees of the store.
pub struct NatsView<'a> {
    state: &'a mut NatsState,
    table: &'a mut ResourceTable,
    log: &'a GuestLog,
    /// What is left of the guest's call.
    remaining: Duration,
}

struct NatsHost;

impl HasData for NatsHost {
    type Data<'a> = NatsView<'a>;
}

pub(super) fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    contract::add_to_linker::<T, NatsHost>(linker, |data| {
        let guest = data.guest();
        let states = guest.states;
        NatsView { state: &mut states.nats, table: guest.table, log: &states.logging, remaining: guest.remaining }
    })
}

/// The connection behind a guest's handle (the contract's `Connection` is bindgen's
/// placeholder; the table holds a `NatsConnection` under the handle's number).
fn ours(handle: &Resource<Connection>) -> Resource<NatsConnection> {
    Resource::new_borrow(handle.rep())
}

impl Host for NatsView<'_> {}

impl HostConnection for NatsView<'_> {
    async fn open(&mut self, name: String) -> Result<Resource<Connection>, Error> {
        let Some(served) = self.state.servers.get(&name) else {
            let problem = format!("the server `{name}` is not in this connector's grants.nats");
            self.log.host_warning(&format!("nats: {problem}"));
            return Err(Error::NotGranted(problem));
        };
        let connection = NatsConnection { name, served: served.clone(), jetstream: None, consumers: HashMap::new() };
        hold(self.table, connection).map_err(|problem| {
            self.log.host_warning(&format!("nats: {problem}"));
            Error::Connection(problem)
        })
    }

    async fn publish(
        &mut self,
        this: Resource<Connection>,
        messages: Vec<Outgoing>,
    ) -> Result<Vec<Result<Published, String>>, Error> {
        let what = format!("publishing {} message(s)", messages.len());
        self.within(&this, what, async |connection| {
            let jetstream = connection.jetstream().await?;
            // Every message out first; then each acknowledgement.
            let mut pending = Vec::with_capacity(messages.len());
            for Outgoing { subject, headers, payload } in messages {
                let mut map = HeaderMap::new();
                for (name, value) in &headers {
                    map.insert(name.as_str(), value.as_str());
                }
                pending.push(match jetstream.publish_with_headers(subject, map, payload.into()).await {
                    Ok(acknowledgement) => Ok(acknowledgement),
                    Err(error) => Err(refusal(error)?),
                });
            }
            let mut answers = Vec::with_capacity(pending.len());
            for sent in pending {
                answers.push(match sent {
                    Ok(acknowledgement) => match acknowledgement.await {
                        Ok(ack) => Ok(Published { stream: ack.stream, sequence: ack.sequence, duplicate: ack.duplicate }),
                        Err(error) => Err(refusal(error)?),
                    },
                    Err(refused) => Err(refused),
                });
            }
            Ok(answers)
        })
        .await
    }

    async fn consumer_state(
        &mut self,
        this: Resource<Connection>,
        stream: String,
        durable: String,
    ) -> Result<Result<Option<ConsumerState>, String>, Error> {
        let what = format!("reading the state of the consumer {durable:?} of the stream {stream:?}");
        self.within(&this, what, async |connection| consumers::state(connection.jetstream().await?, &stream, &durable).await)
            .await
    }

    async fn make_consumer(
        &mut self,
        this: Resource<Connection>,
        wanted: Wanted,
        start: Option<u64>,
    ) -> Result<Result<(), String>, Error> {
        let what = format!("making the consumer {:?} of the stream {:?}", wanted.durable, wanted.stream);
        self.within(&this, what, async |connection| {
            let key = (wanted.stream.clone(), wanted.durable.clone());
            connection.consumers.remove(&key);
            Ok(match consumers::make(connection.jetstream().await?, &wanted, start).await? {
                Ok(consumer) => {
                    connection.consumers.insert(key, consumer);
                    Ok(())
                }
                Err(refused) => Err(refused),
            })
        })
        .await
    }

    async fn fetch(
        &mut self,
        this: Resource<Connection>,
        stream: String,
        durable: String,
        max_messages: u32,
    ) -> Result<Result<Vec<u8>, String>, Error> {
        let what = format!("fetching from the consumer {durable:?} of the stream {stream:?}");
        self.within(&this, what, async |connection| {
            let key = (stream, durable);
            if !connection.consumers.contains_key(&key) {
                match consumers::find(connection.jetstream().await?, &key.0, &key.1).await? {
                    Ok(consumer) => connection.consumers.insert(key.clone(), consumer),
                    Err(refused) => return Ok(Err(refused)),
                };
            }
            consumers::fetch(&connection.consumers[&key], max_messages).await
        })
        .await
    }

    async fn acknowledge(&mut self, this: Resource<Connection>, replies: Vec<String>) -> Result<Result<(), String>, Error> {
        let what = format!("acknowledging {} message(s)", replies.len());
        self.within(&this, what, async |connection| {
            let client = connection.jetstream().await?.client();
            let read = |reply: &String| {
                consumers::acknowledged(reply).is_some_and(|(stream, durable)| {
                    connection.consumers.contains_key(&(stream.to_string(), durable.to_string()))
                })
            };
            if let Some(other) = replies.iter().find(|reply| !read(reply)) {
                return Ok(Err(format!(
                    "{other:?} does not acknowledge a message of a consumer this connection reads"
                )));
            }
            for reply in replies {
                client
                    .publish(reply, "+ACK".into())
                    .await
                    .map_err(|e| Error::Connection(format!("acknowledging failed: {e}")))?;
            }
            client.flush().await.map_err(|e| Error::Connection(format!("acknowledging failed: {e}")))?;
            Ok(Ok(()))
        })
        .await
    }

    async fn drop(&mut self, this: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(Resource::<NatsConnection>::new_own(this.rep()))?;
        Ok(())
    }
}

impl NatsView<'_> {
    /// Run `call` on the connection behind `this` within what is left of the guest's
    /// call; a failure of the connection (or the deadline) drops it, so that the next
    /// use starts afresh (what was sent may still be answered late), and is logged.
    async fn within<R>(
        &mut self,
        this: &Resource<Connection>,
        what: String,
        call: impl AsyncFnOnce(&mut NatsConnection) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let deadline = Deadline::of_call(self.remaining);
        let connection = self.table.get_mut(&ours(this)).map_err(|e| Error::Connection(e.to_string()))?;
        let result = deadline.run(&what, call(connection)).await.unwrap_or_else(|late| Err(Error::TimedOut(late)));
        if let Err(error) = &result {
            connection.jetstream = None;
            connection.consumers.clear();
            self.log.host_warning(&format!("nats `{}`: {}", connection.name, describe(error)));
        }
        result
    }
}

/// A failed publish: the message's own refusal (`Ok`: no stream takes its subject, it
/// is too big, the stream refused it), or the connection's failure (`Err`: it broke,
/// or an acknowledgement did not come), which fails the whole call.
fn refusal(error: PublishError) -> Result<String, Error> {
    match error.kind() {
        PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe | PublishErrorKind::MaxAckPending => {
            Err(Error::Connection(format!("publishing failed: {error}")))
        }
        _ => Ok(error.to_string()),
    }
}

/// A JetStream context on a new connection to `served`, within its `connect_timeout`.
async fn connect(served: &Served) -> Result<Context, Error> {
    let mut options = ConnectOptions::new().connection_timeout(served.connect_timeout).name("ferry");
    options = match &served.credentials {
        Credentials::None => options,
        Credentials::UserAndPassword(user, password) => options.user_and_password(user.clone(), password.clone()),
        Credentials::Token(token) => options.token(token.clone()),
    };
    let client = options
        .connect(served.address.as_str())
        .await
        .map_err(|e| Error::Connection(format!("cannot connect to {}: {e}", served.address)))?;
    Ok(jetstream::new(client))
}

fn describe(error: &Error) -> String {
    match error {
        Error::NotGranted(p) => format!("not granted: {p}"),
        Error::Connection(p) => p.clone(),
        Error::TimedOut(p) => format!("timed out: {p}"),
    }
}
