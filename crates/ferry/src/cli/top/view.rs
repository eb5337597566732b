//! What one screen of `ferry top` shows: a header, the totals, and a row of cells per
//! connector, made once from a reading and its rates. Piped, it is printed as text
//! ([`View::text`]); on a terminal, drawn as a table (`terminal.rs`); both from the
//! same cells, so both show the same figures.

use std::time::Duration;

use super::{Rates, Reading, Row};
use ferry_engine::status::format_micros;

/// The columns, in order; the last error comes last, as wide as it is.
pub(super) const HEADINGS: [&str; COLUMNS + 1] = [
    "KEY",
    "ROLE",
    "TENANT",
    "PHASE",
    "MSGS/S",
    "BATCHES/S",
    "MESSAGES",
    "NACKS",
    "TRAPS",
    "RESTARTS",
    "DEAD",
    "LAST ERROR",
];

/// How many columns are aligned (all but the last error).
pub(super) const COLUMNS: usize = 11;

/// The least width of each aligned column, and whether it is a figure (aligned to the
/// right) rather than a word.
const LAYOUT: [(usize, bool); COLUMNS] = [
    (0, false),
    (6, false),
    (0, false),
    (11, false),
    (10, true),
    (9, true),
    (12, true),
    (7, true),
    (6, true),
    (8, true),
    (6, true),
];

/// One screen, in words.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct View {
    /// `ferry pid N: running; from ..., as of ... (every 1s)`.
    pub header: String,
    /// `N connectors, ...; X msgs/s; ...`.
    pub totals: String,
    /// A connector's cells, in the order of [`HEADINGS`], by key.
    pub rows: Vec<Cells>,
}

/// One connector's cells: its phase is `cells[PHASE]`.
pub(super) type Cells = [String; COLUMNS + 1];

/// Where a row's phase is.
pub(super) const PHASE: usize = 3;

impl View {
    /// The screen for `reading`, with `rates`, its figures read `origin` (in words),
    /// one every `interval`.
    pub fn new(reading: &Reading, rates: &Rates, origin: &str, interval: Duration) -> View {
        let header = format!(
            "ferry pid {}: {}; {origin}, as of {} (every {})",
            reading.pid,
            reading.state,
            format_micros(reading.at_micros),
            humantime::format_duration(interval)
        );
        let healthy = reading.rows.iter().filter(|r| r.phase == "running" || r.phase == "idle").count();
        let sum = |field: fn(&Row) -> u64| reading.rows.iter().map(field).sum::<u64>();
        let known: Vec<f64> = reading.rows.iter().filter_map(|r| rates.of(&r.key)).map(|r| r.messages).collect();
        let total_rate = (!known.is_empty()).then(|| known.iter().sum::<f64>());
        let totals = format!(
            "{} connectors, {healthy} running or idle; {} msgs/s; {} messages, {} NACKs, {} traps, {} dead-lettered",
            reading.rows.len(),
            per_second(total_rate),
            sum(|r| r.messages),
            sum(|r| r.nacks),
            sum(|r| r.traps),
            sum(|r| r.dead_lettered),
        );
        let rows = reading
            .rows
            .iter()
            .map(|row| {
                let rate = rates.of(&row.key);
                [
                    row.key.clone(),
                    row.role.clone(),
                    row.tenant.clone().unwrap_or_else(|| "-".into()),
                    row.phase.clone(),
                    per_second(rate.map(|r| r.messages)),
                    per_second(rate.map(|r| r.batches)),
                    row.messages.to_string(),
                    row.nacks.to_string(),
                    row.traps.to_string(),
                    row.restarts.to_string(),
                    row.dead_lettered.to_string(),
                    one_line(row.last_error.as_deref().unwrap_or("")),
                ]
            })
            .collect();
        View { header, totals, rows }
    }

    /// The width of each aligned column: its least, or its heading's, or its widest
    /// cell's.
    pub fn widths(&self) -> [usize; COLUMNS] {
        std::array::from_fn(|column| {
            let cells = self.rows.iter().map(|cells| cells[column].chars().count());
            cells.chain([HEADINGS[column].len(), LAYOUT[column].0]).max().unwrap_or(0)
        })
    }

    /// Whether column `column` holds figures (aligned to the right).
    pub fn is_figure(column: usize) -> bool {
        LAYOUT.get(column).is_some_and(|&(_, figure)| figure)
    }

    /// The screen as lines of text, each cut to `width` characters: the header, the
    /// totals, the headings and a line per connector, the columns separated by a space
    /// and the last error by two.
    pub fn text(&self, width: usize) -> String {
        let widths = self.widths();
        let line = |cells: &[&str]| {
            let mut line = String::new();
            for (column, cell) in cells[..COLUMNS].iter().enumerate() {
                if column > 0 {
                    line.push(' ');
                }
                let width = widths[column];
                if View::is_figure(column) {
                    line.push_str(&format!("{cell:>width$}"));
                } else {
                    line.push_str(&format!("{cell:<width$}"));
                }
            }
            format!("{line}  {}", cells[COLUMNS])
        };
        let mut lines = vec![self.header.clone(), self.totals.clone(), line(&HEADINGS)];
        for cells in &self.rows {
            lines.push(line(&cells.each_ref().map(String::as_str)));
        }
        let mut screen = String::new();
        for line in lines {
            screen.push_str(&truncate(&line, width));
            screen.push('\n');
        }
        screen
    }
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
    use crate::cli::top::tests::{reading, row};

    const WIDE: usize = 200;

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
        let first = reading(1_000_000, vec![row("feed", 100, 10), failing.clone()]);
        tracker.observe(&first, 1_000_000);
        let first = View::new(&first, &tracker, "from the status file s", Duration::from_millis(500)).text(WIDE);
        let lines: Vec<&str> = first.lines().collect();
        assert!(lines[0].starts_with("ferry pid 7: running; from the status file s, as of "), "{first}");
        assert!(lines[0].ends_with("(every 500ms)"), "{first}");
        assert_eq!(
            lines[1],
            "2 connectors, 1 running or idle; - msgs/s; 110 messages, 0 NACKs, 3 traps, 0 dead-lettered"
        );
        // Exactly as `ferry top` has always printed it: scripts read these columns.
        assert_eq!(
            lines[2],
            "KEY     ROLE   TENANT PHASE           MSGS/S BATCHES/S     MESSAGES   NACKS  TRAPS RESTARTS   DEAD  \
             LAST ERROR"
        );
        assert_eq!(
            lines[3],
            "feed    source -      running              -         -          100       0      0        0      0  "
        );
        let columns = |line: &str| line.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(columns(lines[4])[..11], ["trapper", "source", "-", "failed", "-", "-", "10", "0", "3", "2", "0"]);
        assert!(lines[4].ends_with("the guest trapped in `poll`: unreachable backtrace"), "{first}");

        let later = reading(3_000_000, vec![row("feed", 300, 14), failing]);
        tracker.observe(&later, 3_000_000);
        let view = View::new(&later, &tracker, "from the API at http://x", Duration::from_secs(1));
        let second = view.text(60);
        let lines: Vec<&str> = second.lines().collect();
        assert!(lines[1].contains("; 100.0 msgs/s; 310 messages"), "{second}");
        assert_eq!(columns(lines[3])[4..6], ["100.0", "2.0"]);
        assert_eq!(columns(lines[4])[4..6], ["0.0", "0.0"]);
        assert!(lines.iter().all(|l| l.chars().count() <= 60), "every line fits the width:\n{second}");
        assert!(lines[4].ends_with('…'), "the error is cut: {second}");
        assert_eq!(view.rows[1][PHASE], "failed");
        assert_eq!(view.widths(), [7, 6, 6, 11, 10, 9, 12, 7, 6, 8, 6]);
    }
}
