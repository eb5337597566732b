//! How long each stage of a connector's loop takes: a histogram per stage, kept in
//! atomics so that timing a stage never takes a lock on the hot path.
//!
//! The loops do not time anything themselves: they hand each stage's future to
//! [`super::Reporter::timed`], which is one call per stage, and the API's `/metrics`
//! reads the histograms from here ([`StageTimes::snapshot`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A stage of a loop. A source polls, transforms, delivers, saves its cursor and
/// acks; a sink polls its input, transforms, writes to its guest, delivers dead
/// letters and saves its offset. The labels are Iggy's runtime's where the meaning
/// is the same (`prepare`, `iggy_send`, `state_save`, `total`), Ferry's own for
/// what only Ferry has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A source's `poll()`; a sink's read of its next batch from its input.
    Poll,
    /// A source's delivery of a batch to its streams in the local log.
    Deliver,
    /// A source's delivery of a batch to its streams on an Iggy server (Iggy's
    /// `iggy_send`).
    IggySend,
    /// Committing a source's cursor or storing a sink's offset.
    StateSave,
    /// A source's `on-batch-result` (ACK or NACK) call into its guest.
    Ack,
    /// A sink's `write(batch)` call into its guest.
    Write,
    /// A sink's delivery of the messages it could never write.
    DeadLetters,
    /// A connector's transforms, on one batch (Iggy's `prepare`: the batch made
    /// ready for its target).
    Transform,
    /// One batch from the moment the host has it (a source's guest returned it, a
    /// sink's input read it) until it is settled: its cursor saved, or its offset
    /// stored (Iggy's `total`). A source's NACKed batch counts too.
    Total,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Poll,
        Stage::Deliver,
        Stage::IggySend,
        Stage::StateSave,
        Stage::Ack,
        Stage::Write,
        Stage::DeadLetters,
        Stage::Transform,
        Stage::Total,
    ];

    /// The name in the `stage` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Poll => "poll",
            Stage::Deliver => "deliver",
            Stage::IggySend => "iggy_send",
            Stage::StateSave => "state_save",
            Stage::Ack => "ack",
            Stage::Write => "write",
            Stage::DeadLetters => "dead_letters",
            Stage::Transform => "prepare",
            Stage::Total => "total",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// Upper bounds of the buckets, in seconds: from 100 µs (a commit to a warm state
/// file) to 10 s (past any default timeout); anything longer lands in +Inf.
pub const BUCKETS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// One stage's histogram.
#[derive(Debug, Default)]
struct Histogram {
    /// Observations per bucket (not cumulative); the last one is +Inf.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

/// Every stage's histogram, for one connector.
#[derive(Debug, Default)]
pub struct StageTimes {
    stages: [Histogram; Stage::ALL.len()],
}

/// What a histogram holds at one moment, as Prometheus encodes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub sum_seconds: f64,
    pub count: u64,
    /// `(upper bound, observations in this bucket alone)`, the last bound `f64::INFINITY`
    /// (+Inf).
    pub buckets: Vec<(f64, u64)>,
}

impl StageTimes {
    pub fn observe(&self, stage: Stage, took: Duration) {
        let histogram = &self.stages[stage.index()];
        let seconds = took.as_secs_f64();
        let bucket = BUCKETS.iter().position(|bound| seconds <= *bound).unwrap_or(BUCKETS.len());
        histogram.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        histogram.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The histogram of `stage` now.
    pub fn snapshot(&self, stage: Stage) -> HistogramSnapshot {
        let histogram = &self.stages[stage.index()];
        let bounds = BUCKETS.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> =
            bounds.zip(histogram.buckets.iter().map(|b| b.load(Ordering::Relaxed))).collect();
        HistogramSnapshot {
            // The count is the buckets' sum, so that a scrape racing an observation
            // never shows a count the buckets do not add up to.
            count: buckets.iter().map(|(_, n)| n).sum(),
            sum_seconds: histogram.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            buckets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_bucket_and_add_up() {
        let times = StageTimes::default();
        times.observe(Stage::Deliver, Duration::from_micros(50));
        times.observe(Stage::Deliver, Duration::from_millis(3));
        times.observe(Stage::Deliver, Duration::from_secs(60));
        times.observe(Stage::Poll, Duration::from_millis(1));
        let deliver = times.snapshot(Stage::Deliver);
        assert_eq!(deliver.count, 3);
        assert!((deliver.sum_seconds - 60.00305).abs() < 1e-9, "{}", deliver.sum_seconds);
        let in_bucket = |bound: f64| deliver.buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
        assert_eq!(in_bucket(0.0001), 1, "50 µs is within the first bound");
        assert_eq!(in_bucket(0.005), 1, "3 ms is above 2.5 ms and within 5 ms");
        assert_eq!(in_bucket(f64::INFINITY), 1, "a minute is past every bound");
        assert_eq!(times.snapshot(Stage::Poll).count, 1, "stages are apart");
        assert_eq!(times.snapshot(Stage::Ack).count, 0);
    }
}
