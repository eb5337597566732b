//! The contract's logging import: guest lines become `tracing` events in the
//! connector's span, so they carry its key like every host line about it.
//!
//! A guest's text is untrusted: control characters are escaped (a guest must not be
//! able to forge a line that looks like it came from another connector), long lines
//! are cut, and the number of lines is rate-limited per connector
//! (`limits.log_lines_per_second`, with a burst of `limits.log_burst`): a guest that
//! floods its log must not fill the operator's disk or drown its neighbours' lines.
//! Dropped lines are counted, in status and in one summary line per second.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ferry_contract::guest_text;
use ferry_contract::rate_limit::RateLimit;
use ferry_contract::wit::logging::Level;
use tracing::Span;
use wasmtime::component::Linker;

use crate::{Capability, GuestData, Import, InstanceBuilder, NoSection, Verdict};

mod host;

/// The capability: always granted, linked once, each instance's lines into the log
/// its connector was given.
pub struct Logging;

impl Capability for Logging {
    const NAME: &'static str = "logging";
    type Grant = ();
    type Section = NoSection;
    type Shared = ();
    type State = GuestLog;

    fn verdict(import: &Import<'_>, _: &()) -> Option<Verdict> {
        import.is("iggy:connector", "logging").then_some(Verdict::Granted("into the host log, rate-limited"))
    }

    async fn instantiate(_: &(), _: &(), instance: &mut InstanceBuilder<'_>) -> Result<GuestLog, String> {
        Ok(instance.log.clone())
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        host::link(linker)
    }
}

/// Longest guest line kept, in bytes; the rest is replaced by a marker.
const MAX_LINE: usize = 4096;

/// Where one guest instance's lines go.
#[derive(Clone)]
pub struct GuestLog {
    span: Span,
    budget: Arc<LogBudget>,
}

impl GuestLog {
    /// Lines logged in `span` (the connector's span), within `budget`.
    pub fn new(span: Span, budget: Arc<LogBudget>) -> Self {
        GuestLog { span, budget }
    }

    /// Log one line from the guest, unless it is over its budget.
    pub fn line(&self, level: Level, text: &str) {
        let _entered = self.span.enter();
        if !self.budget.admit() {
            return;
        }
        let text = guest_text::clean(text, MAX_LINE);
        match level {
            Level::Trace => tracing::trace!(target: "ferry::guest", "{text}"),
            Level::Debug => tracing::debug!(target: "ferry::guest", "{text}"),
            Level::Info => tracing::info!(target: "ferry::guest", "{text}"),
            Level::Warn => tracing::warn!(target: "ferry::guest", "{text}"),
            Level::Error => tracing::error!(target: "ferry::guest", "{text}"),
        }
    }
}

impl GuestLog {
    /// A warning of the host's about something the guest did through a capability
    /// (a refused PostgreSQL statement, say): in the connector's span, within the
    /// same budget as the guest's own lines (a guest looping on failures must not
    /// flood the log through the host either), its text cleaned since it may quote
    /// the guest's data.
    pub fn host_warning(&self, text: &str) {
        let _entered = self.span.enter();
        if !self.budget.admit() {
            return;
        }
        let text = guest_text::clean(text, MAX_LINE);
        tracing::warn!(target: "ferry::grants", "{text}");
    }
}

/// The log lines one connector may write, shared by all its instances (a restart
/// does not refill it), and the count of those dropped.
pub struct LogBudget {
    limit: RateLimit,
    dropped: Arc<AtomicU64>,
}

impl LogBudget {
    /// `per_second` lines on average, `burst` at once; drops counted in `dropped`.
    pub fn new(per_second: u32, burst: u32, dropped: Arc<AtomicU64>) -> Arc<Self> {
        Arc::new(LogBudget { limit: RateLimit::new(per_second, burst), dropped })
    }

    /// Whether one more line may be logged now. Call inside the connector's span.
    fn admit(&self) -> bool {
        let admission = self.limit.admit();
        if !admission.admitted {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(dropped) = admission.refused_to_report {
            tracing::warn!(
                target: "ferry::limits",
                dropped,
                "guest log lines dropped: over limits.log_lines_per_second ({}) with a burst of {}",
                self.limit.per_second(),
                self.limit.burst(),
            );
        }
        admission.admitted
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::LogBudget;

    #[test]
    fn a_burst_passes_and_the_rest_is_dropped_and_counted() {
        let dropped = Arc::new(AtomicU64::new(0));
        let budget = LogBudget::new(1, 10, dropped.clone());
        let admitted = (0..100).filter(|_| budget.admit()).count();
        // The burst, plus at most one line refilled while the loop ran.
        assert!((10..=11).contains(&admitted), "{admitted} lines admitted");
        assert_eq!(dropped.load(Ordering::Relaxed), 100 - admitted as u64);
    }
}
