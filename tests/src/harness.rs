//! A host in a temporary directory, with real components, the real local log and
//! real state files, for sources and for sinks reading that log; and a running host
//! whose events a test can wait for.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry::config::{BackoffConfig, StreamConfig};
use ferry::contract::Message;
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::Delivery;
use ferry::engine::delivery::Target;
use ferry::engine::shutdown::{self, ShutdownTrigger};
use ferry::engine::sink::{DeadLetters, SinkConnector, SinkSettings};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::engine::status::{Event, StatusBoard};
use ferry::host::{Host, RunReport};
use ferry::runtime::{EngineOptions, Runtime, Sandbox, SinkComponent, SinkWorld, SourceComponent};
use ferry::store::local_log::{LocalLog, Record};
use ferry::store::local_log::{LocalLogInput, LoggedCursor};
use ferry::store::state::{ConnectorState, StateDir};
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
        verbose: false,
        benchmark: false,
    }
}

/// [`quick_settings`] for a sink: batches of at most 10 messages, and the backoff
/// after a NACK as the backoff after a `retry`.
pub fn quick_sink_settings() -> SinkSettings {
    let source = quick_settings();
    SinkSettings {
        poll_interval: source.poll_interval,
        batch_length: 10,
        delivery_timeout: source.delivery_timeout,
        max_consecutive_nacks: source.max_consecutive_nacks,
        retry_backoff: source.nack_backoff,
        restart_backoff: source.restart_backoff,
        verbose: source.verbose,
        benchmark: source.benchmark,
    }
}

/// The stream of every local log topic the harness's connectors use.
pub const STREAM: &str = "test";

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

    pub fn sink_component(&self, path: &str) -> Arc<SinkComponent> {
        self.runtime.load::<SinkWorld>(Path::new(path)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The state file of `key`, held by this process.
    pub fn cursor(&self, key: &str) -> Arc<ConnectorState> {
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
            transforms: None,
            cursor: self.source_cursor(key),
        }
    }

    /// The cursor of source `key` delivering to the harness's log, as `ferry run`
    /// makes it: its state file, and the cursors the log keeps beside its batches.
    pub fn source_cursor(&self, key: &str) -> Arc<dyn CursorStore> {
        let file = self.states.open(key).unwrap_or_else(|e| panic!("{e}"));
        Arc::new(LoggedCursor::new(file, key, &self.log, vec![("test".to_string(), key.to_string())]))
    }

    /// A sink `key` running `component` with `plugin_config`, reading the local log
    /// topics `test/<topic>` of `topics`, its positions in the harness's state, with
    /// no dead letters (see [`Harness::dead_letters`]).
    pub fn sink(&self, key: &str, component: &str, plugin_config: serde_json::Value, topics: &[&str]) -> SinkConnector {
        self.sink_keeping(key, component, plugin_config, topics, self.cursor(key))
    }

    /// [`Harness::sink`], its positions kept in `positions` (a faulty or gated store
    /// around [`Harness::cursor`], say).
    pub fn sink_keeping(
        &self,
        key: &str,
        component: &str,
        plugin_config: serde_json::Value,
        topics: &[&str],
        positions: Arc<dyn CursorStore>,
    ) -> SinkConnector {
        let topics = topics.iter().map(|topic| (STREAM.to_string(), topic.to_string())).collect();
        SinkConnector {
            key: key.into(),
            tenant: None,
            component: self.sink_component(component).into(),
            plugin_config: plugin_config.to_string(),
            settings: quick_sink_settings(),
            sandbox: Sandbox::default(),
            input: Arc::new(LocalLogInput::new(key, self.log.dir(), topics, positions)),
            transforms: None,
            dead_letters: None,
        }
    }

    /// Dead letters into the local log topic `test/<topic>`.
    pub fn dead_letters(&self, topic: &str) -> DeadLetters {
        DeadLetters { target: self.log.clone(), stream: vec![StreamConfig::new(STREAM, topic)].into() }
    }

    /// Append `messages` to the local log topic `test/<topic>`, as a source would.
    pub async fn append(&self, topic: &str, messages: Vec<Message>) {
        let delivery = Delivery {
            connector: "test".into(),
            streams: vec![StreamConfig::new(STREAM, topic)].into(),
            messages: Arc::new(messages),
            cursor: None,
        };
        self.log.deliver(delivery).await.unwrap_or_else(|e| panic!("appending to {STREAM}/{topic}: {e}"));
    }

    /// What the local log holds in topic `test/<topic>`: what source `<topic>`
    /// delivered, or what a sink appended there.
    pub fn records(&self, topic: &str) -> Vec<Record> {
        let path = LocalLog::topic_file(self.log.dir(), STREAM, topic);
        if !path.exists() {
            return Vec::new();
        }
        LocalLog::read_all(self.log.dir(), STREAM, topic).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The committed cursor of `key` as another process would read it.
    pub fn committed(&self, key: &str) -> Option<ferry::engine::cursor::Committed> {
        self.states.read(key).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The bytes of `key`'s state files: unchanged bytes mean nothing was written.
    pub fn state_bytes(&self, key: &str) -> (Vec<u8>, Option<Vec<u8>>) {
        let file = self.states.file_of(key);
        let mut wal = file.clone().into_os_string();
        wal.push("-wal");
        (std::fs::read(&file).unwrap(), std::fs::read(wal).ok())
    }

    /// A host with these connectors.
    pub fn host(&self, connectors: Vec<SourceConnector>) -> Host {
        self.host_with(connectors, Vec::new())
    }

    /// A host with these sources and sinks.
    pub fn host_with(&self, sources: Vec<SourceConnector>, sinks: Vec<SinkConnector>) -> Host {
        let mut host = Host::new(self.runtime.clone());
        for connector in sources {
            host.add_source(connector, None);
        }
        for connector in sinks {
            host.add_sink(connector, None);
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
    committed: std::sync::Mutex<Option<ferry::engine::cursor::Committed>>,
}

#[async_trait::async_trait]
impl CursorStore for MemoryCursor {
    async fn load(&self) -> Result<Option<ferry::engine::cursor::Committed>, ferry::engine::cursor::StateError> {
        Ok(self.committed.lock().unwrap().clone())
    }

    async fn commit(
        &self,
        state: Vec<u8>,
        receipt: ferry::engine::delivery::Receipt,
    ) -> Result<ferry::engine::cursor::Committed, ferry::engine::cursor::StateError> {
        let mut committed = self.committed.lock().unwrap();
        let generation = committed.as_ref().map_or(0, |c| c.generation) + 1;
        let next = ferry::engine::cursor::Committed { state, generation, committed_at_micros: 0, receipt };
        *committed = Some(next.clone());
        Ok(next)
    }

    fn lineage(&self) -> u128 {
        0
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

    /// The events published since the last wait, without waiting: what a connector
    /// reported before the moment a test stopped it at (a gate, say).
    pub fn drain(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            match self.events.try_recv() {
                Ok(event) => events.push(event),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    panic!("{n} events were lost: the test read too late")
                }
                Err(_) => return events,
            }
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
