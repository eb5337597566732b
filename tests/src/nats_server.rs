//! A NATS server with JetStream of a test's own: Debian's `nats-server` on a generated
//! config, as a child process on free ports of 127.0.0.1 (clients and monitoring),
//! its JetStream store in a temporary directory, so that a test can `kill -9` it and
//! start it again on the same data. `max_payload` is [`MAX_PAYLOAD`], so that a test
//! can send a message the server refuses. [`NatsServer::start_with_password`] starts
//! one that asks for [`USER`] and [`PASSWORD`].
//!
//! When the tests run as root (as CI does) the server runs as [`SERVER_USER`], the
//! package's own user. `scripts/setup-nats` installs the server (and makes sure of
//! that user). Without them the tests fail and say so: they are never skipped.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, Context, stream};

use crate::free_port;
use crate::server_process::{kill_9, on_path, read_from, run_as};

/// The user of a server started with a password.
pub const USER: &str = "ferry";
/// Its password.
pub const PASSWORD: &str = "ferry-test-nats-password";
/// The most a message may hold (payload and headers), in bytes.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// The system user the server runs as when the tests run as root (the package's).
pub const SERVER_USER: &str = "nats";

/// Long enough for a start, or a JetStream store's recovery, on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// Tries at a pair of ports before giving up, when another process takes one first.
const PORT_TRIES: usize = 5;

/// A running (or stopped) server on a directory of its own, removed on drop.
pub struct NatsServer {
    /// `nats.conf`, `jetstream/` and the server's log (`server.log`).
    dir: tempfile::TempDir,
    port: u16,
    monitor_port: u16,
    password: bool,
    run_as: Option<(u32, u32)>,
    child: Option<Child>,
}

impl NatsServer {
    /// A new server, started and answering, without auth.
    pub fn start() -> NatsServer {
        Self::start_serving(false)
    }

    /// A new server that asks for [`USER`] and [`PASSWORD`].
    pub fn start_with_password() -> NatsServer {
        Self::start_serving(true)
    }

    fn start_serving(password: bool) -> NatsServer {
        let dir = tempfile::Builder::new().prefix("ferry-nats-").tempdir().expect("a temporary directory");
        let run_as = run_as(SERVER_USER, "scripts/setup-nats");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("the server's user owns its temporary directory");
        }
        let mut server = NatsServer { dir, port: 0, monitor_port: 0, password, run_as, child: None };
        for _ in 0..PORT_TRIES {
            server.port = free_port();
            server.monitor_port = free_port();
            server.write_config();
            match server.spawn() {
                Ok(()) => return server,
                // Another process took a port between our look and the server's bind.
                Err(log) if log.contains("address already in use") => continue,
                Err(log) => panic!("nats-server did not start; its log:\n{log}"),
            }
        }
        panic!("nats-server found no free ports in {PORT_TRIES} tries; its log:\n{}", server.log())
    }

    fn write_config(&self) {
        let dir = self.dir.path().display();
        let auth = if self.password {
            format!("authorization {{\n  user: \"{USER}\"\n  password: \"{PASSWORD}\"\n}}\n")
        } else {
            String::new()
        };
        let config = format!(
            "listen: \"127.0.0.1:{port}\"\nhttp: \"127.0.0.1:{monitor}\"\nmax_payload: {MAX_PAYLOAD}\n\
             log_file: \"{dir}/server.log\"\njetstream {{\n  store_dir: \"{dir}/jetstream\"\n}}\n{auth}",
            port = self.port,
            monitor = self.monitor_port,
        );
        fs::write(self.config_path(), config).expect("the server's config");
    }

    /// Start `nats-server` and wait until it is ready, or return what it logged if it
    /// exits first.
    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the server is already running");
        let log_path = self.log_path();
        let from = fs::metadata(&log_path).map_or(0, |m| m.len());
        let mut command = Command::new(on_path("nats-server", "scripts/setup-nats (Debian's nats-server)"));
        command
            .arg("-c")
            .arg(self.config_path())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        self.child = Some(command.spawn().expect("nats-server starts"));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let child = self.child.as_mut().expect("just started");
            if let Some(status) = child.try_wait().expect("the server's status") {
                self.child = None;
                return Err(format!("nats-server exited ({status}):\n{}", read_from(&log_path, from)));
            }
            if read_from(&log_path, from).contains("Server is ready") {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("nats-server was not ready within {PATIENCE:?}; its log:\n{}", read_from(&log_path, from));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The section that defines this server in a ferry config, named `name`, its
    /// password (if any) read from the environment variable `password_env`.
    pub fn ferry_section(&self, name: &str, password_env: &str) -> String {
        let auth = if self.password {
            format!("user = \"{USER}\"\npassword = {{ env = \"{password_env}\" }}\n")
        } else {
            String::new()
        };
        format!("[nats.{name}]\nhost = \"127.0.0.1\"\nport = {}\n{auth}", self.port)
    }

    /// A JetStream context of the test's own.
    pub async fn jetstream(&self) -> Context {
        let mut options = async_nats::ConnectOptions::new();
        if self.password {
            options = options.user_and_password(USER.into(), PASSWORD.into());
        }
        let client =
            options.connect(format!("127.0.0.1:{}", self.port)).await.expect("the test connects to its server");
        jetstream::new(client)
    }

    /// A stream `name` that takes `subjects`, with the default duplicate window (2 min).
    pub async fn create_stream(&self, name: &str, subjects: &[&str]) {
        let config = stream::Config {
            name: name.into(),
            subjects: subjects.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        self.jetstream().await.create_stream(config).await.expect("the stream is created");
    }

    /// Every message of the stream `name`, in order: its headers and payload.
    pub async fn messages(&self, name: &str) -> Vec<async_nats::jetstream::message::StreamMessage> {
        let mut stream = self.jetstream().await.get_stream(name).await.expect("the stream");
        let last = stream.info().await.expect("the stream's info").state.last_sequence;
        let mut messages = Vec::new();
        for sequence in 1..=last {
            messages.push(stream.get_raw_message(sequence).await.expect("a message of the stream"));
        }
        messages
    }

    /// How many connections the server has taken since it started (its `/varz`).
    pub fn connections_taken(&self) -> u64 {
        let address = format!("127.0.0.1:{}", self.monitor_port);
        let varz = crate::http_client::get(&address, "/varz", &[]).expect("the monitoring port answers").json();
        varz["total_connections"].as_u64().expect("total_connections in /varz")
    }

    /// `kill -9` the server. Returns once it is gone.
    pub fn kill_9(&mut self) {
        kill_9(&mut self.child);
    }

    /// Start the server again on the same directory and ports.
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn() {
            panic!("nats-server did not start again on port {}; its log:\n{log}", self.port);
        }
    }

    /// Everything the server logged, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("nats.conf")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("nats-server's log (port {}):\n{}", self.port, self.log());
        }
        self.kill_9();
    }
}
