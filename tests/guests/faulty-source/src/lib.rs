//! A source that misbehaves on purpose, for Ferry's isolation and restart tests.
//!
//! It produces `{"seq":N}` records like the random source (gap-free `seq` from its
//! cursor), and, per instance, can be told to:
//!
//! * `trap_on_poll = K`: panic (a trap) on its K-th poll;
//! * `fail_from_poll = K`: return an error from its K-th poll on;
//! * `fail_open = true`: refuse to open;
//! * `open_error = "..."`: refuse to open with this message (a test hands it as a
//!   secret, to see that a guest repeating its secret cannot leak it through the
//!   host's API);
//! * `open_when_exists = "/gate/open"`: refuse to open until this file exists (in a
//!   granted directory), so that a test decides when the connector starts running;
//! * `echo = "..."`: repeat this text (a test hands it as a secret) into every
//!   channel the host shows guest text in: log lines at open (whole, split across two
//!   lines, in upper case, and on standard error), and the message of a trap
//!   (`trap_on_poll`) or of an error (`fail_from_poll`);
//! * `ignore_cursor_on_open = true`: start every instance at `seq` 0 whatever cursor
//!   it was opened with, keeping its own position from there (moved on by ACKs, so
//!   NACKs are still replayed): it breaks rule 4 of the contract and nothing else;
//! * `advance_on_nack = true`: after a NACK, skip the NACKed records and produce the
//!   ones after them, instead of the same records again: it breaks rule 3.
//!
//! Counting is per instance, so a restarted instance makes progress again before
//! misbehaving: a test sees traps *and* every record delivered. `ferry test` is
//! tested against the last two switches.

use ferry_guest::{Batch, Error, Message, Nack, Source};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "five")]
    messages_per_batch: u64,
    max_count: u64,
    #[serde(default)]
    trap_on_poll: Option<u64>,
    #[serde(default)]
    fail_from_poll: Option<u64>,
    #[serde(default)]
    fail_open: bool,
    #[serde(default)]
    open_error: Option<String>,
    #[serde(default)]
    open_when_exists: Option<String>,
    #[serde(default)]
    echo: Option<String>,
    #[serde(default)]
    ignore_cursor_on_open: bool,
    #[serde(default)]
    advance_on_nack: bool,
}

fn five() -> u64 {
    5
}

#[derive(Serialize, Deserialize, Default)]
struct Cursor {
    next_seq: u64,
}

struct FaultySource {
    config: Config,
    polls: u64,
    /// With `ignore_cursor_on_open`: where this instance thinks it is.
    own_seq: Option<u64>,
    /// With `advance_on_nack`: records skipped past the committed cursor.
    skipped: u64,
}

impl FaultySource {
    /// `echo`, to append to a message.
    fn echo(&self) -> String {
        self.config.echo.as_ref().map(|echo| format!(": {echo}")).unwrap_or_default()
    }
}

impl Source for FaultySource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        if config.fail_open {
            return Err(Error::msg("configured to refuse to open"));
        }
        if let Some(message) = &config.open_error {
            return Err(Error::msg(format!("configured to refuse to open: {message}")));
        }
        if let Some(gate) = &config.open_when_exists
            && std::fs::metadata(gate).is_err()
        {
            return Err(Error::msg(format!("configured to wait for {gate} before opening")));
        }
        ferry_guest::info!("faulty source opened at seq {}", cursor.next_seq);
        if let Some(echo) = &config.echo {
            let half = echo.char_indices().nth(echo.chars().count() / 2).map_or(0, |(at, _)| at);
            ferry_guest::info!("echo: {echo}");
            ferry_guest::warn!("echo, split across lines: {}", &echo[..half]);
            ferry_guest::warn!("{} <- the rest", &echo[half..]);
            ferry_guest::info!("echo, louder: {}", echo.to_uppercase());
            eprintln!("echo on stderr: {echo}");
        }
        let own_seq = config.ignore_cursor_on_open.then_some(0);
        Ok(FaultySource { config, polls: 0, own_seq, skipped: 0 })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        self.polls += 1;
        if self.config.trap_on_poll == Some(self.polls) {
            panic!("faulty source: configured to trap on poll {}{}", self.polls, self.echo());
        }
        if self.config.fail_from_poll.is_some_and(|k| self.polls >= k) {
            return Err(Error::msg(format!("configured to fail from poll {}{}", self.polls, self.echo())));
        }
        let start = self.own_seq.unwrap_or(cursor.next_seq) + self.skipped;
        let end = self.config.max_count.min(start + self.config.messages_per_batch);
        if end <= start {
            return Ok(None);
        }
        let messages = (start..end).map(|seq| Message::new(format!("{{\"seq\":{seq}}}"))).collect();
        Ok(Some(Batch::new(messages, Cursor { next_seq: end })))
    }

    fn on_ack(&mut self, committed: &Cursor) {
        if let Some(own) = &mut self.own_seq {
            *own = committed.next_seq;
        }
        self.skipped = 0;
    }

    fn on_nack(&mut self, _nack: &Nack) {
        if self.config.advance_on_nack {
            self.skipped += self.config.messages_per_batch;
        }
    }
}

ferry_guest::export_source!(FaultySource);
