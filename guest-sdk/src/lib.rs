//! # ferry-guest: write a Ferry source connector in Rust
//!
//! A Ferry source is a WebAssembly component that the host polls for batches. The
//! host delivers each batch and commits the cursor the batch carried *only after* the
//! delivery succeeded; then it tells the guest `ack` or `nack`. Getting that dance
//! right by hand is easy to get subtly wrong (apply the cursor too early and a NACK
//! loses records), so this crate does it for you:
//!
//! * you write a [`Source`]: a typed `Config` (from the connector's `plugin_config`),
//!   a typed `Cursor` (where you are), and `poll(&mut self, cursor)` that returns the
//!   next messages together with the cursor *after* them;
//! * the SDK stages that cursor, applies it when the host ACKs, drops it when the host
//!   NACKs (so your next `poll` sees the committed cursor again and produces the same
//!   records), checks that results match the outstanding batch, and logs NACKs;
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
//! Build with `cargo build --target wasm32-wasip2` (or `cargo component build`); on a
//! machine without that target, see the Ferry README for the fallback toolchain.

pub mod bindings;
mod driver;
mod error;
pub mod log;
mod message;
mod source;

#[doc(hidden)]
pub mod __glue;

pub use driver::{Driver, Settled};
pub use error::Error;
pub use message::{HeaderValue, Message};
pub use source::{Batch, Nack, NackReason, Source};

/// Export a [`Source`] implementation as the component's `source` interface.
///
/// Use it once, at the top level of your `cdylib` crate.
#[macro_export]
macro_rules! export_source {
    ($source:ty) => {
        const _: () = {
            struct FerryExport;

            ::std::thread_local! {
                static DRIVER: $crate::__glue::Slot<$source> = $crate::__glue::Slot::new();
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
