//! `ferry status CONFIG`: the status file the running (or last) ferry wrote.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use ferry_config::Config;
use ferry_engine::status::{StatusFile, read_status_file, status_file_path};

use super::format_micros;

pub fn status(path: &Path, as_json: bool) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let file = status_file_path(&config.state.path);
    if !file.exists() {
        println!("{}", no_status_yet(path, &file));
        return Ok(ExitCode::FAILURE);
    }
    let status = read_status_file(&file).map_err(|e| anyhow!(e))?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "ferry pid {}: {}; started {}, status as of {}",
        status.pid,
        process_state(&status),
        format_micros(status.started_at_micros),
        format_micros(status.updated_at_micros)
    );
    println!(
        "{:<20} {:<6} {:<10} {:<9} {:>9} {:>8} {:>12} {:>6} {:>6} {:>6} {:>10} {:>12} {:>8}  last error",
        "KEY",
        "ROLE",
        "TENANT",
        "PHASE",
        "INSTANCES",
        "BATCHES",
        "MESSAGES",
        "NACKS",
        "DEAD",
        "TRAPS",
        "GENERATION",
        "FUEL",
        "LOG-DROP"
    );
    for c in &status.connectors {
        let phase = serde_json::to_value(c.phase)?.as_str().unwrap_or("?").to_string();
        println!(
            "{:<20} {:<6} {:<10} {:<9} {:>9} {:>8} {:>12} {:>6} {:>6} {:>6} {:>10} {:>12} {:>8}  {}",
            c.key,
            c.role,
            c.tenant.as_deref().unwrap_or("-"),
            phase,
            c.instances,
            c.batches_acked,
            c.messages_delivered,
            c.nacks,
            c.dead_lettered,
            c.traps,
            c.committed_generation.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
            c.fuel_consumed,
            c.log_lines_dropped,
            c.last_error.as_deref().unwrap_or("")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What to say when `config` has no status file (`file`) yet.
pub(super) fn no_status_yet(config: &Path, file: &Path) -> String {
    format!("no status yet: ferry has not run with {} ({} does not exist)", config.display(), file.display())
}

/// Whether the ferry that wrote `status` runs, stopped cleanly, or died.
pub(super) fn process_state(status: &StatusFile) -> &'static str {
    let alive = Path::new(&format!("/proc/{}", status.pid)).exists();
    match (status.stopped, alive) {
        (true, _) => "stopped cleanly",
        (false, true) => "running",
        (false, false) => "not running (it did not stop cleanly)",
    }
}
