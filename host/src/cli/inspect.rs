//! `ferry inspect COMPONENT`: what a component is, and whether ferry can run it.

use std::path::Path;
use std::process::ExitCode;

use crate::contract::{self, ComponentWorld, Contract, SOURCE_WORLD};
use crate::runtime::Runtime;
use anyhow::{Context, Result};

pub fn inspect(path: &Path, wit: bool) -> Result<ExitCode> {
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
    if let Err(problem) = contract::check_source(&world, &Contract::load()) {
        println!("source: no: {problem}");
        return Ok(ExitCode::FAILURE);
    }
    let runtime = Runtime::new()?;
    match runtime.load_source(path) {
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
