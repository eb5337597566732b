//! Capped exponential backoff: `initial`, then twice as long each time, never more
//! than `max`, back to `initial` after a success.

use std::time::Duration;

use crate::config::BackoffConfig;

#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    next: Duration,
}

impl Backoff {
    pub fn new(config: BackoffConfig) -> Self {
        Backoff { config, next: config.initial }
    }

    /// The pause to take now; the following one will be twice as long (capped).
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.config.max);
        delay
    }

    /// Start again from `initial`.
    pub fn reset(&mut self) {
        self.next = self.config.initial;
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
}
