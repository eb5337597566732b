//! The `mqtt` interface of the contract, served to one instance through its
//! [`MqttView`]: the brokers its connector was granted, its table of handles, its log
//! and the time left of the call.
//!
//! Every call runs within what is left of the guest's call (less a margin, so that the
//! guest can still answer); past it the call is `timed-out` and its connection is
//! dropped, as it is when it fails: the next call dials again. Every failure is a
//! value for the guest and a warning in the log under the connector's key.

use std::time::Duration;

use ferry_contract::wit::mqtt::{self as contract, Error, Host, HostSession, Incoming, Outgoing, Qos, Session};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::MqttState;
use super::session::Session as Ours;
use crate::GuestData;
use crate::deadline::Deadline;
use crate::handles::hold;
use crate::logging::GuestLog;

/// The most messages one `receive` hands over.
const MAX_RECEIVE: u32 = 10_000;

/// What an MQTT call sees of the store.
pub struct MqttView<'a> {
    state: &'a mut MqttState,
    table: &'a mut ResourceTable,
    log: &'a GuestLog,
    /// What is left of the guest's call.
    remaining: Duration,
}

struct MqttHost;

impl HasData for MqttHost {
    type Data<'a> = MqttView<'a>;
}

pub(super) fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    contract::add_to_linker::<T, MqttHost>(linker, |data| {
        let guest = data.guest();
        let states = guest.states;
        MqttView { state: &mut states.mqtt, table: guest.table, log: &states.logging, remaining: guest.remaining }
    })
}

/// The session behind a guest's handle (the contract's `Session` is bindgen's
/// placeholder; the table holds ours under the handle's number).
fn ours(handle: &Resource<Session>) -> Resource<Ours> {
    Resource::new_borrow(handle.rep())
}

impl Host for MqttView<'_> {}

impl HostSession for MqttView<'_> {
    async fn open(&mut self, name: String, client_id: String, persistent: bool) -> Result<Resource<Session>, Error> {
        let Some(broker) = self.state.brokers.get(&name) else {
            let problem = format!("the broker `{name}` is not in this connector's grants.mqtt");
            self.log.host_warning(&format!("mqtt: {problem}"));
            return Err(Error::NotGranted(problem));
        };
        if client_id.is_empty() || client_id.len() > 256 {
            return Err(Error::Connection(format!("the client id {client_id:?} is empty or longer than 256 bytes")));
        }
        let session = Ours::new(name, broker.clone(), client_id, persistent);
        hold(self.table, session).map_err(|problem| {
            self.log.host_warning(&format!("mqtt: {problem}"));
            Error::Connection(problem)
        })
    }

    async fn publish(&mut self, this: Resource<Session>, messages: Vec<Outgoing>) -> Result<(), Error> {
        let what = format!("publishing {} message(s)", messages.len());
        self.within(&this, what, async |session| session.publish(messages).await).await
    }

    async fn subscribe(&mut self, this: Resource<Session>, filters: Vec<(String, Qos)>) -> Result<Result<(), String>, Error> {
        let what = format!("subscribing to {} filter(s)", filters.len());
        self.within(&this, what, async |session| session.subscribe(filters).await).await
    }

    async fn receive(&mut self, this: Resource<Session>, max_messages: u32, wait_ms: u32) -> Result<Vec<Incoming>, Error> {
        let max = max_messages.clamp(1, MAX_RECEIVE) as usize;
        // Never past the call's deadline: an empty answer before it, not a time-out.
        let wait = Duration::from_millis(u64::from(wait_ms)).min(Deadline::of_call(self.remaining).budget() / 2);
        self.within(&this, "receiving".into(), async |session| session.receive(max, wait).await).await
    }

    async fn acknowledge(&mut self, this: Resource<Session>, ticket: u64) -> Result<(), Error> {
        let what = format!("acknowledging up to message {ticket}");
        self.within(&this, what, async |session| session.acknowledge(ticket).await).await
    }

    async fn drop(&mut self, this: Resource<Session>) -> wasmtime::Result<()> {
        self.table.delete(Resource::<Ours>::new_own(this.rep()))?;
        Ok(())
    }
}

impl MqttView<'_> {
    /// Run `call` on the session behind `this` within what is left of the guest's
    /// call; a failure (or the deadline) drops its connection and is logged.
    async fn within<R>(
        &mut self,
        this: &Resource<Session>,
        what: String,
        call: impl AsyncFnOnce(&mut Ours) -> Result<R, String>,
    ) -> Result<R, Error> {
        let session = self.table.get_mut(&ours(this)).map_err(|e| Error::Connection(e.to_string()))?;
        let result = match Deadline::of_call(self.remaining).run(&what, call(session)).await {
            Ok(result) => result.map_err(Error::Connection),
            Err(late) => Err(Error::TimedOut(late)),
        };
        if let Err(error) = &result {
            session.drop_connection();
            let said = match error {
                Error::NotGranted(p) | Error::Connection(p) => p.clone(),
                Error::TimedOut(p) => format!("timed out: {p}"),
            };
            self.log.host_warning(&format!("mqtt `{}`: {said}", session.name));
        }
        result
    }
}
