//! # Ferry: a sandboxed WebAssembly connector host for Apache Iggy
//!
//! Connectors are WebAssembly components implementing the contract in `wit/`. Ferry
//! loads each one, checks it against the contract, runs it in a sandbox of its own,
//! delivers the batches a source produces, and commits the source's cursor only after
//! the delivery succeeded. A guest that panics, traps or misbehaves loses its
//! instance, never the host, and restarts from its last committed cursor.
//!
//! This crate is the `ferry` command line ([`cli`], here rather than in `main.rs`, so
//! that tests run exactly the code operators run) and the front door to the layers
//! below it, one crate each, every one depending only on those listed before it:
//!
//! * [`contract`]: the WIT contract and what every layer agrees on (messages, the
//!   values the config is made of);
//! * [`capabilities`]: what a guest may reach, deny by default, one folder each;
//! * [`config`]: the TOML file and its validation;
//! * [`runtime`]: the wasmtime engine, loading and instantiating components under
//!   their limits and grants;
//! * [`engine`]: the two loops (a source: poll, deliver, commit, ack / nack, back off;
//!   a sink: read, write, commit, retry / dead-letter, back off), the supervisor that
//!   keeps either running, status, and the ports the stores implement;
//! * [`store`] and [`iggy`]: where batches go and sinks read from (the state
//!   directory and the embedded log; an Iggy server);
//! * [`host`]: all of the above wired together for `ferry run`;
//! * [`api`]: the HTTP API and Prometheus metrics over the host;
//! * [`conformance`]: the kit `ferry test` drives a component through the contract's
//!   hard cases with.

pub mod cli;

pub use ferry_api as api;
pub use ferry_capabilities as capabilities;
pub use ferry_config as config;
pub use ferry_conformance as conformance;
pub use ferry_contract as contract;
pub use ferry_engine as engine;
pub use ferry_host as host;
pub use ferry_iggy as iggy;
pub use ferry_runtime as runtime;
pub use ferry_store as store;
