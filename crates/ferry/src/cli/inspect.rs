//! `ferry inspect COMPONENT [--config CONFIG --key KEY]`: what a component is,
//! whether ferry can run it, and what a connector's grants would let it reach.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ferry_capabilities::Verdict;
use ferry_config::{Config, ConnectorConfig, RuntimeConfig};
use ferry_contract::files;
use ferry_contract::{ComponentWorld, Contract, Kind};
use ferry_runtime::{LoadError, Runtime, SinkWorld, SourceWorld, TransformWorld, World};

pub fn inspect(path: &Path, wit: bool, grants_of: Option<(&Path, &str)>) -> Result<ExitCode> {
    let settings = RuntimeConfig::default();
    let limit = "[runtime] max_component_bytes";
    let bytes = files::read_regular(path, settings.max_component_bytes.bytes(), "the component", limit)?;
    let world = ComponentWorld::decode(&bytes).with_context(|| path.display().to_string())?;
    println!("component: {} ({} bytes)", path.display(), bytes.len());
    println!("imports:");
    for import in world.imports() {
        println!("  {import}");
    }
    println!("exports:");
    for export in world.exports() {
        println!("  {export}");
    }
    if wit {
        println!("\n{}", world.wit());
    }
    if let Some((config_path, key)) = grants_of {
        print_grants(&world, config_path, key)?;
    }
    let judgement = judge(path, &world, &settings)?;
    println!("{judgement}");
    Ok(if judgement.problem.is_none() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What `ferry run` would make of a component: the kind it claims, and why it cannot
/// run as that kind, if it cannot. `ferry inspect` and `ferry build` print it.
pub(super) struct Judgement {
    pub kind: Kind,
    pub problem: Option<String>,
}

impl std::fmt::Display for Judgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.problem {
            None => write!(f, "{}: yes: implements {}, compiles and links", self.kind, self.kind.world()),
            Some(problem) => write!(f, "{}: no: {problem}", self.kind),
        }
    }
}

/// Judge the component at `path`, whose world is `world`, as `ferry run` would:
/// against the contract of its kind, then compiled and linked.
pub(super) fn judge(path: &Path, world: &ComponentWorld, settings: &RuntimeConfig) -> Result<Judgement> {
    // A component is judged as what it claims to be; one that claims nothing is
    // told what a source would need.
    let kind = ferry_contract::kind_of(world).unwrap_or(Kind::Source);
    if let Err(problem) = ferry_contract::check(world, &Contract::load(), kind) {
        return Ok(Judgement { kind, problem: Some(problem.to_string()) });
    }
    let runtime = Runtime::new()?.with_compiler(super::run::isolated_compiler(settings)?);
    let loaded = match kind {
        Kind::Source => compiles::<SourceWorld>(&runtime, path, settings),
        Kind::Sink => compiles::<SinkWorld>(&runtime, path, settings),
        Kind::Transform => compiles::<TransformWorld>(&runtime, path, settings),
    };
    Ok(Judgement { kind, problem: loaded.err().map(|e| e.to_string()) })
}

/// Check and compile the component as `ferry run` would.
fn compiles<W: World>(runtime: &Runtime, path: &Path, settings: &RuntimeConfig) -> Result<(), LoadError> {
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| LoadError::Compile {
        path: path.to_path_buf(),
        message: format!("cannot start a runtime to compile: {e}"),
    })?;
    tokio.block_on(async {
        let checked = runtime.check::<W>(path, settings.max_component_bytes.bytes())?;
        runtime.compile(checked).await.map(|_| ())
    })
}

/// Each import, granted or denied under connector `key`'s grants.
fn print_grants(world: &ComponentWorld, config_path: &Path, key: &str) -> Result<()> {
    let config = Config::load(config_path)?;
    let connector = connector_of(&config, config_path, key)?;
    println!("grants of `{key}` in {}:", config_path.display());
    for import in world.imports() {
        match connector.grants().verdict(&import) {
            Verdict::Granted(how) => println!("  granted      {import}  ({how})"),
            Verdict::Denied(why) => println!("  denied       {import}  ({why})"),
            Verdict::Unavailable => println!("  unavailable  {import}  (this host does not provide it)"),
        }
    }
    Ok(())
}

/// Connector `key` of `config` (read from `config_path`), or an error listing the
/// keys there are.
pub(super) fn connector_of<'a>(config: &'a Config, config_path: &Path, key: &str) -> Result<&'a dyn ConnectorConfig> {
    let Some(connector) = config.connector(key) else {
        let keys: Vec<_> = config.connectors().map(|c| c.key()).collect();
        bail!("{}: no connector has key `{key}` (keys: {})", config_path.display(), keys.join(", "));
    };
    Ok(connector)
}
