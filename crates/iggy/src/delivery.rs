//! Delivering to Iggy: every batch sent to an Apache Iggy server and acknowledged by it
//! before the source loop commits the cursor.
//!
//! "Delivered" means the server answered the send of every part of the batch, to
//! every configured stream/topic. There is no background buffering between the
//! source's poll and the commit: each send is awaited. Anything short of that
//! (connection down, a send failed or abandoned at its timeout, one stream of
//! several refused) is an error, so the loop NACKs, and the batch produced again
//! carries the same message ids (derived by the source loop), which lets a consumer
//! drop the part that had landed. Delivery is at-least-once: this Iggy has no
//! server-side deduplication (consumers deduplicate by id).

use std::sync::Arc;

use async_trait::async_trait;
use iggy::prelude::{IggyError, IggyTimestamp, MessageClient};

use super::connection::Connection;
use super::error::RequestError;
use super::messages::{Payloads, plan, to_iggy};
use super::topics::Topics;
use ferry_config::{IggyConfig, StreamConfig};
use ferry_contract::Message;
use ferry_engine::delivery::{Delivery, DeliveryError, Receipt, Target};
use ferry_engine::status::Stage;

/// Delivers to one Iggy server over one connection shared by every connector.
pub struct IggyTarget {
    connection: Arc<Connection>,
    topics: Topics,
}

impl IggyTarget {
    /// Start connecting to the server of `config`, in the background: the host starts
    /// even while the server is down, and deliveries fail (NACK) until it is up. The
    /// connection lives as long as the target. Must be called within a tokio runtime.
    pub fn start(config: &IggyConfig) -> Result<IggyTarget, String> {
        let credentials = config.credentials()?;
        Ok(IggyTarget { connection: Connection::start(config, credentials), topics: Topics::default() })
    }

    /// The connection, for a sink reading from the same server as the same user.
    pub fn connection(&self) -> Arc<Connection> {
        self.connection.clone()
    }

    async fn deliver_to(
        &self,
        client: &iggy::prelude::IggyClient,
        stream: &StreamConfig,
        messages: &mut [Message],
        payloads: Payloads,
        now: u64,
    ) -> Result<(), RequestError> {
        let address = self.connection.address();
        let topic = self.topics.ensure(client, stream, address).await?;
        let sends = plan(&stream.partitioning, &topic, messages).map_err(RequestError::rejected)?;
        // Every part converted before any is sent: a message Iggy cannot take rejects
        // the batch before any of it reaches this stream.
        let parts = sends
            .iter()
            .map(|send| to_iggy(messages, &send.messages, payloads, now))
            .collect::<Result<Vec<_>, _>>()
            .map_err(RequestError::rejected)?;
        for (send, mut part) in sends.iter().zip(parts) {
            let sent = client.send_messages(&topic.stream_id, &topic.topic_id, &send.partitioning, &mut part).await;
            if let Err(error) = sent {
                if matches!(
                    error,
                    IggyError::StreamNameNotFound(_)
                        | IggyError::TopicNameNotFound(..)
                        | IggyError::StreamIdNotFound(_)
                        | IggyError::TopicIdNotFound(..)
                ) {
                    self.topics.forget(stream).await;
                }
                return Err(
                    RequestError::from_iggy(error).context(format!("sending to {}/{}", stream.stream, stream.topic))
                );
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Target for IggyTarget {
    fn stage(&self) -> Stage {
        Stage::IggySend
    }

    /// The receipt is empty: Iggy's offsets are the server's, not checked by ferry.
    async fn deliver(&self, delivery: Delivery) -> Result<Receipt, DeliveryError> {
        let live = self.connection.current().map_err(DeliveryError::Failed)?;
        // If this future is dropped mid-send (the loop's delivery timeout), the guard
        // reports the connection broken: a half-sent request must not be followed by
        // another on the same connection.
        let mut guard =
            AbandonGuard { connection: &self.connection, generation: live.generation, armed: true, reason: None };
        // The origin timestamp of the messages that carry none: the same for the whole
        // batch, in every stream.
        let now = IggyTimestamp::now().as_micros();
        // The batch is ours (the source loop keeps no other handle on it): the last
        // stream takes its payloads, the others share them.
        let mut messages = Arc::unwrap_or_clone(delivery.messages);
        for (at, stream) in delivery.streams.iter().enumerate() {
            let payloads = if at + 1 == delivery.streams.len() { Payloads::Take } else { Payloads::Share };
            if let Err(error) = self.deliver_to(&live.client, stream, &mut messages, payloads, now).await {
                guard.armed = error.breaks_connection;
                if error.breaks_connection {
                    guard.reason = Some(error.message.clone());
                }
                return Err(if error.rejected {
                    DeliveryError::Rejected(error.message)
                } else {
                    DeliveryError::Failed(error.message)
                });
            }
        }
        guard.armed = false;
        Ok(Receipt::default())
    }
}

struct AbandonGuard<'a> {
    connection: &'a Connection,
    generation: u64,
    armed: bool,
    reason: Option<String>,
}

impl Drop for AbandonGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let why = self.reason.take().unwrap_or_else(|| "a send was abandoned at its timeout".into());
            self.connection.report_broken(self.generation, why);
        }
    }
}
