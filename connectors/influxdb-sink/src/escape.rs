//! Line protocol's escaping (InfluxDB 1.x): a string field's value in quotes with
//! `"` and `\` escaped; a measurement, tag or field key's separators escaped; and
//! the names line protocol cannot carry refused, saying why.

/// A string field's value: in quotes, `"` and `\` escaped.
pub fn quoted(out: &mut String, text: &str) {
    out.push('"');
    let mut run = 0;
    for (at, byte) in text.bytes().enumerate() {
        if matches!(byte, b'"' | b'\\') {
            out.push_str(&text[run..at]);
            out.push('\\');
            run = at;
        }
    }
    out.push_str(&text[run..]);
    out.push('"');
}

/// JSON `text` (checked) without the whitespace between its tokens, as a quoted
/// string field: what Iggy's `payload_json` holds.
pub fn compact_quoted(out: &mut String, text: &str) {
    out.push('"');
    let (mut run, mut in_string, mut escape) = (0, false, false);
    for (at, byte) in text.bytes().enumerate() {
        if in_string {
            if escape {
                escape = false;
            } else if byte == b'\\' {
                escape = true;
            } else if byte == b'"' {
                in_string = false;
            }
        } else if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
            out.push_str(&text[run..at]);
            run = at + 1;
            continue;
        } else if byte == b'"' {
            in_string = true;
        }
        if matches!(byte, b'"' | b'\\') {
            out.push_str(&text[run..at]);
            out.push('\\');
            run = at;
        }
    }
    out.push_str(&text[run..]);
    out.push('"');
}

/// A measurement, tag key, tag value or field key, its `special` characters escaped.
/// Line protocol 1.x has no escape for a newline, nor for a backslash: one that
/// ends the name or comes before a special character would escape what follows.
pub fn escaped(out: &mut String, what: &str, text: &str, special: &[char]) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if !text.contains(|c: char| c == '\\' || c == '\n' || c == '\r' || special.contains(&c)) {
        out.push_str(text);
        return Ok(());
    }
    if text.contains(['\n', '\r']) {
        return Err(format!("{what} {text:?} holds a line break, which line protocol cannot carry"));
    }
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_none_or(|next| special.contains(next) || *next == '\\') {
            return Err(format!("{what} {text:?} holds a backslash line protocol would read as an escape"));
        }
        if special.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(())
}
