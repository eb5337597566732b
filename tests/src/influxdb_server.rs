//! An InfluxDB 1.x server of a test's own: Debian's `influxd` on a generated config.
//!
//! Each [`InfluxServer`] writes a config into a temporary directory (its meta, data
//! and wal directories there, HTTP and the RPC service each on a free port of
//! 127.0.0.1, reporting and the monitor's own database off) and starts `influxd` as
//! a child process, so that a test can `kill -9` it and start it again on the same
//! data (InfluxDB then replays its write-ahead log). [`InfluxServer::start_with_auth`]
//! starts one with `auth-enabled`, its admin [`USER`] with [`PASSWORD`].
//!
//! When the tests run as root (as CI does) the server runs as [`SERVER_USER`], the
//! package's own user. `scripts/setup-influxdb` installs the server (and makes sure
//! of that user). Without them the tests fail and say so: they are never skipped.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::free_port;
use crate::server_process::{kill_9, on_path, read_from, run_as};

/// The admin user of a server started with auth.
pub const USER: &str = "ferry";
/// Its password.
pub const PASSWORD: &str = "ferry-test-password";
/// The system user the server runs as when the tests run as root (the package's).
pub const SERVER_USER: &str = "influxdb";

/// Long enough for a start or a WAL replay on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// Tries at a pair of ports before giving up, when another process takes one first.
const PORT_TRIES: usize = 5;

/// A running (or stopped) server on a directory of its own, removed on drop.
pub struct InfluxServer {
    /// `influxdb.conf`, `meta/`, `data/`, `wal/` and the server's log (`server.log`).
    dir: tempfile::TempDir,
    port: u16,
    rpc_port: u16,
    auth: bool,
    /// The uid and gid the server runs as, when not the tests' own.
    run_as: Option<(u32, u32)>,
    child: Option<Child>,
}

impl InfluxServer {
    /// A new server, started and answering, without auth.
    pub fn start() -> InfluxServer {
        Self::start_serving(false)
    }

    /// A new server with `auth-enabled`, started and answering, its admin [`USER`].
    pub fn start_with_auth() -> InfluxServer {
        let server = Self::start_serving(true);
        // With auth on and no user yet, 1.x takes the first admin without credentials.
        let statement = format!("CREATE USER \"{USER}\" WITH PASSWORD '{PASSWORD}' WITH ALL PRIVILEGES");
        let (status, body) = server.request("POST", "/query", &format!("q={}", encode(&statement)));
        assert_eq!(status, 200, "creating the admin user: {body}");
        server
    }

    fn start_serving(auth: bool) -> InfluxServer {
        let binary = binary();
        let dir = tempfile::Builder::new().prefix("ferry-influx-").tempdir().expect("a temporary directory");
        let run_as = run_as(SERVER_USER, "scripts/setup-influxdb");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("the server's user owns its temporary directory");
        }
        let mut server = InfluxServer { dir, port: 0, rpc_port: 0, auth, run_as, child: None };
        for _ in 0..PORT_TRIES {
            server.port = free_port();
            server.rpc_port = free_port();
            server.write_config();
            match server.spawn(&binary) {
                Ok(()) => return server,
                // Another process took a port between our look and the server's bind.
                Err(log) if log.contains("address already in use") => continue,
                Err(log) => panic!("influxd did not start; its log:\n{log}"),
            }
        }
        panic!("influxd found no free ports in {PORT_TRIES} tries; its log:\n{}", server.log())
    }

    fn write_config(&self) {
        let dir = self.dir.path().display();
        let config = format!(
            r#"reporting-disabled = true
bind-address = "127.0.0.1:{rpc}"

[meta]
  dir = "{dir}/meta"

[data]
  dir = "{dir}/data"
  wal-dir = "{dir}/wal"
  query-log-enabled = false

[http]
  enabled = true
  bind-address = "127.0.0.1:{port}"
  auth-enabled = {auth}
  log-enabled = false

[monitor]
  store-enabled = false

[continuous_queries]
  enabled = false
"#,
            rpc = self.rpc_port,
            port = self.port,
            auth = self.auth,
        );
        fs::write(self.config_path(), config).expect("the server's config");
    }

    /// Start `influxd` and wait until it answers `/ping`, or return what it logged if
    /// it exits first.
    fn spawn(&mut self, binary: &Path) -> Result<(), String> {
        assert!(self.child.is_none(), "the server is already running");
        let log_path = self.log_path();
        let log = fs::OpenOptions::new().create(true).append(true).open(&log_path).expect("the server's log file");
        // Only what this start logs counts: the file keeps earlier runs' lines too.
        let from = log.metadata().expect("the server's log file").len();
        let mut command = Command::new(binary);
        command
            .arg("-config")
            .arg(self.config_path())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the server's log file"))
            .stderr(log);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        self.child = Some(command.spawn().expect("influxd starts"));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let child = self.child.as_mut().expect("just started");
            if let Some(status) = child.try_wait().expect("the server's status") {
                self.child = None;
                return Err(format!("influxd exited ({status}):\n{}", read_from(&log_path, from)));
            }
            if exchange(&self.address(), "GET", "/ping", "", "text/plain").is_ok_and(|(status, _)| status == 204) {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("influxd did not answer /ping within {PATIENCE:?}; its log:\n{}", read_from(&log_path, from));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `127.0.0.1:PORT`, its HTTP address (what `grants.network` names).
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `METHOD path` with a form `body`, as the admin when the server has auth: its
    /// status and body.
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        self.request_raw(method, path, body, "application/x-www-form-urlencoded")
    }

    fn request_raw(&self, method: &str, path: &str, body: &str, content_type: &str) -> (u16, String) {
        let path = if self.auth {
            let separator = if path.contains('?') { '&' } else { '?' };
            format!("{path}{separator}u={USER}&p={}", encode(PASSWORD))
        } else {
            path.to_string()
        };
        exchange(&self.address(), method, &path, body, content_type).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Run a statement that changes something (`CREATE DATABASE`, ...), as the admin.
    pub fn execute(&self, statement: &str) {
        let (status, body) = self.request("POST", "/query", &format!("q={}", encode(statement)));
        let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{statement}: not JSON ({e}): {body}"));
        assert!(status == 200 && body["results"][0].get("error").is_none(), "{statement}: {status} {body}");
    }

    /// Write `lines` of line protocol (timestamps in ns) to `db`, as the admin.
    pub fn write(&self, db: &str, lines: &str) {
        let (status, body) = self.request_raw("POST", &format!("/write?db={}", encode(db)), lines, "text/plain");
        assert_eq!(status, 204, "writing to {db}: {body}");
    }

    pub fn create_database(&self, name: &str) {
        self.execute(&format!("CREATE DATABASE \"{name}\""));
    }

    /// The rows `query` returns in database `db`: each series' rows, every row a map
    /// of column to value (and the series' tags, when grouped by them).
    pub fn select(&self, db: &str, query: &str) -> Vec<serde_json::Map<String, Value>> {
        let path = format!("/query?epoch=u&db={}&q={}", encode(db), encode(query));
        let (_, body) = self.request("GET", &path, "");
        let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{query}: not JSON ({e}): {body}"));
        let result = &body["results"][0];
        assert!(result.get("error").is_none() && body.get("error").is_none(), "{query}: {body}");
        let mut rows = Vec::new();
        for series in result["series"].as_array().into_iter().flatten() {
            let columns: Vec<&str> =
                series["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
            for values in series["values"].as_array().unwrap() {
                let mut row: serde_json::Map<String, Value> =
                    columns.iter().zip(values.as_array().unwrap()).map(|(c, v)| (c.to_string(), v.clone())).collect();
                if let Some(tags) = series.get("tags").and_then(Value::as_object) {
                    row.extend(tags.clone());
                }
                if let Some(name) = series.get("name") {
                    row.insert("measurement".into(), name.clone());
                }
                rows.push(row);
            }
        }
        rows
    }

    /// `kill -9` the server. Returns once it is gone.
    pub fn kill_9(&mut self) {
        kill_9(&mut self.child);
    }

    /// Start the server again on the same directory and ports, and wait until it
    /// answers (after replaying its WAL, if it was killed).
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn(&binary()) {
            panic!("influxd did not start again on port {}; its log:\n{log}", self.port);
        }
    }

    /// SIGTERM, and wait until the server has exited.
    pub fn stop(&mut self) {
        let Some(child) = self.child.as_mut() else { return };
        // SAFETY: kill(2) on our own child's pid, which `wait` has not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + PATIENCE;
        while child.try_wait().expect("the server's status").is_none() {
            if Instant::now() > deadline {
                eprintln!("influxd ignored SIGTERM for {PATIENCE:?}; killing it");
                self.kill_9();
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child = None;
    }

    /// Everything the server logged, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("influxdb.conf")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }
}

impl Drop for InfluxServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("influxd's log (port {}):\n{}", self.port, self.log());
        }
        self.kill_9();
    }
}

/// One request in HTTP/1.0 (so the answer is never chunked: the server closes the
/// connection after it), with `body` of `content_type` when not empty: the status
/// and the body.
fn exchange(address: &str, method: &str, path: &str, body: &str, content_type: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {address}\r\nContent-Length: {}\r\n", body.len());
    if !body.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let answer = || std::io::Error::other(format!("not an HTTP answer: {text}"));
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(answer)?;
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(answer)?;
    Ok((status, body.to_string()))
}

/// `text` percent-encoded for a query string or a form body.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `influxd` on the PATH (Debian's package puts it in /usr/bin).
fn binary() -> PathBuf {
    on_path("influxd", "scripts/setup-influxdb (Debian's influxdb)")
}
