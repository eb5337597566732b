//! Building a Python connector project with componentize-py: a directory whose
//! `pyproject.toml` has a `[tool.ferry]` table saying what the connector is. The
//! component is `app.py` (and what it imports from the project) with Ferry's helper
//! library `ferry_guest.py`, against this checkout's WIT.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::cli::new::{Kind, guest_sdk};

/// The componentize-py the Python guests are made and tested with, exactly: another
/// version may generate other bindings.
const VERSION: &str = "0.25.1";

/// The contract, in the checkout this ferry was built from (named whole: a project is
/// anywhere).
const WIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");

/// The script that installs the pinned componentize-py.
const SETUP_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/setup-python-guest");

/// The part of `pyproject.toml` ferry reads.
#[derive(Deserialize)]
struct PyProject {
    project: Option<Project>,
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Project {
    name: Option<String>,
}

#[derive(Deserialize)]
struct Tool {
    ferry: Option<FerryTable>,
}

/// `[tool.ferry]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FerryTable {
    /// `source`, `sink` or `transform`: the world the component implements.
    kind: Kind,
    /// The directory of `ferry_guest.py`, relative to the project (default: the
    /// project itself when it carries one, as `ferry new` writes it, else this
    /// checkout's `guest-sdk/python`).
    guest_sdk: Option<PathBuf>,
    /// The module that defines `Source`, `Sink` or `Transform` (default `app`).
    app: Option<String>,
}

/// The world a connector of this kind implements.
fn world(kind: Kind) -> &'static str {
    match kind {
        Kind::Source => "source-connector",
        Kind::Sink => "sink-connector",
        Kind::Transform => "transform-component",
    }
}

pub(super) fn build(dir: &Path, out: Option<&Path>) -> Result<PathBuf> {
    let manifest = dir.join("pyproject.toml");
    let text = std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let project: PyProject = toml::from_str(&text)
        .with_context(|| format!("{}: not a pyproject.toml ferry can read", manifest.display()))?;
    let Some(ferry) = project.tool.and_then(|tool| tool.ferry) else {
        bail!(
            "{}: no [tool.ferry] table, so not a Ferry connector; add one with kind = \"source\" or \"sink\" \
             (`ferry new source NAME --lang python` writes a project that has it)",
            manifest.display()
        );
    };
    let app = ferry.app.as_deref().unwrap_or("app");
    let app_file = dir.join(format!("{app}.py"));
    if !app_file.is_file() {
        bail!("{}: no such file; [tool.ferry] app names the module that exports the connector", app_file.display());
    }
    let guest_sdk = match &ferry.guest_sdk {
        Some(path) => dir.join(path),
        None if dir.join("ferry_guest.py").is_file() => dir.to_path_buf(),
        None => PathBuf::from(guest_sdk("python")?),
    };
    if !guest_sdk.join("ferry_guest.py").is_file() {
        bail!("{}: [tool.ferry] guest_sdk is {}, which has no ferry_guest.py", manifest.display(), guest_sdk.display());
    }
    let Some(name) = project.project.and_then(|p| p.name) else {
        bail!("{}: no [project] name; the component is named after it", manifest.display());
    };
    let components = dir.join("target/components");
    std::fs::create_dir_all(&components).with_context(|| format!("creating {}", components.display()))?;
    let component = components.join(format!("{}.wasm", name.replace('-', "_")));

    let tool = componentize_py()?;
    eprintln!("building {} with {} {VERSION}", dir.display(), tool.display());
    let status = Command::new(&tool)
        .current_dir(dir)
        .arg("-d")
        .arg(WIT)
        .args(["-w", world(ferry.kind), "componentize", "-p", "."])
        .arg("-p")
        .arg(&guest_sdk)
        .arg(app)
        .arg("-o")
        .arg(&component)
        .status()
        .with_context(|| format!("running {}", tool.display()))?;
    if !status.success() {
        bail!("{}: componentize-py failed ({status}); what it said is above", app_file.display());
    }
    if let Some(out) = out {
        std::fs::copy(&component, out).with_context(|| format!("copying the component to {}", out.display()))?;
    }
    Ok(component)
}

/// componentize-py of the pinned version: on PATH, or where the setup script installs
/// it.
fn componentize_py() -> Result<PathBuf> {
    let installed = installed_path();
    let mut found = Vec::new();
    for candidate in [PathBuf::from("componentize-py"), installed.clone()] {
        let Ok(output) = Command::new(&candidate).arg("--version").output() else { continue };
        let said = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if said == format!("componentize-py {VERSION}") {
            return Ok(candidate);
        }
        found.push(format!("{} is {said:?}", candidate.display()));
    }
    let found = if found.is_empty() { String::new() } else { format!(" ({})", found.join("; ")) };
    bail!(
        "componentize-py {VERSION} is not installed{found}: building a Python connector needs exactly that \
         version, on PATH or in {}; {} installs it",
        installed.display(),
        Path::new(SETUP_SCRIPT).canonicalize().unwrap_or_else(|_| SETUP_SCRIPT.into()).display()
    )
}

/// Where scripts/setup-python-guest installs componentize-py.
fn installed_path() -> PathBuf {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/share"));
    data.join(format!("ferry/componentize-py-{VERSION}/bin/componentize-py"))
}
