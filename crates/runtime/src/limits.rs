//! The limits one guest instance runs under, enforced inside its store.
//!
//! * Memory, tables and instances: [`MemoryLimiter`], wasmtime's resource limiter
//!   hook. Memory is capped for all of an instance's linear memories *together* (a
//!   component built with the preview1 adapter has several), and a refused growth is
//!   logged with the connector's key, because the guest usually dies of it a moment
//!   later and the operator should see why.
//! * Time: [`CallClock`]. The engine's epoch ticks every [`EPOCH_TICK`]; at every tick
//!   a running guest yields to tokio (so a spinning guest cannot starve its
//!   neighbours of a worker thread) and is interrupted once its call has run longer
//!   than `limits.call_timeout`.
//! * Fuel, when metered: refilled to `limits.fuel` before each call.
//!
//! What an instance uses (fuel burnt, linear memory held) is published through its
//! connector's [`InstanceMeters`], for the status and `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, UpdateDeadline};

use ferry_config::Limits;
pub use ferry_contract::settings::EPOCH_TICK;

/// What a connector's instances use, counted where the sandbox sees it: one set
/// per connector, shared by its instances one after the other.
#[derive(Debug, Clone, Default)]
pub struct InstanceMeters {
    /// Fuel burnt by all its calls (when the engine meters fuel).
    pub fuel_consumed: Arc<AtomicU64>,
    /// Bytes of linear memory its current instance holds (0 between instances).
    pub memory_in_use: Arc<AtomicU64>,
}

/// The resource limiter of one store.
pub struct MemoryLimiter {
    limits: Limits,
    /// Bytes of linear memory the instance's memories hold together.
    memory_in_use: usize,
    /// Where `memory_in_use` is published.
    memory_gauge: Arc<AtomicU64>,
    table_elements_in_use: usize,
    /// What was refused since the last call began, if anything: the likely cause of a
    /// trap in that call (a guest whose allocation fails usually traps), named in its
    /// error with the limit to raise.
    refused: Option<String>,
}

impl MemoryLimiter {
    pub fn new(limits: &Limits, memory_gauge: Arc<AtomicU64>) -> Self {
        MemoryLimiter {
            limits: limits.clone(),
            memory_in_use: 0,
            memory_gauge,
            table_elements_in_use: 0,
            refused: None,
        }
    }

    /// What was refused since the last call to this (see [`MemoryLimiter::refused`]).
    pub fn take_refused(&mut self) -> Option<String> {
        self.refused.take()
    }
}

impl Drop for MemoryLimiter {
    /// The instance's memory goes with its store.
    fn drop(&mut self) {
        self.memory_gauge.store(0, Ordering::Relaxed);
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let cap = self.limits.memory.as_usize();
        let after = self.memory_in_use.saturating_add(desired.saturating_sub(current));
        if after > cap {
            let refused = format!(
                "the guest asked for {} more bytes of memory with {} in use; refused: limits.memory is {}",
                desired - current,
                self.memory_in_use,
                self.limits.memory,
            );
            tracing::warn!(target: "ferry::limits", "{refused}");
            self.refused = Some(format!("out of memory ({refused}; raise the connector's limits.memory)"));
            return Ok(false);
        }
        self.memory_in_use = after;
        self.memory_gauge.store(after as u64, Ordering::Relaxed);
        Ok(true)
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let cap = usize::try_from(self.limits.table_elements).unwrap_or(usize::MAX);
        let after = self.table_elements_in_use.saturating_add(desired.saturating_sub(current));
        if after > cap {
            let refused = format!(
                "the guest asked for {} more table elements; refused: limits.table_elements is {cap}",
                desired - current,
            );
            tracing::warn!(target: "ferry::limits", "{refused}");
            self.refused =
                Some(format!("out of table elements ({refused}; raise the connector's limits.table_elements)"));
            return Ok(false);
        }
        self.table_elements_in_use = after;
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.limits.instances as usize
    }

    fn tables(&self) -> usize {
        self.limits.tables as usize
    }

    fn memories(&self) -> usize {
        self.limits.memories as usize
    }
}

/// When the current call into the guest started, and how long it may run.
pub struct CallClock {
    timeout: Duration,
    started: Instant,
}

/// The error a call dies of when it runs out of time.
#[derive(Debug, thiserror::Error)]
#[error("the call ran longer than limits.call_timeout ({timeout:?}) and was interrupted")]
pub struct CallTimedOut {
    pub timeout: Duration,
}

impl CallClock {
    pub fn new(timeout: Duration) -> Self {
        CallClock { timeout, started: Instant::now() }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// What is left of the current call's time.
    pub fn remaining(&self) -> Duration {
        self.timeout.saturating_sub(self.started.elapsed())
    }

    /// A call begins now.
    pub fn start(&mut self) {
        self.started = Instant::now();
    }

    /// At an epoch tick: yield and go on, or interrupt a call past its time.
    pub fn on_tick(&self) -> wasmtime::Result<UpdateDeadline> {
        if self.started.elapsed() > self.timeout {
            return Err(CallTimedOut { timeout: self.timeout }.into());
        }
        Ok(UpdateDeadline::Yield(1))
    }
}

/// How much data one call may hand the host, in bytes as the host holds it: wasmtime's
/// "hostcall fuel", spent while a returned batch (or an error, or a log line) is
/// lifted out of the guest's memory, before any of Ferry's checks can run.
///
/// Derived from the batch limits, twice over: a batch at every cap (each message with
/// every header it may have) lifts with room to spare, so a batch somewhat over a cap
/// is NACKed `rejected` by the batch checks, naming the cap; one far over it traps
/// before the host has allocated much more than the limits allow.
pub fn hostcall_fuel(limits: &Limits) -> usize {
    use ferry_contract::wit::types::{Header, Message};
    let per_message = (size_of::<Message>() as u64)
        .saturating_add(u64::from(limits.max_headers_per_message).saturating_mul(size_of::<Header>() as u64));
    let batch = u64::from(limits.max_messages_per_batch)
        .saturating_mul(per_message)
        .saturating_add(limits.max_batch_bytes.bytes())
        .saturating_add(limits.max_state_bytes.bytes());
    // Room for the rest of one call's data: an error message, a log line.
    const SLACK: u64 = 1 << 20;
    usize::try_from(batch.saturating_mul(2).saturating_add(SLACK)).unwrap_or(usize::MAX)
}
