//! `ferry build [PATH] [--out FILE]`: build a connector crate, wherever it lives, into
//! a component, and say whether ferry can run it. The toolchain work is the
//! componentize crate's, shared with the workspace's own build of its guests.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ferry_componentize::Toolchain;

use crate::config::RuntimeConfig;
use crate::contract::ComponentWorld;
use crate::files;

pub fn build(dir: &Path, out: Option<&Path>) -> Result<ExitCode> {
    if !dir.is_dir() {
        bail!("{}: not a directory; `ferry build` takes the directory of a connector crate", dir.display());
    }
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        bail!(
            "{}: no Cargo.toml, so not a Rust crate (`ferry new source NAME` makes a connector crate)",
            dir.display()
        );
    }
    let toolchain = Toolchain::detect()?;
    eprintln!("building {} with {toolchain}", dir.display());
    let built = ferry_componentize::build_crate(&manifest, &toolchain, out)?;

    // What `ferry inspect` would say of it: a build that makes something ferry cannot
    // run is not done.
    let settings = RuntimeConfig::default();
    let limit = "[runtime] max_component_bytes";
    let bytes = files::read_regular(&built.path, settings.max_component_bytes.bytes(), "the component", limit)?;
    let world = ComponentWorld::decode(&bytes).with_context(|| built.path.display().to_string())?;
    println!("component: {} ({} bytes)", built.path.display(), bytes.len());
    let judgement = super::inspect::judge(&built.path, &world, &settings)?;
    println!("{judgement}");
    Ok(if judgement.problem.is_none() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
