//! A sink that publishes every message to an MQTT broker the operator granted
//! (`grants.mqtt`), at QoS 1 or 2, to a topic made per batch; a batch is acknowledged
//! only once the broker acknowledged every message of it.
//!
//! `plugin_config`:
//!
//! | key           | default            | meaning |
//! |---------------|--------------------|---------|
//! | `connection`  | required           | the `[mqtt.NAME]` granted to the connector |
//! | `client_id`   | required           | the MQTT client id (two connections of one id take turns at the broker) |
//! | `topic`       | `{stream}/{topic}` | the topic, `{stream}`, `{topic}` and `{partition}` filled in |
//! | `qos`         | 1                  | 1 (at least once) or 2 (exactly once per publish) |
//! | `retain`      | false              | whether the broker keeps the last message of the topic for new subscribers |
//! | `max_payload` | 262144             | the largest payload published, in bytes; a bigger one goes to the dead letters |
//!
//! At least once: a batch published again (a retry after a broken connection, a crash
//! before its offset was committed) publishes its messages again, and MQTT 3.1.1 has
//! no message id to know them by; QoS 2 makes each *publish* arrive once, not each
//! message. A topic the template makes invalid (a wildcard, empty) or a payload over
//! `max_payload` goes to the dead letters with the reason; a broker that cannot be
//! reached or refuses the session is a retry, said in the log.

mod config;

use ferry_guest::bindings::iggy::connector::mqtt::{Outgoing, Session};
use ferry_guest::mqtt::describe;
use ferry_guest::{Error, Rejected, Sink, SinkBatch, Written};

use crate::config::{Config, check_topic};

struct MqttSink {
    config: Config,
    session: Session,
}

impl Sink for MqttSink {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        config.check().map_err(Error::msg)?;
        let session = Session::open(&config.connection, &config.client_id, false)
            .map_err(|e| Error::msg(format!("mqtt `{}`: {}", config.connection, describe(&e))))?;
        Ok(MqttSink { config, session })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let topic = self.config.topic.render(batch);
        if let Err(why) = check_topic(&topic) {
            // Every message of the batch has it: none can be published.
            let why = format!("the topic {topic:?} {why}");
            return Ok(Written::reject((0..batch.messages.len()).map(|i| (i, why.clone()))));
        }
        let (mut outgoing, mut rejected) = (Vec::with_capacity(batch.messages.len()), Vec::new());
        for (index, message) in batch.messages.iter().enumerate() {
            if message.payload.len() > self.config.max_payload {
                let why = format!(
                    "its payload of {} bytes is over max_payload ({})",
                    message.payload.len(),
                    self.config.max_payload
                );
                rejected.push(Rejected::new(index, why));
                continue;
            }
            let (qos, retain) = (self.config.qos, self.config.retain);
            outgoing.push(Outgoing { topic: topic.clone(), payload: message.payload.clone(), qos, retain });
        }
        if let Err(error) = self.session.publish(&outgoing) {
            return Ok(Written::retry(format!("mqtt `{}`: {}", self.config.connection, describe(&error))));
        }
        Ok(if rejected.is_empty() { Written::Ack } else { Written::Reject(rejected) })
    }
}

ferry_guest::export_sink!(MqttSink);
