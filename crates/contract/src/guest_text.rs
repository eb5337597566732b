//! Text a guest wrote, made safe to put in the host's log, its status file and its
//! errors.
//!
//! Everything a guest says is untrusted: an error message, a trap's backtrace (the
//! function names come from the guest's own name section), a header key quoted in a
//! NACK, a log line. Printed as is, a newline forges a log line under another
//! connector's key, a carriage return or an ANSI escape rewrites the operator's
//! terminal, and a 30 MiB message is logged whole every time it recurs. So guest text
//! is escaped (control characters, and the invisible Unicode that reorders or breaks
//! lines) and cut to a bounded length, with its real size noted. The work is bounded
//! by the cut, not by the input: a huge text costs no more than a short one.
//!
//! The host's secrets are redacted from it first ([`crate::secrets`]): a guest
//! repeating the secret it was handed does not get it into any channel.
//!
//! [`clean`] is idempotent (its output contains nothing it would escape, and is not
//! longer than the cut), so text may pass through it at every layer it crosses.

use std::fmt::Write;

use crate::secrets;

/// The longest error, NACK detail or trap message kept, in bytes.
pub const MAX_MESSAGE: usize = 2048;

/// The longest guest value (a header key, say) quoted inside a host message.
pub const MAX_QUOTED: usize = 96;

/// Room kept for the cut marker, so that a cut text stays within its bound.
const MARKER_ROOM: usize = 48;

/// `text` with the host's secrets redacted ([`crate::secrets`]), escaped and cut to at
/// most `max` bytes (at least [`MARKER_ROOM`] are allowed); a cut says how long the
/// text was.
pub fn clean(text: &str, max: usize) -> String {
    let max = max.max(MARKER_ROOM * 2);
    let secrets = secrets::current();
    // Escaping never shortens text, so no more than `max` bytes of it can be kept:
    // only those are searched (and a secret's length more, to see one a cut splits),
    // which keeps the work bounded by the cut.
    let mut considered = text.len().min(max.saturating_add(secrets.longest()));
    while !text.is_char_boundary(considered) {
        considered -= 1;
    }
    let redacted = secrets.redact(&text[..considered]);
    escape_and_cut(&redacted, max, text.len(), considered < text.len())
}

/// `text` escaped and cut to `max` bytes, a cut (or `more`: the text was longer
/// than what is given) marked with its length in all, `total`.
fn escape_and_cut(text: &str, max: usize, total: usize, more: bool) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    // Where the text would be cut, if it has to be: with room for the marker.
    let mut keep = 0;
    for c in text.chars() {
        if out.len() <= max - MARKER_ROOM {
            keep = out.len();
        }
        push_escaped(&mut out, c);
        if out.len() > max {
            out.truncate(keep);
            let _ = write!(out, "…[cut: {total} bytes in all]");
            return out;
        }
    }
    if more {
        if out.len() > max - MARKER_ROOM {
            out.truncate(keep);
        }
        let _ = write!(out, "…[cut: {total} bytes in all]");
    }
    out
}

/// A guest value quoted inside a host message: `"key"`, escaped and cut to
/// [`MAX_QUOTED`] bytes.
pub fn quote(text: &str) -> String {
    format!("\"{}\"", clean(text, MAX_QUOTED))
}

fn push_escaped(out: &mut String, c: char) {
    if needs_escape(c) {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    } else {
        out.push(c);
    }
}

/// Characters that change how a line is shown rather than what it says: control
/// characters (newline, carriage return, escape, delete...) and Unicode's line and
/// paragraph separators and bidirectional controls (which can make a line read
/// backwards). A tab is kept.
fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_cannot_forge_lines_or_steer_the_terminal() {
        assert_eq!(
            clean("one\n2024 INFO connector{key=other}: forged", 100),
            "one\\u{a}2024 INFO connector{key=other}: forged"
        );
        assert_eq!(clean("\r\x1b[2Jclear", 100), "\\u{d}\\u{1b}[2Jclear");
        assert_eq!(clean("tab\tok \u{202e}evil", 100), "tab\tok \\u{202e}evil");
        assert_eq!(clean("line\u{2028}sep", 100), "line\\u{2028}sep");
    }

    #[test]
    fn long_text_is_cut_with_its_size_noted() {
        let long = "x".repeat(30 << 20);
        let cut = clean(&long, MAX_MESSAGE);
        assert!(cut.len() <= MAX_MESSAGE, "{} bytes", cut.len());
        assert!(cut.ends_with(&format!("…[cut: {} bytes in all]", 30 << 20)), "{}", &cut[cut.len() - 40..]);
        // Multi-byte characters are never split.
        let wide = "é".repeat(100);
        let cut = clean(&wide, 101);
        assert!(cut.len() <= 101 && cut.ends_with("é…[cut: 200 bytes in all]"), "{cut}");
        // Escapes count towards the bound too.
        let escaped = clean(&"\n".repeat(100), 200);
        assert!(escaped.len() <= 200 && escaped.contains("[cut: 100 bytes in all]"), "{escaped}");
    }

    #[test]
    fn cleaning_twice_changes_nothing() {
        for text in ["plain", "a\nb\x1b", &"y\n".repeat(5000), &"z".repeat(5000), "é\u{202e}", ""] {
            let once = clean(text, 300);
            assert_eq!(clean(&once, 300), once, "{text:?}");
        }
    }

    /// The one test of this crate that sets the process's secrets.
    #[test]
    fn the_hosts_secrets_never_come_through_even_at_a_cut() {
        secrets::set(secrets::Secrets::new(["sw0rdfish-42".to_string()]));
        assert_eq!(clean("key: SW0RDFISH-42", 100), "key: [redacted]");
        assert_eq!(quote("sw0rdfish-42"), "\"[redacted]\"");
        // A secret the cut would split is gone whole, not left in part.
        let cut = clean(&format!("{}sw0rdfish-42 and more", "x".repeat(90)), 96);
        assert!(!cut.contains("sw0rd") && cut.contains("bytes in all"), "{cut}");
        // Cleaning again changes nothing; a new set replaces the old.
        assert_eq!(clean(&clean("a sw0rdfish-42\nb", 100), 100), clean("a sw0rdfish-42\nb", 100));
        secrets::set(secrets::Secrets::default());
        assert_eq!(clean("key: sw0rdfish-42", 100), "key: sw0rdfish-42");
    }

    #[test]
    fn quoted_values_are_short() {
        assert_eq!(quote("id"), "\"id\"");
        let quoted = quote(&"k".repeat(1000));
        assert!(quoted.len() <= MAX_QUOTED + 2 && quoted.contains("1000 bytes in all"), "{quoted}");
    }
}
