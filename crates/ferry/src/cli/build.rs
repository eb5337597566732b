//! `ferry build [PATH] [--out FILE]`: build a connector project, wherever it lives,
//! into a component, and say whether ferry can run it. Which language a project is
//! in is told by the file its tools read (`Cargo.toml` for Rust, `pyproject.toml` for
//! Python, `package.json` for JavaScript); each language's build is in
//! `build/<lang>.rs`, and what follows a build (the check `ferry inspect` does) is
//! here, the same for all.

mod js;
mod python;
mod rust;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use ferry_config::RuntimeConfig;
use ferry_contract::ComponentWorld;
use ferry_contract::files;

/// How to build the project in a directory: the first language whose marker file is
/// there.
struct Builder {
    /// The file that says a directory is a project of this language.
    marker: &'static str,
    /// Builds the project in a directory into a component (also copied to `out`), and
    /// says where the component is.
    build: fn(dir: &Path, out: Option<&Path>) -> Result<PathBuf>,
}

const BUILDERS: &[Builder] = &[
    Builder { marker: "Cargo.toml", build: rust::build },
    Builder { marker: "pyproject.toml", build: python::build },
    Builder { marker: "package.json", build: js::build },
];

/// How long the check after a build lets the component compile.
const BUILD_COMPILE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

pub fn build(dir: &Path, out: Option<&Path>) -> Result<ExitCode> {
    if !dir.is_dir() {
        bail!("{}: not a directory; `ferry build` takes the directory of a connector project", dir.display());
    }
    let Some(builder) = BUILDERS.iter().find(|builder| dir.join(builder.marker).is_file()) else {
        let markers: Vec<&str> = BUILDERS.iter().map(|builder| builder.marker).collect();
        bail!(
            "{}: no {}, so not a connector project ferry can build (`ferry new source NAME` makes one)",
            dir.display(),
            markers.join(" or ")
        );
    };
    let component = (builder.build)(dir, out)?;

    // What `ferry inspect` would say of it: a build that makes something ferry cannot
    // run is not done.
    // The default limits, but time to compile: the component is the author's own, just
    // built, often on a machine busy building, and one holding a JavaScript engine
    // takes up to a minute there. `ferry run` applies the configured limit.
    let settings = RuntimeConfig { compile_timeout: BUILD_COMPILE_TIMEOUT, ..RuntimeConfig::default() };
    let limit = "[runtime] max_component_bytes";
    let bytes = files::read_regular(&component, settings.max_component_bytes.bytes(), "the component", limit)?;
    let world = ComponentWorld::decode(&bytes).with_context(|| component.display().to_string())?;
    println!("component: {} ({} bytes)", component.display(), bytes.len());
    let judgement = super::inspect::judge(&component, &world, &settings)?;
    println!("{judgement}");
    Ok(if judgement.problem.is_none() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
