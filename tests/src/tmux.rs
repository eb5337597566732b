//! A terminal for a test: a tmux server of its own (on a socket of its own), running
//! one command in a detached session of a given size, so that the test can read the
//! screen (`capture-pane`), type keys (`send-keys`), and once the command exited read
//! its exit status and whether it left the terminal as it found it.
//!
//! `scripts/setup-tmux` installs tmux (`scripts/test` runs it). Without tmux a test
//! skips, saying so, unless `FERRY_TEST_IGGY_REQUIRED` is set (as `scripts/test` sets
//! it): then it fails, like every test whose tool the setup should have installed.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::harness::PATIENCE;

/// The session's name (a server of one's own has one session).
const SESSION: &str = "test";

/// A tmux server running one command; killed, with the command, when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Start `command` (a shell command line) in a `columns` × `rows` terminal, or
    /// `None` after saying why the test named `test` is skipped. The pane stays once
    /// the command exited, so that its exit status and last screen can be read.
    pub fn start(test: &str, command: &str, columns: u16, rows: u16) -> Option<Tmux> {
        if !Tmux::installed() {
            assert!(
                std::env::var_os("FERRY_TEST_IGGY_REQUIRED").is_none(),
                "{test}: tmux is not installed (scripts/setup-tmux installs it), and FERRY_TEST_IGGY_REQUIRED is set: \
                 the setup should have installed every tool the tests need"
            );
            eprintln!("\n*** SKIPPED {test}: it needs tmux (scripts/setup-tmux installs it). ***\n");
            return None;
        }
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let socket = format!("ferry-test-{}-{}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed));
        let tmux = Tmux { socket };
        let (columns, rows) = (columns.to_string(), rows.to_string());
        // No config file (`-f /dev/null`): the user's could change the keys or the size.
        // remain-on-exit is set in the same call, before the command can have exited.
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &columns,
            "-y",
            &rows,
            command,
            ";",
            "set-option",
            "-t",
            SESSION,
            "remain-on-exit",
            "on",
        ]);
        Some(tmux)
    }

    fn installed() -> bool {
        Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success())
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        // A test run inside tmux must not reach the tmux it runs in.
        command.env_remove("TMUX").args(["-L", &self.socket, "-f", "/dev/null"]);
        command
    }

    /// Run `tmux ARGS...` on this server, failing the test unless it succeeds; what it
    /// printed.
    pub fn run(&self, args: &[&str]) -> String {
        let Output { status, stdout, stderr } = self.command().args(args).output().expect("tmux runs");
        let stderr = String::from_utf8_lossy(&stderr);
        assert!(status.success(), "tmux {args:?} failed ({status}): {stderr}");
        String::from_utf8_lossy(&stdout).to_string()
    }

    /// What the terminal shows now, as text (no colours), a line per row.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", SESSION])
    }

    /// A tmux format (`#{pane_dead}`, `#{alternate_on}`...) of the pane, now.
    pub fn format(&self, format: &str) -> String {
        self.run(&["display-message", "-p", "-t", SESSION, format]).trim_end().to_string()
    }

    /// Type `keys` (tmux's names: `q`, `Escape`, `C-c`).
    pub fn send_keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", SESSION, keys]);
    }

    /// Read the screen until `done` holds for it, and hand it back; fails the test
    /// with the last screen, saying what was `awaited`, past the suite's patience.
    pub fn screen_until(&self, awaited: &str, mut done: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the terminal never showed {awaited}; it shows:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the command exited; its exit status (`#{pane_dead_status}`), if
    /// tmux recorded one. tmux marks the pane dead when its terminal closes and
    /// records the status when it reaps the process: under a loaded suite it was seen
    /// to mark the pane dead and never record the status, so `None` is "exited, how
    /// not known" (a test reads what the command printed for that). A process killed
    /// by a signal fails the test.
    pub fn exit_status(&self) -> Option<i32> {
        let deadline = Instant::now() + PATIENCE;
        let mut dead_since = None;
        loop {
            let ended = self.format("#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}");
            let mut parts = ended.split('|');
            let (dead, status, signal) = (parts.next(), parts.next(), parts.next());
            if dead == Some("1") {
                if let Some(status) = status.and_then(|s| s.parse().ok()) {
                    return Some(status);
                }
                if let Some(signal) = signal.filter(|s| !s.is_empty()) {
                    panic!("the command was killed by signal {signal}; the terminal shows:\n{}", self.screen());
                }
                let since = *dead_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(1) {
                    return None;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the command never exited ({ended}); the terminal shows:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}
