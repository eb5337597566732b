//! The connectors a host runs, one slot each: what the connector is (wired), its
//! task while it runs, and its own stop trigger, so that one connector can be
//! stopped gracefully (its outstanding batch settles, its guest is closed) while the
//! others go on: for a pause, a restart, a reload. Ferry's shutdown stops them all
//! the same way.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;
use tracing::Instrument;

use super::control::{Refusal, RefusalKind};
use super::fingerprint::Fingerprint;
use super::wiring::Wired;
use ferry_contract::Role;
use ferry_engine::shutdown::{self, Shutdown, ShutdownTrigger};
use ferry_engine::status::{self, Reporter, StatusBoard};
use ferry_engine::supervisor::supervise;
use ferry_runtime::Runtime;

/// One connector of the host.
pub(super) struct Slot {
    pub key: Arc<str>,
    pub role: Role,
    /// What it is; `None` only when its state could not be taken again after a
    /// reset or a reload (its status says why).
    pub wired: Option<Wired>,
    /// What it is made of, for hosts built from a config (see `fingerprint.rs`).
    pub fingerprint: Option<Fingerprint>,
    /// Its reporter, from its first start on (a restart keeps its counters).
    pub reporter: Option<Reporter>,
    /// Its task, from its start until it is stopped.
    running: Option<Running>,
    /// Paused by an operator.
    pub paused: bool,
}

impl Slot {
    /// Whether its task is alive (a connector refused for good has ended on its own).
    pub fn is_running(&self) -> bool {
        self.running.as_ref().is_some_and(|r| !r.task.is_finished())
    }
}

/// A connector's task and what stops it.
struct Running {
    stop: ShutdownTrigger,
    /// Ends when its supervisor does.
    task: JoinHandle<()>,
    /// Aborts its supervisor.
    abort: AbortHandle,
}

pub(super) struct Fleet {
    runtime: Arc<Runtime>,
    board: Arc<StatusBoard>,
    /// In the order they were added (sources, then sinks, as in the config).
    slots: Vec<Slot>,
    /// The host's shutdown, from [`Fleet::start_all`] on: every connector's own stop
    /// is within it, so that it reaches them all at once.
    host_shutdown: Option<Shutdown>,
}

impl Fleet {
    pub fn new(runtime: Arc<Runtime>, board: Arc<StatusBoard>) -> Fleet {
        Fleet { runtime, board, slots: Vec::new(), host_shutdown: None }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn add(&mut self, wired: Wired, fingerprint: Option<Fingerprint>) {
        let (key, role) = (wired.key().clone(), wired.role());
        self.slots.push(Slot {
            key,
            role,
            wired: Some(wired),
            fingerprint,
            reporter: None,
            running: None,
            paused: false,
        });
    }

    /// Put `wired` in the slot of its key (a changed connector, stopped before), or
    /// in a new one. Its reporter is made again at its start: its name or tenant may
    /// have changed (its counters are kept).
    pub fn put(&mut self, wired: Wired, fingerprint: Option<Fingerprint>) -> &mut Slot {
        let Some(index) = self.slots.iter().position(|slot| slot.key == *wired.key()) else {
            self.add(wired, fingerprint);
            return self.slots.last_mut().expect("just added");
        };
        let slot = &mut self.slots[index];
        slot.role = wired.role();
        slot.wired = Some(wired);
        slot.fingerprint = fingerprint;
        slot.reporter = None;
        slot
    }

    pub fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.slots.iter().map(|slot| &slot.key)
    }

    pub fn get(&self, key: &str) -> Option<&Slot> {
        self.slots.iter().find(|slot| &*slot.key == key)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|slot| &*slot.key == key)
    }

    /// The slot of the `role` connector `key`, or a refusal saying what it is instead.
    pub fn find(&mut self, role: Role, key: &str) -> Result<&mut Slot, Refusal> {
        match self.slots.iter_mut().find(|slot| &*slot.key == key) {
            Some(slot) if slot.role == role => Ok(slot),
            Some(slot) => Err(Refusal::new(
                RefusalKind::NotFound,
                format!("`{key}` is a {}, not a {}", slot.role.noun(), role.noun()),
            )),
            None => Err(Refusal::new(RefusalKind::NotFound, format!("no {} has the key `{key}`", role.noun()))),
        }
    }

    /// Take `key` off the host and the status board (it was stopped before).
    pub fn remove(&mut self, key: &str) {
        self.slots.retain(|slot| &*slot.key != key);
        self.board.remove(key);
    }

    /// Start every connector that is not running or paused; they, and every one
    /// started later, stop when `host_shutdown` is requested.
    pub fn start_all(&mut self, host_shutdown: &Shutdown) {
        self.host_shutdown = Some(host_shutdown.clone());
        // By position, not by key: a search by key for each of ten thousand
        // connectors is a hundred million comparisons.
        for index in 0..self.slots.len() {
            self.start_slot(index);
        }
    }

    /// Start supervising `key` in its span (instance after instance, from its
    /// committed state). Does nothing for a connector without what it needs, whose
    /// status already says why.
    pub fn start(&mut self, key: &str) {
        if let Some(index) = self.slots.iter().position(|slot| &*slot.key == key) {
            self.start_slot(index);
        }
    }

    fn start_slot(&mut self, index: usize) {
        let (runtime, board) = (self.runtime.clone(), self.board.clone());
        let slot = &mut self.slots[index];
        let Some(wired) = &slot.wired else { return };
        let reporter = slot
            .reporter
            .get_or_insert_with(|| board.reporter(&slot.key, slot.role, wired.name(), wired.tenant()))
            .clone();
        // Kept across reloads: the instance starting now follows its config's `verbose`
        // and `benchmark`.
        reporter.set_verbose(wired.verbose());
        reporter.set_benchmark(wired.benchmark());
        let (stop, shutdown) = match &self.host_shutdown {
            Some(host_shutdown) => shutdown::channel_within(host_shutdown),
            None => shutdown::channel(),
        };
        let span = status::connector_span(&slot.key, wired.tenant());
        let supervisor = match wired {
            Wired::Source(source, _) => {
                tokio::spawn(supervise(runtime, source.clone(), reporter.clone(), shutdown).instrument(span))
            }
            Wired::Sink(sink, _) => {
                tokio::spawn(supervise(runtime, sink.clone(), reporter.clone(), shutdown).instrument(span))
            }
        };
        let abort = supervisor.abort_handle();
        let task = tokio::spawn(report_a_crash(supervisor, reporter));
        slot.running = Some(Running { stop, task, abort });
        slot.paused = false;
    }

    /// Stop `keys` gracefully, all at once: polling stops, each outstanding batch
    /// settles within `grace` (or the connector is cut off, and that batch will be
    /// produced again), guests are closed. Returns the keys that were cut off. If
    /// ferry's `shutdown` comes meanwhile, this gives up waiting (the shutdown
    /// waits for them) and says so.
    pub async fn stop(
        &mut self,
        keys: &[Arc<str>],
        grace: Duration,
        shutdown: &Shutdown,
    ) -> Result<Vec<String>, Refusal> {
        for slot in self.slots.iter().filter(|slot| keys.contains(&slot.key)) {
            if let Some(running) = &slot.running {
                running.stop.trigger();
            }
        }
        let deadline = deadline_after(grace);
        let mut unsettled = Vec::new();
        for slot in self.slots.iter_mut().filter(|slot| keys.contains(&slot.key)) {
            let Some(running) = &mut slot.running else { continue };
            let mut shutdown = shutdown.clone();
            tokio::select! {
                settled = running.settle(&slot.key, deadline) => if !settled {
                    unsettled.push(slot.key.to_string());
                },
                _ = shutdown.requested() => {
                    return Err(Refusal::new(RefusalKind::Unavailable, "ferry began shutting down meanwhile"));
                }
            }
            slot.running = None;
        }
        Ok(unsettled)
    }

    /// Stop every connector (ferry is shutting down); the keys of those cut off.
    pub async fn stop_all(&mut self, grace: Duration) -> Vec<String> {
        for running in self.slots.iter().filter_map(|slot| slot.running.as_ref()) {
            running.stop.trigger();
        }
        let deadline = deadline_after(grace);
        let mut unsettled = Vec::new();
        for slot in &mut self.slots {
            if let Some(mut running) = slot.running.take()
                && !running.settle(&slot.key, deadline).await
            {
                unsettled.push(slot.key.to_string());
            }
        }
        unsettled
    }
}

impl Running {
    /// Wait for the connector to stop by `deadline`; past it, abort it and say so
    /// (false). Either way it is gone when this returns, its state given up.
    async fn settle(&mut self, key: &str, deadline: Instant) -> bool {
        if tokio::time::timeout_at(deadline, &mut self.task).await.is_ok() {
            return true;
        }
        self.abort.abort();
        tracing::warn!(key = %key, "did not settle within the grace period; its last batch will be produced again");
        // The supervisor's future (and the connector's state) is dropped before its
        // task reports the abort.
        let _ = (&mut self.task).await;
        false
    }
}

/// `grace` from now; a grace period too long to add up is as good as forever.
fn deadline_after(grace: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(grace).unwrap_or(now + Duration::from_secs(86_400 * 365))
}

/// Wait for a connector's supervisor; if it died of a panic (a bug in ferry), say so
/// in its status instead of letting it look alive.
async fn report_a_crash(supervisor: JoinHandle<()>, reporter: Reporter) {
    if let Err(error) = supervisor.await
        && error.is_panic()
    {
        let panic = error.into_panic();
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        reporter.crashed(&message);
    }
}
