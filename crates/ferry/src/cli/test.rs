//! `ferry test COMPONENT [--config CONFIG --key KEY]`: the conformance kit
//! ([`ferry_conformance`]) run on one component, one line per check, then a
//! summary. Exits 0 when every check passed, 1 when one failed, and 2 when the
//! component could not be tested at all (unreadable, neither a source nor a sink,
//! not compiling, a config or key that is wrong).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::inspect::connector_of;
use ferry_config::{Config, RuntimeConfig};
use ferry_conformance::{Report, Setup};
use ferry_contract::files;
use ferry_contract::{ComponentWorld, Role};
use ferry_runtime::{EngineOptions, Runtime, Sandbox, SinkWorld, SourceWorld};

/// The exit code when the component could not be tested (clap's for bad usage).
const CANNOT_TEST: u8 = 2;

pub fn test(path: &Path, config_of: Option<(&Path, &str)>) -> ExitCode {
    match tested(path, config_of) {
        Ok(report) => {
            for check in report.checks() {
                println!("{check}");
            }
            let verdict = if report.passed() { "passes" } else { "FAILS" };
            println!("{}: {} {verdict} the contract's checks", report.summary(), path.display());
            if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(CANNOT_TEST)
        }
    }
}

/// How the component is to run, and what runtime settings bound its compilation.
struct Under {
    setup: Setup,
    runtime: RuntimeConfig,
    /// Which role the config says the connector has, if a config was given.
    role: Option<Role>,
    /// The setup, in words, for the first line of the output.
    described: String,
}

fn tested(path: &Path, config_of: Option<(&Path, &str)>) -> Result<Report> {
    let under = match config_of {
        Some((config_path, key)) => from_config(config_path, key)?,
        None => Under {
            setup: Setup::default(),
            runtime: RuntimeConfig::default(),
            role: None,
            described: "plugin_config {}, default limits, no grants".into(),
        },
    };
    let limit = "[runtime] max_component_bytes";
    let bytes = files::read_regular(path, under.runtime.max_component_bytes.bytes(), "the component", limit)?;
    let world = ComponentWorld::decode(&bytes).with_context(|| path.display().to_string())?;
    let Some(kind) = ferry_contract::kind_of(&world) else {
        bail!(
            "{}: neither a source nor a sink: it exports neither {} nor {}",
            path.display(),
            Role::Source.interface(),
            Role::Sink.interface()
        );
    };
    let Some(role) = kind.role() else {
        bail!(
            "{}: a transform; `ferry test` runs sources and sinks: test a transform in a connector's chain (`ferry \
             run` with it in the connector's `transforms`)",
            path.display()
        );
    };
    if let Some(configured) = under.role
        && configured != role
    {
        bail!("{}: a {role}, but the connector given by --key is a {configured}", path.display());
    }
    println!("testing {} as a {role}, with {}", path.display(), under.described);

    let engine = EngineOptions { fuel: under.setup.sandbox.limits.fuel.is_some(), ..EngineOptions::default() };
    let runtime = Runtime::with_options(&engine)?.with_compiler(super::run::isolated_compiler(&under.runtime)?);
    let max_bytes = under.runtime.max_component_bytes.bytes();
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    tokio.block_on(async {
        Ok(match role {
            Role::Source => {
                let compiled = runtime.compile(runtime.check::<SourceWorld>(path, max_bytes)?).await?;
                ferry_conformance::test_source(&runtime, &compiled.component, &under.setup).await
            }
            Role::Sink => {
                let compiled = runtime.compile(runtime.check::<SinkWorld>(path, max_bytes)?).await?;
                ferry_conformance::test_sink(&runtime, &compiled.component, &under.setup).await
            }
        })
    })
}

/// Connector `key` of the config at `config_path`: its plugin_config (with its
/// secrets), limits, grants and poll interval, as `ferry run` would give them.
fn from_config(config_path: &Path, key: &str) -> Result<Under> {
    let config = Config::load(config_path)?;
    let connector = connector_of(&config, config_path, key)?;
    let refuse =
        |problem: String| anyhow::anyhow!("{}: {}s (key `{key}`): {problem}", config_path.display(), connector.role());
    let plugin_config = connector.plugin_config_json().map_err(refuse)?;
    let shared = connector.grants().prepare(&config.sections).map_err(refuse)?;
    let sandbox = Sandbox { limits: connector.limits().clone(), grants: connector.grants().clone(), shared };
    Ok(Under {
        setup: Setup { plugin_config, sandbox, poll_interval: connector.poll_interval() },
        runtime: config.runtime.clone(),
        role: Some(connector.role()),
        described: format!("the plugin_config, limits and grants of connector `{key}` of {}", config_path.display()),
    })
}
