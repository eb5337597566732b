//! The terminal `ferry top` draws on while it runs live: taken in raw mode on the
//! alternate screen, the table drawn with ratatui, and the keys that stop it (`q`,
//! Esc, Ctrl-C) read as they are typed.
//!
//! Snapshots printed on a terminal (`--iterations`) are cut to its [`width`].
//!
//! [`Screen`] puts the terminal back as it was (line mode, the screen it had, the
//! cursor) when it is dropped: when top stops, on an error, and on a panic (whose
//! message is then printed on the restored screen, not lost on the alternate one).

use std::io::{IsTerminal as _, Stdout, Write as _};
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Alignment, Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::view::{COLUMNS, HEADINGS, PHASE, View};

/// What the bottom line says.
const HELP: &str = "q, Esc or Ctrl-C: quit";

/// The terminal, while top draws on it.
pub(super) struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    /// Dropped after `terminal` (fields drop in order): puts the terminal back.
    _restore: Restore,
}

impl Screen {
    /// Take the terminal: keys one at a time, unechoed, Ctrl-C as a key rather than a
    /// signal; the alternate screen, without the cursor.
    pub fn open() -> Result<Screen> {
        restore_on_panic();
        terminal::enable_raw_mode().context(
            "cannot switch the terminal to raw mode (use --once or --iterations N to print snapshots instead)",
        )?;
        // From here on, whatever fails, dropping the guard puts the terminal back.
        let restore = Restore;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
            .context("cannot switch the terminal to its alternate screen")?;
        let terminal =
            Terminal::new(CrosstermBackend::new(std::io::stdout())).context("cannot draw on the terminal")?;
        Ok(Screen { terminal, _restore: restore })
    }

    /// Draw `view`, fitted to the terminal's size now.
    pub fn draw(&mut self, view: &View) -> Result<()> {
        self.terminal
            .draw(|frame| {
                let [header, totals, _, table, help] = Layout::vertical([
                    Constraint::Length(1),
                    Constraint::Length(1),
                    Constraint::Length(1),
                    Constraint::Fill(1),
                    Constraint::Length(1),
                ])
                .areas(frame.area());
                frame.render_widget(Paragraph::new(view.header.as_str()), header);
                frame.render_widget(Paragraph::new(view.totals.as_str()), totals);
                frame.render_widget(self::table(view), table);
                frame.render_widget(Paragraph::new(HELP).style(Style::new().add_modifier(Modifier::DIM)), help);
            })
            .context("cannot draw on the terminal")?;
        Ok(())
    }

    /// Wait `interval`, or less if a key asks to quit; whether one did. The terminal
    /// resized meanwhile, `view` is drawn again at once to its new size.
    pub fn quit_within(&mut self, interval: Duration, view: &View) -> Result<bool> {
        let deadline = Instant::now() + interval;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !event::poll(left).context("cannot read the keys typed")? {
                return Ok(false);
            }
            match event::read().context("cannot read the keys typed")? {
                Event::Key(key) if quits(key) => return Ok(true),
                Event::Resize(..) => self.draw(view)?,
                _ => {}
            }
        }
    }
}

/// Puts the terminal back when dropped: line mode, the main screen, the cursor.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}

/// Put the terminal back. Each step is tried whatever became of the last: there is
/// nothing better to do with a terminal that cannot be restored.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let mut stdout = std::io::stdout();
    let _ = execute!(stdout, terminal::LeaveAlternateScreen, cursor::Show);
    let _ = stdout.flush();
}

/// On a panic, put the terminal back before the message is printed (the guard's drop
/// comes only after, while the stack unwinds). Restoring a terminal that was never
/// taken changes nothing.
fn restore_on_panic() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// The width of the terminal standard output is, if it is one (else `COLUMNS`): what
/// the snapshots printed with `--iterations` are cut to.
pub(super) fn width() -> Option<usize> {
    if std::io::stdout().is_terminal()
        && let Ok((columns, _)) = terminal::size()
        && columns > 0
    {
        return Some(usize::from(columns));
    }
    std::env::var("COLUMNS").ok()?.parse().ok().filter(|&w| w > 0)
}

/// Whether `key` asks top to stop: `q`, Esc, or Ctrl-C.
fn quits(key: KeyEvent) -> bool {
    if key.kind == KeyEventKind::Release {
        return false;
    }
    match key.code {
        KeyCode::Char('q' | 'Q') | KeyCode::Esc => true,
        KeyCode::Char('c') => key.modifiers.contains(KeyModifiers::CONTROL),
        _ => false,
    }
}

/// The connectors' table of `view`: the columns as wide as [`View::widths`], figures
/// to the right, phases coloured, the last error in what width is left.
fn table(view: &View) -> Table<'_> {
    let cell = |column: usize, text: &str| {
        // The last error is two spaces from DEAD, as in the text printed.
        let line = Line::from(if column == COLUMNS { format!(" {text}") } else { text.to_string() });
        let line = if View::is_figure(column) { line.alignment(Alignment::Right) } else { line };
        Cell::from(Text::from(line))
    };
    let header = Row::new(HEADINGS.iter().enumerate().map(|(column, heading)| cell(column, heading)))
        .style(Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED));
    let rows = view.rows.iter().map(|cells| {
        Row::new(cells.iter().enumerate().map(|(column, text)| {
            let cell = cell(column, text);
            if column == PHASE { cell.style(Style::new().fg(phase_colour(text))) } else { cell }
        }))
    });
    let widths = view.widths().map(|width| Constraint::Length(width as u16));
    let widths = widths.into_iter().chain([Constraint::Fill(1)]);
    Table::new(rows, widths).header(header)
}

/// Green for a connector at work, red for one failed, yellow for the rest (starting,
/// restarting, stopped, paused...).
fn phase_colour(phase: &str) -> Color {
    match phase {
        "running" | "idle" => Color::Green,
        "failed" => Color::Red,
        _ => Color::Yellow,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ratatui::backend::TestBackend;

    use super::*;
    use crate::cli::top::Rates;
    use crate::cli::top::tests::{reading, row};

    #[test]
    fn q_esc_and_ctrl_c_quit_and_other_keys_do_not() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        assert!(quits(key(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(quits(key(KeyCode::Char('Q'), KeyModifiers::SHIFT)));
        assert!(quits(key(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(quits(key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!quits(key(KeyCode::Char('c'), KeyModifiers::NONE)));
        assert!(!quits(key(KeyCode::Enter, KeyModifiers::NONE)));
    }

    #[test]
    fn the_table_drawn_holds_the_same_cells_as_the_text() {
        let mut failing = row("trapper", 10, 2);
        failing.phase = "failed".into();
        failing.last_error = Some("the guest trapped".into());
        let view = View::new(
            &reading(1, vec![row("feed", 100, 10), failing]),
            &Rates::default(),
            "here",
            Duration::from_secs(1),
        );
        let mut terminal = Terminal::new(TestBackend::new(120, 6)).unwrap();
        terminal.draw(|frame| frame.render_widget(table(&view), frame.area())).unwrap();
        let buffer = terminal.backend().buffer();
        let line = |y: u16| (0..120).map(|x| buffer[(x, y)].symbol()).collect::<String>();
        let text = view.text(120);
        let printed: Vec<&str> = text.lines().skip(2).collect();
        for (y, printed) in printed.iter().enumerate() {
            let drawn = line(y as u16);
            assert_eq!(drawn.trim_end(), printed.trim_end(), "line {y} drawn as it is printed");
        }
        assert_eq!(buffer[(22, 2)].fg, Color::Red, "a failed phase is red: {:?}", line(2));
    }
}
