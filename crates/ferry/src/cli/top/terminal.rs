//! The terminal `ferry top` redraws in: its width, and the keys that stop it (`q`,
//! or Ctrl-C), read without waiting for Enter.
//!
//! While top runs, the terminal's input is switched out of line mode (and Ctrl-C
//! comes as a key rather than a signal), so that top always gets to put it back as it
//! was: when it stops, on an error, or on a panic, since that is done on drop.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The keys typed on standard input, while top runs.
pub(super) struct Keys {
    /// The terminal's settings before, to restore; none when stdin is no terminal.
    saved: Option<libc::termios>,
}

/// Ctrl-C, as read once it is no longer a signal.
const CTRL_C: u8 = 3;

impl Keys {
    /// Read keys one at a time, unechoed, if standard input is a terminal.
    pub fn new() -> Keys {
        if !std::io::stdin().is_terminal() {
            return Keys { saved: None };
        }
        // SAFETY: termios is plain data, filled by tcgetattr before it is read.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd 0 is open (it is a terminal) and `saved` is a valid termios.
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } != 0 {
            return Keys { saved: None };
        }
        let mut keys = saved;
        keys.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
        keys.c_cc[libc::VMIN] = 0;
        keys.c_cc[libc::VTIME] = 0;
        // SAFETY: as above; `keys` is the terminal's own settings, changed.
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &keys) } != 0 {
            return Keys { saved: None };
        }
        Keys { saved: Some(saved) }
    }

    /// Wait `interval`, or less if a key asks to quit; whether one did.
    pub fn quit_within(&self, interval: Duration) -> bool {
        if self.saved.is_none() {
            // Only a signal stops top then, and the terminal was never changed.
            std::thread::sleep(interval);
            return false;
        }
        let deadline = Instant::now() + interval;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let mut wanted = libc::pollfd { fd: libc::STDIN_FILENO, events: libc::POLLIN, revents: 0 };
            let millis = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut wanted, 1, millis) };
            if ready <= 0 {
                continue;
            }
            let mut typed = [0u8; 64];
            // SAFETY: reads at most `typed.len()` bytes into `typed`.
            let n = unsafe { libc::read(libc::STDIN_FILENO, typed.as_mut_ptr().cast(), typed.len()) };
            if n <= 0 {
                // The terminal went away: nothing more to read; wait out the interval.
                std::thread::sleep(left);
                return false;
            }
            if typed[..n as usize].iter().any(|&key| matches!(key, b'q' | b'Q' | CTRL_C)) {
                return true;
            }
        }
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: restores the settings read in `new`.
            unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, saved) };
        }
    }
}

/// The width of the terminal standard output is, if it is one (else `COLUMNS`).
pub(super) fn width() -> Option<usize> {
    if std::io::stdout().is_terminal() {
        // SAFETY: winsize is plain data, filled by the ioctl.
        let mut size: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ writes one winsize.
        if unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0 && size.ws_col > 0 {
            return Some(size.ws_col as usize);
        }
    }
    std::env::var("COLUMNS").ok()?.parse().ok().filter(|&w| w > 0)
}

/// What draws `screen` over the last one: each line clears what the last screen had
/// beyond it, and what is below is cleared; the first clears the whole terminal.
pub(super) fn redraw(screen: &str, first: bool) -> String {
    // Clear the screen; go to the top left; clear the rest of the line; clear below.
    const CLEAR: &str = "\x1b[2J";
    const HOME: &str = "\x1b[H";
    const CLEAR_LINE: &str = "\x1b[K";
    const CLEAR_BELOW: &str = "\x1b[J";
    let mut out = if first { format!("{CLEAR}{HOME}") } else { HOME.to_string() };
    for line in screen.lines() {
        out.push_str(line);
        out.push_str(CLEAR_LINE);
        out.push('\n');
    }
    out.push_str(CLEAR_BELOW);
    out
}

#[cfg(test)]
mod tests {
    use super::redraw;

    #[test]
    fn a_redraw_goes_home_and_clears_what_the_last_screen_left() {
        assert_eq!(redraw("a\nbc\n", true), "\x1b[2J\x1b[Ha\x1b[K\nbc\x1b[K\n\x1b[J");
        assert_eq!(redraw("a\n", false), "\x1b[Ha\x1b[K\n\x1b[J");
    }
}
