//! A token bucket for log lines: a rate on average, a burst at once, and a count of
//! what was refused, reported at most once per [`REPORT_EVERY`].
//!
//! Guests decide how often the host logs about them (every guest log line, every
//! error or NACK they provoke), so each connector's lines pass one of these: a guest
//! that floods must not fill the operator's disk or drown its neighbours' lines.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often, at most, the number of refused lines is reported.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

pub struct RateLimit {
    per_second: f64,
    burst: f64,
    state: Mutex<State>,
}

struct State {
    tokens: f64,
    refilled: Instant,
    /// Refused since the last report.
    unreported: u64,
    reported: Instant,
}

/// What [`RateLimit::admit`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Whether this line may be logged.
    pub admitted: bool,
    /// When it is time to say so: how many lines were refused since the last report.
    pub refused_to_report: Option<u64>,
}

impl RateLimit {
    /// `per_second` lines on average, `burst` at once.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let now = Instant::now();
        let burst = f64::from(burst.max(1));
        RateLimit {
            per_second: f64::from(per_second),
            burst,
            state: Mutex::new(State { tokens: burst, refilled: now, unreported: 0, reported: now }),
        }
    }

    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Whether one more line may be logged now.
    pub fn admit(&self) -> Admission {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let elapsed = now.duration_since(state.refilled).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.per_second).min(self.burst);
        state.refilled = now;
        let admitted = state.tokens >= 1.0;
        if admitted {
            state.tokens -= 1.0;
        } else {
            state.unreported += 1;
        }
        let mut refused_to_report = None;
        if state.unreported > 0 && now.duration_since(state.reported) >= REPORT_EVERY {
            refused_to_report = Some(std::mem::take(&mut state.unreported));
            state.reported = now;
        }
        Admission { admitted, refused_to_report }
    }
}

#[cfg(test)]
mod tests {
    use super::RateLimit;

    #[test]
    fn a_burst_passes_and_the_rest_is_refused() {
        let limit = RateLimit::new(1, 10);
        let admitted = (0..100).filter(|_| limit.admit().admitted).count();
        // The burst, plus at most one line refilled while the loop ran.
        assert!((10..=11).contains(&admitted), "{admitted} lines admitted");
    }
}
