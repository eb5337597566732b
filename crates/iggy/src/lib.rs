//! Ferry's side of an Apache Iggy server: one connection kept up in the background
//! ([`connection`]), topics looked up or created ([`topics`]), messages converted both
//! ways ([`messages`]), and the two directions data moves: [`IggyTarget`] delivers
//! what sources produce ([`delivery`]), [`IggyInput`] reads for sinks ([`consumer`]).

mod connection;
mod consumer;
mod delivery;
mod error;
mod messages;
mod topics;

pub use connection::Connection;
pub use consumer::{IggyInput, Reading};
pub use delivery::IggyTarget;
pub use error::RequestError;
pub use messages::{Send, from_iggy, plan, to_iggy};
pub use topics::TopicInfo;
