//! Probes of what the sandbox grants: each tries one thing a connector might want
//! (a file, an environment variable, a TCP connection, an HTTP request) and reports the outcome as a
//! record, so the test reads what the guest saw rather than guessing from outside.

use serde::Serialize;

pub enum Probe {
    ReadFile { path: String },
    WriteFile { path: String, contents: String },
    Env { name: String },
    Connect { address: String },
    HttpGet { address: String },
}

/// The record a probe produces.
#[derive(Serialize)]
struct Outcome<'a> {
    probe: &'a str,
    ok: bool,
    /// What was read, or the error.
    detail: String,
}

impl Probe {
    /// Try it; the record's payload.
    pub fn run(&self) -> String {
        let (probe, result) = match self {
            Probe::ReadFile { path } => ("read_file", std::fs::read_to_string(path).map_err(|e| e.to_string())),
            Probe::WriteFile { path, contents } => ("write_file", write_and_read_back(path, contents)),
            Probe::Env { name } => ("env", std::env::var(name).map_err(|e| e.to_string())),
            Probe::Connect { address } => ("connect", crate::connect::say_hello(address)),
            Probe::HttpGet { address } => ("http_get", crate::http::get(address)),
        };
        let (ok, detail) = match result {
            Ok(detail) => (true, detail),
            Err(detail) => (false, detail),
        };
        ferry_guest::info!("hostile source: probe {probe}: ok={ok}: {detail}");
        serde_json::to_string(&Outcome { probe, ok, detail }).expect("an outcome serializes")
    }
}

/// Write `contents` to `path`, then read it back: a write that "succeeded" but
/// cannot be read back is not a working grant.
fn write_and_read_back(path: &str, contents: &str) -> Result<String, String> {
    std::fs::write(path, contents).map_err(|e| format!("write: {e}"))?;
    let read = std::fs::read_to_string(path).map_err(|e| format!("read back: {e}"))?;
    if read == contents { Ok(read) } else { Err(format!("read back {read:?}, wrote {contents:?}")) }
}
