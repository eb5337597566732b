//! A target that accepts everything and keeps nothing: the cost of the host alone.

use async_trait::async_trait;

use super::{Delivery, DeliveryError, Receipt, Target};

#[derive(Debug, Default, Clone, Copy)]
pub struct NullTarget;

#[async_trait]
impl Target for NullTarget {
    async fn deliver(&self, _delivery: Delivery) -> Result<Receipt, DeliveryError> {
        Ok(Receipt::default())
    }
}
