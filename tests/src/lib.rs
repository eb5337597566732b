//! Helpers for Ferry's end-to-end suite and benchmarks: the components built from this
//! workspace (by `build.rs`), a host wired to a temporary directory, fault-injecting
//! targets and state stores, a capture of the log, and ways to wait for events
//! instead of sleeping.

pub mod faults;
pub mod harness;
pub mod iggy_server;
pub mod logs;
pub mod raw_component;
pub mod records;
pub mod sink_output;

/// Paths of the components built from this workspace's guest crates.
pub mod components {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}
