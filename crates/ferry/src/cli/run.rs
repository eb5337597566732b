//! `ferry run CONFIG`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use ferry_config::{Config, RuntimeConfig};
use ferry_engine::shutdown::{self, Signals};
use ferry_host::{Control, Host};
use ferry_runtime::{Compiler, Isolation};
use tokio::signal::unix::{Signal, SignalKind, signal};

pub fn run(config: Config) -> Result<ExitCode> {
    let path = config.file.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut signals =
            Signals::listen().map_err(|e| anyhow::anyhow!("cannot listen for SIGINT and SIGTERM: {e}"))?;
        // Caught from now on: SIGHUP's default action would kill ferry during set-up.
        let hangups = signal(SignalKind::hangup()).map_err(|e| anyhow::anyhow!("cannot listen for SIGHUP: {e}"))?;
        let mut host = Host::from_config(&config, isolated_compiler(&config.runtime)?)?;
        if host.connector_count() == 0 {
            bail!("{}: no enabled [[sources]] or [[sinks]]; nothing to run", path.display());
        }
        let (trigger, stop) = shutdown::channel();
        tokio::spawn(async move {
            let name = signals.next().await;
            tracing::info!("{name} received: stopping (send it again to exit at once)");
            trigger.trigger();
            let name = signals.next().await;
            tracing::error!("second {name}: exiting without waiting for outstanding batches");
            std::process::exit(130);
        });
        tokio::spawn(reload_on_hangup(hangups, host.control()));
        let api = match config.http.as_ref().filter(|http| http.enabled) {
            Some(http) => Some(ferry_api::start(http, &mut host, stop.clone()).await?),
            None => None,
        };
        let report = host.run(stop).await;
        if let Some(api) = api {
            api.stopped().await;
        }
        if report.unsettled.is_empty() {
            tracing::info!("all connectors stopped cleanly");
            Ok(ExitCode::SUCCESS)
        } else {
            tracing::error!("not settled within the grace period: {}", report.unsettled.join(", "));
            Ok(ExitCode::FAILURE)
        }
    })
}

/// Reload the config at every SIGHUP (the host logs what changed, or why the new
/// config was refused).
async fn reload_on_hangup(mut hangups: Signal, control: Control) {
    while hangups.recv().await.is_some() {
        tracing::info!("SIGHUP received: reloading the config");
        // The outcome is logged by the host; a refusal leaves everything running.
        let _ = control.reload().await;
    }
}

/// Components compiled in child processes of this binary, within `[runtime]`'s
/// compile_timeout and compile_memory.
pub fn isolated_compiler(runtime: &RuntimeConfig) -> Result<Compiler> {
    let exe = std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find ferry's own executable: {e}"))?;
    Ok(Compiler::Isolated(Isolation { exe, timeout: runtime.compile_timeout, memory: runtime.compile_memory.bytes() }))
}
