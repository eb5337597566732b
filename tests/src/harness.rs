//! A host in a temporary directory, with real components, the real local log and
//! real state files; and a running host whose events a test can wait for.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry::config::{BackoffConfig, StreamConfig};
use ferry::delivery::Target;
use ferry::host::{Host, RunReport};
use ferry::local_log::{LocalLog, Record};
use ferry::runtime::{EngineOptions, Runtime, Sandbox, SourceComponent};
use ferry::shutdown::{self, ShutdownTrigger};
use ferry::source::{SourceConnector, SourceSettings};
use ferry::state::{ConnectorStateFile, CursorStore, StateDir};
use ferry::status::{Event, StatusBoard};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// How long any wait in a test may take before the test fails. Generous: the point is
/// to fail instead of hanging, not to measure speed.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// Settings that make tests quick: short polls and backoffs, and NACKs that do not
/// fail the connector unless a test says so.
pub fn quick_settings() -> SourceSettings {
    let ms = Duration::from_millis;
    SourceSettings {
        poll_interval: ms(5),
        delivery_timeout: Duration::from_secs(10),
        max_consecutive_nacks: 1000,
        nack_backoff: BackoffConfig { initial: ms(5), max: ms(20) },
        restart_backoff: BackoffConfig { initial: ms(20), max: ms(100) },
    }
}

/// A temporary directory with a state directory and a local log, and a runtime.
pub struct Harness {
    pub runtime: Arc<Runtime>,
    pub dir: tempfile::TempDir,
    pub log: Arc<LocalLog>,
    pub states: StateDir,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    pub fn new() -> Harness {
        Self::with_engine(&EngineOptions::default())
    }

    /// A harness whose engine meters fuel, for connectors with `limits.fuel`.
    pub fn with_fuel() -> Harness {
        Self::with_engine(&EngineOptions { fuel: true, ..EngineOptions::default() })
    }

    pub fn with_engine(options: &EngineOptions) -> Harness {
        crate::logs::capture();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = Arc::new(LocalLog::new(dir.path().join("log")));
        let states = StateDir::new(dir.path().join("state"));
        Harness { runtime: Arc::new(Runtime::with_options(options).expect("a runtime")), dir, log, states }
    }

    pub fn component(&self, path: &str) -> Arc<SourceComponent> {
        self.runtime.load_source(Path::new(path)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The state file of `key`, held by this process.
    pub fn cursor(&self, key: &str) -> Arc<ConnectorStateFile> {
        Arc::new(self.states.open(key).unwrap_or_else(|e| panic!("{e}")))
    }

    /// A connector `key` running `component` with `plugin_config`, delivering to the
    /// local log topic `test/<key>`, with its state in the harness.
    pub fn source(&self, key: &str, component: &str, plugin_config: serde_json::Value) -> SourceConnector {
        SourceConnector {
            key: key.into(),
            tenant: None,
            component: self.component(component).into(),
            plugin_config: plugin_config.to_string(),
            streams: vec![StreamConfig::new("test", key)].into(),
            settings: quick_settings(),
            sandbox: Sandbox::default(),
            target: self.log.clone() as Arc<dyn Target>,
            cursor: self.cursor(key) as Arc<dyn CursorStore>,
        }
    }

    /// What the local log holds for connector `key`.
    pub fn records(&self, key: &str) -> Vec<Record> {
        let path = LocalLog::topic_file(self.log.dir(), "test", key);
        if !path.exists() {
            return Vec::new();
        }
        LocalLog::read_all(self.log.dir(), "test", key).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The committed cursor of `key` as another process would read it.
    pub fn committed(&self, key: &str) -> Option<ferry::state::Committed> {
        self.states.read(key).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A host with these connectors.
    pub fn host(&self, connectors: Vec<SourceConnector>) -> Host {
        let mut host = Host::new(self.runtime.clone());
        for connector in connectors {
            host.add_source(connector, None);
        }
        host
    }

    /// A host with these connectors, started.
    pub fn start(&self, connectors: Vec<SourceConnector>) -> Running {
        Running::start(self.host(connectors))
    }
}

/// A cursor store in memory: for benchmarks that measure the host without the disk.
#[derive(Default)]
pub struct MemoryCursor {
    committed: std::sync::Mutex<Option<ferry::state::Committed>>,
}

#[async_trait::async_trait]
impl CursorStore for MemoryCursor {
    async fn load(&self) -> Result<Option<ferry::state::Committed>, ferry::state::StateError> {
        Ok(self.committed.lock().unwrap().clone())
    }

    async fn commit(
        &self,
        state: Vec<u8>,
        receipt: ferry::delivery::Receipt,
    ) -> Result<ferry::state::Committed, ferry::state::StateError> {
        let mut committed = self.committed.lock().unwrap();
        let generation = committed.as_ref().map_or(0, |c| c.generation) + 1;
        let next = ferry::state::Committed { state, generation, committed_at_micros: 0, receipt };
        *committed = Some(next.clone());
        Ok(next)
    }
}

/// A host running in the background.
pub struct Running {
    pub events: broadcast::Receiver<Event>,
    pub status: Arc<StatusBoard>,
    trigger: ShutdownTrigger,
    task: JoinHandle<RunReport>,
}

impl Running {
    pub fn start(host: Host) -> Running {
        let status = host.status();
        let events = status.subscribe();
        let (trigger, stop) = shutdown::channel();
        let task = tokio::spawn(host.run(stop));
        Running { events, status, trigger, task }
    }

    /// The next event that `matches`, failing the test after [`PATIENCE`].
    pub async fn wait_for(&mut self, what: &str, mut matches: impl FnMut(&Event) -> bool) -> Event {
        let wait = async {
            loop {
                match self.events.recv().await {
                    Ok(event) if matches(&event) => return event,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => panic!("the host stopped while waiting for {what}"),
                }
            }
        };
        match tokio::time::timeout(PATIENCE, wait).await {
            Ok(event) => event,
            Err(_) => panic!("gave up waiting for {what}; status: {:#?}", self.status.snapshot()),
        }
    }

    /// Wait until connector `key` is idle (it has nothing more to deliver).
    pub async fn wait_idle(&mut self, key: &str) {
        self.wait_for(&format!("{key} to be idle"), |e| matches!(e, Event::Idle { key: k } if &**k == key)).await;
    }

    /// Ask the host to stop and wait for it.
    pub async fn stop(self) -> RunReport {
        self.request_stop();
        self.finished().await
    }

    /// Ask the host to stop, without waiting.
    pub fn request_stop(&self) {
        self.trigger.trigger();
    }

    /// Wait for the host to finish (after [`Running::request_stop`]).
    pub async fn finished(self) -> RunReport {
        match tokio::time::timeout(PATIENCE, self.task).await {
            Ok(report) => report.expect("the host task does not panic"),
            Err(_) => panic!("the host did not stop"),
        }
    }
}
