//! What operators see: each connector's phase and counters, the log lines that go
//! with every change, and a stream of events (tests and the status file follow it).
//!
//! The loops and the supervisor report through a [`Reporter`] (see `reporter.rs`);
//! they never format a log line themselves, so each loop reads as its contract and
//! nothing else.

mod file;
mod progress;
mod reporter;
mod stages;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast};

use ferry_contract::NackReason;
use ferry_contract::Role;
use ferry_runtime::InstanceMeters;

pub use file::{StatusFile, keep_written, read_status_file, status_file_path, write_final};
pub use progress::log_progress;
pub use reporter::{Polled, Reporter, StartingFrom, Written};
pub use stages::{BUCKETS, HistogramSnapshot, Stage, StageTimes};

/// Where a connector is in its life.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Being instantiated and opened.
    #[default]
    Starting,
    /// Delivering batches.
    Running,
    /// Polled, nothing to deliver; polling again at its interval.
    Idle,
    /// Marked failed (traps, or too many NACKs); will restart after a backoff.
    Failed,
    /// Will not be restarted (its state is corrupt, say); needs an operator.
    Refused,
    /// Stopped by a graceful shutdown.
    Stopped,
    /// Paused by an operator (`POST .../pause`): its last batch settled, its guest
    /// closed; it polls again only when resumed (or when ferry restarts).
    Paused,
}

impl Phase {
    /// Its name, as in status output (`running`, `failed`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Idle => "idle",
            Phase::Failed => "failed",
            Phase::Refused => "refused",
            Phase::Stopped => "stopped",
            Phase::Paused => "paused",
        }
    }

    /// Every phase, for metrics that show each one.
    pub const ALL: [Phase; 7] =
        [Phase::Starting, Phase::Running, Phase::Idle, Phase::Failed, Phase::Refused, Phase::Stopped, Phase::Paused];

    /// Running or idle: doing its job.
    pub fn is_healthy(self) -> bool {
        matches!(self, Phase::Running | Phase::Idle)
    }

    /// Healthy, or paused on purpose: what an operator asked for is not a fault,
    /// and a probe that restarted ferry for it would undo the pause.
    pub fn is_as_intended(self) -> bool {
        self.is_healthy() || self == Phase::Paused
    }
}

/// One connector's status. Written with the names Iggy's runtime answers with
/// (`connector_type`, `status`), the same in the status file, `ferry status --json`
/// and every answer of the API; a file of an older ferry (`role`, `phase`) reads too.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnectorStatus {
    pub key: String,
    /// `source` or `sink`.
    #[serde(default, rename = "connector_type", alias = "role")]
    pub role: String,
    pub name: Option<String>,
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(rename = "status", alias = "phase")]
    pub phase: Phase,
    /// Instances started so far (1 for the first start).
    pub instances: u64,
    pub batches_acked: u64,
    /// Messages a source delivered, or a sink's guest wrote (its dead letters are
    /// counted apart, in `dead_lettered`).
    pub messages_delivered: u64,
    /// Their payload bytes.
    pub bytes_delivered: u64,
    pub nacks: u64,
    /// NACKs (a sink: retries) by reason, `delivery-failed`, `retry`, ...; they add
    /// up to `nacks`.
    #[serde(default)]
    pub nacks_by_reason: BTreeMap<String, u64>,
    pub consecutive_nacks: u32,
    pub traps: u64,
    pub guest_errors: u64,
    pub committed_generation: Option<u64>,
    pub last_error: Option<String>,
    /// Fuel burnt by its calls (when the engine meters fuel).
    #[serde(default)]
    pub fuel_consumed: u64,
    /// Bytes of linear memory its current instance holds (0 when none runs).
    #[serde(default)]
    pub memory_in_use: u64,
    /// Guest log lines dropped by the rate limit.
    #[serde(default)]
    pub log_lines_dropped: u64,
    /// Messages a sink could never write, handed to its dead-letter destination
    /// (not in `messages_delivered`: the two add up to the messages it settled).
    #[serde(default)]
    pub dead_lettered: u64,
    /// Messages a source's guest produced (in batches delivered or not), or a sink
    /// read from its input to hand its guest.
    #[serde(default)]
    pub messages_polled: u64,
    /// Records of settled batches that a transform dropped: settled (the cursor or
    /// offset moved past them) without being delivered or written.
    #[serde(default)]
    pub messages_filtered: u64,
    /// Whether the current instance has been idle yet (to log that once).
    #[serde(skip)]
    pub idled_this_instance: bool,
}

/// Something that happened to a connector.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Started {
        key: Arc<str>,
        instance: u64,
    },
    Acked {
        key: Arc<str>,
        batch: u64,
        messages: usize,
        generation: Option<u64>,
    },
    Nacked {
        key: Arc<str>,
        batch: u64,
        reason: NackReason,
        detail: String,
    },
    /// A sink's batch is settled: written (or dead-lettered) and its offset stored.
    Written {
        key: Arc<str>,
        stream: String,
        topic: String,
        partition: u32,
        end: u64,
        messages: usize,
        dead: usize,
    },
    /// A sink's guest answered `retry` (or a rejection had nowhere to go).
    Retried {
        key: Arc<str>,
        reason: String,
    },
    /// A sink read a message it cannot hand to its guest as it is stored (see
    /// `sink::input::Unreadable`): where, and what became of it.
    Unreadable {
        key: Arc<str>,
        stream: String,
        topic: String,
        partition: u32,
        offset: u64,
        detail: String,
    },
    /// A sink could not read its input, deliver its dead letters, or store its offset.
    InputFailed {
        key: Arc<str>,
        detail: String,
    },
    GuestError {
        key: Arc<str>,
        message: String,
    },
    Trapped {
        key: Arc<str>,
        message: String,
    },
    Failed {
        key: Arc<str>,
        reason: String,
    },
    Refused {
        key: Arc<str>,
        reason: String,
    },
    Idle {
        key: Arc<str>,
    },
    Stopped {
        key: Arc<str>,
    },
    /// Paused by an operator, after its last batch settled.
    Paused {
        key: Arc<str>,
    },
}

impl Event {
    pub fn key(&self) -> &str {
        match self {
            Event::Started { key, .. }
            | Event::Acked { key, .. }
            | Event::Nacked { key, .. }
            | Event::Written { key, .. }
            | Event::Retried { key, .. }
            | Event::Unreadable { key, .. }
            | Event::InputFailed { key, .. }
            | Event::GuestError { key, .. }
            | Event::Trapped { key, .. }
            | Event::Failed { key, .. }
            | Event::Refused { key, .. }
            | Event::Idle { key }
            | Event::Stopped { key }
            | Event::Paused { key } => key,
        }
    }
}

/// Counters the sandbox bumps on hot paths (every call, every guest log line), so
/// they are atomics rather than fields behind the board's lock.
/// The time each stage of the loop takes and the messages polled are here too: they
/// change on every batch.
#[derive(Debug, Default)]
pub struct Meters {
    /// Fuel burnt, memory held.
    pub instance: InstanceMeters,
    pub log_lines_dropped: Arc<AtomicU64>,
    pub messages_polled: AtomicU64,
    pub stages: StageTimes,
}

impl Meters {
    fn fill(&self, status: &mut ConnectorStatus) {
        status.fuel_consumed = self.instance.fuel_consumed.load(Ordering::Relaxed);
        status.memory_in_use = self.instance.memory_in_use.load(Ordering::Relaxed);
        status.log_lines_dropped = self.log_lines_dropped.load(Ordering::Relaxed);
        status.messages_polled = self.messages_polled.load(Ordering::Relaxed);
    }
}

/// Every connector's status, and the event stream.
pub struct StatusBoard {
    connectors: Mutex<BTreeMap<String, ConnectorStatus>>,
    meters: Mutex<BTreeMap<String, Arc<Meters>>>,
    events: broadcast::Sender<Event>,
    changed: Notify,
    /// Notified when a connector's phase changes, which is rare: a waiter on it is not
    /// woken for every batch, as one on the events is.
    phase_changed: Notify,
    started_at_micros: u64,
}

impl StatusBoard {
    pub fn new() -> Arc<StatusBoard> {
        Arc::new(StatusBoard {
            connectors: Mutex::new(BTreeMap::new()),
            meters: Mutex::new(BTreeMap::new()),
            events: broadcast::channel(4096).0,
            changed: Notify::new(),
            phase_changed: Notify::new(),
            started_at_micros: now_micros(),
        })
    }

    /// The reporter of connector `key` (of `tenant`, if any), which appears on the
    /// board from now on. A connector already on the board in the same role (one
    /// reloaded with a new config) keeps its counters, so that they only ever grow.
    pub fn reporter(self: &Arc<Self>, key: &str, role: Role, name: Option<String>, tenant: Option<&str>) -> Reporter {
        let role = role.noun().to_string();
        let tenant = tenant.map(str::to_string);
        let mut meters = self.meters.lock().unwrap_or_else(|e| e.into_inner());
        let mut connectors = self.lock();
        let kept = connectors.get_mut(key).filter(|status| status.role == role);
        let meters = match (kept, meters.get(key)) {
            (Some(status), Some(kept_meters)) => {
                status.name = name;
                status.tenant = tenant;
                kept_meters.clone()
            }
            _ => {
                let status = ConnectorStatus { key: key.to_string(), role, name, tenant, ..Default::default() };
                connectors.insert(key.to_string(), status);
                let fresh = Arc::new(Meters::default());
                meters.insert(key.to_string(), fresh.clone());
                fresh
            }
        };
        drop(connectors);
        Reporter::new(key.into(), self.clone(), meters)
    }

    /// Take connector `key` off the board (it was removed from the config).
    pub fn remove(&self, key: &str) {
        self.meters.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        self.lock().remove(key);
        self.changed.notify_one();
    }

    /// The status of every connector, by key.
    pub fn snapshot(&self) -> Vec<ConnectorStatus> {
        let mut all: Vec<_> = self.lock().values().cloned().collect();
        for status in &mut all {
            self.fill_meters(status);
        }
        all
    }

    /// The status of one connector.
    pub fn get(&self, key: &str) -> Option<ConnectorStatus> {
        let mut status = self.lock().get(key).cloned()?;
        self.fill_meters(&mut status);
        Some(status)
    }

    /// The sandbox and stage meters of one connector (for `/metrics`).
    pub fn meters(&self, key: &str) -> Option<Arc<Meters>> {
        self.meters.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    fn fill_meters(&self, status: &mut ConnectorStatus) {
        if let Some(meters) = self.meters(&status.key) {
            meters.fill(status);
        }
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    /// Wait until connector `key`'s status is `done` (at once if it is), looked at now
    /// and after every change of its phase, never at the batches in between: for a
    /// benchmark's clock, or anything else that must not cost the connector a wake-up
    /// per batch. So `done` must turn true with a change of phase (going idle, say).
    pub async fn wait_until(&self, key: &str, done: impl Fn(&ConnectorStatus) -> bool) {
        loop {
            // Made before the look, so that a change right after it is not missed.
            let changed = self.phase_changed.notified();
            if self.lock().get(key).is_some_and(&done) {
                return;
            }
            changed.await;
        }
    }

    pub fn started_at_micros(&self) -> u64 {
        self.started_at_micros
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ConnectorStatus>> {
        self.connectors.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The span every line about one connector is logged in: its key, and its tenant
/// when it has one.
pub fn connector_span(key: &str, tenant: Option<&str>) -> tracing::Span {
    match tenant {
        Some(tenant) => tracing::info_span!("connector", key = %key, tenant = %tenant),
        None => tracing::info_span!("connector", key = %key),
    }
}

/// Microseconds since the epoch, as an RFC 3339 time.
pub fn format_micros(micros: u64) -> String {
    let time = UNIX_EPOCH + std::time::Duration::from_micros(micros);
    humantime::format_rfc3339_millis(time).to_string()
}

pub fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::AtomicUsize;
    use std::task::{Context, Poll, Wake, Waker};

    use super::*;

    /// A waker that counts how often it was woken.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_wait_is_woken_by_changes_of_phase_only() {
        let board = StatusBoard::new();
        let reporter = board.reporter("k", Role::Source, None, None);
        reporter.running();
        let woken = Arc::new(Counting::default());
        let waker = Waker::from(woken.clone());
        let mut context = Context::from_waker(&waker);
        let mut waiting = pin!(board.wait_until("k", |status| status.phase == Phase::Idle));
        assert_eq!(waiting.as_mut().poll(&mut context), Poll::Pending, "running, not idle");
        for batch in 1..=100 {
            reporter.acked(batch, 10, 100, Some(batch));
        }
        assert_eq!(woken.0.load(Ordering::SeqCst), 0, "batches are no change of phase: no wake-up");
        reporter.idle();
        assert_eq!(woken.0.load(Ordering::SeqCst), 1, "idle: woken once");
        assert_eq!(waiting.as_mut().poll(&mut context), Poll::Ready(()));
        let mut again = pin!(board.wait_until("k", |status| status.phase == Phase::Idle));
        assert_eq!(again.as_mut().poll(&mut context), Poll::Ready(()), "already idle: at once");
    }
}
