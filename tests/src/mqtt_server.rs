//! An MQTT broker of a test's own: Debian's `mosquitto` (2.0) on a generated config, as
//! a child process on a free port of 127.0.0.1, its persistence file and log in a
//! temporary directory. [`MqttServer::start_with_password`] starts one that asks for
//! [`USER`] and [`PASSWORD`].
//!
//! Persistent sessions (clean session off) and the QoS 1 and 2 messages queued for
//! them, without limit, survive a restart on the same directory. Mosquitto keeps them
//! in memory and writes a whole snapshot (fsynced, then renamed into place); this one
//! writes it after every round of its event loop that changed something
//! (`autosave_on_changes` with a threshold of 1) and when it exits on SIGTERM
//! ([`MqttServer::stop`]). So a stop and restart loses nothing, but a `kill -9` loses
//! what the last round changed: mosquitto sends a `PUBACK` before it saves, and one
//! killed right after it has no snapshot with that message. No setting of mosquitto's
//! closes that window; a test of "nothing acknowledged is lost" stops it instead.
//!
//! When the tests run as root (as CI does) the broker runs as [`SERVER_USER`], the
//! package's own user. `scripts/setup-mosquitto` installs the broker (and makes sure
//! of that user). Without them the tests fail and say so: they are never skipped.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::server_process::{kill_9, on_path, read_from, run_as};

/// The user of a broker started with a password.
pub const USER: &str = "ferry";
/// Its password.
pub const PASSWORD: &str = "ferry-test-mqtt-password";
/// The system user the broker runs as when the tests run as root (the package's).
pub const SERVER_USER: &str = "mosquitto";

/// Long enough for a start, or a large snapshot's load, on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// Tries at a port before giving up, when another process takes one first.
const PORT_TRIES: usize = 5;
const SETUP: &str = "scripts/setup-mosquitto (Debian's mosquitto)";

/// A running (or stopped) broker on a directory of its own, removed on drop.
pub struct MqttServer {
    /// `mosquitto.conf`, `passwords`, the snapshot (`mosquitto.db`) and the log
    /// (`mosquitto.log`).
    dir: tempfile::TempDir,
    port: u16,
    password: bool,
    /// Save a snapshot after every change (else only on stop).
    save_every_change: bool,
    run_as: Option<(u32, u32)>,
    child: Option<Child>,
}

impl MqttServer {
    /// A new broker, started and listening, that lets anyone in.
    pub fn start() -> MqttServer {
        Self::start_serving(false, true)
    }

    /// A new broker that lets in only [`USER`], with [`PASSWORD`].
    pub fn start_with_password() -> MqttServer {
        Self::start_serving(true, true)
    }

    /// A new broker, with [`USER`] and [`PASSWORD`], that saves its state only when it
    /// stops: for benchmarks, where a snapshot rewritten after every change (a cost
    /// that grows with what is queued) would be most of what is measured.
    pub fn start_saving_on_stop() -> MqttServer {
        Self::start_serving(true, false)
    }

    fn start_serving(password: bool, save_every_change: bool) -> MqttServer {
        let dir = tempfile::Builder::new().prefix("ferry-mqtt-").tempdir().expect("a temporary directory");
        let run_as = run_as(SERVER_USER, "scripts/setup-mosquitto");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("the broker's user owns its temporary directory");
        }
        let mut server = MqttServer { dir, port: 0, password, save_every_change, run_as, child: None };
        if password {
            server.write_password_file();
        }
        for _ in 0..PORT_TRIES {
            server.port = free_port();
            server.write_config();
            match server.spawn() {
                Ok(()) => return server,
                // Another process took the port between our look and the broker's bind.
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("mosquitto did not start; its log:\n{log}"),
            }
        }
        panic!("mosquitto found no free port in {PORT_TRIES} tries; its log:\n{}", server.log())
    }

    /// `passwords`, with [`USER`] and a hash of [`PASSWORD`], made by `mosquitto_passwd`
    /// as the broker's user, so that the broker can read it.
    fn write_password_file(&self) {
        let mut command = Command::new(on_path("mosquitto_passwd", SETUP));
        command.args(["-b", "-c"]).arg(self.password_path()).args([USER, PASSWORD]);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        let output = command.output().expect("mosquitto_passwd runs");
        assert!(output.status.success(), "mosquitto_passwd failed: {}", String::from_utf8_lossy(&output.stderr));
    }

    fn write_config(&self) {
        let dir = self.dir.path().display();
        let auth = if self.password {
            format!("allow_anonymous false\npassword_file {}\n", self.password_path().display())
        } else {
            "allow_anonymous true\n".to_string()
        };
        let saving = if self.save_every_change {
            "autosave_on_changes true\nautosave_interval 1\n"
        } else {
            "autosave_interval 0\n"
        };
        // One log type a line: mosquitto reads only the first word of a `log_type`.
        // `max_inflight_messages`: the QoS 1 messages sent to a client and not yet
        // acknowledged; a source acknowledges a batch only after it was committed, so
        // this bounds its batches (20 by default). `set_tcp_nodelay`: its answers (a
        // PUBACK, a ping's) go out at once, not after a delayed ACK of ~40 ms.
        let config = format!(
            "listener {port} 127.0.0.1\npersistence true\npersistence_location {dir}/\n{saving}\
             max_queued_messages 0\nmax_inflight_messages 1000\nset_tcp_nodelay true\n\
             log_dest file {log}\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n{auth}",
            port = self.port,
            log = self.log_path().display(),
        );
        fs::write(self.config_path(), config).expect("the broker's config");
    }

    /// Start `mosquitto` and wait until it says it is running, or return what it
    /// logged if it exits first.
    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "the broker is already running");
        let log_path = self.log_path();
        let from = fs::metadata(&log_path).map_or(0, |m| m.len());
        let mut command = Command::new(binary());
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
        self.child = Some(command.spawn().expect("mosquitto starts"));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let child = self.child.as_mut().expect("just started");
            if let Some(status) = child.try_wait().expect("the broker's status") {
                self.child = None;
                return Err(format!("mosquitto exited ({status}):\n{}", read_from(&log_path, from)));
            }
            // "mosquitto version 2.0.11 running", once it listens (after loading its snapshot).
            let log = read_from(&log_path, from);
            if log.lines().any(|line| line.contains("mosquitto version ") && line.ends_with(" running")) {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill_9();
                panic!("mosquitto was not running within {PATIENCE:?}; its log:\n{log}");
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

    /// The section that defines this broker in a ferry config, named `name`, its
    /// password (if any) read from the environment variable `password_env`.
    pub fn ferry_section(&self, name: &str, password_env: &str) -> String {
        let auth = if self.password {
            format!("user = \"{USER}\"\npassword = {{ env = \"{password_env}\" }}\n")
        } else {
            String::new()
        };
        format!("[mqtt.{name}]\nhost = \"127.0.0.1\"\nport = {}\n{auth}", self.port)
    }

    /// `kill -9` the broker. Returns once it is gone; what it changed since its last
    /// snapshot is lost.
    pub fn kill_9(&mut self) {
        kill_9(&mut self.child);
    }

    /// Stop the broker as an operator would (SIGTERM), and wait until it has saved its
    /// snapshot and exited.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // SAFETY: kill(2) on our own child's pid, which `wait` has not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let status = child.wait().expect("the stopped broker is reaped");
        assert!(status.success(), "mosquitto did not stop cleanly ({status}); its log:\n{}", self.log());
    }

    /// Start the broker again on the same directory and port, and wait until it runs
    /// (with the sessions and messages of its last snapshot).
    pub fn restart(&mut self) {
        if let Err(log) = self.spawn() {
            panic!("mosquitto did not start again on port {}; its log:\n{log}", self.port);
        }
    }

    /// Everything the broker logged, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("mosquitto.conf")
    }

    fn password_path(&self) -> PathBuf {
        self.dir.path().join("passwords")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("mosquitto.log")
    }
}

impl Drop for MqttServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("mosquitto's log (port {}):\n{}", self.port, self.log());
        }
        self.kill_9();
    }
}

/// Debian's broker is in /usr/sbin, which an unprivileged user's PATH may lack.
fn binary() -> PathBuf {
    let debian = Path::new("/usr/sbin/mosquitto");
    if debian.is_file() { debian.to_path_buf() } else { on_path("mosquitto", SETUP) }
}
