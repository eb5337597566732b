//! `ferry inspect COMPONENT [--config CONFIG --key KEY]`: what a component is,
//! whether ferry can run it, and what a connector's grants would let it reach.

use std::path::Path;
use std::process::ExitCode;

use crate::config::{Config, RuntimeConfig};
use crate::contract::{self, ComponentWorld, Contract, SOURCE_WORLD};
use crate::grants::{self, Verdict};
use crate::runtime::Runtime;
use anyhow::{Context, Result, bail};

pub fn inspect(path: &Path, wit: bool, grants_of: Option<(&Path, &str)>) -> Result<ExitCode> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read the component", path.display()))?;
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
    if let Err(problem) = contract::check_source(&world, &Contract::load()) {
        println!("source: no: {problem}");
        return Ok(ExitCode::FAILURE);
    }
    let settings = RuntimeConfig::default();
    let runtime = Runtime::new()?.with_compiler(super::run::isolated_compiler(&settings)?);
    let loaded = tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
        let checked = runtime.check_source(path, settings.max_component_bytes.bytes())?;
        runtime.compile_source(checked).await
    });
    match loaded {
        Ok(_) => {
            println!("source: yes: implements {SOURCE_WORLD}, compiles and links");
            Ok(ExitCode::SUCCESS)
        }
        Err(problem) => {
            println!("source: no: {problem}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Each import, granted or denied under connector `key`'s grants.
fn print_grants(world: &ComponentWorld, config_path: &Path, key: &str) -> Result<()> {
    let config = Config::load(config_path)?;
    let Some(source) = config.source(key) else {
        let keys: Vec<_> = config.sources.iter().map(|s| s.key.as_str()).collect();
        bail!("{}: no connector has key `{key}` (keys: {})", config_path.display(), keys.join(", "));
    };
    println!("grants of `{key}` in {}:", config_path.display());
    for import in world.imports() {
        match grants::verdict(&import, &source.grants) {
            Verdict::Granted(how) => println!("  granted      {import}  ({how})"),
            Verdict::Denied(why) => println!("  denied       {import}  ({why})"),
            Verdict::Unavailable => println!("  unavailable  {import}  (this host does not provide it)"),
        }
    }
    Ok(())
}
