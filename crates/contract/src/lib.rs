//! # ferry-contract: what every layer of Ferry agrees on
//!
//! The bottom of the host; it imports no other crate of Ferry's, and every crate above
//! speaks its types:
//!
//! * [`wit`]: the WIT contract with guests, compiled in as text and as Rust bindings;
//!   [`check`](Contract): the check that a component keeps it, naming what it breaks;
//! * [`Message`] and the contract's plain types (ids, headers, batches, NACK reasons);
//! * [`StoredChecksums`]: Iggy's checksums of the messages a sink is handed;
//! * [`settings`]: the values the configuration is made of (sizes, durations, their
//!   bounds, secrets, names), shared by the layers that each own a part of the config;
//! * [`Durability`]: when a committed cursor is on disk;
//! * the rules for what the host takes from outside: [`files`] the operator names,
//!   [`guest_text`] a guest writes, and the [`rate_limit`] on how much of it is kept.

/// The version of the WIT package `iggy:connector` this host speaks, as a literal
/// (for `concat!`). The README's "Versions of the contract" says what changes it.
macro_rules! contract_version {
    () => {
        "0.2.1"
    };
}

/// The version of the WIT package `iggy:connector` this host speaks: a component
/// must export its role's interface at this version (or a patch release of it, see
/// [`check`]), or it is refused with an error naming both versions.
pub const VERSION: &str = contract_version!();

mod check;
mod checksums;
mod durability;
pub mod files;
pub mod guest_text;
mod message;
pub mod rate_limit;
pub mod secrets;
pub mod settings;
pub mod wit;

pub use check::{ComponentWorld, Contract, ContractError, Kind, Role, check, kind_of, show};
pub use checksums::StoredChecksums;
pub use durability::Durability;
pub use message::{Message, header_size};
pub use wit::types::{Batch, BatchResult, Header, HeaderValue, Int128, Nack, NackReason, Uint128};
