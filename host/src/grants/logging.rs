//! The contract's logging import: guest lines become `tracing` events in the
//! connector's span, so they carry its key like every host line about it.
//!
//! A guest's text is untrusted: control characters are escaped (a guest must not be
//! able to forge a line that looks like it came from another connector), long lines
//! are cut, and the number of lines is rate-limited per connector
//! (`limits.log_lines_per_second`, with a burst of `limits.log_burst`): a guest that
//! floods its log must not fill the operator's disk or drown its neighbours' lines.
//! Dropped lines are counted, in status and in one summary line per second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::Span;

use crate::runtime::bindings::logging::{Host, Level};
use crate::runtime::context::GuestContext;

/// Longest guest line kept, in bytes; the rest is replaced by a marker.
const MAX_LINE: usize = 4096;

/// How often, at most, the count of dropped lines is logged.
const DROP_SUMMARY_EVERY: Duration = Duration::from_secs(1);

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
        let text = sanitize(text);
        match level {
            Level::Trace => tracing::trace!(target: "ferry::guest", "{text}"),
            Level::Debug => tracing::debug!(target: "ferry::guest", "{text}"),
            Level::Info => tracing::info!(target: "ferry::guest", "{text}"),
            Level::Warn => tracing::warn!(target: "ferry::guest", "{text}"),
            Level::Error => tracing::error!(target: "ferry::guest", "{text}"),
        }
    }
}

/// A token bucket of log lines, shared by every instance of one connector (a
/// restart does not refill it).
pub struct LogBudget {
    per_second: f64,
    burst: f64,
    bucket: Mutex<Bucket>,
    dropped: Arc<AtomicU64>,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    /// Dropped since the last summary line.
    unreported: u64,
    reported: Instant,
}

impl LogBudget {
    /// `per_second` lines on average, `burst` at once; drops counted in `dropped`.
    pub fn new(per_second: u32, burst: u32, dropped: Arc<AtomicU64>) -> Arc<Self> {
        let now = Instant::now();
        Arc::new(LogBudget {
            per_second: f64::from(per_second),
            burst: f64::from(burst.max(1)),
            bucket: Mutex::new(Bucket { tokens: f64::from(burst.max(1)), refilled: now, unreported: 0, reported: now }),
            dropped,
        })
    }

    /// Whether one more line may be logged now. Call inside the connector's span.
    fn admit(&self) -> bool {
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.refilled = now;
        let admitted = bucket.tokens >= 1.0;
        if admitted {
            bucket.tokens -= 1.0;
        } else {
            bucket.unreported += 1;
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if bucket.unreported > 0 && now.duration_since(bucket.reported) >= DROP_SUMMARY_EVERY {
            tracing::warn!(
                target: "ferry::limits",
                dropped = bucket.unreported,
                "guest log lines dropped: over limits.log_lines_per_second ({}) with a burst of {}",
                self.per_second,
                self.burst,
            );
            bucket.unreported = 0;
            bucket.reported = now;
        }
        admitted
    }
}

impl Host for GuestContext {
    fn log(&mut self, level: Level, message: String) {
        self.log.line(level, &message);
    }
}

/// Escape control characters and cut overlong lines.
fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_LINE));
    for c in text.chars() {
        if out.len() >= MAX_LINE {
            out.push_str(" …[cut]");
            break;
        }
        if c.is_control() && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{LogBudget, sanitize};

    #[test]
    fn a_burst_passes_and_the_rest_is_dropped_and_counted() {
        let dropped = Arc::new(AtomicU64::new(0));
        let budget = LogBudget::new(1, 10, dropped.clone());
        let admitted = (0..100).filter(|_| budget.admit()).count();
        // The burst, plus at most one line refilled while the loop ran.
        assert!((10..=11).contains(&admitted), "{admitted} lines admitted");
        assert_eq!(dropped.load(Ordering::Relaxed), 100 - admitted as u64);
    }

    #[test]
    fn a_guest_cannot_inject_lines() {
        assert_eq!(
            sanitize("one\n2024 INFO connector{key=other}: forged"),
            "one\\n2024 INFO connector{key=other}: forged"
        );
        assert_eq!(sanitize("bell\x07"), "bell\\u{7}");
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "x".repeat(10_000);
        let cut = sanitize(&long);
        assert!(cut.len() < 4200);
        assert!(cut.ends_with("[cut]"));
    }
}
