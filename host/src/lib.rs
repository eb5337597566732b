//! # Ferry: a sandboxed WebAssembly connector host for Apache Iggy
//!
//! Connectors are WebAssembly components implementing the contract in `wit/`. Ferry
//! loads each one, checks it against the contract, runs it in a sandbox of its own,
//! delivers the batches a source produces, and commits the source's cursor only after
//! the delivery succeeded. A guest that panics, traps or misbehaves loses its
//! instance, never the host, and restarts from its last committed cursor.
//!
//! The layers, each in its own module:
//!
//! * [`config`]: the TOML file and its validation;
//! * [`contract`] and [`runtime`]: the WIT contract, the wasmtime engine, loading and
//!   instantiating components; [`grants`]: what a guest may reach (deny by default);
//! * [`source`] and [`sink`]: the two loops (a source: poll, deliver, commit, ack /
//!   nack, back off; a sink: read, write, commit, retry / dead-letter, back off), and
//!   the [`supervisor`] that keeps either running, instance after instance;
//! * [`delivery`]: what it means to deliver a batch, and [`iggy`] and [`local_log`],
//!   the two stores batches are delivered to (an Iggy server, or the embedded log);
//! * [`state`]: the committed cursors;
//! * [`status`], [`shutdown`]: what operators see and how the host stops;
//! * [`conformance`]: the kit `ferry test` drives a component through the contract's
//!   hard cases with;
//! * [`api`]: the HTTP API and Prometheus metrics over the status and the state;
//! * [`host`]: all of the above wired together for `ferry run`;
//! * [`cli`]: the `ferry` command line (here rather than in `main.rs`, so that tests
//!   run exactly the code operators run).

pub mod api;
pub mod backoff;
pub mod batch;
pub mod cli;
pub mod config;
pub mod conformance;
pub mod contract;
pub mod delivery;
pub mod exit;
pub mod files;
pub mod grants;
pub mod guest_text;
pub mod host;
pub mod iggy;
pub mod local_log;
pub mod rate_limit;
pub mod runtime;
pub mod shutdown;
pub mod sink;
pub mod source;
pub mod sqlite;
pub mod state;
pub mod status;
pub mod supervisor;
