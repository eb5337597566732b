//! Capped exponential backoff: `initial`, then twice as long each time, never more
//! than `max`, back to `initial` after a success. Written in the config as
//! `{ initial = "100ms", max = "10s" }`; used by the loops (after a NACK, before a
//! restart) and by connections (before reconnecting).
//!
//! The doubling saturates: the config bounds both durations, but a backoff must not be
//! able to panic a connector's task whatever it was built from.

use std::time::Duration;

use serde::Deserialize;

use super::duration;

/// A capped exponential backoff: `initial`, doubling up to `max`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BackoffConfig {
    #[serde(with = "duration")]
    pub initial: Duration,
    #[serde(with = "duration")]
    pub max: Duration,
}

/// The delays of one [`BackoffConfig`], one after the other.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    next: Duration,
}

impl Backoff {
    /// The first delay will be `config.initial`.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff { config, next: config.initial.min(config.max) }
    }

    /// The pause to take now; the following one will be twice as long (capped).
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.config.max);
        delay
    }

    /// Start again from `initial`.
    pub fn reset(&mut self) {
        self.next = self.config.initial.min(self.config.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new(BackoffConfig { initial: ms(100), max: ms(500) });
        let delays: Vec<_> = (0..5).map(|_| backoff.next_delay()).collect();
        assert_eq!(delays, [ms(100), ms(200), ms(400), ms(500), ms(500)]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), ms(100));
    }

    #[test]
    fn the_largest_durations_saturate_instead_of_overflowing() {
        // `Duration::MAX * 2` panics; the backoff must not.
        let mut backoff =
            Backoff::new(BackoffConfig { initial: Duration::MAX / 2 + Duration::from_secs(1), max: Duration::MAX });
        let delays: Vec<_> = (0..3).map(|_| backoff.next_delay()).collect();
        assert_eq!(delays[1..], [Duration::MAX, Duration::MAX]);
        let mut inverted = Backoff::new(BackoffConfig { initial: Duration::from_secs(5), max: Duration::from_secs(1) });
        assert_eq!(inverted.next_delay(), Duration::from_secs(1), "never more than max, even the first time");
        inverted.reset();
        assert_eq!(inverted.next_delay(), Duration::from_secs(1));
    }
}
