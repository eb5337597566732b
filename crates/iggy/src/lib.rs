//! # ferry-iggy: Apache Iggy, as a target and as an input
//!
//! Ferry's side of an Apache Iggy server: one connection kept up in the background
//! ([`connection`]), topics looked up or created ([`topics`]), messages converted both
//! ways ([`messages`]), and the two directions data moves: [`IggyTarget`] delivers
//! what sources produce ([`delivery`]), [`IggyInput`] reads for sinks ([`consumer`]).

mod connection;
mod consumer;
mod delivery;
mod error;
mod group;
mod messages;
mod topics;

pub use connection::Connection;
pub use consumer::{IggyInput, Reading};
pub use delivery::IggyTarget;
pub use error::RequestError;
pub use messages::{Send, from_iggy, plan, to_iggy};
pub use topics::TopicInfo;

#[cfg(test)]
mod tests {
    /// `ferry-config` refuses more partitions than a topic may have without building
    /// Iggy's crates, so it keeps the server's limit as a number of its own.
    #[test]
    fn the_config_knows_the_servers_largest_partition_count() {
        assert_eq!(ferry_config::MAX_PARTITIONS_COUNT, iggy_common::MAX_PARTITIONS_COUNT);
    }
}
