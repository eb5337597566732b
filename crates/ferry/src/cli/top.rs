//! `ferry top CONFIG`: a live table of the connectors of the ferry running CONFIG,
//! with their rates, refreshed in place.
//!
//! The figures come from the HTTP API when the config has an enabled `[http]`
//! (`GET /stats`), else, or while the API cannot be reached or its key read, from
//! the status file the running ferry keeps written (what `ferry status` shows). Rates are the difference
//! between two readings over the time between them, so the first screen has none.
//! On a terminal the table is redrawn every `--interval` until `q` or Ctrl-C;
//! otherwise (or with `--iterations`) top prints that many snapshots and exits.

mod api;
mod terminal;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};

use self::api::{ApiClient, ApiError, Stats};
use super::status::{no_status_yet, process_state};
use ferry_config::Config;
use ferry_engine::status::{StatusFile, format_micros, now_micros, read_status_file, status_file_path};

/// How long the status file may stay the same while its ferry runs before top takes
/// it that nothing moves: the file is rewritten within half a second of any change.
const QUIET_MICROS: u64 = 1_500_000;

/// The width lines are cut to when there is no terminal to tell (nor `COLUMNS`): a
/// trap's error holds its whole backtrace (`ferry status --json` shows it).
const UNKNOWN_WIDTH: usize = 200;

pub fn top(path: &Path, interval: Duration, iterations: Option<u64>) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let mut figures = Figures::new(&config, path)?;
    let live = iterations.is_none() && std::io::stdout().is_terminal();
    // Piped without a count: one snapshot, as `ferry status` would print.
    let iterations = if live { u64::MAX } else { iterations.unwrap_or(1) };
    let keys = live.then(terminal::Keys::new);
    let mut rates = Rates::default();
    let mut stdout = std::io::stdout().lock();
    for round in 0..iterations {
        if round > 0 {
            match &keys {
                Some(keys) if keys.quit_within(interval) => break,
                Some(_) => {}
                None => std::thread::sleep(interval),
            }
        }
        let reading = figures.read()?;
        rates.observe(&reading, now_micros());
        let width = terminal::width().unwrap_or(UNKNOWN_WIDTH);
        let screen = render(&reading, &rates, &figures.origin(), interval, width);
        if live {
            stdout.write_all(terminal::redraw(&screen, round == 0).as_bytes())?;
        } else {
            if round > 0 {
                writeln!(stdout)?;
            }
            stdout.write_all(screen.as_bytes())?;
        }
        stdout.flush()?;
    }
    Ok(ExitCode::SUCCESS)
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
/// change of source is said once on stderr, and the header says why the status file
/// is read. An API key that cannot be read (its variable unset, its file missing)
/// means top cannot use the API at all: it reads the status file, and says why.
struct Figures {
    api: Option<ApiClient>,
    file: PathBuf,
    config: PathBuf,
    /// Why the status file is read although the config has an API, while it is.
    api_lost: Option<String>,
}

impl Figures {
    fn new(config: &Config, path: &Path) -> Result<Figures> {
        let file = status_file_path(&config.state.path);
        let mut figures = Figures { api: None, file, config: path.to_path_buf(), api_lost: None };
        if let Some(http) = config.http.as_ref().filter(|http| http.enabled) {
            match ApiClient::new(http) {
                Ok(client) => figures.api = Some(client),
                Err(problem) => {
                    eprintln!(
                        "ferry top: {}: cannot use the API: {problem}; reading the status file {} instead",
                        path.display(),
                        figures.file.display()
                    );
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
                        eprintln!("ferry top: the API at {} answers again; reading it", client.url);
                    }
                    return Ok(Reading::from_api(stats, now_micros()));
                }
                Err(ApiError::Unauthorized(problem)) => bail!("{}: {problem}", self.config.display()),
                Err(ApiError::Unavailable(problem)) => {
                    // Said once, when it goes; the header says it on every screen while
                    // it is gone.
                    if self.api_lost.is_none() {
                        eprintln!(
                            "ferry top: cannot read the API at {}: {problem}; reading the status file {} instead \
                             until it answers again",
                            client.url,
                            self.file.display()
                        );
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

/// The screen for `reading`: a header, the totals, and one line per connector, each
/// cut to `width` characters.
fn render(reading: &Reading, rates: &Rates, origin: &str, interval: Duration, width: usize) -> String {
    let mut lines = vec![format!(
        "ferry pid {}: {}; {origin}, as of {} (every {})",
        reading.pid,
        reading.state,
        format_micros(reading.at_micros),
        humantime::format_duration(interval)
    )];
    let healthy = reading.rows.iter().filter(|r| r.phase == "running" || r.phase == "idle").count();
    let sum = |field: fn(&Row) -> u64| reading.rows.iter().map(field).sum::<u64>();
    let known: Vec<Rate> = reading.rows.iter().filter_map(|r| rates.of(&r.key)).collect();
    let total_rate = (!known.is_empty()).then(|| known.iter().map(|r| r.messages).sum::<f64>());
    lines.push(format!(
        "{} connectors, {healthy} running or idle; {} msgs/s; {} messages, {} NACKs, {} traps, {} dead-lettered",
        reading.rows.len(),
        per_second(total_rate),
        sum(|r| r.messages),
        sum(|r| r.nacks),
        sum(|r| r.traps),
        sum(|r| r.dead_lettered),
    ));
    let key_width = column_width("KEY", reading.rows.iter().map(|r| r.key.as_str()));
    let tenant_width = column_width("TENANT", reading.rows.iter().map(|r| r.tenant.as_deref().unwrap_or("-")));
    lines.push(format!(
        "{:<key_width$} {:<6} {:<tenant_width$} {:<11} {:>10} {:>9} {:>12} {:>7} {:>6} {:>8} {:>6}  LAST ERROR",
        "KEY", "ROLE", "TENANT", "PHASE", "MSGS/S", "BATCHES/S", "MESSAGES", "NACKS", "TRAPS", "RESTARTS", "DEAD"
    ));
    for row in &reading.rows {
        let rate = rates.of(&row.key);
        lines.push(format!(
            "{:<key_width$} {:<6} {:<tenant_width$} {:<11} {:>10} {:>9} {:>12} {:>7} {:>6} {:>8} {:>6}  {}",
            row.key,
            row.role,
            row.tenant.as_deref().unwrap_or("-"),
            row.phase,
            per_second(rate.map(|r| r.messages)),
            per_second(rate.map(|r| r.batches)),
            row.messages,
            row.nacks,
            row.traps,
            row.restarts,
            row.dead_lettered,
            one_line(row.last_error.as_deref().unwrap_or("")),
        ));
    }
    let mut screen = String::new();
    for line in lines {
        screen.push_str(&truncate(&line, width));
        screen.push('\n');
    }
    screen
}

/// The width of a column headed `title` holding `values`.
fn column_width<'a>(title: &str, values: impl Iterator<Item = &'a str>) -> usize {
    values.map(|v| v.chars().count()).chain([title.len()]).max().unwrap_or(0)
}

/// A rate, or `-` before there is one.
fn per_second(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_string(), |r| format!("{r:.1}"))
}

/// `text` on one line: an error may hold line breaks.
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// `line` cut to `width` characters, ending in `…` when something was cut.
fn truncate(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_engine::status::ConnectorStatus;

    fn row(key: &str, messages: u64, batches: u64) -> Row {
        Row { key: key.into(), role: "source".into(), phase: "running".into(), messages, batches, ..Row::default() }
    }

    fn reading(at_micros: u64, rows: Vec<Row>) -> Reading {
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

    #[test]
    fn lines_are_cut_to_the_width_by_characters() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("exactly10!", 10), "exactly10!");
        assert_eq!(truncate("a line that is too long", 10), "a line th…");
        assert_eq!(truncate("ééééé", 3), "éé…", "cut between characters, not bytes");
        assert_eq!(one_line("trapped:\nwasm backtrace\tat 0"), "trapped: wasm backtrace at 0");
    }

    #[test]
    fn the_table_shows_each_connector_its_rates_and_the_totals() {
        let mut failing = row("trapper", 10, 2);
        failing.phase = "failed".into();
        failing.traps = 3;
        failing.restarts = 2;
        failing.last_error = Some("the guest trapped in `poll`: unreachable\nbacktrace".into());
        let mut tracker = Rates::default();
        tracker.observe(&reading(1_000_000, vec![row("feed", 100, 10), failing.clone()]), 1_000_000);
        let first = render(
            &reading(1_000_000, vec![row("feed", 100, 10), failing.clone()]),
            &tracker,
            "from the status file s",
            Duration::from_millis(500),
            UNKNOWN_WIDTH,
        );
        let lines: Vec<&str> = first.lines().collect();
        assert!(lines[0].starts_with("ferry pid 7: running; from the status file s, as of "), "{first}");
        assert!(lines[0].ends_with("(every 500ms)"), "{first}");
        assert_eq!(
            lines[1],
            "2 connectors, 1 running or idle; - msgs/s; 110 messages, 0 NACKs, 3 traps, 0 dead-lettered"
        );
        let columns = |line: &str| line.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(columns(lines[2])[..5], ["KEY", "ROLE", "TENANT", "PHASE", "MSGS/S"]);
        assert_eq!(columns(lines[3]), ["feed", "source", "-", "running", "-", "-", "100", "0", "0", "0", "0"]);
        assert_eq!(columns(lines[4])[..11], ["trapper", "source", "-", "failed", "-", "-", "10", "0", "3", "2", "0"]);
        assert!(lines[4].ends_with("the guest trapped in `poll`: unreachable backtrace"), "{first}");

        let later = reading(3_000_000, vec![row("feed", 300, 14), failing]);
        tracker.observe(&later, 3_000_000);
        let second = render(&later, &tracker, "from the API at http://x", Duration::from_secs(1), 60);
        let lines: Vec<&str> = second.lines().collect();
        assert!(lines[1].contains("; 100.0 msgs/s; 310 messages"), "{second}");
        assert_eq!(columns(lines[3])[4..6], ["100.0", "2.0"]);
        assert_eq!(columns(lines[4])[4..6], ["0.0", "0.0"]);
        assert!(lines.iter().all(|l| l.chars().count() <= 60), "every line fits the width:\n{second}");
        assert!(lines[4].ends_with('…'), "the error is cut: {second}");
    }
}
