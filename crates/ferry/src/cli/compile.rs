//! `ferry compile COMPONENT... [--config CONFIG] [--cache DIR]`: fill the compile
//! cache ahead of time, so that `ferry run` loads each component rather than compile
//! it (seconds for a large guest).
//!
//! The entries must be made for the engine `ferry run` will build, so the engine comes
//! from the same config: fuel metering is compiled in when any enabled connector sets
//! `limits.fuel`. Components are compiled exactly as `ferry run` compiles them: checked
//! against the contract, then compiled in a child process within `compile_timeout`
//! and `compile_memory`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use ferry_config::{Config, RuntimeConfig};
use ferry_contract::files;
use ferry_contract::{ComponentWorld, Kind};
use ferry_host::engine_options;
use ferry_runtime::{
    Caching, EngineOptions, LoadError, Provenance, Runtime, SinkWorld, SourceWorld, TransformWorld, World,
};

pub fn compile(components: &[PathBuf], config: Option<&Path>, cache: Option<&Path>) -> Result<ExitCode> {
    let config = config.map(Config::load).transpose()?;
    let (options, settings) = match &config {
        Some(config) => (engine_options(config), config.runtime.clone()),
        None => (EngineOptions::default(), RuntimeConfig::default()),
    };
    let dir = match (cache, &config) {
        (Some(dir), _) => dir.to_path_buf(),
        (None, Some(config)) => config.compile_cache_dir().with_context(|| {
            format!(
                "{}: [runtime] compile_cache = false: the compile cache is off, so there is nothing to fill \
                 (give --cache DIR to fill another directory)",
                config.file.display()
            )
        })?,
        (None, None) => bail!("say which cache to fill: --config CONFIG (its [runtime] compile_cache) or --cache DIR"),
    };
    let runtime = Runtime::with_options(&options)
        .context("cannot start the WebAssembly runtime")?
        .with_compiler(super::run::isolated_compiler(&settings)?)
        .with_compile_cache(dir.clone());
    let fuel = if options.fuel { "on (some connector sets limits.fuel)" } else { "off" };
    println!("compile cache: {} (fuel metering {fuel})", dir.display());

    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut failed = false;
    for path in components {
        let shown = path.display();
        match tokio.block_on(compile_one(&runtime, path, &settings)) {
            Ok((Provenance::CacheHit { entry }, elapsed)) => {
                println!("{shown}: cache hit, loaded in {elapsed:.1?} from {}", entry.display());
            }
            Ok((Provenance::Compiled { cache: Caching::Stored { entry } }, elapsed)) => {
                println!("{shown}: cache miss, compiled in {elapsed:.1?}, cached in {}", entry.display());
            }
            Ok((Provenance::Compiled { cache: Caching::Failed(problem) }, elapsed)) => {
                println!("{shown}: cache miss, compiled in {elapsed:.1?}, but not cached: {problem}");
                failed = true;
            }
            Ok((Provenance::Compiled { cache: Caching::Off }, _)) => unreachable!("this runtime has a compile cache"),
            Err(problem) => {
                println!("{shown}: not compiled: {problem:#}");
                failed = true;
            }
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Check the component at `path` as what it claims to be (a source, a sink or a
/// transform), and
/// compile it into the cache.
async fn compile_one(
    runtime: &Runtime,
    path: &Path,
    settings: &RuntimeConfig,
) -> Result<(Provenance, std::time::Duration)> {
    let max = settings.max_component_bytes.bytes();
    let bytes = files::read_regular(path, max, "the component", "[runtime] max_component_bytes")?;
    let world = ComponentWorld::decode(&bytes).with_context(|| path.display().to_string())?;
    drop(bytes);
    let Some(kind) = ferry_contract::kind_of(&world) else {
        bail!(
            "it is neither a source, a sink nor a transform (exports: {}); see `ferry inspect`",
            world.exports().join(", ")
        );
    };
    Ok(match kind {
        Kind::Source => compiled::<SourceWorld>(runtime, path, max).await?,
        Kind::Sink => compiled::<SinkWorld>(runtime, path, max).await?,
        Kind::Transform => compiled::<TransformWorld>(runtime, path, max).await?,
    })
}

async fn compiled<W: World>(
    runtime: &Runtime,
    path: &Path,
    max: u64,
) -> Result<(Provenance, std::time::Duration), LoadError> {
    let compiled = runtime.compile(runtime.check::<W>(path, max)?).await?;
    Ok((compiled.provenance, compiled.elapsed))
}
