//! One insert, as many times as it takes within one `write`, and what its answer
//! means.
//!
//! ClickHouse inserts a block all or nothing: a row it cannot take fails the whole
//! insert, naming the row (`(at row N)`), with 400 or 500 as the version has it.
//! Such an answer is the row's fault, never the server's: the caller leaves that
//! row out (to the dead letters) and inserts the rest again. 401/403 and 516 are the
//! credentials', a missing table or database the operator's: the batch waits
//! (handed again by the host) without being tried again here. Anything else (5xx,
//! no answer) is tried again after `retry_delay`, up to `max_retries` more times,
//! then left to the host.

use std::time::Duration;

use ferry_guest::http::{HttpError, Request, Response};

use crate::config::Config;

/// How requests go out and time passes: `wasi:http` and the guest's clock in the
/// component, fakes in the tests.
pub trait Transport {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError>;
    fn sleep(&mut self, duration: Duration);
}

/// The host's `wasi:http` and clock.
#[derive(Default)]
pub struct Wasi;

impl Transport for Wasi {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        ferry_guest::http::send(request)
    }

    fn sleep(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// What became of an insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    All,
    /// Nothing: the row at this index of the body (from 0) cannot be inserted.
    RowRefused(usize, String),
    /// Nothing, for a reason not the rows': try the batch again later.
    Later(String),
}

/// A request running `query` with `body`.
pub fn request(config: &Config, query: &str, body: Vec<u8>) -> Request {
    let url = format!("{}/?database={}&query={}", config.url, config.database, encode(query));
    let mut request = Request::post(url, body)
        .header("X-ClickHouse-User", config.username.clone())
        .header("X-ClickHouse-Key", config.password.clone());
    request.timeout = Some(config.timeout);
    request
}

/// Insert `body` (rows of the config's format) into the table.
pub fn insert(config: &Config, transport: &mut dyn Transport, body: Vec<u8>) -> Inserted {
    let query = format!("INSERT INTO {}.{} FORMAT {}", config.database, config.table, config.format.name());
    let request = request(config, &query, body);
    let mut attempt = 0;
    loop {
        let problem = match transport.send(&request) {
            Ok(response) if (200..300).contains(&response.status) => return Inserted::All,
            Ok(response) => {
                let said = said(&response);
                if let Some(row) = refused_row(&said) {
                    return Inserted::RowRefused(row, said);
                }
                match (response.status, code(&said)) {
                    (401 | 403, _) | (_, Some(192..=194 | 516)) => {
                        return Inserted::Later(format!("{said} (the credentials are refused)"));
                    }
                    (_, Some(60 | 81)) => return Inserted::Later(format!("{said} (create it, and the batch goes in)")),
                    _ => format!("HTTP {}: {said}", response.status),
                }
            }
            Err(HttpError::Invalid(why)) => return Inserted::Later(format!("the request is invalid: {why}")),
            Err(error @ HttpError::Denied(_)) => return Inserted::Later(error.to_string()),
            Err(error @ HttpError::Failed(_)) => error.to_string(),
        };
        if attempt >= config.max_retries {
            return Inserted::Later(format!("{problem} (after {} attempt(s))", attempt + 1));
        }
        attempt += 1;
        ferry_guest::warn!(
            "clickhouse sink: {problem}; trying again in {:?} ({attempt} of {})",
            config.retry_delay,
            config.max_retries
        );
        transport.sleep(config.retry_delay);
    }
}

/// The server's answer, on one line and not too long for a log or a dead letter,
/// and without the text it quotes after ` before: `: the rows that follow the
/// refused one, other messages' data, which a dead letter must not carry.
fn said(response: &Response) -> String {
    let text = String::from_utf8_lossy(&response.body);
    let text = text.split(", e.what()").next().unwrap_or_default().trim();
    let text = text.replacen(", e.displayText() = DB::Exception:", ":", 1);
    let text = match text.find(" before: ") {
        Some(quote) => {
            let rest = ["(while read", "(at row"].iter().filter_map(|tail| text[quote..].find(tail)).min();
            let tail = rest.map_or("", |at| &text[quote + at..]);
            format!("{} {tail}", &text[..quote])
        }
        None => text,
    };
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(500).collect()
}

/// `N` of `Code: N` in an answer.
fn code(said: &str) -> Option<u32> {
    let rest = said.strip_prefix("Code: ")?;
    rest[..rest.find(|c: char| !c.is_ascii_digit())?].parse().ok()
}

/// The row (from 0) an answer names as the one it could not take: `(at row N)`,
/// N counted from 1.
fn refused_row(said: &str) -> Option<usize> {
    let at = said.rfind("(at row ")?;
    let rest = &said[at + "(at row ".len()..];
    let row: usize = rest[..rest.find(')')?].parse().ok()?;
    row.checked_sub(1)
}

/// `text` percent-encoded for a query string.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_names_its_code_and_the_row_it_refused() {
        let answer = |body: &str| Response { status: 500, headers: Vec::new(), body: body.as_bytes().to_vec() };
        let said = said(&answer(
            "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \" before: bad\",\"x\":1}\n{\"seq\":8,\
             \"secret\":\"of another row\"}: (while read the value of key seq): (at row 2)\n, e.what() = DB::Exception\n",
        ));
        assert_eq!(said, "Code: 27: Cannot parse input: expected \" (while read the value of key seq): (at row 2)");
        assert_eq!((code(&said), refused_row(&said)), (Some(27), Some(1)));
        let said = "Code: 60: Table default.nosuch doesn't exist.";
        assert_eq!((code(said), refused_row(said)), (Some(60), None));
        assert_eq!(code("Ok."), None);
        assert_eq!(encode("INSERT INTO d.t FORMAT CSV"), "INSERT%20INTO%20d.t%20FORMAT%20CSV");
    }
}
