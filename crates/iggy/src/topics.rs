//! Making sure a stream and topic exist before the first send: looked up once,
//! created when the config allows it, refused with a clear error when it does not.

use std::collections::HashMap;
use std::sync::Arc;

use iggy::prelude::{
    Identifier, IggyClient, IggyDuration, IggyError, IggyExpiry, StreamClient, TopicClient, TopicCreateOptions,
};
use tokio::sync::Mutex;

use super::error::RequestError;
use ferry_config::StreamConfig;

/// What a sender needs to know about a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    /// Partition ids, ascending: the order the server maps message keys onto.
    pub partitions: Vec<u32>,
}

/// The topics known to exist, by stream and topic name.
#[derive(Default)]
pub struct Topics {
    known: Mutex<HashMap<(String, String), Arc<TopicInfo>>>,
}

impl Topics {
    /// The topic of `stream`, looked up (and created if allowed) on first use.
    pub async fn ensure(
        &self,
        client: &IggyClient,
        stream: &StreamConfig,
        address: &str,
    ) -> Result<Arc<TopicInfo>, RequestError> {
        let name = (stream.stream.clone(), stream.topic.clone());
        let mut known = self.known.lock().await;
        if let Some(info) = known.get(&name) {
            return Ok(info.clone());
        }
        let info = Arc::new(lookup_or_create(client, stream, address).await?);
        known.insert(name, info.clone());
        Ok(info)
    }

    /// Forget what is known of `stream` (it was deleted, or moved).
    pub async fn forget(&self, stream: &StreamConfig) {
        self.known.lock().await.remove(&(stream.stream.clone(), stream.topic.clone()));
    }
}

async fn lookup_or_create(
    client: &IggyClient,
    config: &StreamConfig,
    address: &str,
) -> Result<TopicInfo, RequestError> {
    let (stream, topic) = (config.stream.as_str(), config.topic.as_str());
    let stream_id =
        Identifier::named(stream).map_err(|e| RequestError::rejected(format!("stream name {stream:?}: {e}")))?;
    let topic_id =
        Identifier::named(topic).map_err(|e| RequestError::rejected(format!("topic name {topic:?}: {e}")))?;

    let looking_up = |what: String| move |e| RequestError::from_iggy(e).context(format!("looking up {what}"));
    if client.get_stream(&stream_id).await.map_err(looking_up(format!("the stream `{stream}`")))?.is_none() {
        if config.create.is_none() {
            return Err(RequestError::failed(format!(
                "the stream `{stream}` does not exist on the Iggy server at {address}, and auto-creation is off \
                 (add `create = {{ partitions = 1 }}` to this [[sources.streams]] entry, or create it)"
            )));
        }
        match client.create_stream(stream).await {
            Ok(_) => tracing::info!(%address, "created the stream `{stream}`"),
            // Someone else (another connector, another host) was quicker: fine.
            Err(IggyError::StreamNameAlreadyExists(_)) => {}
            Err(e) => return Err(RequestError::from_iggy(e).context(format!("creating the stream `{stream}`"))),
        }
    }

    let details = match client
        .get_topic(&stream_id, &topic_id)
        .await
        .map_err(looking_up(format!("the topic `{stream}/{topic}`")))?
    {
        Some(details) => details,
        None => {
            let Some(create) = &config.create else {
                return Err(RequestError::failed(format!(
                    "the topic `{stream}/{topic}` does not exist on the Iggy server at {address}, and auto-creation is \
                     off (add `create = {{ partitions = 1 }}` to this [[sources.streams]] entry, or create it)"
                )));
            };
            let options = TopicCreateOptions {
                partitions_count: Some(create.partitions),
                message_expiry: create.retention.map(|d| IggyExpiry::ExpireDuration(IggyDuration::new(d))),
                enforce_fsync: create.enforce_fsync,
                messages_required_to_save: create.messages_required_to_save,
                ..Default::default()
            };
            match client.create_topic(&stream_id, topic, &options).await {
                Ok(details) => {
                    tracing::info!(%address, "created the topic `{stream}/{topic}` with {} partition(s)", create.partitions);
                    details
                }
                Err(IggyError::TopicNameAlreadyExists(..)) => {
                    client.get_topic(&stream_id, &topic_id).await.map_err(RequestError::from_iggy)?.ok_or_else(
                        || RequestError::failed(format!("the topic `{stream}/{topic}` vanished while created")),
                    )?
                }
                Err(e) => {
                    return Err(RequestError::from_iggy(e).context(format!("creating the topic `{stream}/{topic}`")));
                }
            }
        }
    };
    let mut partitions: Vec<u32> = details.partitions.iter().map(|p| p.id).collect();
    partitions.sort_unstable();
    if partitions.is_empty() {
        return Err(RequestError::failed(format!("the topic `{stream}/{topic}` has no partitions")));
    }
    Ok(TopicInfo { stream_id, topic_id, partitions })
}
