//! Building a JavaScript connector: a directory with a `package.json` saying which
//! module is the connector (`main`) and what it is (`"ferry": { "kind": "source" }`
//! or `"sink"`). Two pinned tools do the work, as scripts/setup-js-guest installs
//! them: rolldown bundles the connector's modules (and the ferry-guest helper it
//! imports, wherever it lives) into one file, because componentize-js only reads
//! modules under the directory it runs in; componentize-js then compiles that file,
//! with a JavaScript engine, into a component of Ferry's WIT world.
//!
//! The world is Ferry's `source-connector`, `sink-connector` or `transform-component`
//! with WASI's filesystem
//! preopens named (guest-sdk/js/wit/js-worlds.wit says why), assembled in
//! `target/js/wit/`. The bundle goes to `target/js/<lib>.js`, the component to
//! `target/components/<lib>.wasm`, `<lib>` being the package's name with `_` for `-`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The componentize-js version the setup script pins (guest-sdk/js/tools/).
const COMPONENTIZE_JS: &str = "0.23.0";
const SETUP_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/setup-js-guest");
/// Ferry's WIT, the contract the component is built against.
const WIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");
/// The worlds a JavaScript connector is built as.
const JS_WORLDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest-sdk/js/wit/js-worlds.wit");
/// WASI's packages the JS worlds import, as jco (a dependency of componentize-js)
/// ships them, relative to the tools' node_modules.
const WASI_WIT: &[&str] = &[
    "@bytecodealliance/jco/lib/wit/builtin/0.2.12",
    "@bytecodealliance/componentize-js/node_modules/@bytecodealliance/jco/lib/wit/builtin/0.2.12",
];
const WASI_PACKAGES: &[&str] = &["wasi-filesystem", "wasi-io", "wasi-clocks"];
/// The modules a connector imports from the host (its world's imports), which the
/// bundle leaves as imports.
const HOST_MODULES: &str = "iggy:connector/logging@0.2.1,iggy:connector/postgres@0.2.1,\
                            wasi:filesystem/preopens@0.2.12,wasi:filesystem/types@0.2.12";

/// What `package.json` says of the project.
#[derive(Debug, PartialEq, Eq)]
struct Project {
    /// The package's name with `_` for `-`: the file names of what is built.
    lib: String,
    /// The connector's module, relative to the project.
    main: String,
    world: &'static str,
}

pub(super) fn build(dir: &Path, out: Option<&Path>) -> Result<PathBuf> {
    // Absolute: the tools run in other directories than this one.
    let dir = &dir.canonicalize().with_context(|| format!("reading {}", dir.display()))?;
    let manifest = dir.join("package.json");
    let text = std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let project = project(&text).with_context(|| format!("{}: not a Ferry connector project", manifest.display()))?;
    if !dir.join(&project.main).is_file() {
        bail!("{}: `main` is {:?}, which is not a file in {}", manifest.display(), project.main, dir.display());
    }
    let tools = Tools::find()?;
    eprintln!("building {} ({}) with componentize-js {COMPONENTIZE_JS}", dir.display(), project.world);

    let js = dir.join("target/js");
    let components = dir.join("target/components");
    for made in [&js, &components] {
        std::fs::create_dir_all(made).with_context(|| format!("creating {}", made.display()))?;
    }
    let bundle = js.join(format!("{}.js", project.lib));
    let mut rolldown = Command::new(&tools.rolldown);
    rolldown.current_dir(dir).arg(&project.main).arg("--file").arg(&bundle);
    rolldown.args(["--format", "esm", "--external", HOST_MODULES]);
    run(rolldown, "rolldown (bundling the connector's modules)", dir)?;

    let component = components.join(format!("{}.wasm", project.lib));
    let wit = assemble_wit(&js.join("wit"), &tools)?;
    let mut componentize = Command::new(&tools.componentize_js);
    // From the bundle's directory: componentize-js maps the directory it runs in into
    // the engine and reads the module from there.
    componentize.current_dir(&js).arg(bundle.file_name().expect("a file name"));
    componentize.arg("--wit").arg(&wit).args(["--world-name", project.world]).arg("--out").arg(&component);
    run(componentize, "componentize-js", dir)?;

    if let Some(out) = out {
        std::fs::copy(&component, out).with_context(|| format!("copying the component to {}", out.display()))?;
        return Ok(out.to_path_buf());
    }
    Ok(component)
}

/// Ferry's WIT, the JS worlds and WASI's packages, in `dir` (made afresh): a copy,
/// because componentize-js reads the directory through a WASI shim that does not
/// follow links out of it.
fn assemble_wit(dir: &Path, tools: &Tools) -> Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let wasi =
        WASI_WIT.iter().map(|sub| tools.node_modules.join(sub)).find(|path| path.is_dir()).with_context(|| {
            format!(
                "WASI's WIT is not in {} (jco's lib/wit/builtin/0.2.12): reinstall the tools",
                tools.node_modules.display()
            )
        })?;
    let copy = |from: &Path, to: &Path| -> Result<()> {
        std::fs::copy(from, to).with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        Ok(())
    };
    for package in WASI_PACKAGES {
        let into = dir.join("deps").join(package);
        std::fs::create_dir_all(&into).with_context(|| format!("creating {}", into.display()))?;
        for entry in std::fs::read_dir(wasi.join(package)).with_context(|| format!("reading {}", wasi.display()))? {
            let entry = entry?;
            copy(&entry.path(), &into.join(entry.file_name()))?;
        }
    }
    for entry in std::fs::read_dir(WIT).with_context(|| format!("Ferry's WIT ({WIT}) is gone"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "wit") {
            copy(&path, &dir.join(path.file_name().expect("a file name")))?;
        }
    }
    copy(Path::new(JS_WORLDS), &dir.join("js-worlds.wit"))?;
    Ok(dir.to_path_buf())
}

/// Read what a build needs from `package.json`.
fn project(text: &str) -> Result<Project> {
    let json: serde_json::Value = serde_json::from_str(text).context("it is not JSON")?;
    let name = json["name"].as_str().context("no \"name\" (a string)")?;
    let main = json["main"].as_str().context("no \"main\" (the connector's module, e.g. \"source.js\")")?;
    let world = match json["ferry"]["kind"].as_str() {
        Some("source") => "source-connector-js",
        Some("sink") => "sink-connector-js",
        Some("transform") => "transform-component-js",
        other => bail!(
            "\"ferry\": {{ \"kind\": ... }} is {}, not \"source\", \"sink\" or \"transform\" (what the \
             connector is)",
            other.map_or("missing".to_string(), |k| format!("{k:?}"))
        ),
    };
    let lib = name.rsplit('/').next().unwrap_or(name).replace('-', "_");
    Ok(Project { lib, main: main.to_string(), world })
}

/// Run a tool, failing with its name and what it printed when it fails.
fn run(mut command: Command, what: &str, dir: &Path) -> Result<()> {
    let output = command.output().with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        bail!(
            "{}: {what} failed ({}):\n{}{}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Where the tools are: where scripts/setup-js-guest installs them, else on PATH.
struct Tools {
    componentize_js: PathBuf,
    rolldown: PathBuf,
    /// The node_modules componentize-js is in.
    node_modules: PathBuf,
}

impl Tools {
    fn find() -> Result<Tools> {
        let installed = install_dir().map(|dir| dir.join("node_modules/.bin"));
        let in_place = installed.as_ref().filter(|bin| bin.join("componentize-js").is_file());
        let found = match in_place {
            Some(bin) => Some((bin.join("componentize-js"), bin.join("rolldown"))),
            None => on_path("componentize-js").zip(on_path("rolldown")),
        };
        // `.bin/componentize-js` links to `<node_modules>/@bytecodealliance/componentize-js/src/cli.js`.
        let node_modules = |tool: &Path| tool.canonicalize().ok()?.ancestors().nth(4).map(Path::to_path_buf);
        if let Some((componentize_js, rolldown)) = found
            && let Some(node_modules) = node_modules(&componentize_js)
        {
            return Ok(Tools { componentize_js, rolldown, node_modules });
        }
        let setup = Path::new(SETUP_SCRIPT).canonicalize().unwrap_or_else(|_| PathBuf::from(SETUP_SCRIPT));
        bail!(
            "building a JavaScript connector needs componentize-js {COMPONENTIZE_JS} and rolldown (with Node.js), \
             which are neither in {} nor on PATH; {} installs them",
            installed.map_or("~/.local/share/ferry/js-guest".to_string(), |bin| bin.display().to_string()),
            setup.display()
        )
    }
}

/// `${XDG_DATA_HOME:-~/.local/share}/ferry/js-guest/componentize-js-<version>`, as
/// scripts/setup-js-guest has it.
fn install_dir() -> Option<PathBuf> {
    let data = match std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        Some(data) => PathBuf::from(data),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".local/share"),
    };
    Some(data.join(format!("ferry/js-guest/componentize-js-{COMPONENTIZE_JS}")))
}

fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(tool)).find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The world `package.json` asks for, or the error.
    fn world_or_error(text: &str) -> String {
        match project(text) {
            Ok(project) => project.world.to_string(),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn package_json_names_the_module_and_the_world() {
        let project = project(r#"{"name": "my-source", "main": "src/app.js", "ferry": {"kind": "source"}}"#).unwrap();
        assert_eq!(
            project,
            Project { lib: "my_source".into(), main: "src/app.js".into(), world: "source-connector-js" }
        );
        assert_eq!(world_or_error(r#"{"name": "s", "main": "s.js", "ferry": {"kind": "sink"}}"#), "sink-connector-js");
    }

    #[test]
    fn a_package_json_that_does_not_say_what_to_build_is_refused_naming_the_key() {
        assert!(world_or_error("{").contains("not JSON"));
        assert!(world_or_error(r#"{"main": "a.js"}"#).contains("no \"name\""));
        assert!(world_or_error(r#"{"name": "a"}"#).contains("no \"main\""));
        let error = world_or_error(r#"{"name": "a", "main": "a.js"}"#);
        assert!(error.contains(r#""ferry": { "kind": ... } is missing"#), "{error}");
        let error = world_or_error(r#"{"name": "a", "main": "a.js", "ferry": {"kind": "pump"}}"#);
        assert!(error.contains(r#"is "pump", not "source", "sink" or "transform""#), "{error}");
        let transform = project(r#"{"name": "@me/my-transform", "main": "t.js", "ferry": {"kind": "transform"}}"#);
        let transform = transform.unwrap();
        assert_eq!((transform.world, transform.lib.as_str()), ("transform-component-js", "my_transform"));
    }
}
