//! A sink's transforms: each batch's records changed after they are read and before
//! the guest gets them. Offsets, ids and the number of records stay as they were, so
//! what the reader commits is what it read.

use std::sync::Arc;

use async_trait::async_trait;

use super::Pipeline;
use crate::sink::input::{Read, SinkBatch};
use crate::sink::{Budget, Input, InputError, OpenError, Reader};
use crate::status::StartingFrom;

pub struct TransformedInput {
    pipeline: Arc<Pipeline>,
    input: Arc<dyn Input>,
}

impl TransformedInput {
    pub fn new(pipeline: Arc<Pipeline>, input: Arc<dyn Input>) -> Self {
        TransformedInput { pipeline, input }
    }
}

#[async_trait]
impl Input for TransformedInput {
    async fn open(&self) -> Result<Box<dyn Reader>, OpenError> {
        let reader = self.input.open().await?;
        Ok(Box::new(TransformedReader { pipeline: self.pipeline.clone(), reader }))
    }
}

struct TransformedReader {
    pipeline: Arc<Pipeline>,
    reader: Box<dyn Reader>,
}

#[async_trait]
impl Reader for TransformedReader {
    fn starting_from(&self) -> StartingFrom {
        self.reader.starting_from()
    }

    async fn next(&mut self, budget: Budget) -> Result<Option<Read>, InputError> {
        let mut read = self.reader.next(budget).await?;
        // A message that cannot be read as it is stored goes to the dead letters as
        // it is.
        if let Some(Read::Batch(batch)) = &mut read {
            for message in &mut batch.messages {
                if let Some(payload) = self.pipeline.apply(&message.payload) {
                    message.payload = payload;
                }
            }
        }
        Ok(read)
    }

    async fn commit(&mut self, batch: &SinkBatch) -> Result<Option<u64>, InputError> {
        self.reader.commit(batch).await
    }
}
