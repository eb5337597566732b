//! A Redis server of a test's own: Debian's `redis-server`, as a child process on a
//! free port of 127.0.0.1 with its directory in a temporary one.
//!
//! It keeps an append-only file fsynced at every write (`appendfsync always`), so a
//! test can `kill -9` it and start it again on the same data with nothing it
//! acknowledged lost, as a durable deployment is set up. [`RedisServer::start_with_password`]
//! starts one that asks for a password ([`PASSWORD`]).
//!
//! When the tests run as root (as CI does) the server runs as [`SERVER_USER`], the
//! package's own user. `scripts/setup-redis` installs the server (and makes sure of
//! that user). Without them the tests fail and say so: they are never skipped.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::free_port;
use crate::server_process::{kill_9, on_path, read_from, run_as};

/// The password of a server started with one.
pub const PASSWORD: &str = "ferry-test-redis-password";
/// The system user the server runs as when the tests run as root (the package's).
pub const SERVER_USER: &str = "redis";

/// Long enough for a start, or an append-only file's replay, on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// Tries at a port before giving up, when another process takes one first.
const PORT_TRIES: usize = 5;

/// A running (or stopped) server on a directory of its own, removed on drop.
pub struct RedisServer {
    /// Its data (`appendonlydir/`) and log (`server.log`).
    dir: tempfile::TempDir,
    port: u16,
    password: Option<&'static str>,
    run_as: Option<(u32, u32)>,
    child: Option<Child>,
}

impl RedisServer {
    /// A new server, started and answering, without a password.
    pub fn start() -> RedisServer {
        Self::start_serving(None)
    }

    /// A new server that asks for [`PASSWORD`].
    pub fn start_with_password() -> RedisServer {
        Self::start_serving(Some(PASSWORD))
    }

    fn start_serving(password: Option<&'static str>) -> RedisServer {
        let dir = tempfile::Builder::new().prefix("ferry-redis-").tempdir().expect("a temporary directory");
        let run_as = run_as(SERVER_USER, "scripts/setup-redis");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("the server's user owns its temporary directory");
        }
        let mut server = RedisServer { dir, port: 0, password, run_as, child: None };
        for _ in 0..PORT_TRIES {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => return server,
                // Another process took the port between our look and the server's bind.
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("redis-server did not start; its log:\n{log}"),
            }
        }
        panic!("redis-server found no free port in {PORT_TRIES} tries; its log:\n{}", server.log())
    }

    /// Start `redis-server` and wait until it answers `PING`, or return what it
    /// logged if it exits first.
    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the server is already running");
        let log_path = self.log_path();
        let from = fs::metadata(&log_path).map_or(0, |m| m.len());
        let mut command = Command::new(binary());
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log_path)
            .args(["--save", "", "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(password) = self.password {
            command.args(["--requirepass", password]);
        }
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        self.child = Some(command.spawn().expect("redis-server starts"));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let child = self.child.as_mut().expect("just started");
            if let Some(status) = child.try_wait().expect("the server's status") {
                self.child = None;
                return Err(format!("redis-server exited ({status}):\n{}", read_from(&log_path, from)));
            }
            if read_from(&log_path, from).contains("Ready to accept connections") {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("redis-server was not ready within {PATIENCE:?}; its log:\n{}", read_from(&log_path, from));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The section that defines this server in a ferry config, named `name`, its
    /// password (if any) read from the environment variable `password_env`.
    pub fn ferry_section(&self, name: &str, password_env: &str) -> String {
        let password = match self.password {
            Some(_) => format!("password = {{ env = \"{password_env}\" }}\n"),
            None => String::new(),
        };
        format!("[redis.{name}]\nhost = \"127.0.0.1\"\nport = {}\n{password}", self.port)
    }

    /// A connection of the test's own.
    pub async fn client(&self) -> MultiplexedConnection {
        let url = match self.password {
            Some(password) => format!("redis://:{password}@127.0.0.1:{}/", self.port),
            None => format!("redis://127.0.0.1:{}/", self.port),
        };
        let client = redis::Client::open(url).expect("a Redis URL");
        // No response timeout: a pipeline of many writes fsynced one by one takes long.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        client.get_multiplexed_async_connection_with_config(&config).await.expect("the test connects to its server")
    }

    /// `kill -9` the server. Returns once it is gone.
    pub fn kill_9(&mut self) {
        kill_9(&mut self.child);
    }

    /// Start the server again on the same directory and port, and wait until it
    /// answers (after replaying its append-only file).
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn() {
            panic!("redis-server did not start again on port {}; its log:\n{log}", self.port);
        }
    }

    /// Everything the server logged, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("redis-server's log (port {}):\n{}", self.port, self.log());
        }
        self.kill_9();
    }
}

fn binary() -> PathBuf {
    on_path("redis-server", "scripts/setup-redis (Debian's redis-server)")
}
