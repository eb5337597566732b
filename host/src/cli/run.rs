//! `ferry run CONFIG`.

use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::host::Host;
use crate::shutdown;
use anyhow::{Result, bail};

pub fn run(path: &Path) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let host = Host::from_config(&config)?;
        if host.connector_count() == 0 {
            bail!("{}: no enabled [[sources]]; nothing to run", path.display());
        }
        let (trigger, stop) = shutdown::channel();
        tokio::spawn(async move {
            match shutdown::signal().await {
                Ok(name) => tracing::info!("{name} received: stopping (send it again to exit at once)"),
                Err(e) => tracing::error!("cannot listen for signals: {e}; stopping"),
            }
            trigger.trigger();
            if let Ok(name) = shutdown::signal().await {
                tracing::error!("second {name}: exiting without waiting for outstanding batches");
                std::process::exit(130);
            }
        });
        let report = host.run(stop).await;
        if report.unsettled.is_empty() {
            tracing::info!("all connectors stopped cleanly");
            Ok(ExitCode::SUCCESS)
        } else {
            tracing::error!("not settled within the grace period: {}", report.unsettled.join(", "));
            Ok(ExitCode::FAILURE)
        }
    })
}
