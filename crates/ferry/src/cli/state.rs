//! `ferry state show`, `ferry state check` and `ferry state reset`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use ferry_config::Config;
use ferry_contract::Role;
use ferry_engine::cursor::Committed;
use ferry_store::local_log::LocalLog;
use ferry_store::state::StateDir;
use serde_json::json;

use super::format_micros;

pub fn show(path: &Path, only: Option<&str>, as_json: bool) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let states = StateDir::new(&config.state.path);
    let keys: Vec<String> = match only {
        Some(key) => vec![key.to_string()],
        None => {
            let mut keys: Vec<String> = config.connectors().map(|c| c.key().to_string()).collect();
            let stored: Vec<String> = states.keys()?.into_iter().filter(|k| !keys.contains(k)).collect();
            keys.extend(stored);
            keys
        }
    };
    let mut any_corrupt = false;
    for key in keys {
        let result = states_of(&config, &key).read(&key);
        any_corrupt |= result.is_err();
        if as_json {
            let line = match &result {
                Ok(None) => json!({ "key": key, "committed": null }),
                Ok(Some(c)) => json!({
                    "key": key,
                    "generation": c.generation,
                    "committed_at": format_micros(c.committed_at_micros),
                    "state": String::from_utf8_lossy(&c.state),
                    "delivered": c.receipt.marks.iter().map(|m| json!({
                        "stream": m.stream, "topic": m.topic, "end": m.end,
                    })).collect::<Vec<_>>(),
                }),
                Err(e) => json!({ "key": key, "error": e.to_string() }),
            };
            println!("{line}");
        } else {
            match &result {
                Ok(None) => println!("{key}: no committed cursor"),
                Ok(Some(c)) => println!("{key}: {}", describe(c, role_of(&config, &key))),
                Err(e) => println!("{key}: ERROR: {e}"),
            }
        }
    }
    Ok(if any_corrupt { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `ferry state check`: every state database (the host's and each tenant's) and
/// every topic file of the local log checked whole.
pub fn check(path: &Path) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let tenants = config.tenants.iter().map(|t| config.state.path.join("tenants").join(&t.key));
    let mut damaged = 0;
    let mut checked = 0;
    for dir in std::iter::once(config.state.path.clone()).chain(tenants) {
        match StateDir::new(&dir).check() {
            Ok(None) => {}
            Ok(Some(file)) => println!("{}: ok", file.display()),
            Err(e) => {
                damaged += 1;
                println!("ERROR: {e}");
            }
        }
        checked += 1;
    }
    let topics = LocalLog::topics(&config.local_log.path);
    for topic in topics.iter().flatten() {
        let file = LocalLog::topic_file(&config.local_log.path, &topic.stream, &topic.topic);
        match LocalLog::check(&config.local_log.path, &topic.stream, &topic.topic) {
            Ok(()) => println!("{}: ok", file.display()),
            Err(e) => {
                damaged += 1;
                println!("ERROR: {e}");
            }
        }
    }
    if let Err(e) = topics {
        damaged += 1;
        println!("ERROR: {e}");
    }
    println!("{damaged} damaged ({checked} state directories and the local log checked)");
    Ok(if damaged > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The state directory holding `key`'s cursor: its tenant's namespace, if it has one.
fn states_of(config: &Config, key: &str) -> StateDir {
    match config.connector(key) {
        Some(connector) => StateDir::new(config.state_dir_of(connector)),
        None => StateDir::new(&config.state.path),
    }
}

/// What `key` is in the config, if it is there.
fn role_of(config: &Config, key: &str) -> Option<Role> {
    config.connector(key).map(|c| c.role())
}

/// One line on a committed state: a source's cursor and what it says was delivered,
/// or a sink's positions and what they say was read.
fn describe(committed: &Committed, role: Option<Role>) -> String {
    let cursor = match std::str::from_utf8(&committed.state) {
        Ok(text) => text.to_string(),
        Err(_) => format!("0x{}", committed.state.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    };
    let (what, marked) = match role {
        Some(Role::Sink) => ("positions", "read"),
        Some(Role::Source) => ("cursor", "delivered to"),
        None => ("state", "marks"),
    };
    let mut line = format!(
        "generation {}, committed {}, {what} {cursor}",
        committed.generation,
        format_micros(committed.committed_at_micros)
    );
    // What the state says is in the log: the start-up check holds the log to it.
    for mark in &committed.receipt.marks {
        line.push_str(&format!(", {marked} {mark}"));
    }
    line
}

pub fn reset(path: &Path, key: &str, yes: bool) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let states = states_of(&config, key);
    let current = match states.read(key) {
        Ok(Some(c)) => describe(&c, role_of(&config, key)),
        Ok(None) => "no committed cursor".to_string(),
        Err(e) => format!("unreadable: {e}"),
    };
    if !yes {
        println!("{key}: {current}");
        println!("this would forget it, and `{key}` would start from scratch; run again with --yes to do it");
        return Ok(ExitCode::FAILURE);
    }
    let kept = match states.reset(key) {
        Ok(kept) => kept,
        Err(e) => bail!("cannot reset `{key}`: {e}"),
    };
    if kept.is_empty() {
        println!("{key}: had no state; nothing to do");
    } else {
        println!("{key}: reset (was: {current})");
        for place in kept {
            println!("  old state kept {place}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
