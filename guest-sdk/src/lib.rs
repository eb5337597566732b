//! # ferry-guest: write Ferry connectors in Rust
//!
//! A Ferry connector is a WebAssembly component the host drives: a **source** produces
//! batches for the host to deliver, a **sink** writes the batches the host reads. Both
//! contracts have a dance that is easy to get subtly wrong by hand, so this crate does
//! it for you.
//!
//! ## Sources
//!
//! The host delivers each batch a source produces and commits the cursor the batch
//! carried *only after* the delivery succeeded; then it tells the guest `ack` or
//! `nack`. Apply the cursor too early and a NACK loses records. So:
//!
//! * you write a [`Source`]: a typed `Config` (from the connector's `plugin_config`),
//!   a typed `Cursor` (where you are), and `poll(&mut self, cursor)` that returns the
//!   next messages together with the cursor *after* them;
//! * the SDK stages that cursor, applies it when the host ACKs, drops it when the host
//!   NACKs (so your next `poll` sees the committed cursor again and produces the same
//!   records), checks that results match the outstanding batch, and logs NACKs;
//! * override [`Source::on_ack`] to act on what was delivered (delete or mark it at
//!   its origin) once its cursor is committed, never after a NACK;
//! * [`export_source!`] exports the component; `on-batch-result` is not yours to
//!   forget.
//!
//! ```ignore
//! use ferry_guest::{Batch, Error, Message, Source};
//!
//! struct Counter { per_batch: u64 }
//!
//! impl Source for Counter {
//!     type Config = serde_json::Value;
//!     type Cursor = u64;
//!
//!     fn open(_config: Self::Config, _cursor: &u64) -> Result<Self, Error> {
//!         Ok(Counter { per_batch: 10 })
//!     }
//!
//!     fn poll(&mut self, next: &u64) -> Result<Option<Batch<u64>>, Error> {
//!         let messages = (*next..*next + self.per_batch)
//!             .map(|n| Message::new(n.to_string()))
//!             .collect();
//!         Ok(Some(Batch::new(messages, *next + self.per_batch)))
//!     }
//! }
//!
//! ferry_guest::export_source!(Counter);
//! ```
//!
//! Cursors are stored as JSON, so `ferry state show` can print them.
//!
//! A source that makes many small messages can write them straight into the form the
//! host takes, [`PackedMessages`], and return [`Batch::from_packed`]: no [`Message`],
//! no payload allocation and no second copy per message (see `connectors/random-source`).
//!
//! ## Sinks
//!
//! The host hands a sink one batch at a time (messages of one partition, in offset
//! order) and moves its offset past the batch only once the sink answered that the
//! messages are durably written. So:
//!
//! * you write a [`Sink`]: a typed `Config`, and `write(&mut self, batch)` that returns
//!   what became of the batch, a [`Written`]: `Ack` (all durably written), `Retry`
//!   (hand it again later), `Reject` (these messages are poison, the others are
//!   written) or `Unwritable` (one is poison, I cannot tell which, nothing is written);
//! * an `Err` from `write` is a `Retry` with the error's message, so `?` does the
//!   right thing for a failed connection or a full disk;
//! * the SDK checks a `Reject` before the host sees it: an index outside the batch
//!   becomes a `Retry` naming the bug (and is logged), repeated indices are merged;
//! * [`export_sink!`] exports the component.
//!
//! ```ignore
//! use ferry_guest::{Error, Sink, SinkBatch, Written};
//!
//! struct Print;
//!
//! impl Sink for Print {
//!     type Config = serde_json::Value;
//!
//!     fn open(_config: Self::Config) -> Result<Self, Error> {
//!         Ok(Print)
//!     }
//!
//!     fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
//!         for message in &batch.messages {
//!             println!("{}", batch.message_json(message));
//!         }
//!         Ok(Written::Ack)
//!     }
//! }
//!
//! ferry_guest::export_sink!(Print);
//! ```
//!
//! The host delivers at least once: after a retry, a trap or a restart the same
//! messages come again. A sink that must not write one twice writes idempotently, by
//! [`StoredMessage::id`] or by offset (see `connectors/file-sink`).
//!
//! ## Transforms
//!
//! A transform changes, or drops, a connector's records on their way (between a
//! source and delivery, or between a sink's input and the sink), chained in the
//! connector's `transforms`. You write a [`Transform`]: a typed `Config` and
//! `transform(&mut self, record)` returning the record as it goes on, or `None` to
//! drop it; [`export_transform!`] exports it. The host keeps each record's id.
//!
//! ```ignore
//! use ferry_guest::{Error, Record, Transform};
//!
//! struct Upper;
//!
//! impl Transform for Upper {
//!     type Config = serde_json::Value;
//!
//!     fn open(_config: Self::Config) -> Result<Self, Error> {
//!         Ok(Upper)
//!     }
//!
//!     fn transform(&mut self, mut record: Record) -> Result<Option<Record>, Error> {
//!         record.payload.make_ascii_uppercase();
//!         Ok(Some(record))
//!     }
//! }
//!
//! ferry_guest::export_transform!(Upper);
//! ```
//!
//! ## PostgreSQL
//!
//! Connectors granted a server use the host's import,
//! [`bindings::iggy::connector::postgres`]; [`sql`] quotes table and column names for
//! the statements' text (values are bound as parameters) and words the import's errors
//! for the operator's log (see `connectors/postgres-source` and `connectors/postgres-sink`).
//! A connector reading many rows asks for them packed (`query_packed`) and reads them
//! in place with [`rows::Table`], rather than as a value per allocation.
//!
//! ## Building
//!
//! Build with `cargo build --target wasm32-wasip2` (or `cargo component build`); on a
//! machine without that target, see the Ferry README for the fallback toolchain.

mod alloc;
pub mod bindings;
mod driver;
mod error;
#[cfg(target_arch = "wasm32")]
pub mod granted;
pub mod http;
mod json;
pub mod kafka;
pub mod log;
mod message;
pub mod mqtt;
pub mod mysql;
pub mod nats;
mod packed;
mod places;
pub mod redis;
pub mod row;
pub mod rows;
mod sink;
mod sink_driver;
mod source;
pub mod sql;
mod stored;
mod transform;

#[doc(hidden)]
pub mod __glue;

pub use alloc::Recycling;
pub use driver::{Driver, Settled};
pub use error::Error;
pub use json::headers_json;
pub use message::{HeaderValue, Message};
pub use packed::{Fields, PER_MESSAGE, PackedMessages, Payload, messages_of};
pub use places::BatchTemplate;
pub use sink::{Rejected, Sink, Written};
pub use sink_driver::{Answer, SinkDriver};
pub use source::{Batch, Nack, NackReason, Source};
pub use stored::{SinkBatch, StoredMessage};
pub use transform::{Record, Transform, TransformDriver};

/// Every guest built with the SDK recycles its small blocks (see `alloc.rs`); a
/// connector with an allocator of its own turns the `recycling-allocator` feature off.
#[cfg(all(feature = "recycling-allocator", target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: Recycling = Recycling::new();

/// Export a [`Source`] implementation as the component's `source` interface.
///
/// Use it once, at the top level of your `cdylib` crate.
#[macro_export]
macro_rules! export_source {
    ($source:ty) => {
        const _: () = {
            struct FerryExport;

            ::std::thread_local! {
                static DRIVER: $crate::__glue::Slot<$crate::Driver<$source>> = $crate::__glue::Slot::new();
            }

            impl $crate::bindings::exports::iggy::connector::source::Guest for FerryExport {
                fn open(
                    config: ::std::string::String,
                    committed_state: ::std::option::Option<::std::vec::Vec<u8>>,
                ) -> ::std::result::Result<(), $crate::bindings::iggy::connector::types::Error> {
                    DRIVER.with(|slot| slot.open(&config, committed_state.as_deref()))
                }

                fn poll() -> ::std::result::Result<
                    ::std::option::Option<$crate::bindings::iggy::connector::types::Batch>,
                    $crate::bindings::iggy::connector::types::Error,
                > {
                    DRIVER.with(|slot| slot.poll())
                }

                fn on_batch_result(id: u64, result: $crate::bindings::iggy::connector::types::BatchResult) {
                    DRIVER.with(|slot| slot.on_batch_result(id, result))
                }

                fn close() {
                    DRIVER.with(|slot| slot.close())
                }
            }

    $crate::bindings::__export_source_connector!(FerryExport with_types_in $crate::bindings);
        };
    };
}

/// Export a [`Sink`] implementation as the component's `sink` interface.
///
/// Use it once, at the top level of your `cdylib` crate.
#[macro_export]
macro_rules! export_sink {
    ($sink:ty) => {
        const _: () = {
            struct FerryExport;

            ::std::thread_local! {
                static DRIVER: $crate::__glue::Slot<$crate::SinkDriver<$sink>> = $crate::__glue::Slot::new();
            }

            impl $crate::bindings::sink::exports::iggy::connector::sink::Guest for FerryExport {
                fn open(
                    config: ::std::string::String,
                ) -> ::std::result::Result<(), $crate::bindings::iggy::connector::types::Error> {
                    DRIVER.with(|slot| slot.open(&config))
                }

                fn write(
                    batch: $crate::bindings::sink::exports::iggy::connector::sink::SinkBatch,
                ) -> $crate::bindings::sink::exports::iggy::connector::sink::WriteResult {
                    DRIVER.with(|slot| slot.write(batch))
                }

                fn close() {
                    DRIVER.with(|slot| slot.close())
                }
            }

    $crate::bindings::sink::__export_sink_connector!(FerryExport with_types_in $crate::bindings::sink);
        };
    };
}

/// Export a [`Transform`] implementation as the component's `transform` interface.
///
/// Use it once, at the top level of your `cdylib` crate.
#[macro_export]
macro_rules! export_transform {
    ($transform:ty) => {
        const _: () = {
            struct FerryExport;

            ::std::thread_local! {
                static DRIVER: $crate::__glue::Slot<$crate::TransformDriver<$transform>> = $crate::__glue::Slot::new();
            }

            impl $crate::bindings::transform::exports::iggy::connector::transform::Guest for FerryExport {
                fn open(
                    config: ::std::string::String,
                ) -> ::std::result::Result<(), $crate::bindings::iggy::connector::types::Error> {
                    DRIVER.with(|slot| slot.open(&config))
                }

                fn transform(
                    records: ::std::vec::Vec<$crate::bindings::transform::exports::iggy::connector::transform::Incoming>,
                ) -> ::std::result::Result<
                    ::std::vec::Vec<
                        ::std::option::Option<$crate::bindings::transform::exports::iggy::connector::transform::Outgoing>,
                    >,
                    $crate::bindings::iggy::connector::types::Error,
                > {
                    DRIVER.with(|slot| slot.transform(records))
                }
            }

    $crate::bindings::transform::__export_transform_component!(FerryExport with_types_in $crate::bindings::transform);
        };
    };
}
