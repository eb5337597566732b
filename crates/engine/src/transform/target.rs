//! A source's transforms: each batch's records changed on their way to its target,
//! after the guest produced them and before anything is delivered, so that what is
//! delivered, and what the cursor commits to, is what was transformed.

use std::sync::Arc;

use async_trait::async_trait;
use ferry_contract::Message;

use super::Pipeline;
use crate::delivery::{Delivery, DeliveryError, Receipt, Target};

pub struct TransformedTarget {
    pipeline: Arc<Pipeline>,
    target: Arc<dyn Target>,
}

impl TransformedTarget {
    pub fn new(pipeline: Arc<Pipeline>, target: Arc<dyn Target>) -> Self {
        TransformedTarget { pipeline, target }
    }
}

#[async_trait]
impl Target for TransformedTarget {
    async fn deliver(&self, mut delivery: Delivery) -> Result<Receipt, DeliveryError> {
        let messages = delivery
            .messages
            .iter()
            .map(|message| match self.pipeline.apply(&message.payload) {
                Some(payload) => Message { payload: payload.into(), ..message.clone() },
                None => message.clone(),
            })
            .collect();
        delivery.messages = Arc::new(messages);
        self.target.deliver(delivery).await
    }
}
