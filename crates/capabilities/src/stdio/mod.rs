//! Standard output and error of a guest, as lines in the host log.
//!
//! Rust guests print their panic message to stderr before they trap, so this is what
//! puts "panicked at src/lib.rs:12: index out of bounds" next to the trap in the log.
//! Standard input stays closed.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

use ferry_contract::wit::logging::Level;

use crate::logging::GuestLog;
use crate::{Capability, Import, InstanceBuilder, NoSection, Verdict};

/// Longest partial line held back waiting for its newline.
const MAX_PENDING: usize = 4096;

/// The capability: always granted, standard output and error into the log.
pub struct Stdio;

impl Capability for Stdio {
    const NAME: &'static str = "stdio";
    type Grant = ();
    type Section = NoSection;
    type Shared = ();
    type State = ();

    fn verdict(import: &Import<'_>, _: &()) -> Option<Verdict> {
        match (import.package, import.name) {
            ("wasi:cli", "stdout" | "stderr" | "terminal-output" | "terminal-stdout" | "terminal-stderr") => {
                Some(Verdict::Granted("into the host log"))
            }
            ("wasi:cli", "stdin" | "terminal-input" | "terminal-stdin") => {
                Some(Verdict::Denied("standard input is closed"))
            }
            _ => None,
        }
    }

    async fn instantiate(_: &(), _: &(), instance: &mut InstanceBuilder<'_>) -> Result<(), String> {
        grant(instance.wasi, instance.log);
        Ok(())
    }
}

fn grant(builder: &mut WasiCtxBuilder, log: &GuestLog) {
    builder.stdout(LineStream::new(log.clone(), Level::Info));
    builder.stderr(LineStream::new(log.clone(), Level::Warn));
}

/// A byte stream cut into lines, each logged at `level`.
#[derive(Clone)]
struct LineStream {
    lines: Arc<Mutex<Lines>>,
}

struct Lines {
    log: GuestLog,
    level: Level,
    pending: Vec<u8>,
}

impl LineStream {
    fn new(log: GuestLog, level: Level) -> Self {
        LineStream { lines: Arc::new(Mutex::new(Lines { log, level, pending: Vec::new() })) }
    }

    fn write_bytes(&self, bytes: &[u8]) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.push(bytes);
    }
}

impl Lines {
    fn push(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|b| *b == b'\n') {
            self.pending.extend_from_slice(&bytes[..end]);
            self.emit();
            bytes = &bytes[end + 1..];
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= MAX_PENDING {
            self.emit();
        }
    }

    fn emit(&mut self) {
        let line = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        if !line.trim().is_empty() {
            self.log.line(self.level, &line);
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            self.emit();
        }
    }
}

impl IsTerminal for LineStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LineStream {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for LineStream {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.write_bytes(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LineStream {
    async fn ready(&mut self) {}
}

impl AsyncWrite for LineStream {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.write_bytes(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
