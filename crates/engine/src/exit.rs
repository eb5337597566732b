//! How a connector's loop ends, and the count of failures in a row that ends it.
//! The source loop and the sink loop end the same three ways, and the round that
//! ran either one turns its end into the supervisor's next step the same way.

use crate::status::Reporter;
use crate::supervisor::RoundEnd;
use ferry_runtime::CallError;

/// Why a loop ended.
pub enum Exit {
    /// Shutdown was requested; the instance is intact and should be closed.
    Shutdown,
    /// Too many failures in a row.
    Failed { reason: String },
    /// The guest trapped; the instance must be dropped.
    Trapped(CallError),
}

impl Exit {
    /// What the supervisor does next. Call after closing the guest on `Shutdown`.
    pub fn round_end(self, status: &Reporter, made_progress: bool) -> RoundEnd {
        match self {
            Exit::Shutdown => RoundEnd::Stopped,
            Exit::Failed { reason } => RoundEnd::Failed { reason, made_progress },
            Exit::Trapped(error) => {
                let reason = error.to_string();
                status.trapped(&reason);
                RoundEnd::Failed { reason, made_progress }
            }
        }
    }
}

/// Failures in a row (NACKs, retries, guest errors); too many fail the instance.
pub struct FailureStreak {
    count: u32,
    max: u32,
    /// What counts, for the reason: "NACKs or guest errors".
    what: &'static str,
}

impl FailureStreak {
    pub fn new(max: u32, what: &'static str) -> Self {
        FailureStreak { count: 0, max, what }
    }

    /// Count one more failure; the exit when that makes too many.
    pub fn failed(&mut self, last: &str) -> Option<Exit> {
        self.count += 1;
        (self.count >= self.max)
            .then(|| Exit::Failed { reason: format!("{} {} in a row; the last: {last}", self.count, self.what) })
    }

    /// Something went right: the streak is broken.
    pub fn reset(&mut self) {
        self.count = 0;
    }
}
