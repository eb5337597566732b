//! Targets and state stores that fail on command, a target and a state store that
//! hold what reaches them until told to let it go, and files made immutable (a fault
//! that stops root too).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ferry::engine::cursor::{Committed, CursorStore, StateError};
use ferry::engine::delivery::{Delivery, DeliveryError, Receipt, Target};
use tokio::sync::{Semaphore, mpsc};

use crate::harness::PATIENCE;
use crate::records::{message_seqs, seq_of};

/// A target that refuses every batch while its fault is on, remembering what it
/// refused.
pub struct FaultyTarget {
    inner: Arc<dyn Target>,
    failing: AtomicBool,
    /// The payloads of each refused batch.
    refused: Mutex<Vec<Vec<Vec<u8>>>>,
}

impl FaultyTarget {
    pub fn new(inner: Arc<dyn Target>) -> Arc<Self> {
        Arc::new(FaultyTarget { inner, failing: AtomicBool::new(false), refused: Mutex::new(Vec::new()) })
    }

    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The `seq`s of every refused batch, in order (for guests producing `{"seq":N}`).
    pub fn refused(&self) -> Vec<Vec<u64>> {
        self.refused_payloads().iter().map(|batch| batch.iter().map(|p| seq_of(p)).collect()).collect()
    }

    /// The payloads of every refused batch, in order.
    pub fn refused_payloads(&self) -> Vec<Vec<Vec<u8>>> {
        self.refused.lock().unwrap().clone()
    }
}

#[async_trait]
impl Target for FaultyTarget {
    async fn deliver(&self, delivery: Delivery) -> Result<Receipt, DeliveryError> {
        if self.failing.load(Ordering::SeqCst) {
            self.refused.lock().unwrap().push(delivery.messages.iter().map(|m| m.payload.to_vec()).collect());
            return Err(DeliveryError::Failed("injected fault: the target refused the batch".into()));
        }
        self.inner.deliver(delivery).await
    }
}

/// A cursor store whose commits fail while its fault is on.
pub struct FaultyCursor {
    inner: Arc<dyn CursorStore>,
    failing: AtomicBool,
}

impl FaultyCursor {
    pub fn new(inner: Arc<dyn CursorStore>) -> Arc<Self> {
        Arc::new(FaultyCursor { inner, failing: AtomicBool::new(false) })
    }

    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }
}

#[async_trait]
impl CursorStore for FaultyCursor {
    async fn load(&self) -> Result<Option<Committed>, StateError> {
        self.inner.load().await
    }

    async fn commit(&self, state: Vec<u8>, receipt: Receipt) -> Result<Committed, StateError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StateError::Io("injected fault: the disk refused the write".into()));
        }
        self.inner.commit(state, receipt).await
    }

    fn lineage(&self) -> u128 {
        self.inner.lineage()
    }
}

/// Announces each arrival and holds it until released: what [`GatedTarget`] and
/// [`GatedCursor`] share.
struct Gate<T> {
    arrivals: mpsc::UnboundedSender<T>,
    arrived: tokio::sync::Mutex<mpsc::UnboundedReceiver<T>>,
    permits: Semaphore,
}

impl<T> Gate<T> {
    fn new() -> Self {
        let (arrivals, arrived) = mpsc::unbounded_channel();
        Gate { arrivals, arrived: tokio::sync::Mutex::new(arrived), permits: Semaphore::new(0) }
    }

    /// Announce `arrival`, then wait to be let through.
    async fn pass(&self, arrival: T) {
        let _ = self.arrivals.send(arrival);
        self.permits.acquire().await.expect("the gate is never closed").forget();
    }

    /// The next arrival, failing the test after [`PATIENCE`].
    async fn next_arrival(&self) -> T {
        let next = async { self.arrived.lock().await.recv().await.expect("the gate is alive") };
        tokio::time::timeout(PATIENCE, next).await.expect("nothing reached the gate")
    }

    /// Let `count` more arrivals through.
    fn release(&self, count: usize) {
        self.permits.add_permits(count);
    }
}

/// A target that announces each batch and holds it until released.
pub struct GatedTarget {
    inner: Arc<dyn Target>,
    gate: Gate<Vec<u64>>,
}

impl GatedTarget {
    pub fn new(inner: Arc<dyn Target>) -> Arc<Self> {
        Arc::new(GatedTarget { inner, gate: Gate::new() })
    }

    /// The `seq`s of the next batch that reaches the gate.
    pub async fn next_arrival(&self) -> Vec<u64> {
        self.gate.next_arrival().await
    }

    /// Let `batches` more batches through.
    pub fn release(&self, batches: usize) {
        self.gate.release(batches);
    }
}

#[async_trait]
impl Target for GatedTarget {
    async fn deliver(&self, delivery: Delivery) -> Result<Receipt, DeliveryError> {
        self.gate.pass(message_seqs(&delivery.messages)).await;
        self.inner.deliver(delivery).await
    }
}

/// A cursor store that announces each commit (the state to be stored) and holds it
/// until released: the moment between a connector's decision to commit and the
/// commit, made as long as a test needs.
pub struct GatedCursor {
    inner: Arc<dyn CursorStore>,
    gate: Gate<Vec<u8>>,
}

impl GatedCursor {
    pub fn new(inner: Arc<dyn CursorStore>) -> Arc<Self> {
        Arc::new(GatedCursor { inner, gate: Gate::new() })
    }

    /// The state of the next commit that reaches the gate.
    pub async fn next_arrival(&self) -> Vec<u8> {
        self.gate.next_arrival().await
    }

    /// Let `commits` more commits through.
    pub fn release(&self, commits: usize) {
        self.gate.release(commits);
    }
}

#[async_trait]
impl CursorStore for GatedCursor {
    async fn load(&self) -> Result<Option<Committed>, StateError> {
        self.inner.load().await
    }

    async fn commit(&self, state: Vec<u8>, receipt: Receipt) -> Result<Committed, StateError> {
        self.gate.pass(state.clone()).await;
        self.inner.commit(state, receipt).await
    }

    fn lineage(&self) -> u128 {
        self.inner.lineage()
    }
}

/// A file or directory made immutable (`chattr +i`) for as long as the value lives.
/// Permission bits do not stop root, and the tests run as root; the immutable
/// attribute does: nothing can be created in such a directory, nor written to such a
/// file.
pub struct Immutable {
    path: PathBuf,
}

impl Immutable {
    /// Make `path` immutable; `None`, after saying why on stderr, where that cannot be
    /// done (a file system without the attribute, a user who may not set it): the
    /// test calling it is then skipped.
    pub fn set(path: &Path, test: &str) -> Option<Immutable> {
        let skip = |why: String| {
            eprintln!("\n*** SKIPPED {test}: it needs `chattr +i` ({why})\n");
            None
        };
        match Command::new("chattr").arg("+i").arg(path).output() {
            Ok(output) if output.status.success() => Some(Immutable { path: path.to_path_buf() }),
            Ok(output) => skip(String::from_utf8_lossy(&output.stderr).trim().to_string()),
            Err(e) => skip(format!("cannot run chattr: {e}")),
        }
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let cleared = Command::new("chattr").arg("-i").arg(&self.path).status();
        if !cleared.is_ok_and(|s| s.success()) {
            eprintln!("cannot clear the immutable attribute of {}: run `chattr -i` on it", self.path.display());
        }
    }
}
