//! A source that subscribes to topic filters on an MQTT broker the operator granted
//! (`grants.mqtt`), in a persistent session, and acknowledges each message (PUBACK)
//! only after its batch was delivered and the cursor committed.
//!
//! `plugin_config`:
//!
//! | key          | default  | meaning |
//! |--------------|----------|---------|
//! | `connection` | required | the `[mqtt.NAME]` granted to the connector |
//! | `client_id`  | required | the session's client id: the broker keeps the session, and what it has for it, under this id |
//! | `topics`     | required | the topic filters subscribed to (`+` and `#` wildcards allowed) |
//! | `qos`        | 1        | the subscriptions' QoS: 1 (at least once) or 2 |
//! | `batch_size` | 100      | the most messages a batch takes (1 to 10,000) |
//! | `wait_ms`    | 10       | how long a poll waits for a first message before it says there is none |
//!
//! Nothing is lost: the session is persistent (clean session off), so the broker keeps
//! the subscriptions while ferry is away and queues what arrives; a message is
//! acknowledged only once the host committed the batch that holds it, so one in flight
//! at a crash or a broken connection is sent again by the broker. MQTT 3.1.1 gives a
//! message no id to know it by when it comes again: a message delivered and committed
//! whose acknowledgement did not reach the broker (a crash between the two, a
//! connection that broke) is delivered twice. After a NACK the same messages are
//! delivered again, as the same batch.
//!
//! Each message's payload is kept as it is, with the headers `mqtt_topic`,
//! `mqtt_qos`, for a retained message `mqtt_retain`, and for one the broker marked as
//! sent before (DUP) `mqtt_duplicate`.

mod config;

use ferry_guest::bindings::iggy::connector::mqtt::{Incoming, Session};
use ferry_guest::mqtt::{describe, level};
use ferry_guest::{Batch, Error, Fields, HeaderValue, Nack, PER_MESSAGE, PackedMessages, Source};
use serde::{Deserialize, Serialize};

use crate::config::Config;

/// How many messages were delivered (and committed) so far: for the operator; what to
/// read next is the broker's to keep, in the session.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cursor {
    #[serde(default)]
    delivered: u64,
}

struct MqttSource {
    config: Config,
    session: Session,
    /// The messages of the batch in flight, kept to deliver again after a NACK.
    in_flight: Vec<Incoming>,
    /// The batch in flight was NACKed: the next poll delivers it again.
    again: bool,
    /// A ticket whose acknowledgement failed, tried again before the next receive.
    unacked: Option<u64>,
}

impl Source for MqttSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, _cursor: &Cursor) -> Result<Self, Error> {
        config.check().map_err(Error::msg)?;
        let failed = |e| Error::msg(format!("mqtt `{}`: {}", config.connection, describe(&e)));
        let session = Session::open(&config.connection, &config.client_id, true).map_err(failed)?;
        let filters: Vec<_> = config.topics.iter().map(|topic| (topic.clone(), config.qos)).collect();
        session
            .subscribe(&filters)
            .map_err(failed)?
            .map_err(|refused| Error::msg(format!("mqtt `{}`: {refused}", config.connection)))?;
        ferry_guest::info!(
            "mqtt source: subscribed to {} as {:?} at QoS {}",
            config.topics.join(", "),
            config.client_id,
            level(config.qos)
        );
        Ok(MqttSource { config, session, in_flight: Vec::new(), again: false, unacked: None })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        if let Some(ticket) = self.unacked {
            // Kept until the broker took it: a failure here is tried again next time.
            self.acknowledge(ticket)?;
            self.unacked = None;
        }
        if !std::mem::take(&mut self.again) || self.in_flight.is_empty() {
            self.in_flight = self
                .session
                .receive(self.config.batch_size, self.config.wait_ms)
                .map_err(|e| Error::msg(format!("mqtt `{}`: {}", self.config.connection, describe(&e))))?;
        }
        if self.in_flight.is_empty() {
            return Ok(None);
        }
        let bytes: usize = self.in_flight.iter().map(|m| PER_MESSAGE + 64 + m.topic.len() + m.payload.len()).sum();
        let mut packed = PackedMessages::with_capacity(bytes);
        for incoming in &self.in_flight {
            pack(&mut packed, incoming);
        }
        let next = Cursor { delivered: cursor.delivered + self.in_flight.len() as u64 };
        Ok(Some(Batch::from_packed(packed, next)))
    }

    fn on_ack(&mut self, _committed: &Cursor) {
        let Some(last) = std::mem::take(&mut self.in_flight).last().map(|m| m.ticket) else { return };
        if let Err(error) = self.acknowledge(last) {
            ferry_guest::warn!("{error}; the batch is acknowledged before the next receive");
            self.unacked = Some(last);
        }
    }

    fn on_nack(&mut self, _nack: &Nack) {
        self.again = true;
    }
}

impl MqttSource {
    fn acknowledge(&self, ticket: u64) -> Result<(), Error> {
        self.session
            .acknowledge(ticket)
            .map_err(|e| Error::msg(format!("mqtt `{}`: acknowledging: {}", self.config.connection, describe(&e))))
    }
}

/// Add the message `incoming` becomes to `packed`.
fn pack(packed: &mut PackedMessages, incoming: &Incoming) {
    let mut headers = vec![
        ("mqtt_topic".to_string(), HeaderValue::String(incoming.topic.clone())),
        ("mqtt_qos".to_string(), HeaderValue::Uint8(level(incoming.qos))),
    ];
    if incoming.retain {
        headers.push(("mqtt_retain".to_string(), HeaderValue::Bool(true)));
    }
    if incoming.duplicate {
        headers.push(("mqtt_duplicate".to_string(), HeaderValue::Bool(true)));
    }
    let fields = Fields { id: None, origin_timestamp: None, headers: &headers };
    packed.push_with(fields, |payload| payload.extend_from_slice(&incoming.payload));
}

ferry_guest::export_source!(MqttSource);
