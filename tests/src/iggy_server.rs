//! An `iggy-server` of the suite's own, for the live tests.
//!
//! No registry carries the Iggy server: `FERRY_TEST_IGGY_SERVER` names an
//! `iggy-server` binary and `FERRY_TEST_IGGY_CONFIG` its config (by default looked for
//! above the binary, as `core/server/config.toml` of an apache/iggy checkout).
//! `scripts/test` sets both from `scripts/setup-iggy`, which finds the server this
//! project's machines keep in `../shared/iggy/`, and sets `FERRY_TEST_IGGY_REQUIRED`
//! so that no live test can skip. Each test starts its own server on a free port with
//! a temporary data directory, and can kill it and start it again on the same data.
//! Without a server (and without the requirement), each live test says loudly that it
//! was skipped, and why.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use iggy::prelude::{
    Client, Consumer, ConsumerGroupClient, ConsumerOffsetClient, Identifier, IggyClient, IggyMessage, MessageClient,
    PolledMessages, PollingStrategy, StreamClient, TopicClient, TopicCreateOptions, UserClient,
};

use crate::free_port;

/// Root credentials of the test servers.
pub const USERNAME: &str = "iggy";
pub const PASSWORD: &str = "iggy";

/// The server binary and its config, or `None` after printing why the test named
/// `test` is skipped.
pub fn live_server(test: &str) -> Option<IggyServer> {
    let Some(binary) = std::env::var_os("FERRY_TEST_IGGY_SERVER").map(PathBuf::from) else {
        // scripts/test found a server: a live test that cannot have one is a failure.
        assert!(
            std::env::var_os("FERRY_TEST_IGGY_REQUIRED").is_none(),
            "{test}: FERRY_TEST_IGGY_REQUIRED is set, but FERRY_TEST_IGGY_SERVER is not"
        );
        eprintln!(
            "\n*** SKIPPED {test}: it needs a live Iggy server. Set FERRY_TEST_IGGY_SERVER to an iggy-server \
             binary (and FERRY_TEST_IGGY_CONFIG to its core/server/config.toml) to run it. ***\n"
        );
        return None;
    };
    let config = std::env::var_os("FERRY_TEST_IGGY_CONFIG").map(PathBuf::from).or_else(|| {
        binary.ancestors().map(|dir| dir.join("core/server/config.toml")).find(|candidate| candidate.exists())
    });
    let Some(config) = config else {
        panic!(
            "FERRY_TEST_IGGY_SERVER is set, but no server config was found: set FERRY_TEST_IGGY_CONFIG to core/server/config.toml"
        );
    };
    assert!(binary.exists(), "FERRY_TEST_IGGY_SERVER={} does not exist", binary.display());
    Some(IggyServer::start(binary, config))
}

/// A running (or stopped) server on a data directory of its own.
pub struct IggyServer {
    binary: PathBuf,
    config: PathBuf,
    data: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl IggyServer {
    fn start(binary: PathBuf, config: PathBuf) -> IggyServer {
        // A port found free can be taken by another test's socket before the server
        // binds it: then it exits saying so, and starts again on another port.
        for attempt in 1.. {
            let mut server = IggyServer {
                binary: binary.clone(),
                config: config.clone(),
                data: tempfile::tempdir().expect("a data directory"),
                port: free_port(),
                child: None,
            };
            match server.launch() {
                Ok(()) => return server,
                Err(log) if attempt < 5 && log.contains("CannotBindToSocket") => continue,
                Err(log) => panic!("iggy-server exited; its log:\n{log}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// `127.0.0.1:PORT`, the TCP address.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Start the server (again) on the same port and data directory, and wait until
    /// it accepts connections.
    pub fn restart(&mut self) {
        if let Err(log) = self.launch() {
            panic!("iggy-server exited; its log:\n{log}");
        }
    }

    /// Start the server and wait until it accepts connections; its log if it exits
    /// first.
    fn launch(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the server is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data.path().join("server.log"))
            .expect("a log file");
        let child = Command::new(&self.binary)
            .env("IGGY_CONFIG_PATH", &self.config)
            .env("IGGY_SYSTEM_PATH", self.data.path().join("data"))
            .env("IGGY_TCP_ADDRESS", self.address())
            .env("IGGY_HTTP_ENABLED", "false")
            .env("IGGY_QUIC_ENABLED", "false")
            .env("IGGY_WEBSOCKET_ENABLED", "false")
            .env("IGGY_ROOT_USERNAME", USERNAME)
            .env("IGGY_ROOT_PASSWORD", PASSWORD)
            .env("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", "1")
            .env("IGGY_SYSTEM_SHARDING_PIN_CORES", "false")
            .current_dir(self.data.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log file"))
            .stderr(log)
            .spawn()
            .expect("iggy-server starts");
        self.child = Some(child);
        // Readiness can only be seen by trying: connect until the port answers.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(self.address()).is_err() {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                return Err(format!("({status})\n{}", self.log()));
            }
            assert!(
                Instant::now() < deadline,
                "iggy-server did not listen on {}; its log:\n{}",
                self.address(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// `kill -9` the server.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// What the server logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data.path().join("server.log")).unwrap_or_default()
    }

    /// A client signed in as root.
    pub async fn client(&self) -> IggyClient {
        let client = IggyClient::builder()
            .with_tcp()
            .with_server_address(self.address())
            .with_no_delay()
            .build()
            .expect("a client");
        client.connect().await.expect("connected");
        client.login_user(USERNAME, PASSWORD).await.expect("signed in");
        client
    }

    /// Every message of `stream`/`topic`, from every partition, in offset order per
    /// partition.
    pub async fn read_all(&self, stream: &str, topic: &str) -> Vec<IggyMessage> {
        let client = self.client().await;
        let (stream_id, topic_id) = (Identifier::named(stream).unwrap(), Identifier::named(topic).unwrap());
        let details = client.get_topic(&stream_id, &topic_id).await.expect("get_topic").expect("the topic exists");
        let mut all = Vec::new();
        for partition in details.partitions {
            let mut offset = 0;
            loop {
                let polled = client
                    .poll_messages(
                        &stream_id,
                        &topic_id,
                        Some(partition.id),
                        &Consumer::default(),
                        &PollingStrategy::offset(offset),
                        1000,
                        false,
                    )
                    .await
                    .expect("poll_messages");
                if polled.messages.is_empty() {
                    break;
                }
                offset = polled.messages.last().unwrap().header.offset + 1;
                all.extend(polled.messages);
            }
        }
        all
    }

    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// A new topic `stream/topic` of one partition, made by `client` (the stream too,
    /// if it does not exist yet); its identifiers.
    pub async fn create_topic(client: &IggyClient, stream: &str, topic: &str) -> (Identifier, Identifier) {
        let stream_id = Identifier::named(stream).unwrap();
        if client.get_stream(&stream_id).await.expect("get_stream").is_none() {
            client.create_stream(stream).await.expect("create_stream");
        }
        let options = TopicCreateOptions { partitions_count: Some(1), ..Default::default() };
        client.create_topic(&stream_id, topic, &options).await.expect("create_topic");
        (stream_id, Identifier::named(topic).unwrap())
    }

    /// A plain consumer of `stream/topic` in a new consumer group `group`, joined,
    /// with auto-commit off: what the benchmarks' native sides read with.
    pub async fn join_group(&self, stream: &str, topic: &str, group: &str) -> GroupConsumer {
        let client = self.client().await;
        let (stream, topic) = (Identifier::named(stream).unwrap(), Identifier::named(topic).unwrap());
        client.create_consumer_group(&stream, &topic, group).await.expect("create_consumer_group");
        let group = Identifier::named(group).unwrap();
        client.join_consumer_group(&stream, &topic, &group).await.expect("join_consumer_group");
        GroupConsumer { client, stream, topic, consumer: Consumer::group(group) }
    }
}

/// A consumer in a group of its own (see [`IggyServer::join_group`]).
pub struct GroupConsumer {
    client: IggyClient,
    stream: Identifier,
    topic: Identifier,
    consumer: Consumer,
}

impl GroupConsumer {
    /// The next (at most) `count` messages for the group, without storing its offset.
    pub async fn poll(&self, count: u32) -> PolledMessages {
        let next = PollingStrategy::next();
        self.client
            .poll_messages(&self.stream, &self.topic, None, &self.consumer, &next, count, false)
            .await
            .expect("poll_messages")
    }

    /// Store the group's offset in `partition`: `offset` (the last message read) is done.
    pub async fn store(&self, partition: u32, offset: u64) {
        self.client
            .store_consumer_offset(&self.consumer, &self.stream, &self.topic, Some(partition), offset)
            .await
            .expect("store_consumer_offset");
    }
}

impl Drop for IggyServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl IggyServer {
    /// Ferry's `[iggy]` section for this server, with `password` (root's by default)
    /// and a quick reconnect.
    pub fn ferry_config(&self, password: &str) -> ferry::config::IggyConfig {
        serde_json::from_value(serde_json::json!({
            "address": self.address(),
            "username": USERNAME,
            "password": password,
            "reconnect_backoff": { "initial": "100ms", "max": "1s" },
        }))
        .expect("a valid [iggy] section")
    }
}

/// A stream/topic entry that creates a one-partition topic with the server's own
/// defaults for keeping it (in memory, written to disk as the server sees fit).
pub fn created_stream(stream: &str, topic: &str) -> ferry::config::StreamConfig {
    let mut config = ferry::config::StreamConfig::new(stream, topic);
    config.create = Some(ferry::config::CreateTopic {
        partitions: 1,
        retention: None,
        enforce_fsync: None,
        messages_required_to_save: None,
    });
    config
}

/// A stream/topic entry that creates a one-partition topic written to disk and
/// fsynced at every send, so that what the server acknowledged survives the server
/// being killed (by default it acknowledges what it only holds in memory).
pub fn durable_stream(stream: &str, topic: &str) -> ferry::config::StreamConfig {
    let mut config = created_stream(stream, topic);
    if let Some(create) = &mut config.create {
        create.enforce_fsync = Some(true);
        create.messages_required_to_save = Some(1);
    }
    config
}
