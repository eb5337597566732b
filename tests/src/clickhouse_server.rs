//! A ClickHouse server of a test's own, from Debian's `clickhouse-server` package.
//!
//! Each [`ChServer`] writes a config of its own in a temporary directory (data,
//! logs, users: [`USER`] with [`PASSWORD`]) and starts `clickhouse-server` as a
//! child process on free ports, so that a test can `kill -9` it and start it again
//! on the same data. When the tests run as root (as CI does) the server runs as the
//! package's `clickhouse` user. `scripts/setup-clickhouse` installs the package.
//! Without it the tests fail and say so: they are never skipped.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::server_process::{kill_9, run_as};

/// The user the tests sign in as, and its password.
pub const USER: &str = "ferry";
pub const PASSWORD: &str = "ferry-test-password";
/// Where the package installs the server.
const SERVER: &str = "/usr/sbin/clickhouse-server";
/// The package's system user, the server's when the tests run as root.
const SERVER_USER: &str = "clickhouse";
/// Long enough for a start or a restart after a kill on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// Tries at a pair of ports before giving up, when another process takes one first.
const PORT_TRIES: usize = 5;

/// A running (or stopped) server on a directory of its own, removed on drop.
pub struct ChServer {
    dir: tempfile::TempDir,
    http_port: u16,
    run_as: Option<(u32, u32)>,
    child: Option<Child>,
}

impl ChServer {
    /// A new server, started and answering.
    pub fn start() -> ChServer {
        assert!(
            std::path::Path::new(SERVER).is_file(),
            "no {SERVER}: run scripts/setup-clickhouse to install Debian's clickhouse-server package"
        );
        let dir = tempfile::Builder::new().prefix("ferry-ch-").tempdir().expect("a temporary directory");
        let run_as = run_as(SERVER_USER, "scripts/setup-clickhouse");
        let mut server = ChServer { dir, http_port: 0, run_as, child: None };
        for _ in 0..PORT_TRIES {
            server.http_port = free_port();
            server.write_config(free_port());
            match server.spawn() {
                Ok(()) => return server,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("ClickHouse did not start; its log:\n{log}"),
            }
        }
        panic!("ClickHouse found no free ports in {PORT_TRIES} tries; its log:\n{}", server.log())
    }

    /// `host:port` of its HTTP interface.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.http_port)
    }

    /// Run `sql` as [`USER`]; the answer's text, or the server's error.
    pub fn try_query(&self, sql: &str) -> Result<String, String> {
        self.try_query_within(sql, PATIENCE)
    }

    /// [`ChServer::try_query`] that gives up after `timeout`: for a test polling until
    /// rows arrive, so that one slow answer does not use up the test's whole patience.
    pub fn try_query_within(&self, sql: &str, timeout: Duration) -> Result<String, String> {
        let client = reqwest::blocking::Client::new();
        let answer = client
            .post(format!("http://{}/", self.address()))
            .header("X-ClickHouse-User", USER)
            .header("X-ClickHouse-Key", PASSWORD)
            .timeout(timeout)
            .body(sql.to_string())
            .send()
            .map_err(|e| e.to_string())?;
        let status = answer.status();
        let text = answer.text().map_err(|e| e.to_string())?;
        if status.is_success() { Ok(text) } else { Err(format!("{status}: {text}")) }
    }

    /// Run `sql`, failing the test on an error.
    pub fn query(&self, sql: &str) -> String {
        self.try_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// `kill -9`, and wait until it is gone.
    pub fn kill_9(&mut self) {
        kill_9(&mut self.child);
    }

    /// Start again on the same ports and data.
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn() {
            panic!("ClickHouse did not start again on port {}; its log:\n{log}", self.http_port);
        }
    }

    pub fn log(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        format!("{}{}", read("server.err.log"), read("stdout.log"))
    }

    fn write_config(&self, tcp_port: u16) {
        let dir = self.dir.path().display();
        for sub in ["data", "tmp", "user_files"] {
            fs::create_dir_all(self.dir.path().join(sub)).expect("the server's directories");
        }
        let config = format!(
            r#"<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{dir}/server.log</log><errorlog>{dir}/server.err.log</errorlog></logger>
  <http_port>{http}</http_port>
  <tcp_port>{tcp_port}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{dir}/data/</path>
  <tmp_path>{dir}/tmp/</tmp_path>
  <user_files_path>{dir}/user_files/</user_files_path>
  <users_config>{dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>104857600</mark_cache_size>
  <uncompressed_cache_size>104857600</uncompressed_cache_size>
</yandex>
"#,
            http = self.http_port
        );
        let users = format!(
            r#"<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users>
    <{USER}><password>{PASSWORD}</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></{USER}>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
"#
        );
        fs::write(self.dir.path().join("config.xml"), config).expect("the server's config");
        fs::write(self.dir.path().join("users.xml"), users).expect("the server's users");
        if let Some((uid, gid)) = self.run_as {
            chown_all(self.dir.path(), uid, gid);
        }
    }

    /// Start the server and wait until it answers `/ping`, or return its log if it
    /// exits first.
    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the server is already running");
        let stdout = fs::File::create(self.dir.path().join("stdout.log")).expect("the server's output file");
        let mut command = Command::new(SERVER);
        command
            .arg(format!("--config-file={}", self.dir.path().join("config.xml").display()))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(stdout.try_clone().expect("the server's output file"))
            .stderr(stdout);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        let ping = format!("http://{}/ping", self.address());
        let child = self.child.insert(command.spawn().expect("clickhouse-server starts"));
        let deadline = Instant::now() + PATIENCE;
        loop {
            if reqwest::blocking::get(&ping).and_then(|r| r.text()).is_ok_and(|text| text.starts_with("Ok.")) {
                return Ok(());
            }
            if let Some(status) = child.try_wait().expect("the server's status") {
                self.child = None;
                return Err(format!("clickhouse-server exited ({status}):\n{}", self.log()));
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("ClickHouse did not answer within {PATIENCE:?}; its log:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ChServer {
    fn drop(&mut self) {
        self.kill_9();
    }
}

fn chown_all(path: &std::path::Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("the server's user owns its directory");
    if path.is_dir() {
        for entry in fs::read_dir(path).expect("the server's directory") {
            chown_all(&entry.expect("an entry").path(), uid, gid);
        }
    }
}
