//! The status file, `<state dir>/status.json`: the board as JSON, rewritten (whole,
//! atomically) shortly after every change, so `ferry status` can show what a running
//! host is doing without talking to it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConnectorStatus, StatusBoard, now_micros};
use crate::shutdown::Shutdown;
use ferry_contract::files;

/// At most one write per this interval, however busy the connectors are.
const WRITE_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusFile {
    /// The `ferry` process that wrote it.
    pub pid: u32,
    pub started_at_micros: u64,
    pub updated_at_micros: u64,
    /// Whether that process had finished (a clean exit writes this last).
    pub stopped: bool,
    pub connectors: Vec<ConnectorStatus>,
}

pub fn status_file_path(state_dir: &Path) -> PathBuf {
    state_dir.join("status.json")
}

/// Write the board to `path` after every change (throttled) until shutdown, the caller
/// writes the last one with [`write_final`].
pub async fn keep_written(board: Arc<StatusBoard>, path: PathBuf, mut shutdown: Shutdown) {
    loop {
        if let Err(e) = write(&board, &path, false) {
            tracing::warn!("cannot write the status file: {e}");
        }
        tokio::select! {
            _ = board.changed() => {}
            _ = shutdown.requested() => return,
        }
        // Throttle: changes in the next interval go into the next write.
        tokio::select! {
            _ = tokio::time::sleep(WRITE_INTERVAL) => {}
            _ = shutdown.requested() => return,
        }
    }
}

/// Write the board one last time, marked as stopped.
pub fn write_final(board: &StatusBoard, path: &Path) -> std::io::Result<()> {
    write(board, path, true)
}

fn write(board: &StatusBoard, path: &Path, stopped: bool) -> std::io::Result<()> {
    let file = StatusFile {
        pid: std::process::id(),
        started_at_micros: board.started_at_micros(),
        updated_at_micros: now_micros(),
        stopped,
        connectors: board.snapshot(),
    };
    if let Some(dir) = path.parent() {
        files::create_private_dir(dir)?;
    }
    let temporary = path.with_extension("json.tmp");
    // Removed first: a mode is given only to a file created.
    let _ = std::fs::remove_file(&temporary);
    let mut written = files::private_file().write(true).create_new(true).open(&temporary)?;
    written.write_all(&serde_json::to_vec_pretty(&file)?)?;
    drop(written);
    std::fs::rename(&temporary, path)
}

pub fn read_status_file(path: &Path) -> Result<StatusFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a status file: {e}", path.display()))
}
