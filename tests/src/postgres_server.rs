//! A PostgreSQL server of a test's own: a throwaway cluster from Debian's packages.
//!
//! Each [`PgServer`] runs `initdb` in a temporary directory and starts `postgres` on a
//! free port as a child process, so that a test can `kill -9` it and start it again on
//! the same data (PostgreSQL then recovers from its write-ahead log). TCP connections
//! must give the password ([`PASSWORD`], checked with SCRAM), so a test can also see a
//! wrong one refused.
//!
//! [`PgServer::start_with_tls`] starts one with `ssl = on` and a certificate the test
//! made, for TLS tests; TCP connections may then be in TLS or not, as the client asks.
//!
//! `initdb` and `postgres` refuse to run as root; when the tests run as root (as CI
//! does) the server runs as [`SERVER_USER`]. `scripts/setup-postgres` installs the
//! server and creates that user. Without them the tests fail and say so: they are
//! never skipped.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, Config, NoTls};

use crate::free_port;
use crate::server_process::{read_from, run_as};

/// The superuser `initdb` creates, the one the tests sign in as.
pub const USER: &str = "ferry";
/// Its password.
pub const PASSWORD: &str = "ferry-test-password";
/// The database the tests use: the one `initdb` always creates.
pub const DATABASE: &str = "postgres";
/// The system user the server runs as when the tests run as root (made by
/// `scripts/setup-postgres`, which names the same user).
pub const SERVER_USER: &str = "ferry-postgres";

/// Where Debian installs each major version's server binaries.
const DEBIAN_SERVERS: &str = "/usr/lib/postgresql";
/// What the server logs once it accepts connections, after a start or a crash recovery.
const READY: &str = "database system is ready to accept connections";
/// Long enough for initdb, a crash recovery or a fast shutdown on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// Tries at a port before giving up, when another process takes the free one first.
const PORT_TRIES: usize = 5;

/// A running (or stopped) server on a data directory of its own, removed on drop.
pub struct PgServer {
    /// The directory holding `initdb`, `postgres` and friends.
    bin: PathBuf,
    /// The cluster (`data/`), the server's sockets and its log (`server.log`).
    dir: tempfile::TempDir,
    port: u16,
    /// The uid and gid the server runs as, when not the tests' own.
    run_as: Option<(u32, u32)>,
    /// Whether it serves TLS, with `server.crt` and `server.key` in `dir`.
    tls: bool,
    child: Option<Child>,
}

impl PgServer {
    /// This server as ferry's `[postgres.NAME]` sees it, signing in with `password`
    /// (written to `dir/<name>-password`, read from there as a secret file).
    pub fn ferry_server(
        &self,
        dir: &Path,
        name: &str,
        password: &str,
    ) -> ferry::capabilities::postgres::PostgresServer {
        let file = dir.join(format!("{name}-password"));
        fs::write(&file, format!("{password}\n")).expect("writing the password file");
        ferry::capabilities::postgres::PostgresServer {
            url: None,
            host: self.host().to_string(),
            port: self.port(),
            database: self.database().to_string(),
            user: self.user().to_string(),
            password: Some(ferry::config::SecretSource::File(file)),
            max_connections: 2,
            connect_timeout: Duration::from_secs(5),
            tls: None,
            ca_file: None,
        }
    }

    /// The `[postgres.NAME]` table of a ferry config for this server, its password
    /// in `dir/<name>-password`.
    pub fn ferry_toml(&self, dir: &Path, name: &str) -> String {
        let server = self.ferry_server(dir, name, PASSWORD);
        let Some(ferry::config::SecretSource::File(file)) = &server.password else { unreachable!() };
        format!(
            "[postgres.{name}]\nhost = \"{}\"\nport = {}\ndatabase = \"{}\"\nuser = \"{}\"\npassword = {{ file = \"{}\" }}\n",
            server.host,
            server.port,
            server.database,
            server.user,
            file.display()
        )
    }

    /// A new cluster, started and accepting connections.
    pub fn start() -> PgServer {
        Self::start_serving(None)
    }

    /// A new cluster serving TLS (`ssl = on`) with the certificate `cert_pem` (for
    /// 127.0.0.1) and its key `key_pem`, started and accepting connections.
    pub fn start_with_tls(cert_pem: &str, key_pem: &str) -> PgServer {
        Self::start_serving(Some((cert_pem, key_pem)))
    }

    fn start_serving(tls: Option<(&str, &str)>) -> PgServer {
        let bin = binaries();
        let run_as = run_as(SERVER_USER, "scripts/setup-postgres");
        let dir = tempfile::Builder::new().prefix("ferry-pg-").tempdir().expect("a temporary directory");
        let mut server = PgServer { bin, dir, port: 0, run_as, tls: tls.is_some(), child: None };
        server.init();
        if let Some((cert, key)) = tls {
            server.write_tls_files(cert, key);
        }
        for _ in 0..PORT_TRIES {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => return server,
                // Another process took the port between our look and the server's bind.
                Err(log) if log.contains("could not bind") || log.contains("could not create any TCP/IP sockets") => {
                    continue;
                }
                Err(log) => panic!("PostgreSQL did not start; its log:\n{log}"),
            }
        }
        panic!("PostgreSQL found no free port in {PORT_TRIES} tries; its log:\n{}", server.log())
    }

    /// `initdb`: UTF-8, the C locale (so that messages are in English whatever the
    /// machine's locale), [`USER`] with [`PASSWORD`], SCRAM for TCP connections. The
    /// local socket trusts its users, for a person poking at a kept cluster with psql.
    fn init(&self) {
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(self.dir.path(), Some(uid), Some(gid))
                .expect("the server's user owns its temporary directory");
        }
        let pwfile = self.dir.path().join("pwfile");
        fs::write(&pwfile, PASSWORD).expect("the password file");
        let output = self
            .command("initdb")
            .arg("--pgdata")
            .arg(self.data_dir())
            .args(["--username", USER, "--encoding", "UTF8", "--locale", "C"])
            .args(["--auth-local", "trust", "--auth-host", "scram-sha-256"])
            .arg("--pwfile")
            .arg(&pwfile)
            // Skipping the final fsync saves seconds; the tests kill the server, never
            // the machine, and the server itself still syncs what it commits.
            .arg("--no-sync")
            .stdin(Stdio::null())
            .output()
            .expect("initdb runs");
        assert!(
            output.status.success(),
            "initdb failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The certificate and key the server reads: its own files, the key readable by it
    /// alone (the server refuses a key others can read).
    fn write_tls_files(&self, cert: &str, key: &str) {
        use std::os::unix::fs::PermissionsExt;
        for (name, pem) in [("server.crt", cert), ("server.key", key)] {
            let path = self.dir.path().join(name);
            fs::write(&path, pem).expect("the server's TLS files");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("the TLS files' mode");
            if let Some((uid, gid)) = self.run_as {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).expect("the server's user owns its TLS files");
            }
        }
    }

    /// Start `postgres` on `self.port` and wait until it accepts connections, or return
    /// what it logged if it exits first.
    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the server is already running");
        let log_path = self.log_path();
        let log = fs::OpenOptions::new().create(true).append(true).open(&log_path).expect("the server's log file");
        // Only what this start logs counts: the file keeps earlier runs' lines too.
        let from = log.metadata().expect("the server's log file").len();
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(self.tls_settings())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the server's log file"))
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        let child = self.child.insert(child);
        let deadline = Instant::now() + PATIENCE;
        loop {
            let logged = read_from(&log_path, from);
            if logged.contains(READY) {
                return Ok(());
            }
            if let Some(status) = child.try_wait().expect("the server's status") {
                self.child = None;
                return Err(format!("postgres exited ({status}):\n{logged}"));
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("PostgreSQL was not ready within {PATIENCE:?}; its log:\n{logged}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The settings that make the server serve TLS, if it does.
    fn tls_settings(&self) -> Vec<String> {
        if !self.tls {
            return Vec::new();
        }
        let file = |name: &str| self.dir.path().join(name).display().to_string();
        let settings = [
            "ssl=on".to_string(),
            format!("ssl_cert_file={}", file("server.crt")),
            format!("ssl_key_file={}", file("server.key")),
        ];
        settings.into_iter().flat_map(|setting| ["-c".to_string(), setting]).collect()
    }

    /// One of the server's programs, run as the server's user, in its directory.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command.current_dir(self.dir.path());
        if let Some((uid, gid)) = self.run_as {
            // std drops root's supplementary groups when it changes the uid.
            command.uid(uid).gid(gid);
        }
        command
    }

    /// Always `127.0.0.1`: the server listens on nothing else.
    pub fn host(&self) -> &'static str {
        "127.0.0.1"
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn user(&self) -> &'static str {
        USER
    }

    pub fn password(&self) -> &'static str {
        PASSWORD
    }

    pub fn database(&self) -> &'static str {
        DATABASE
    }

    /// `host=… port=… user=… password=… dbname=…`, as libpq and tokio-postgres take it.
    pub fn connection_string(&self) -> String {
        format!("host={} port={} user={USER} password={PASSWORD} dbname={DATABASE}", self.host(), self.port)
    }

    /// `postgres://user:password@host:port/database`.
    pub fn url(&self) -> String {
        format!("postgres://{USER}:{PASSWORD}@{}:{}/{DATABASE}", self.host(), self.port)
    }

    /// A tokio-postgres config for this server, with a short connect timeout so that
    /// a test against a dead server fails rather than hangs.
    pub fn config(&self) -> Config {
        let mut config = Config::new();
        config
            .host(self.host())
            .port(self.port)
            .user(USER)
            .password(PASSWORD)
            .dbname(DATABASE)
            .connect_timeout(Duration::from_secs(10));
        config
    }

    /// A client signed in as [`USER`]; its connection runs on a task of its own.
    pub async fn client(&self) -> Client {
        let (client, connection) = self.config().connect(NoTls).await.unwrap_or_else(|e| {
            panic!("cannot connect to PostgreSQL on port {}: {e}; its log:\n{}", self.port, self.log())
        });
        // Its error, if the server dies, reaches the client's next call.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// Run `sql` (any number of statements), on a connection of its own.
    pub async fn execute(&self, sql: &str) {
        let client = self.client().await;
        client.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }

    /// The first column of each row `sql` returns, which must be a `bigint`.
    pub async fn query_i64s(&self, sql: &str) -> Vec<i64> {
        let client = self.client().await;
        let rows = client.query(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        rows.iter().map(|row| row.try_get(0).unwrap_or_else(|e| panic!("{sql}: {e}"))).collect()
    }

    /// `kill -9` the server: the postmaster and every process it started, as a crash
    /// of the machine or an OOM kill of all of it would. Returns once they are gone.
    ///
    /// Backends outlive a killed postmaster for a while, holding its shared memory,
    /// and a new postmaster refuses to start while they do ("pre-existing shared
    /// memory block is still in use"). They cannot be found by process group (each
    /// calls setsid) nor, once orphaned, by parent; but they all work in the data
    /// directory, so they are found by that.
    pub fn kill_9(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // SAFETY: kill(2) on our own child's pid, which `wait` has not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        child.wait().expect("the killed postmaster is reaped");
        // The postmaster is gone, so no new backend can appear; kill those left until
        // none is.
        let data_dir = fs::canonicalize(self.data_dir()).expect("the data directory");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = processes_in(&data_dir);
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "backends {left:?} outlived kill -9 for {PATIENCE:?}");
            for pid in left {
                // SAFETY: kill(2) has no memory effects; a pid gone meanwhile is ESRCH.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Start the server again on the same data directory and port, and wait until it
    /// accepts connections (after crash recovery, if it was killed).
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn() {
            panic!("PostgreSQL did not start again on port {}; its log:\n{log}", self.port);
        }
    }

    /// Fast shutdown (SIGINT): sessions are cut, what was committed is checkpointed.
    /// Returns once the server has exited.
    pub fn stop(&mut self) {
        let Some(child) = self.child.as_mut() else { return };
        // SAFETY: kill(2) on our own child's pid, which `wait` has not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + PATIENCE;
        while child.try_wait().expect("the server's status").is_none() {
            if Instant::now() > deadline {
                eprintln!("PostgreSQL ignored a fast shutdown for {PATIENCE:?}; killing it");
                self.kill_9();
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child = None;
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Everything the server logged, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    /// The cluster's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("PostgreSQL's log (port {}):\n{}", self.port, self.log());
        }
        self.stop();
    }
}

/// The newest server version's binaries under [`DEBIAN_SERVERS`].
fn binaries() -> PathBuf {
    let newest = fs::read_dir(DEBIAN_SERVERS)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: Vec<u32> =
                entry.file_name().to_str()?.split('.').map(str::parse).collect::<Result<_, _>>().ok()?;
            let bin = entry.path().join("bin");
            ["initdb", "postgres"].iter().all(|program| bin.join(program).is_file()).then_some((version, bin))
        })
        .max();
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "no PostgreSQL server in {DEBIAN_SERVERS}/*/bin (initdb, postgres): run scripts/setup-postgres to install \
             Debian's postgresql package"
        ),
    }
}

/// The live processes whose working directory is `dir`: a postmaster's backends.
/// Zombies have none, so they are not counted.
fn processes_in(dir: &Path) -> Vec<libc::pid_t> {
    let Ok(proc) = fs::read_dir("/proc") else { return Vec::new() };
    proc.flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            (fs::read_link(entry.path().join("cwd")).ok()? == dir).then_some(pid)
        })
        .collect()
}
