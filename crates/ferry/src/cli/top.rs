//! `ferry top CONFIG`: a live table of the connectors of the ferry running CONFIG,
//! with their rates, refreshed in place.
//!
//! The figures come from the HTTP API when the config has an enabled `[http]`
//! (`GET /stats`), else, or while the API cannot be reached or its key read, from
//! the status file the running ferry keeps written (what `ferry status` shows).
//! Rates are the difference between two readings over the time between them, so the
//! first screen has none.
//! On a terminal the table is drawn on the alternate screen (`terminal.rs`) and
//! redrawn every `--interval` until `q`, Esc or Ctrl-C; otherwise (or with
//! `--iterations`) top prints that many snapshots as text (`view.rs`) and exits.

mod api;
mod terminal;
mod view;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};

use self::api::{ApiClient, ApiError, Stats};
use self::terminal::Screen;
use self::view::View;
use super::status::{no_status_yet, process_state};
use ferry_config::Config;
use ferry_engine::status::{StatusFile, now_micros, read_status_file, status_file_path};

/// How long the status file may stay the same while its ferry runs before top takes
/// it that nothing moves: the file is rewritten within half a second of any change.
const QUIET_MICROS: u64 = 1_500_000;

/// The width lines are cut to when there is no terminal to tell (nor `COLUMNS`): a
/// trap's error holds its whole backtrace (`ferry status --json` shows it).
const UNKNOWN_WIDTH: usize = 200;

pub fn top(path: &Path, interval: Duration, iterations: Option<u64>) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let mut figures = Figures::new(&config, path)?;
    if iterations.is_none() && std::io::stdout().is_terminal() {
        let watched = live(&mut figures, interval);
        // Said once the terminal is back, rather than over the table.
        for notice in figures.notices.drain(..) {
            eprintln!("{notice}");
        }
        watched?;
    } else {
        // Piped without a count: one snapshot, as `ferry status` would print.
        snapshots(&mut figures, interval, iterations.unwrap_or(1))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// On a terminal: the table, redrawn every `interval` until a key stops it.
fn live(figures: &mut Figures, interval: Duration) -> Result<()> {
    // The first reading before the terminal is taken: a ferry that never ran is said
    // on the terminal as it is, with no screen flashing by.
    let mut reading = figures.read()?;
    let mut screen = Screen::open()?;
    let mut rates = Rates::default();
    loop {
        rates.observe(&reading, now_micros());
        let view = View::new(&reading, &rates, &figures.origin(), interval);
        screen.draw(&view)?;
        if screen.quit_within(interval, &view)? {
            return Ok(());
        }
        reading = figures.read()?;
    }
}

/// Piped: `iterations` snapshots as text, `interval` apart, separated by a blank line.
fn snapshots(figures: &mut Figures, interval: Duration, iterations: u64) -> Result<()> {
    let mut rates = Rates::default();
    let mut stdout = std::io::stdout().lock();
    for round in 0..iterations {
        if round > 0 {
            std::thread::sleep(interval);
        }
        let reading = figures.read();
        for notice in figures.notices.drain(..) {
            eprintln!("{notice}");
        }
        let reading = reading?;
        rates.observe(&reading, now_micros());
        let view = View::new(&reading, &rates, &figures.origin(), interval);
        if round > 0 {
            writeln!(stdout)?;
        }
        stdout.write_all(view.text(terminal::width().unwrap_or(UNKNOWN_WIDTH)).as_bytes())?;
        stdout.flush()?;
    }
    Ok(())
}

/// One connector's figures, read from either place.
#[derive(Debug, Clone, Default, PartialEq)]
struct Row {
    key: String,
    role: String,
    tenant: Option<String>,
    phase: String,
    restarts: u64,
    batches: u64,
    messages: u64,
    nacks: u64,
    traps: u64,
    dead_lettered: u64,
    last_error: Option<String>,
}

/// One look at the ferry.
#[derive(Debug, Clone, PartialEq)]
struct Reading {
    /// When the figures were true: the status file's time, or when the API answered.
    at_micros: u64,
    pid: u32,
    /// `running`, `stopped cleanly`, ...
    state: String,
    /// By key.
    rows: Vec<Row>,
}

impl Reading {
    fn from_file(status: StatusFile) -> Reading {
        let state = process_state(&status).to_string();
        let rows = status.connectors.into_iter().map(|c| Row {
            phase: c.phase.as_str().to_string(),
            restarts: c.instances.saturating_sub(1),
            batches: c.batches_acked,
            messages: c.messages_delivered,
            nacks: c.nacks,
            traps: c.traps,
            dead_lettered: c.dead_lettered,
            last_error: c.last_error,
            key: c.key,
            role: c.role,
            tenant: c.tenant,
        });
        Reading::new(status.updated_at_micros, status.pid, state, rows)
    }

    fn from_api(stats: Stats, at_micros: u64) -> Reading {
        let rows = stats.connectors.into_iter().map(|c| Row {
            messages: c.messages_sent.or(c.messages_processed).unwrap_or(0),
            phase: c.status,
            restarts: c.restarts,
            batches: c.batches,
            nacks: c.nacks,
            traps: c.traps,
            dead_lettered: c.dead_lettered,
            last_error: c.last_error,
            key: c.key,
            role: c.connector_type,
            tenant: c.tenant,
        });
        // It answered: it runs.
        Reading::new(at_micros, stats.process_id, "running".into(), rows)
    }

    fn new(at_micros: u64, pid: u32, state: String, rows: impl Iterator<Item = Row>) -> Reading {
        let mut rows: Vec<Row> = rows.collect();
        rows.sort_by(|a, b| a.key.cmp(&b.key));
        Reading { at_micros, pid, state, rows }
    }
}

/// Where the readings come from: the API while it answers, else the status file.
///
/// The API is asked again at every refresh after it failed, so a ferry restarted
/// (or an API that was down a moment) is read again as soon as it answers; each
/// change of source is said once (in [`Figures::notices`], for stderr), and the
/// header says why the status file is read. An API key that cannot be read (its variable unset, its file missing)
/// means top cannot use the API at all: it reads the status file, and says why.
struct Figures {
    api: Option<ApiClient>,
    file: PathBuf,
    config: PathBuf,
    /// Why the status file is read although the config has an API, while it is.
    api_lost: Option<String>,
    /// What to say on stderr about a change of source, not said yet: the caller says it
    /// when it can (on a terminal, once the table is gone).
    notices: Vec<String>,
}

impl Figures {
    fn new(config: &Config, path: &Path) -> Result<Figures> {
        let file = status_file_path(&config.state.path);
        let mut figures = Figures { api: None, file, config: path.to_path_buf(), api_lost: None, notices: Vec::new() };
        if let Some(http) = config.http.as_ref().filter(|http| http.enabled) {
            match ApiClient::new(http) {
                Ok(client) => figures.api = Some(client),
                Err(problem) => {
                    figures.notices.push(format!(
                        "ferry top: {}: cannot use the API: {problem}; reading the status file {} instead",
                        path.display(),
                        figures.file.display()
                    ));
                    figures.api_lost = Some(format!("cannot use the API: {problem}"));
                }
            }
        }
        Ok(figures)
    }

    fn read(&mut self) -> Result<Reading> {
        if let Some(client) = &self.api {
            match client.stats() {
                Ok(stats) => {
                    if self.api_lost.take().is_some() {
                        self.notices.push(format!("ferry top: the API at {} answers again; reading it", client.url));
                    }
                    return Ok(Reading::from_api(stats, now_micros()));
                }
                Err(ApiError::Unauthorized(problem)) => bail!("{}: {problem}", self.config.display()),
                Err(ApiError::Unavailable(problem)) => {
                    // Said once, when it goes; the header says it on every screen while
                    // it is gone.
                    if self.api_lost.is_none() {
                        self.notices.push(format!(
                            "ferry top: cannot read the API at {}: {problem}; reading the status file {} instead \
                             until it answers again",
                            client.url,
                            self.file.display()
                        ));
                    }
                    self.api_lost = Some(format!("the API at {} cannot be reached", client.url));
                }
            }
        }
        if !self.file.exists() {
            bail!("{}", no_status_yet(&self.config, &self.file));
        }
        let status = read_status_file(&self.file).map_err(|e| anyhow!(e))?;
        Ok(Reading::from_file(status))
    }

    /// Where the figures on screen come from, in words.
    fn origin(&self) -> String {
        match (&self.api, &self.api_lost) {
            (_, Some(lost)) => format!("from the status file {} ({lost})", self.file.display()),
            (Some(client), None) => format!("from the API at {}", client.url),
            (None, None) => format!("from the status file {}", self.file.display()),
        }
    }
}

/// A connector's rates, per second.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rate {
    messages: f64,
    batches: f64,
}

/// The rates between the last two readings that differ.
#[derive(Debug, Default)]
struct Rates {
    last: Option<Reading>,
    by_key: BTreeMap<String, Rate>,
}

impl Rates {
    /// Take in `reading`, made (or read) at `now_micros`.
    fn observe(&mut self, reading: &Reading, now_micros: u64) {
        match &self.last {
            Some(last) if last.pid != reading.pid => {
                // Another ferry: its counters started again from zero.
                self.by_key.clear();
            }
            Some(last) if last.at_micros == reading.at_micros => {
                // The status file was not rewritten since the last look. It is within
                // half a second of any change, so for a moment the rates stand; past
                // that, nothing has moved.
                if now_micros.saturating_sub(reading.at_micros) > QUIET_MICROS {
                    for rate in self.by_key.values_mut() {
                        *rate = Rate { messages: 0.0, batches: 0.0 };
                    }
                }
                return;
            }
            Some(last) => self.by_key = rates(last, reading),
            None => {}
        }
        self.last = Some(reading.clone());
    }

    fn of(&self, key: &str) -> Option<Rate> {
        self.by_key.get(key).copied()
    }
}

/// Each connector's rates from `before` to `after`: none for a connector that was not
/// in `before`, or whose counters went back (it is not the same one).
fn rates(before: &Reading, after: &Reading) -> BTreeMap<String, Rate> {
    let Some(micros) = after.at_micros.checked_sub(before.at_micros).filter(|&m| m > 0) else {
        return BTreeMap::new();
    };
    let seconds = micros as f64 / 1e6;
    let earlier: BTreeMap<&str, &Row> = before.rows.iter().map(|row| (row.key.as_str(), row)).collect();
    let mut rates = BTreeMap::new();
    for row in &after.rows {
        let Some(old) = earlier.get(row.key.as_str()) else { continue };
        let (Some(messages), Some(batches)) =
            (row.messages.checked_sub(old.messages), row.batches.checked_sub(old.batches))
        else {
            continue;
        };
        rates.insert(row.key.clone(), Rate { messages: messages as f64 / seconds, batches: batches as f64 / seconds });
    }
    rates
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use ferry_engine::status::ConnectorStatus;

    pub(super) fn row(key: &str, messages: u64, batches: u64) -> Row {
        Row { key: key.into(), role: "source".into(), phase: "running".into(), messages, batches, ..Row::default() }
    }

    pub(super) fn reading(at_micros: u64, rows: Vec<Row>) -> Reading {
        Reading { at_micros, pid: 7, state: "running".into(), rows }
    }

    #[test]
    fn rates_are_the_difference_over_the_time_between_readings() {
        let before = reading(1_000_000, vec![row("a", 100, 10), row("b", 5, 1)]);
        let after = reading(1_500_000, vec![row("a", 600, 20), row("b", 5, 1), row("new", 50, 5)]);
        let rates = rates(&before, &after);
        assert_eq!(rates["a"], Rate { messages: 1000.0, batches: 20.0 });
        assert_eq!(rates["b"], Rate { messages: 0.0, batches: 0.0 });
        assert!(!rates.contains_key("new"), "a connector seen once has no rate yet");
        let back = reading(2_000_000, vec![row("a", 10, 1)]);
        assert!(super::rates(&after, &back).is_empty(), "counters that went back are another connector's");
        assert!(super::rates(&after, &after).is_empty(), "no time between: no rate");
    }

    #[test]
    fn an_unchanged_status_file_keeps_the_rates_until_it_is_quiet_and_another_pid_resets_them() {
        let mut tracker = Rates::default();
        let first = reading(1_000_000, vec![row("a", 0, 0)]);
        tracker.observe(&first, 1_000_000);
        assert_eq!(tracker.of("a"), None, "the first look has no rate");
        let second = reading(2_000_000, vec![row("a", 100, 4)]);
        tracker.observe(&second, 2_000_000);
        assert_eq!(tracker.of("a"), Some(Rate { messages: 100.0, batches: 4.0 }));
        // The same file again, soon after: the rate stands.
        tracker.observe(&second, 2_400_000);
        assert_eq!(tracker.of("a"), Some(Rate { messages: 100.0, batches: 4.0 }));
        // Long after: nothing moved.
        tracker.observe(&second, 2_000_000 + QUIET_MICROS + 1);
        assert_eq!(tracker.of("a"), Some(Rate { messages: 0.0, batches: 0.0 }));
        // A rewrite computes from the last reading that differed.
        tracker.observe(&reading(4_000_000, vec![row("a", 300, 8)]), 4_000_000);
        assert_eq!(tracker.of("a"), Some(Rate { messages: 100.0, batches: 2.0 }));
        // Another ferry: no rate until it is seen twice.
        let restarted = Reading { pid: 8, ..reading(5_000_000, vec![row("a", 1, 1)]) };
        tracker.observe(&restarted, 5_000_000);
        assert_eq!(tracker.of("a"), None);
        tracker.observe(&Reading { pid: 8, ..reading(6_000_000, vec![row("a", 11, 2)]) }, 6_000_000);
        assert_eq!(tracker.of("a"), Some(Rate { messages: 10.0, batches: 1.0 }));
    }

    #[test]
    fn both_places_give_the_same_rows_sorted_by_key() {
        let stats: Stats = serde_json::from_value(serde_json::json!({
            "process_id": 9,
            "connectors": [
                { "key": "out", "connector_type": "sink", "tenant": "acme", "status": "idle", "batches": 2,
                  "messages_consumed": 50, "messages_processed": 40, "dead_lettered": 3, "restarts": 1 },
                { "key": "in", "connector_type": "source", "status": "not-started" },
            ],
        }))
        .unwrap();
        let from_api = Reading::from_api(stats, 5);
        assert_eq!((from_api.pid, from_api.state.as_str(), from_api.at_micros), (9, "running", 5));
        let keys: Vec<&str> = from_api.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["in", "out"]);
        let out = &from_api.rows[1];
        assert_eq!((out.role.as_str(), out.tenant.as_deref(), out.phase.as_str()), ("sink", Some("acme"), "idle"));
        assert_eq!((out.messages, out.dead_lettered, out.restarts, out.batches), (40, 3, 1, 2), "a sink's processed");

        let status = StatusFile {
            pid: 9,
            started_at_micros: 1,
            updated_at_micros: 6,
            stopped: true,
            connectors: vec![ConnectorStatus {
                key: "out".into(),
                role: "sink".into(),
                phase: ferry_engine::status::Phase::Failed,
                instances: 3,
                messages_delivered: 40,
                dead_lettered: 3,
                traps: 2,
                ..ConnectorStatus::default()
            }],
        };
        let from_file = Reading::from_file(status);
        assert_eq!((from_file.state.as_str(), from_file.at_micros), ("stopped cleanly", 6));
        let out = &from_file.rows[0];
        assert_eq!((out.phase.as_str(), out.restarts, out.messages, out.traps), ("failed", 2, 40, 2));
    }
}
