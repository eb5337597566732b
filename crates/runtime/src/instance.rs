//! One live guest instance in its store, and how every call into it is made.
//!
//! [`GuestStore`] is what a source's and a sink's instances share (see
//! [`super::source_instance`] and [`super::sink_instance`] for their calls). A call
//! either returns what the guest returned, or fails with [`CallError`]:
//! the guest reported an error (the instance is fine), or it trapped (a panic,
//! `unreachable`, an out-of-bounds access, running out of time or fuel, a host-side
//! failure during the call). A trapped instance is never called again: its state may
//! be half-updated, so the supervisor drops it and starts a new one from the
//! committed cursor.
//!
//! Every call runs under the instance's limits: its clock is restarted and its fuel
//! refilled first, and the whole call, wasm and host calls alike, is bounded by
//! `limits.call_timeout`. The epoch interrupts wasm that computes too long; the
//! timeout around the call catches a guest parked in a host call (a long sleep),
//! which no epoch can interrupt.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::Store;

use ferry_contract::guest_text::{self, MAX_MESSAGE};
use ferry_contract::wit::types::Error;

use super::context::GuestContext;
use super::limits::CallTimedOut;

/// How a guest call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The guest returned `err(error)`.
    #[error("`{call}` returned an error: {message}")]
    Failed { call: &'static str, message: String },
    /// The guest trapped; the instance is unusable.
    #[error("the guest trapped in `{call}`: {}", trap_summary(.error))]
    Trapped { call: &'static str, error: wasmtime::Error },
}

impl CallError {
    pub fn is_trap(&self) -> bool {
        matches!(self, CallError::Trapped { .. })
    }
}

/// The trap and the guest backtrace wasmtime attached, on one line. The backtrace
/// names the guest's functions as its name section says, so it is guest text.
fn trap_summary(error: &wasmtime::Error) -> String {
    let text = format!("{error:#}");
    let mut line = text.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ");
    if text.contains(HOSTCALL_FUEL_EXHAUSTED) {
        line.insert_str(
            0,
            "the guest handed the host more data in one call than its limits allow (see limits.max_batch_bytes \
             and limits.max_messages_per_batch): ",
        );
    }
    guest_text::clean(&line, MAX_MESSAGE)
}

/// What wasmtime says when a call hands the host more data than the store's
/// hostcall fuel (see [`super::limits::hostcall_fuel`]).
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// The guest's `error`, made safe to print.
pub(super) fn failed(call: &'static str, error: Error) -> CallError {
    CallError::Failed { call, message: guest_text::clean(&error.message, MAX_MESSAGE) }
}

/// A guest instance's store, and the bookkeeping around each call.
pub struct GuestStore {
    store: Store<GuestContext>,
    /// Fuel each call starts with, when the engine meters fuel.
    fuel_per_call: Option<u64>,
    fuel_consumed: Arc<AtomicU64>,
}

impl GuestStore {
    pub(super) fn new(store: Store<GuestContext>, fuel_per_call: Option<u64>, fuel_consumed: Arc<AtomicU64>) -> Self {
        GuestStore { store, fuel_per_call, fuel_consumed }
    }

    /// The store, to instantiate in and to call into.
    pub(super) fn store(&mut self) -> &mut Store<GuestContext> {
        &mut self.store
    }

    /// A call begins: the clock restarted, the fuel refilled. Returns how long the
    /// call may take; run it with [`within`], then [`GuestStore::end_call`].
    pub(super) fn begin_call(&mut self, call: &'static str) -> Result<Duration, CallError> {
        self.store.data_mut().clock.start();
        self.store.data_mut().limiter.take_refused();
        if let Some(fuel) = self.fuel_per_call {
            self.store.set_fuel(fuel).map_err(|error| CallError::Trapped { call, error })?;
        }
        Ok(self.store.data().clock.timeout())
    }

    /// The call ended with `result`: count the fuel it burnt, and if it trapped after
    /// a limit refused it memory (or table elements), say so first, with the limit to
    /// raise: the trap itself (an allocation failure, `unreachable`) does not.
    pub(super) fn end_call<R>(&mut self, result: Result<R, CallError>) -> Result<R, CallError> {
        if let Some(budget) = self.fuel_per_call {
            let left = self.store.get_fuel().unwrap_or(0);
            self.fuel_consumed.fetch_add(budget.saturating_sub(left), Ordering::Relaxed);
        }
        let refused = self.store.data_mut().limiter.take_refused();
        match (result, refused) {
            (Err(CallError::Trapped { call, error }), Some(refused)) => {
                Err(CallError::Trapped { call, error: error.context(refused) })
            }
            (result, _) => result,
        }
    }
}

/// Run one call, bounded by `timeout` even while the guest waits in a host call.
pub(super) async fn within<R>(
    timeout: Duration,
    call: &'static str,
    future: impl Future<Output = wasmtime::Result<R>>,
) -> Result<R, CallError> {
    match tokio::time::timeout(timeout, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(CallError::Trapped { call, error }),
        Err(_) => Err(CallError::Trapped { call, error: CallTimedOut { timeout }.into() }),
    }
}
