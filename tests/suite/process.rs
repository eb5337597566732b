//! `ferry` as a child process: start it, read its log as it runs, signal it, kill it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub use ferry_tests::harness::PATIENCE;

pub fn ferry_binary() -> &'static str {
    env!("CARGO_BIN_EXE_ferry")
}

/// Run `ferry ARGS...` to completion.
pub fn ferry(args: &[&str]) -> Output {
    Command::new(ferry_binary()).args(args).output().expect("ferry runs")
}

/// A running `ferry run CONFIG`.
pub struct Ferry {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Ferry {
    /// Start `ferry run config` with extra environment variables.
    pub fn start(config: &Path, env: &[(&str, &str)]) -> Ferry {
        Ferry::start_with(config, env, |_| {})
    }

    /// [`Ferry::start`], the command changed by `adjust` before it is spawned.
    pub fn start_with(config: &Path, env: &[(&str, &str)], adjust: impl FnOnce(&mut Command)) -> Ferry {
        let mut command = Command::new(ferry_binary());
        command.arg("run").arg(config).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        adjust(&mut command);
        let mut child = command.spawn().expect("ferry starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, lines) = mpsc::channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep.lock().unwrap().push(line.clone());
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ferry { child, lines, seen }
    }

    /// The first line from now on containing every one of `needles`.
    pub fn wait_for_line(&mut self, needles: &[&str]) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if needles.iter().all(|n| line.contains(n)) => return line,
                Ok(_) => {}
                Err(_) => panic!("ferry never logged a line with {needles:?}; its log:\n{}", self.log()),
            }
        }
    }

    /// Wait (checking again every 100 ms, up to [`PATIENCE`]) until `done` holds,
    /// showing ferry's log if it never does.
    pub fn until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done() {
            assert!(Instant::now() < deadline, "{what} never happened; ferry's log:\n{}", self.log());
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// The first line ferry logged, since it started, containing every one of
    /// `needles` (waiting for it if there is none yet).
    pub fn wait_until_logged(&mut self, needles: &[&str]) -> String {
        let matches = |line: &String| needles.iter().all(|n| line.contains(n));
        if let Some(line) = self.seen.lock().unwrap().iter().find(|l| matches(l)) {
            return line.clone();
        }
        self.wait_for_line(needles)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything ferry logged so far.
    pub fn log(&self) -> String {
        self.seen.lock().unwrap().join("\n")
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal).expect("the signal is delivered");
    }

    /// `kill -9`, and reap it.
    pub fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `kill -9` at a moment drawn from `rng`: one time in five during start-up
    /// (compiling, opening the state), the others up to 300 ms after ferry logged a
    /// line with every one of `running`, anywhere in the flow. The pause is the
    /// moment itself, not a wait for something.
    pub fn kill_9_at_a_random_moment(&mut self, rng: &mut fastrand::Rng, running: &[&str]) {
        if rng.u8(0..5) > 0 {
            self.wait_for_line(running);
        }
        std::thread::sleep(std::time::Duration::from_millis(rng.u64(0..300)));
        self.kill_9();
    }

    /// Wait for ferry to exit: its stderr closes when it does.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return self.child.wait().expect("reaping works"),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("ferry did not exit; its log:\n{}", self.log());
                }
            }
        }
    }
}

impl Drop for Ferry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory with a config file in it.
pub struct Site {
    pub dir: tempfile::TempDir,
}

impl Site {
    pub fn new() -> Site {
        Site { dir: tempfile::tempdir().expect("a temporary directory") }
    }

    /// Write `ferry.toml` (or another name) and return its path.
    pub fn config(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("writing the config");
        path
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub fn states(&self) -> ferry::store::state::StateDir {
        ferry::store::state::StateDir::new(self.path("state"))
    }

    pub fn log_dir(&self) -> PathBuf {
        self.path("log")
    }
}

/// How many times a crash test kills ferry (`FERRY_CRASH_ROUNDS`, default 20), and the
/// generator of the moments, seeded from `FERRY_CRASH_SEED` or at random; both are
/// printed, so that a failing run can be repeated.
pub fn crash_plan(test: &str) -> (u32, fastrand::Rng) {
    let rounds: u32 = std::env::var("FERRY_CRASH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(20);
    let seed: u64 =
        std::env::var("FERRY_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| fastrand::u64(..));
    eprintln!("{test}: {rounds} rounds, FERRY_CRASH_SEED={seed}");
    (rounds, fastrand::Rng::with_seed(seed))
}

/// A config with one random source `key` delivering to `demo/<key>`.
pub fn random_source_config(key: &str, plugin_config: &str) -> String {
    format!(
        r#"
[runtime]
shutdown_grace_period = "20s"

[state]
path = "state"

[local_log]
path = "log"

[[sources]]
key = "{key}"
path = "{component}"
poll_interval = "2ms"

[[sources.streams]]
stream = "demo"
topic = "{key}"

[sources.plugin_config]
{plugin_config}
"#,
        component = ferry_tests::components::RANDOM_SOURCE
    )
}

/// A `[[sinks]]` table: the file sink `key` reading `demo/feed` (what
/// `random_source_config("feed", ..)` delivers to), with `settings` (TOML keys of the
/// table, such as `batch_length = 7`), writing in the directory `<key>-out` next to
/// the config (which must exist), granted as `/out`, with `plugin_config` added to
/// its `plugin_config`.
pub fn file_sink_table(key: &str, settings: &str, plugin_config: &str) -> String {
    format!(
        r#"
[[sinks]]
key = "{key}"
path = "{component}"
poll_interval = "2ms"
{settings}

[[sinks.streams]]
stream = "demo"
topics = ["feed"]

[sinks.grants]
dirs = [{{ host = "{key}-out", guest = "/out", writable = true }}]

[sinks.plugin_config]
directory = "/out"
{plugin_config}
"#,
        component = ferry_tests::components::FILE_SINK
    )
}
