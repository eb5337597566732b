//! The contract's logging import: guest lines become `tracing` events in the
//! connector's span, so they carry its key like every host line about it.
//!
//! A guest's text is untrusted: control characters are escaped (a guest must not be
//! able to forge a line that looks like it came from another connector) and long
//! lines are cut.

use tracing::Span;

use crate::runtime::bindings::logging::{Host, Level};
use crate::runtime::context::GuestContext;

/// Longest guest line kept, in bytes; the rest is replaced by a marker.
const MAX_LINE: usize = 4096;

/// Where one guest instance's lines go.
#[derive(Clone)]
pub struct GuestLog {
    span: Span,
}

impl GuestLog {
    /// Lines logged in `span` (the connector's span).
    pub fn new(span: Span) -> Self {
        GuestLog { span }
    }

    /// Log one line from the guest.
    pub fn line(&self, level: Level, text: &str) {
        let text = sanitize(text);
        let _entered = self.span.enter();
        match level {
            Level::Trace => tracing::trace!(target: "ferry::guest", "{text}"),
            Level::Debug => tracing::debug!(target: "ferry::guest", "{text}"),
            Level::Info => tracing::info!(target: "ferry::guest", "{text}"),
            Level::Warn => tracing::warn!(target: "ferry::guest", "{text}"),
            Level::Error => tracing::error!(target: "ferry::guest", "{text}"),
        }
    }
}

impl Host for GuestContext {
    fn log(&mut self, level: Level, message: String) {
        self.log.line(level, &message);
    }
}

/// Escape control characters and cut overlong lines.
fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_LINE));
    for c in text.chars() {
        if out.len() >= MAX_LINE {
            out.push_str(" …[cut]");
            break;
        }
        if c.is_control() && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn a_guest_cannot_inject_lines() {
        assert_eq!(
            sanitize("one\n2024 INFO connector{key=other}: forged"),
            "one\\n2024 INFO connector{key=other}: forged"
        );
        assert_eq!(sanitize("bell\x07"), "bell\\u{7}");
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "x".repeat(10_000);
        let cut = sanitize(&long);
        assert!(cut.len() < 4200);
        assert!(cut.ends_with("[cut]"));
    }
}
