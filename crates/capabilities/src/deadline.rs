//! The deadline of a host call made on a guest's behalf: what is left of the guest's
//! own call (its `limits.call_timeout`), less a margin so that the guest can still
//! answer the host after a call of ours timed out. Every capability that talks to a
//! server (Redis, NATS, MQTT, MySQL, Kafka) bounds its calls with one, so that a
//! server that does not answer costs the guest an error, not its whole call.

use std::future::Future;
use std::time::Duration;

/// How long a host call may take when `remaining` is left of the guest's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadline {
    budget: Duration,
}

impl Deadline {
    /// A tenth of `remaining` kept for the guest (at least a millisecond is given).
    pub(crate) fn of_call(remaining: Duration) -> Deadline {
        Deadline { budget: remaining.saturating_sub(remaining / 10).max(Duration::from_millis(1)) }
    }

    /// The time the call may take, for a client's own time-outs.
    pub(crate) fn budget(self) -> Duration {
        self.budget
    }

    /// `call`'s outcome, or `Err(what ran past the deadline)` when it did not finish
    /// within it (for the capability's own `timed-out` error).
    pub(crate) async fn run<R>(self, what: &str, call: impl Future<Output = R>) -> Result<R, String> {
        tokio::time::timeout(self.budget, call).await.map_err(|_| {
            format!("{what} ran past the call's deadline ({:?} were left of limits.call_timeout)", self.budget)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenth_of_what_is_left_is_kept_for_the_guest() {
        assert_eq!(Deadline::of_call(Duration::from_secs(5)).budget(), Duration::from_millis(4500));
        assert_eq!(Deadline::of_call(Duration::ZERO).budget(), Duration::from_millis(1));
    }

    #[tokio::test]
    async fn a_call_past_the_deadline_is_said_with_what_it_was() {
        let deadline = Deadline::of_call(Duration::from_millis(20));
        assert_eq!(deadline.run("reading", async { 7 }).await, Ok(7));
        let late = deadline.run("reading the stream", std::future::pending::<()>()).await.unwrap_err();
        assert!(late.starts_with("reading the stream ran past the call's deadline (18ms"), "{late}");
    }
}
