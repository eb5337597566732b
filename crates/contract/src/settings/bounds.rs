//! The range every duration and size in the config must lie in.
//!
//! Below a minimum a value means nothing useful (a `call_timeout` shorter than the
//! engine's tick traps every call). Above a maximum it is no longer a setting but an
//! attack on the host's arithmetic: the host adds durations to `Instant`s, doubles
//! backoffs and multiplies sizes, and `shutdown_grace_period =
//! "10000000000000000000s"` once made SIGINT panic. Each maximum is far beyond any
//! sensible setting and far below any overflow, so code that uses a validated value
//! needs no overflow handling of its own.

use std::time::Duration;

use super::ByteSize;
use super::duration::show;

/// How often the engine's epoch advances: the granularity of time slicing and of
/// the call deadline (the runtime ticks at it; `limits.call_timeout` cannot be less).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The largest duration most keys accept.
pub const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The pooling allocator's reservation (slots × the largest `limits.memory`) may not
/// exceed this. It is address space, not RAM, but address space is finite: x86-64
/// Linux gives a process 128 TiB, and wasmtime reserves more than slots × memory
/// (guard regions, up to eight memories per slot). 1 TiB holds 1,000 connectors of
/// 512 MiB each, far more than any host runs, and stays well inside the address space
/// even at eight times that.
pub const MAX_POOL_RESERVATION: ByteSize = ByteSize::tib(1);

/// What a key accepts, and why its minimum is what it is.
#[derive(Debug, Clone, Copy)]
pub struct Range<T> {
    pub min: T,
    pub max: T,
    /// Said when a value is below `min`.
    pub why_min: &'static str,
}

/// Timers (`poll_interval`, `delivery_timeout`, backoffs, `connect_timeout`): tokio's
/// timers count in milliseconds, so anything shorter would be a millisecond anyway.
pub const TIMER: Range<Duration> =
    Range { min: Duration::from_millis(1), max: DAY, why_min: "timers count in whole milliseconds" };

/// `limits.call_timeout`: the engine checks a call's deadline once per epoch tick.
pub const CALL_TIMEOUT: Range<Duration> = Range {
    min: EPOCH_TICK,
    max: DAY,
    why_min: "the engine checks call deadlines every 10 ms, so a shorter timeout would trap every call",
};

/// `[runtime] shutdown_grace_period`: zero means "do not wait".
pub const GRACE: Range<Duration> = Range { min: Duration::ZERO, max: DAY, why_min: "" };

/// `[runtime] progress_interval`: a line per busy connector each time.
pub const PROGRESS: Range<Duration> =
    Range { min: Duration::from_millis(100), max: DAY, why_min: "more often would flood the log" };

/// `[runtime] compile_timeout`: compiling a component takes at least some time.
pub const COMPILE_TIMEOUT: Range<Duration> =
    Range { min: Duration::from_secs(1), max: Duration::from_secs(60 * 60), why_min: "compiling takes time" };

/// `create.retention` of an Iggy topic: the server keeps messages at least a second.
pub const RETENTION: Range<Duration> = Range {
    min: Duration::from_secs(1),
    // A hundred of humantime's years (365.25 days), so that it shows as "100years".
    max: Duration::from_secs(100 * 31_557_600),
    why_min: "the server counts retention in seconds",
};

/// `limits.memory` of one instance.
pub const MEMORY: Range<ByteSize> =
    Range { min: ByteSize::mib(1), max: ByteSize::gib(64), why_min: "a smaller one cannot run any component" };

/// `limits.max_batch_bytes` and `limits.max_message_bytes`: a batch is lifted out of a
/// 32-bit guest's memory, which cannot hold more than 4 GiB.
pub const BATCH_BYTES: Range<ByteSize> = Range { min: ByteSize(1), max: ByteSize::gib(4), why_min: "" };

/// `limits.max_state_bytes`: the cursor is one SQLite value, which SQLite caps at
/// 1,000,000,000 bytes.
pub const STATE_BYTES: Range<ByteSize> = Range { min: ByteSize(1), max: ByteSize::mib(512), why_min: "" };

/// `max_memory` of a tenant: a sum of `limits.memory`.
pub const TENANT_MEMORY: Range<ByteSize> =
    Range { min: ByteSize::mib(1), max: ByteSize::tib(1), why_min: "no connector fits in less" };

/// `[runtime] max_component_bytes`: the component file is read into memory whole.
pub const COMPONENT_BYTES: Range<ByteSize> = Range { min: ByteSize(1), max: ByteSize::gib(1), why_min: "" };

/// `[runtime] compile_memory`: the compiling child process needs room for the
/// compiler itself.
pub const COMPILE_MEMORY: Range<ByteSize> =
    Range { min: ByteSize::mib(64), max: ByteSize::gib(64), why_min: "the compiler alone needs more" };

/// A kind of value with a [`Range`]: how it is written in messages.
pub trait Bounded: Copy + PartialOrd {
    fn shown(self) -> String;
    fn is_zero(self) -> bool;
}

impl Bounded for Duration {
    fn shown(self) -> String {
        show(self)
    }

    fn is_zero(self) -> bool {
        Duration::is_zero(&self)
    }
}

impl Bounded for ByteSize {
    fn shown(self) -> String {
        self.to_string()
    }

    fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl<T: Bounded> Range<T> {
    /// `value` within the range, or what is wrong with it.
    pub fn check(&self, value: T) -> Result<(), String> {
        if value < self.min {
            let why = if self.why_min.is_empty() { String::new() } else { format!(" ({})", self.why_min) };
            return Err(if value.is_zero() {
                format!("must be greater than zero; the minimum is {}{why}", self.min.shown())
            } else {
                format!("{} is less than the minimum, {}{why}", value.shown(), self.min.shown())
            });
        }
        if value > self.max {
            return Err(format!("{} is more than the maximum, {}", value.shown(), self.max.shown()));
        }
        Ok(())
    }
}

/// Check each `(key, value, range)`; the error names the key.
pub fn check_all<T: Bounded>(values: &[(&'static str, T, Range<T>)]) -> Result<(), (&'static str, String)> {
    for (key, value, range) in values {
        range.check(*value).map_err(|problem| (*key, problem))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outside_a_range_say_which_bound_and_why() {
        assert_eq!(TIMER.check(Duration::from_millis(1)), Ok(()));
        assert_eq!(TIMER.check(DAY), Ok(()));
        assert_eq!(
            CALL_TIMEOUT.check(Duration::from_nanos(1)).unwrap_err(),
            "1ns is less than the minimum, 10ms (the engine checks call deadlines every 10 ms, so a shorter \
             timeout would trap every call)"
        );
        assert_eq!(
            TIMER.check(Duration::ZERO).unwrap_err(),
            "must be greater than zero; the minimum is 1ms (timers count in whole milliseconds)"
        );
        assert_eq!(
            GRACE.check(Duration::from_secs(10_000_000_000_000_000_000)).unwrap_err(),
            "316880878140years 3months 14days 10h 5m 52s is more than the maximum, 1day"
        );
        assert_eq!(MEMORY.check(ByteSize::gib(65)).unwrap_err(), "65 GiB is more than the maximum, 64 GiB");
        assert_eq!(BATCH_BYTES.check(ByteSize(0)).unwrap_err(), "must be greater than zero; the minimum is 1 B");
    }

    #[test]
    fn every_maximum_leaves_the_host_room_for_its_arithmetic() {
        let now = std::time::Instant::now();
        for range in [TIMER, CALL_TIMEOUT, GRACE, PROGRESS, COMPILE_TIMEOUT, RETENTION] {
            assert!(now.checked_add(range.max).is_some(), "{range:?}");
            assert!(range.max.checked_mul(2).is_some(), "a backoff doubles: {range:?}");
            assert!(range.min <= range.max);
        }
        for range in [MEMORY, BATCH_BYTES, STATE_BYTES, TENANT_MEMORY, COMPONENT_BYTES, COMPILE_MEMORY] {
            assert!(range.min <= range.max);
            assert!(usize::try_from(range.max.bytes()).is_ok(), "{range:?}");
        }
        assert!(STATE_BYTES.max.bytes() < 1_000_000_000, "SQLite's largest value");
    }
}
