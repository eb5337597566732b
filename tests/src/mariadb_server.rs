//! A MariaDB server of a test's own: Debian's `mariadb-server` (10.11), a data directory
//! made by `mariadb-install-db` in a temporary directory and `mariadbd` on it, as a
//! child process on a free port of 127.0.0.1. [`DATABASE`] and [`USER`] (with
//! [`PASSWORD`], allowed from 127.0.0.1 only) are made at the first start.
//!
//! It is as durable as a careful deployment: InnoDB writes and fsyncs its redo log at
//! every commit (`innodb_flush_log_at_trx_commit=1`, said explicitly though it is the
//! default), so a test can `kill -9` it and start it again on the same data, after
//! crash recovery, with nothing it committed lost. The binary log stays off (nothing
//! reads it). No option file is read (`--no-defaults`), so the character set is set to
//! Debian's (`utf8mb4`) rather than left at the server's own default (`latin1`). Each
//! server has a `tmpdir` of its own: a starting server deletes every `#sql*` file in
//! its `tmpdir`, so servers sharing `/tmp` delete each other's temporary tables (and
//! `mariadb-install-db`s run at once fail).
//!
//! When the tests run as root (as CI does) the server runs as [`SERVER_USER`], the
//! package's own user. `scripts/setup-mariadb` installs the server (and makes sure of
//! that user). Without them the tests fail and say so: they are never skipped.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::server_process::{kill_9, on_path, read_from, run_as};

/// The user the tests (and ferry) sign in as, over TCP from 127.0.0.1.
pub const USER: &str = "ferry";
/// Its password.
pub const PASSWORD: &str = "ferry-test-mariadb-password";
/// The database it may do anything in.
pub const DATABASE: &str = "ferry";
/// The system user the server runs as when the tests run as root (the package's).
pub const SERVER_USER: &str = "mysql";

/// What the server logs once it accepts connections, after a start or a crash recovery.
const READY: &str = "ready for connections";
/// Long enough for a start, or a crash recovery, on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// Tries at a port before giving up, when another process takes one first.
const PORT_TRIES: usize = 5;
const SETUP: &str = "scripts/setup-mariadb (Debian's mariadb-server)";

/// A running (or stopped) server on a directory of its own, removed on drop.
pub struct MariaDbServer {
    /// Its data (`data/`), temporary files (`tmp/`), socket (`mysqld.sock`), pid file
    /// and log (`server.log`).
    dir: tempfile::TempDir,
    port: u16,
    run_as: Option<(u32, u32)>,
    child: Option<Child>,
}

impl MariaDbServer {
    /// A new server, started and accepting [`USER`] in [`DATABASE`].
    pub fn start() -> MariaDbServer {
        let dir = tempfile::Builder::new().prefix("ferry-mariadb-").tempdir().expect("a temporary directory");
        let run_as = run_as(SERVER_USER, "scripts/setup-mariadb");
        let tmp = dir.path().join("tmp");
        fs::create_dir(&tmp).expect("the server's own tmpdir");
        if let Some((uid, gid)) = run_as {
            for dir in [dir.path(), &tmp] {
                std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("the server's user owns its directories");
            }
        }
        let mut server = MariaDbServer { dir, port: 0, run_as, child: None };
        server.install_db();
        for _ in 0..PORT_TRIES {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => {
                    server.create_user();
                    return server;
                }
                // Another process took the port between our look and the server's bind.
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("mariadbd did not start; its log:\n{log}"),
            }
        }
        panic!("mariadbd found no free port in {PORT_TRIES} tries; its log:\n{}", server.log())
    }

    /// `mariadb-install-db`: the system tables in `data/`, no test database, and a
    /// `root@localhost` without a password (`normal`, rather than the default `socket`
    /// authentication that admits only the OS user of the same name), whoever the
    /// tests run as. `--force`: no look-up of the machine's name (which fails where DNS
    /// does not work); the server checks no names anyway (`--skip-name-resolve`).
    fn install_db(&self) {
        let mut command = Command::new(on_path("mariadb-install-db", SETUP));
        // `--no-defaults` must come first.
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.path("data").display()))
            .arg(format!("--tmpdir={}", self.path("tmp").display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db", "--force"])
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        let output = command.output().expect("mariadb-install-db runs");
        assert!(
            output.status.success(),
            "mariadb-install-db failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// [`DATABASE`], and [`USER`] allowed everything in it, made by root over the socket
    /// (root has no password there: `normal`, above).
    fn create_user(&self) {
        let socket = format!("--socket={}", self.path("mysqld.sock").display());
        run(client(&[&socket, "--user=root"]).arg(format!(
            "--execute=CREATE DATABASE {DATABASE}; \
             CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; \
             GRANT ALL ON {DATABASE}.* TO '{USER}'@'127.0.0.1';"
        )))
        .unwrap_or_else(|refusal| panic!("{refusal}"));
    }

    /// Start `mariadbd` on `self.port` and wait until it accepts connections, or return
    /// what it logged if it exits first.
    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the server is already running");
        let log_path = self.path("server.log");
        // Only what this start logs counts: the file keeps earlier runs' lines too.
        let from = fs::metadata(&log_path).map_or(0, |m| m.len());
        let path = |name: &str| self.path(name).display().to_string();
        let mut command = Command::new(binary());
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", path("data")))
            .arg(format!("--tmpdir={}", path("tmp")))
            .arg(format!("--socket={}", path("mysqld.sock")))
            .arg(format!("--pid-file={}", path("mariadbd.pid")))
            .arg(format!("--log-error={}", log_path.display()))
            .arg(format!("--port={}", self.port))
            .args(["--bind-address=127.0.0.1", "--skip-name-resolve"])
            .args(["--innodb-flush-log-at-trx-commit=1", "--innodb-buffer-pool-size=64M"])
            .args(["--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        self.child = Some(command.spawn().expect("mariadbd starts"));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let log = read_from(&log_path, from);
            if log.contains(READY) {
                return Ok(());
            }
            let child = self.child.as_mut().expect("just started");
            if let Some(status) = child.try_wait().expect("the server's status") {
                self.child = None;
                return Err(format!("mariadbd exited ({status}):\n{}", read_from(&log_path, from)));
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("mariadbd was not ready within {PATIENCE:?}; its log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `mysql://USER:PASSWORD@127.0.0.1:PORT/DATABASE`.
    pub fn url(&self) -> String {
        format!("mysql://{USER}:{PASSWORD}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The section that defines this server in a ferry config, named `name`, its
    /// password read from the environment variable `password_env`.
    pub fn ferry_section(&self, name: &str, password_env: &str) -> String {
        format!(
            "[mysql.{name}]\nhost = \"127.0.0.1\"\nport = {}\nuser = \"{USER}\"\npassword = {{ env = \"{password_env}\" }}\n\
             database = \"{DATABASE}\"\n",
            self.port
        )
    }

    /// The servers a connector granted this one as `name` reaches, its password read
    /// from the environment variable `password_env`: what `grants.mysql = [name]` and
    /// [`MariaDbServer::ferry_section`] make of it in a config.
    pub fn granted(&self, name: &str, password_env: &str) -> ferry::capabilities::mysql::MysqlServers {
        let server = ferry::capabilities::mysql::MysqlServer {
            host: "127.0.0.1".into(),
            port: self.port,
            user: USER.into(),
            password: Some(ferry::contract::settings::SecretSource::Env(password_env.into())),
            database: DATABASE.into(),
            connect_timeout: Duration::from_secs(5),
        };
        let servers = std::collections::BTreeMap::from([(name.to_string(), server)]);
        ferry::capabilities::mysql::MysqlServers::granted(&[name.to_string()], &servers).expect("granted")
    }

    /// Run `statement` (any number of them) in [`DATABASE`] as [`USER`], over TCP, with
    /// the `mariadb` client, and return what it printed: a row a line, columns
    /// tab-separated, no header. The independent reader for a test's setup and
    /// asserts: another client than ferry's own. Panics, with the client's error, if
    /// a statement fails.
    pub fn sql(&self, statement: &str) -> String {
        self.try_sql(statement).unwrap_or_else(|refusal| panic!("{refusal}"))
    }

    /// [`MariaDbServer::sql`], the client's error as a value: for a test that polls
    /// a table that may not exist yet.
    pub fn try_sql(&self, statement: &str) -> Result<String, String> {
        let port = format!("--port={}", self.port);
        let password = format!("--password={PASSWORD}");
        let mut client = client(&["--protocol=TCP", "--host=127.0.0.1", &port, "--user", USER, &password]);
        run(client.args(["--batch", "--skip-column-names", "--database", DATABASE, "--execute", statement]))
    }

    /// `kill -9` the server. Returns once it is gone.
    pub fn kill_9(&mut self) {
        kill_9(&mut self.child);
    }

    /// Start the server again on the same directory and port, and wait until it
    /// accepts connections (after InnoDB's crash recovery, if it was killed).
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn() {
            panic!("mariadbd did not start again on port {}; its log:\n{log}", self.port);
        }
    }

    /// Everything the server logged, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.path("server.log"), 0)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("mariadbd's log (port {}):\n{}", self.port, self.log());
        }
        self.kill_9();
    }
}

/// The `mariadb` client reading no option file (`--no-defaults` must come first), in
/// UTF-8, reaching the server as `how` says.
fn client(how: &[&str]) -> Command {
    let mut command = Command::new(on_path("mariadb", SETUP));
    command.arg("--no-defaults").arg("--default-character-set=utf8mb4").args(how).stdin(Stdio::null());
    command
}

/// What the `mariadb` client `command` printed; panics with its error if it failed.
fn run(command: &mut Command) -> Result<String, String> {
    let output = command.output().expect("the mariadb client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("the mariadb client failed ({}) at {command:?}:\n{stderr}", output.status));
    }
    Ok(String::from_utf8(output.stdout).expect("the mariadb client's output is UTF-8"))
}

/// Debian's server is in /usr/sbin, which an unprivileged user's PATH may lack.
fn binary() -> PathBuf {
    let debian = Path::new("/usr/sbin/mariadbd");
    if debian.is_file() { debian.to_path_buf() } else { on_path("mariadbd", SETUP) }
}
