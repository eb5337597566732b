//! A Kafka broker of a test's own: tansu (a Kafka-protocol broker from crates.io,
//! which `scripts/setup-kafka` builds), storing in SQLite in a temporary directory, as
//! a child process on a free port of 127.0.0.1, so that a test can `kill -9` it and
//! start it again on the same data; and the test's own client of it (librdkafka,
//! through `rdkafka`): topics made, messages produced, a topic read back whole, a
//! group's committed offsets.
//!
//! What tansu 0.6 does differently from Apache Kafka, found probing it: with SQLite
//! storage it does not create a topic when a client first names it (a test creates its
//! topics), and it never removes a killed member from a consumer group (a group a
//! killed client was in never rebalances), which is one reason the Kafka source
//! assigns partitions itself rather than subscribing. Its SASL PLAIN takes any
//! password; its SCRAM checks it, against users it stores, so a broker that must
//! refuse a password ([`KafkaBroker::start_with_user`]) knows a SCRAM user.
//!
//! When the tests run as root (as CI does) the broker runs as [`SERVER_USER`], which
//! the setup script makes. Without tansu or that user the tests fail and say so: they
//! are never skipped.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use crate::free_port;
use crate::server_process::{kill_9, on_path, read_from, run_as};

/// The system user the broker runs as when the tests run as root.
pub const SERVER_USER: &str = "tansu";

/// Long enough for a start on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// How long the test's own client calls may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const SETUP: &str = "scripts/setup-kafka (tansu, from crates.io)";

/// The user a broker of [`KafkaBroker::start_with_user`] knows, with [`PASSWORD`].
pub const USER: &str = "ferry";
pub const PASSWORD: &str = "kafka-secret-7";
/// Its SASL mechanism.
pub const MECHANISM: &str = "SCRAM-SHA-512";

/// One message of a topic, as the test's client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub payload: Vec<u8>,
}

impl Record {
    /// The value of the header `name`, as text.
    pub fn header(&self, name: &str) -> Option<String> {
        let value = self.headers.iter().find(|(n, _)| n == name)?;
        Some(String::from_utf8_lossy(&value.1).into_owned())
    }
}

/// A running (or stopped) broker on a directory of its own, removed on drop.
pub struct KafkaBroker {
    /// The SQLite store (`tansu.db`) and the broker's log (`broker.log`).
    dir: tempfile::TempDir,
    port: u16,
    run_as: Option<(u32, u32)>,
    /// Whether clients must log in as [`USER`].
    authenticating: bool,
    child: Option<Child>,
}

impl KafkaBroker {
    /// A new broker, started and answering.
    pub fn start() -> KafkaBroker {
        let dir = tempfile::Builder::new().prefix("ferry-kafka-").tempdir().expect("a temporary directory");
        let run_as = run_as(SERVER_USER, SETUP);
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("the broker's user owns its temporary directory");
        }
        let mut broker = KafkaBroker { dir, port: free_port(), run_as, authenticating: false, child: None };
        if let Err(log) = broker.spawn() {
            panic!("tansu did not start; its log:\n{log}");
        }
        broker
    }

    /// A new broker that lets in only [`USER`], by SCRAM with [`PASSWORD`]: started
    /// open, the user made (tansu's own `user create`), then started again requiring
    /// a login.
    pub fn start_with_user() -> KafkaBroker {
        let mut broker = KafkaBroker::start();
        let made = Command::new(on_path("tansu", SETUP))
            .args(["user", "create", "--broker", &format!("tcp://{}", broker.address())])
            .args(["--mechanism", "scram512", USER, PASSWORD])
            .output()
            .expect("tansu user create runs");
        assert!(made.status.success(), "the user is not made: {}", String::from_utf8_lossy(&made.stderr));
        broker.kill_9();
        broker.authenticating = true;
        broker.restart();
        broker
    }

    /// Start tansu and wait until it answers a client's metadata request, or return
    /// what it logged if it exits first.
    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the broker is already running");
        let log_path = self.log_path();
        let from = fs::metadata(&log_path).map_or(0, |m| m.len());
        let log = fs::OpenOptions::new().create(true).append(true).open(&log_path).expect("the broker's log");
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(&log_path, Some(uid), Some(gid)).expect("the broker's user owns its log");
        }
        let listener = format!("tcp://127.0.0.1:{}", self.port);
        let mut command = Command::new(on_path("tansu", SETUP));
        command
            .args(["broker", "--listener-url", &listener, "--advertised-listener-url", &listener])
            .args(["--storage-engine", "sqlite://tansu.db", "--cluster-id", "ferry-tests"])
            .args(self.authenticating.then_some("--authentication"))
            .env("RUST_LOG", "warn")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log, twice"))
            .stderr(log);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        self.child = Some(command.spawn().expect("tansu starts"));
        let deadline = Instant::now() + PATIENCE;
        let probe: BaseConsumer = self.client_config().create().expect("a probing client");
        loop {
            let child = self.child.as_mut().expect("just started");
            if let Some(status) = child.try_wait().expect("the broker's status") {
                self.child = None;
                return Err(format!("tansu exited ({status}):\n{}", read_from(&log_path, from)));
            }
            if probe.fetch_metadata(None, Duration::from_millis(500)).is_ok_and(|m| !m.brokers().is_empty()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("tansu did not answer within {PATIENCE:?}; its log:\n{}", read_from(&log_path, from));
            }
        }
    }

    /// `host:port` of the broker.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The section that defines this broker in a ferry config, named `name`.
    pub fn ferry_section(&self, name: &str) -> String {
        format!("[kafka.{name}]\nbrokers = [\"{}\"]\n", self.address())
    }

    /// That section with a login as [`USER`], the password read from the environment
    /// variable `password_env`.
    pub fn ferry_section_as_user(&self, name: &str, password_env: &str) -> String {
        format!(
            "{}user = \"{USER}\"\npassword = {{ env = \"{password_env}\" }}\nmechanism = \"{MECHANISM}\"\n",
            self.ferry_section(name)
        )
    }

    /// The properties every client of the test's starts from (logged in as [`USER`]
    /// when the broker wants a login).
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.address()).set("client.id", "ferry-tests");
        if self.authenticating {
            config
                .set("security.protocol", "SASL_PLAINTEXT")
                .set("sasl.mechanism", MECHANISM)
                .set("sasl.username", USER)
                .set("sasl.password", PASSWORD);
        }
        config
    }

    /// Create the topic `name` with `partitions` partitions.
    pub async fn create_topic(&self, name: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = self.client_config().create().expect("an admin client");
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new().operation_timeout(Some(CLIENT_TIMEOUT));
        let results = admin.create_topics([&topic], &options).await.expect("the broker answers create-topics");
        for result in results {
            result.unwrap_or_else(|(topic, code)| panic!("the topic {topic} is not created: {code:?}"));
        }
    }

    /// Produce `payloads` to `topic` (keyed by `key_of`, which picks the partition),
    /// every one sent before any report is awaited.
    pub async fn produce(&self, topic: &str, payloads: &[Vec<u8>], key_of: impl Fn(usize) -> String) {
        let producer: FutureProducer = self.client_config().set("linger.ms", "5").create().expect("a producer");
        let keys: Vec<String> = (0..payloads.len()).map(key_of).collect();
        let mut pending = Vec::with_capacity(payloads.len());
        for (payload, key) in payloads.iter().zip(&keys) {
            let record = FutureRecord::to(topic).payload(payload).key(key);
            pending.push(producer.send_result(record).map_err(|(e, _)| e).expect("a message queued"));
        }
        for delivery in pending {
            delivery.await.expect("a report").map_err(|(e, _)| e).expect("the broker stored the message");
        }
    }

    /// Every message of `topic`, each partition's in order, partition by partition.
    pub fn read_all(&self, topic: &str) -> Vec<Record> {
        let consumer: BaseConsumer =
            self.client_config().set("group.id", "ferry-tests-reader").create().expect("a reader");
        let metadata = consumer.fetch_metadata(Some(topic), CLIENT_TIMEOUT).expect("the topic's metadata");
        let partitions: Vec<i32> = metadata.topics()[0].partitions().iter().map(|p| p.id()).collect();
        assert!(!partitions.is_empty(), "the topic {topic} has partitions");
        let mut records = Vec::new();
        for partition in partitions {
            let (low, high) = consumer.fetch_watermarks(topic, partition, CLIENT_TIMEOUT).expect("watermarks");
            if high <= low {
                continue;
            }
            let mut assignment = TopicPartitionList::new();
            assignment.add_partition_offset(topic, partition, Offset::Offset(low)).expect("an offset");
            consumer.assign(&assignment).expect("assigned");
            let deadline = Instant::now() + CLIENT_TIMEOUT;
            let mut next = low;
            while next < high {
                assert!(
                    Instant::now() < deadline,
                    "{topic}/{partition}: read to {next} of {high} in {CLIENT_TIMEOUT:?}"
                );
                let Some(message) = consumer.poll(Duration::from_millis(200)) else { continue };
                let message = message.expect("a message");
                next = message.offset() + 1;
                let headers = message.headers().map_or_else(Vec::new, |headers| {
                    headers.iter().map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec())).collect()
                });
                records.push(Record {
                    partition,
                    offset: message.offset(),
                    key: message.key().map(<[u8]>::to_vec),
                    headers,
                    payload: message.payload().unwrap_or_default().to_vec(),
                });
            }
        }
        records
    }

    /// The offsets `group` committed for `topic`'s partitions `0..partitions`
    /// (`None`: nothing committed there).
    pub fn committed(&self, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
        let consumer: BaseConsumer = self.client_config().set("group.id", group).create().expect("a client");
        let mut wanted = TopicPartitionList::new();
        for partition in 0..partitions {
            wanted.add_partition(topic, partition);
        }
        let committed = consumer.committed_offsets(wanted, CLIENT_TIMEOUT).expect("the group's offsets");
        committed
            .elements()
            .iter()
            .map(|element| match element.offset() {
                Offset::Offset(offset) => Some(offset),
                _ => None,
            })
            .collect()
    }

    /// `kill -9` the broker. Returns once it is gone.
    pub fn kill_9(&mut self) {
        kill_9(&mut self.child);
    }

    /// Start the broker again on the same directory and port.
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn() {
            panic!("tansu did not start again on port {}; its log:\n{log}", self.port);
        }
    }

    /// Everything the broker logged, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("broker.log")
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("tansu's log (port {}):\n{}", self.port, self.log());
        }
        self.kill_9();
    }
}
