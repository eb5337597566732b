//! One guest session with a broker: a `rumqttc` client and its event loop, driven only
//! inside the guest's calls (a call polls the loop until what it asked for is done),
//! so that no task outlives the instance and nothing happens behind the guest's back.
//! Between calls the connection idles; a broker that dropped it meanwhile is dialled
//! again on the next call (a persistent session's messages wait at the broker).
//!
//! Messages received at QoS 1 and 2 are acknowledged (PUBACK / PUBREC) only when the
//! guest acknowledges them, oldest first, and the call returns once the broker took
//! the acknowledgements (a ping answered after them). A connection that fails is dropped with
//! everything it received and did not acknowledge: the broker sends that again.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use ferry_contract::wit::mqtt::{Incoming, Outgoing, Qos};
use rumqttc::{AsyncClient, ConnectionError, Event, EventLoop, MqttOptions, Outgoing as Sent, Packet, Publish, QoS};
use rumqttc::{PubAck, PubRec, SubscribeFilter, SubscribeReasonCode};

use super::brokers::Reached;

/// The most bytes one MQTT packet may take, either way.
const MAX_PACKET: usize = 16 << 20;
/// Publishes and acknowledgements queued for the event loop at a time.
const QUEUE: usize = 1024;

/// A session as the guest holds it: connected when first used, and again after its
/// connection broke.
pub(super) struct Session {
    pub name: String,
    broker: Reached,
    client_id: String,
    persistent: bool,
    /// What the guest subscribed to, made again on a connection without the session.
    subscriptions: Vec<(String, QoS)>,
    connected: Option<Connected>,
    /// The ticket the next message received gets.
    next_ticket: u64,
}

struct Connected {
    client: AsyncClient,
    events: EventLoop,
    /// Received and not yet handed to the guest.
    arrived: VecDeque<Incoming>,
    /// Handed to the guest and not acknowledged, oldest first, by ticket.
    unacknowledged: VecDeque<(u64, Publish)>,
}

impl Session {
    pub fn new(name: String, broker: Reached, client_id: String, persistent: bool) -> Session {
        Session { name, broker, client_id, persistent, subscriptions: Vec::new(), connected: None, next_ticket: 1 }
    }

    /// Forget the connection (it failed, or a call on it ran out of time).
    pub fn drop_connection(&mut self) {
        self.connected = None;
    }

    pub async fn publish(&mut self, mut messages: Vec<Outgoing>) -> Result<(), String> {
        for chunk in messages.chunks_mut(QUEUE) {
            let (connected, tickets) = self.connection().await?;
            for message in chunk.iter_mut() {
                // The payload moves to the client, not copied: the call owns it.
                let payload = std::mem::take(&mut message.payload);
                connected
                    .client
                    .try_publish(message.topic.as_str(), to_qos(message.qos), message.retain, payload)
                    .map_err(|e| format!("cannot publish to {:?}: {e}", message.topic))?;
            }
            // Each publish goes out in order; one of QoS 1 or 2 is done at its PUBACK or
            // PUBCOMP, which comes after it went out.
            let (mut sent, mut pending) = (0, HashSet::new());
            while sent < chunk.len() || !pending.is_empty() {
                match connected.poll(tickets).await? {
                    Some(Event::Outgoing(Sent::Publish(id))) => {
                        if to_qos(chunk[sent].qos) != QoS::AtMostOnce {
                            pending.insert(id);
                        }
                        sent += 1;
                    }
                    Some(Event::Incoming(Packet::PubAck(ack))) => {
                        pending.remove(&ack.pkid);
                    }
                    Some(Event::Incoming(Packet::PubComp(done))) => {
                        pending.remove(&done.pkid);
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Subscribe to `filters`; `Ok(Err)` names a filter the broker refused.
    pub async fn subscribe(&mut self, filters: Vec<(String, Qos)>) -> Result<Result<(), String>, String> {
        let filters: Vec<(String, QoS)> = filters.into_iter().map(|(path, qos)| (path, to_qos(qos))).collect();
        let (connected, tickets) = self.connection().await?;
        let refused = connected.subscribe(&filters, tickets).await?;
        if let Some(refused) = refused {
            return Ok(Err(format!("the broker refused the subscription to {refused:?}")));
        }
        for (path, qos) in filters {
            self.subscriptions.retain(|(taken, _)| *taken != path);
            self.subscriptions.push((path, qos));
        }
        Ok(Ok(()))
    }

    /// Up to `max` messages: waits up to `wait` for the first, then takes what arrived.
    pub async fn receive(&mut self, max: usize, wait: Duration) -> Result<Vec<Incoming>, String> {
        let (connected, tickets) = self.connection().await?;
        let deadline = tokio::time::Instant::now() + wait;
        while connected.arrived.len() < max {
            // Once a message is here, only what is already read: no waiting for more.
            if !connected.arrived.is_empty() && connected.events.state.events.is_empty() {
                break;
            }
            match tokio::time::timeout_at(deadline, connected.poll(tickets)).await {
                Ok(event) => event?,
                Err(_) => break,
            };
        }
        let count = connected.arrived.len().min(max);
        Ok(connected.arrived.drain(..count).collect())
    }

    /// Acknowledge every message handed to the guest up to `ticket`, oldest first.
    pub async fn acknowledge(&mut self, ticket: u64) -> Result<(), String> {
        let Some(connected) = self.connected.as_mut() else { return Ok(()) };
        let mut acknowledgements = Vec::new();
        while connected.unacknowledged.front().is_some_and(|(taken, _)| *taken <= ticket) {
            let (_, publish) = connected.unacknowledged.pop_front().expect("just looked");
            match publish.qos {
                QoS::AtMostOnce => {}
                QoS::AtLeastOnce => acknowledgements.push(Packet::PubAck(PubAck::new(publish.pkid))),
                // The client's state knows the message (it answers the PUBREL itself).
                QoS::ExactlyOnce => acknowledgements.push(Packet::PubRec(PubRec::new(publish.pkid))),
            }
        }
        if acknowledgements.is_empty() {
            return Ok(());
        }
        // Sent is not taken: a process killed with messages unread on its socket resets
        // the connection, and the broker drops what it had not read yet. The broker
        // answers packets in order, so its answer to a ping sent after the
        // acknowledgements means it took them (a keep-alive ping already out is
        // answered first, and proves nothing).
        while connected.events.state.await_pingresp {
            connected.poll(&mut self.next_ticket).await?;
        }
        // Written straight into the connection, one flush for all: the client's request
        // queue would write and flush each on its own (a system call each).
        let written = |e| format!("cannot acknowledge: {e:?}");
        let network = connected.events.network.as_mut().ok_or("cannot acknowledge: the connection is gone")?;
        for packet in acknowledgements {
            network.write(packet).await.map_err(written)?;
        }
        network.write(Packet::PingReq).await.map_err(written)?;
        network.flush().await.map_err(written)?;
        loop {
            if let Some(Event::Incoming(Packet::PingResp)) = connected.poll(&mut self.next_ticket).await? {
                return Ok(());
            }
        }
    }

    /// The connection, dialled (and the subscriptions made again, if the broker has
    /// no session for us) when there is none; and the ticket counter.
    async fn connection(&mut self) -> Result<(&mut Connected, &mut u64), String> {
        if self.connected.is_none() {
            let mut options = MqttOptions::new(&self.client_id, &self.broker.host, self.broker.port);
            options
                .set_keep_alive(self.broker.keep_alive)
                .set_clean_session(!self.persistent)
                .set_manual_acks(true)
                .set_max_packet_size(MAX_PACKET, MAX_PACKET);
            if let Some((user, password)) = &self.broker.credentials {
                options.set_credentials(user, password);
            }
            let (client, mut events) = AsyncClient::new(options, QUEUE);
            events.network_options.set_connection_timeout(self.broker.connect_timeout.as_secs().max(1));
            // An acknowledgement or a ping is a small packet the call waits on: with
            // Nagle's algorithm it would wait for the broker's delayed ACK (~40 ms).
            events.network_options.set_tcp_nodelay(true);
            let address = format!("{}:{}", self.broker.host, self.broker.port);
            let session_present = loop {
                match events.poll().await.map_err(|e| connection_failed(&address, e))? {
                    Event::Incoming(Packet::ConnAck(connack)) => break connack.session_present,
                    _ => continue,
                }
            };
            let mut connected =
                Connected { client, events, arrived: VecDeque::new(), unacknowledged: VecDeque::new() };
            if !session_present
                && !self.subscriptions.is_empty()
                && let Some(refused) = connected.subscribe(&self.subscriptions, &mut self.next_ticket).await?
            {
                return Err(format!("the broker refused the subscription to {refused:?} again"));
            }
            self.connected = Some(connected);
        }
        Ok((self.connected.as_mut().expect("connected just now"), &mut self.next_ticket))
    }
}

impl Connected {
    /// The next event of the loop; a message received is kept (with its ticket) for the
    /// guest, and returned as `None`.
    async fn poll(&mut self, next_ticket: &mut u64) -> Result<Option<Event>, String> {
        match self.events.poll().await.map_err(|e| format!("the connection failed: {e}"))? {
            Event::Incoming(Packet::Publish(publish)) => {
                let ticket = *next_ticket;
                *next_ticket += 1;
                self.arrived.push_back(Incoming {
                    topic: publish.topic.clone(),
                    payload: publish.payload.to_vec(),
                    qos: from_qos(publish.qos),
                    retain: publish.retain,
                    duplicate: publish.dup,
                    ticket,
                });
                self.unacknowledged.push_back((ticket, publish));
                Ok(None)
            }
            event => Ok(Some(event)),
        }
    }

    /// Subscribe to `filters` and wait for the broker's answer: the first filter it
    /// refused, if any.
    async fn subscribe(&mut self, filters: &[(String, QoS)], next_ticket: &mut u64) -> Result<Option<String>, String> {
        let wanted = filters.iter().map(|(path, qos)| SubscribeFilter::new(path.clone(), *qos));
        self.client.subscribe_many(wanted).await.map_err(|e| format!("cannot subscribe: {e}"))?;
        loop {
            if let Some(Event::Incoming(Packet::SubAck(answer))) = self.poll(next_ticket).await? {
                let refused = answer.return_codes.iter().position(|code| *code == SubscribeReasonCode::Failure);
                return Ok(refused.map(|index| filters[index].0.clone()));
            }
        }
    }
}

fn connection_failed(address: &str, error: ConnectionError) -> String {
    match error {
        ConnectionError::ConnectionRefused(code) => format!("the broker at {address} refused the session: {code:?}"),
        other => format!("cannot connect to {address}: {other}"),
    }
}

fn to_qos(qos: Qos) -> QoS {
    match qos {
        Qos::AtMostOnce => QoS::AtMostOnce,
        Qos::AtLeastOnce => QoS::AtLeastOnce,
        Qos::ExactlyOnce => QoS::ExactlyOnce,
    }
}

fn from_qos(qos: QoS) -> Qos {
    match qos {
        QoS::AtMostOnce => Qos::AtMostOnce,
        QoS::AtLeastOnce => Qos::AtLeastOnce,
        QoS::ExactlyOnce => Qos::ExactlyOnce,
    }
}
