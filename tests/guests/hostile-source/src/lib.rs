//! A source that attacks its sandbox on purpose, for Ferry's sandbox tests.
//!
//! It produces `{"seq":N}` records like the faulty source (gap-free `seq` from its
//! cursor, `messages_per_batch` at a time, up to `max_count`), and after
//! `good_batches` good batches *of this instance* it does what `mode` says. Counting
//! per instance means every instance commits something before it misbehaves, and an
//! instance restarted at `max_count` has nothing to produce, so it never misbehaves:
//! a test sees the attack, the restart, and the committed state it must not lose.
//!
//! Modes, with the `plugin_config` keys each one reads:
//!
//! | mode                | keys             | what it does after the good batches               |
//! |---------------------|------------------|---------------------------------------------------|
//! | `spin`              |                  | loops forever inside `poll`                       |
//! | `allocate`          |                  | allocates 1 MiB blocks, keeping them, until it dies |
//! | `stack_overflow`    |                  | recurses without end                              |
//! | `sleep`             |                  | sleeps an hour, blocked in a WASI clock call      |
//! | `panic`             |                  | panics                                            |
//! | `too_many_messages` | `n`              | returns a batch of `n` messages, every poll       |
//! | `message_too_big`   | `bytes`          | returns a batch with one `bytes`-long message     |
//! | `batch_too_big`     | `n`, `bytes`     | returns `n` messages of `bytes` each              |
//! | `state_too_big`     | `bytes`          | returns a batch whose cursor is `bytes` long      |
//! | `flood`             | `lines`          | logs `lines` lines per poll, and keeps producing  |
//! | `many_headers`      | `n`              | returns one message with `n` distinct headers     |
//! | `repeated_key`      | `bytes`          | repeats a header key `bytes` long, with a newline |
//! | `far_future`        |                  | returns a message with origin-timestamp u64::MAX  |
//! | `error_text`        | `bytes`          | returns an error forging a log line, `bytes` long |
//!
//! Probe modes ignore `good_batches`: the first poll tries one thing the sandbox may
//! or may not grant and produces exactly one record,
//! `{"probe":"<mode>","ok":true|false,"detail":"..."}` (what was read, or the error),
//! with a cursor after which nothing more comes. They are `read_file` (`path`),
//! `write_file` (`path`, `contents`; then reads it back), `env` (`name`) and
//! `connect` (`address`, `ip:port`: sends `hello ferry` over TCP) and `http_get`
//! (`address`, `host:port`: GET `/probe` through `wasi:http`; the detail is the
//! status and body).

mod connect;
mod exhaust;
mod http;
mod malformed;
mod oversize;
mod probe;

use ferry_guest::{Batch, Error, Message, Source};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "five")]
    messages_per_batch: u64,
    #[serde(default)]
    max_count: Option<u64>,
    #[serde(default = "two")]
    good_batches: u64,
    #[serde(default)]
    mode: Option<Mode>,
    #[serde(default)]
    n: Option<u64>,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(default)]
    lines: Option<u64>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    contents: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    address: Option<String>,
}

fn five() -> u64 {
    5
}

fn two() -> u64 {
    2
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Spin,
    Allocate,
    StackOverflow,
    Sleep,
    Panic,
    TooManyMessages,
    MessageTooBig,
    BatchTooBig,
    StateTooBig,
    Flood,
    ManyHeaders,
    RepeatedKey,
    FarFuture,
    ErrorText,
    ReadFile,
    WriteFile,
    Env,
    Connect,
    HttpGet,
}

/// The cursor. `padding` is empty (and absent from the JSON) except in the batch of
/// `state_too_big`, which the host must refuse to commit.
#[derive(Serialize, Deserialize, Default)]
struct Cursor {
    next_seq: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    padding: String,
}

impl Cursor {
    fn at(next_seq: u64) -> Cursor {
        Cursor { next_seq, padding: String::new() }
    }
}

/// A mode after validation, with the parameters it needs.
enum Attack {
    None,
    Spin,
    Allocate,
    StackOverflow,
    Sleep,
    Panic,
    Oversize(oversize::Oversize),
    Flood { lines: u64 },
    Malformed(malformed::Malformed),
    Probe(probe::Probe),
}

struct HostileSource {
    messages_per_batch: u64,
    max_count: u64,
    good_batches: u64,
    attack: Attack,
    /// Good batches this instance has produced.
    produced: u64,
}

/// The value of a key `mode` needs, or an error naming both.
fn required<T>(value: Option<T>, key: &str, mode: Mode) -> Result<T, Error> {
    value.ok_or_else(|| Error::msg(format!("plugin_config.{key} is required by mode {mode:?}")))
}

impl Source for HostileSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        if config.messages_per_batch == 0 {
            return Err(Error::msg("plugin_config.messages_per_batch must be at least 1"));
        }
        let attack = match config.mode {
            None => Attack::None,
            Some(Mode::Spin) => Attack::Spin,
            Some(Mode::Allocate) => Attack::Allocate,
            Some(Mode::StackOverflow) => Attack::StackOverflow,
            Some(Mode::Sleep) => Attack::Sleep,
            Some(Mode::Panic) => Attack::Panic,
            Some(mode @ Mode::TooManyMessages) => {
                Attack::Oversize(oversize::Oversize::Messages { n: required(config.n, "n", mode)? })
            }
            Some(mode @ Mode::MessageTooBig) => {
                Attack::Oversize(oversize::Oversize::Message { bytes: required(config.bytes, "bytes", mode)? })
            }
            Some(mode @ Mode::BatchTooBig) => Attack::Oversize(oversize::Oversize::Batch {
                n: required(config.n, "n", mode)?,
                bytes: required(config.bytes, "bytes", mode)?,
            }),
            Some(mode @ Mode::StateTooBig) => {
                Attack::Oversize(oversize::Oversize::State { bytes: required(config.bytes, "bytes", mode)? })
            }
            Some(mode @ Mode::Flood) => Attack::Flood { lines: required(config.lines, "lines", mode)? },
            Some(mode @ Mode::ManyHeaders) => {
                Attack::Malformed(malformed::Malformed::ManyHeaders { n: required(config.n, "n", mode)? })
            }
            Some(mode @ Mode::RepeatedKey) => {
                Attack::Malformed(malformed::Malformed::RepeatedKey { bytes: required(config.bytes, "bytes", mode)? })
            }
            Some(Mode::FarFuture) => Attack::Malformed(malformed::Malformed::FarFuture),
            Some(mode @ Mode::ErrorText) => {
                Attack::Malformed(malformed::Malformed::ErrorText { bytes: required(config.bytes, "bytes", mode)? })
            }
            Some(mode @ Mode::ReadFile) => {
                Attack::Probe(probe::Probe::ReadFile { path: required(config.path, "path", mode)? })
            }
            Some(mode @ Mode::WriteFile) => Attack::Probe(probe::Probe::WriteFile {
                path: required(config.path, "path", mode)?,
                contents: required(config.contents, "contents", mode)?,
            }),
            Some(mode @ Mode::Env) => Attack::Probe(probe::Probe::Env { name: required(config.name, "name", mode)? }),
            Some(mode @ Mode::Connect) => {
                Attack::Probe(probe::Probe::Connect { address: required(config.address, "address", mode)? })
            }
            Some(mode @ Mode::HttpGet) => {
                Attack::Probe(probe::Probe::HttpGet { address: required(config.address, "address", mode)? })
            }
        };
        ferry_guest::info!("hostile source opened at seq {} in mode {:?}", cursor.next_seq, config.mode);
        Ok(HostileSource {
            messages_per_batch: config.messages_per_batch,
            max_count: config.max_count.unwrap_or(u64::MAX),
            good_batches: config.good_batches,
            attack,
            produced: 0,
        })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        if let Attack::Probe(probe) = &self.attack {
            // One record, then a cursor past it: a probe is tried once per connector.
            if cursor.next_seq > 0 {
                return Ok(None);
            }
            let record = probe.run();
            return Ok(Some(Batch::new(vec![Message::new(record)], Cursor::at(1))));
        }
        if self.produced >= self.good_batches {
            match &self.attack {
                Attack::None | Attack::Probe(_) => {}
                Attack::Spin => exhaust::spin(),
                Attack::Allocate => exhaust::allocate(),
                Attack::StackOverflow => exhaust::overflow_stack(),
                Attack::Sleep => exhaust::sleep(),
                Attack::Panic => panic!("hostile source: configured to panic"),
                Attack::Oversize(oversize) => {
                    return Ok(Some(oversize.batch(cursor.next_seq, self.messages_per_batch)));
                }
                Attack::Malformed(malformed) => return malformed.poll(cursor.next_seq).map(Some),
                Attack::Flood { lines } => {
                    for line in 0..*lines {
                        ferry_guest::info!("hostile source: flood line {line} of {lines}");
                    }
                }
            }
        }
        let end = self.max_count.min(cursor.next_seq.saturating_add(self.messages_per_batch));
        if end <= cursor.next_seq {
            return Ok(None);
        }
        self.produced += 1;
        let messages = (cursor.next_seq..end).map(|seq| Message::new(record(seq))).collect();
        Ok(Some(Batch::new(messages, Cursor::at(end))))
    }
}

/// A good record.
fn record(seq: u64) -> String {
    format!("{{\"seq\":{seq}}}")
}

ferry_guest::export_source!(HostileSource);
