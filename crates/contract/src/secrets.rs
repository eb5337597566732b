//! The secret values the host knows, and their redaction from guest text.
//!
//! A guest is handed secrets (its `[secrets]`, through `plugin_config`) and may
//! repeat one: in a log line, an error, a NACK reason, a trap. Every such text passes
//! through [`crate::guest_text::clean`] before it reaches the log, the status file,
//! `ferry status` and `top`, the API, the metrics or a dead letter's headers, so that
//! is where secrets are taken out: one place, every channel.
//!
//! The set is the process's ([`set`] at start and at each reload, [`current`] where
//! text is cleaned): one ferry runs one config, and a secret of any connector is
//! redacted from every connector's text. Besides a secret whole, a guest splitting
//! one across lines (its first part ending one line, the rest starting the next) or
//! changing its ASCII case is caught: at each line's start and end, a piece of
//! [`SHORTEST_PIECE`] bytes or more of a secret is redacted too. Encodings
//! (base64, hex, reversed) are not: a guest that wants to leak a secret it holds
//! can always do so through what it writes to its target.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, RwLock};

/// What a secret (or a piece of one) is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not searched for: replacing every `a` would make
/// text unreadable, and a secret of three characters protects nothing.
pub const SHORTEST: usize = 4;

/// The shortest piece of a secret redacted at a line's start or end.
pub const SHORTEST_PIECE: usize = 4;

/// A set of secret values, ready to be searched for.
#[derive(Debug, Default)]
pub struct Secrets {
    /// ASCII-lowercased, longest first (a secret holding another is replaced whole).
    values: Vec<Pattern>,
}

#[derive(Debug)]
struct Pattern {
    text: Vec<u8>,
    reversed: Vec<u8>,
    /// KMP failure function of `text`, and of `reversed`.
    forward: Vec<usize>,
    backward: Vec<usize>,
}

impl Secrets {
    pub fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut values: Vec<Vec<u8>> = values
            .into_iter()
            .filter(|v| v.chars().count() >= SHORTEST)
            .map(|v| v.to_ascii_lowercase().into_bytes())
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        let values = values
            .into_iter()
            .map(|text| {
                let reversed: Vec<u8> = text.iter().rev().copied().collect();
                Pattern { forward: failure(&text), backward: failure(&reversed), text, reversed }
            })
            .collect();
        Secrets { values }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The length of the longest secret, in bytes.
    pub fn longest(&self) -> usize {
        self.values.first().map_or(0, |p| p.text.len())
    }

    /// `text` with every secret, and every piece of one at a line's edge, replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.values.is_empty() || text.is_empty() {
            return Cow::Borrowed(text);
        }
        let ranges = self.ranges(text.as_bytes());
        if ranges.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in ranges {
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
            at = end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// `bytes` (a cursor need not be text) with every secret replaced, and whether
    /// any was.
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> (Cow<'a, [u8]>, bool) {
        if self.values.is_empty() {
            return (Cow::Borrowed(bytes), false);
        }
        let ranges = self.ranges(bytes);
        if ranges.is_empty() {
            return (Cow::Borrowed(bytes), false);
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        for (start, end) in ranges {
            out.extend_from_slice(&bytes[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            at = end;
        }
        out.extend_from_slice(&bytes[at..]);
        (Cow::Owned(out), true)
    }

    /// The byte ranges to replace, sorted and merged. Every range starts and ends
    /// where a secret (a valid UTF-8 string) or a piece of it cut at a character
    /// boundary does, so cutting `text` there never splits a character.
    fn ranges(&self, text: &[u8]) -> Vec<(usize, usize)> {
        let lower = text.to_ascii_lowercase();
        let mut ranges = Vec::new();
        for pattern in &self.values {
            let needle = &pattern.text[..];
            let mut from = 0;
            while let Some(found) = find(&lower[from..], needle) {
                ranges.push((from + found, from + found + needle.len()));
                from += found + needle.len();
            }
        }
        let mut line_start = 0;
        for (index, byte) in lower.iter().enumerate().chain([(lower.len(), &b'\n')]) {
            if *byte != b'\n' && *byte != b'\r' {
                continue;
            }
            let line = &lower[line_start..index];
            for pattern in &self.values {
                let end = pattern.piece_ending(line);
                if end >= SHORTEST_PIECE {
                    ranges.push((line_start + line.len() - end, line_start + line.len()));
                }
                let start = pattern.piece_starting(line);
                if start >= SHORTEST_PIECE {
                    ranges.push((line_start, line_start + start));
                }
            }
            line_start = index + 1;
        }
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            match merged.last_mut() {
                Some(last) if start < last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        // A piece matched on bytes may end inside a character of the text when the
        // secret's piece was cut inside one of its own: widen to whole characters.
        for range in &mut merged {
            while range.0 > 0 && is_continuation(text[range.0]) {
                range.0 -= 1;
            }
            while range.1 < text.len() && is_continuation(text[range.1]) {
                range.1 += 1;
            }
        }
        merged
    }
}

impl Pattern {
    /// The length of the longest end of `line` that begins this secret (shorter
    /// than the whole secret, which is found as such).
    fn piece_ending(&self, line: &[u8]) -> usize {
        let tail = &line[line.len().saturating_sub(self.text.len() - 1)..];
        matched_at_end(&self.text, &self.forward, tail.iter())
    }

    /// The length of the longest start of `line` that ends this secret.
    fn piece_starting(&self, line: &[u8]) -> usize {
        let head = &line[..line.len().min(self.text.len() - 1)];
        matched_at_end(&self.reversed, &self.backward, head.iter().rev())
    }
}

/// How much of `pattern`'s start the bytes end with (KMP over them).
fn matched_at_end<'a>(pattern: &[u8], failure: &[usize], bytes: impl Iterator<Item = &'a u8>) -> usize {
    let mut matched = 0;
    for byte in bytes {
        while matched > 0 && (matched == pattern.len() || pattern[matched] != *byte) {
            matched = failure[matched - 1];
        }
        if pattern[matched] == *byte {
            matched += 1;
        }
    }
    matched
}

/// KMP's failure function: for each prefix, the longest proper prefix that is also
/// its suffix.
fn failure(pattern: &[u8]) -> Vec<usize> {
    let mut failure = vec![0; pattern.len()];
    let mut matched = 0;
    for index in 1..pattern.len() {
        while matched > 0 && pattern[index] != pattern[matched] {
            matched = failure[matched - 1];
        }
        if pattern[index] == pattern[matched] {
            matched += 1;
        }
        failure[index] = matched;
    }
    failure
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

static CURRENT: LazyLock<RwLock<Arc<Secrets>>> = LazyLock::new(Default::default);

/// Make `secrets` the set redacted from every guest text from now on.
pub fn set(secrets: Secrets) {
    *CURRENT.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(secrets);
}

/// The set in force.
pub fn current() -> Arc<Secrets> {
    CURRENT.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Secrets {
        Secrets::new(["Tr0ub4dor-x9Secret".to_string(), "ab".to_string(), "hunter22".to_string()])
    }

    #[test]
    fn a_secret_is_replaced_whole_in_any_ascii_case() {
        let s = secrets();
        assert_eq!(s.redact("token Tr0ub4dor-x9Secret!"), "token [redacted]!");
        assert_eq!(s.redact("TR0UB4DOR-X9SECRET and tr0ub4dor-x9secret"), "[redacted] and [redacted]");
        assert_eq!(s.redact("hunter22hunter22"), "[redacted][redacted]");
        assert_eq!(s.redact("ab stays: too short to be a secret"), "ab stays: too short to be a secret");
        assert!(matches!(s.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_split_across_lines_is_caught_at_both_edges() {
        let s = secrets();
        assert_eq!(s.redact("first half Tr0ub4dor"), "first half [redacted]");
        assert_eq!(s.redact("-x9Secret is the rest"), "[redacted] is the rest");
        assert_eq!(s.redact("one Tr0ub\nB4DOR-x9Secret two"), "one [redacted]\n[redacted] two");
        // Three bytes at an edge are let go; inside a line a piece is not a secret.
        assert_eq!(s.redact("ends with Tr0"), "ends with Tr0");
        assert_eq!(s.redact("Tr0ub4dor in the middle"), "Tr0ub4dor in the middle");
    }

    #[test]
    fn bytes_and_multibyte_text_stay_whole_characters() {
        let s = Secrets::new(["pässwörd".to_string()]);
        assert_eq!(s.redact("é pässwörd é"), "é [redacted] é");
        assert_eq!(s.redact("ends pässw"), "ends [redacted]");
        let (bytes, any) = s.redact_bytes(b"{\"t\":\"p\xc3\xa4ssw\xc3\xb6rd\"}\xff");
        assert!(any);
        assert_eq!(&*bytes, b"{\"t\":\"[redacted]\"}\xff");
    }
}
