//! Builds guest crates (`cdylib`s) into WebAssembly components: this workspace's own
//! (`ferry-componentize`, the tests' build script) and any author's (`ferry build`).
//!
//! Two toolchains can do it, and this picks the first that is present:
//!
//! 1. **Standard**: the rustup `wasm32-wasip2` target of the toolchain that runs the
//!    build. `cargo build --target wasm32-wasip2` emits a component directly.
//! 2. **Fallback**: Debian's `rustc-web` (installed by `scripts/setup-guest-toolchain`)
//!    building `wasm32-wasip1` with `-Zbuild-std`, then turned into a component here
//!    with `wit-component` and the WASI preview-1 reactor adapter of the same major
//!    version as the host's wasmtime. This exists for machines where `rustup target
//!    add` cannot download anything.
//!
//! Guests are built from source every time the caller asks (cargo makes that cheap
//! when nothing changed), so tests never run a stale `.wasm`. The workspace's guest
//! build uses its own target directory (`target/guests`), an author's crate its own
//! `target/`: it is a different compiler and a different target, and the standard
//! library it builds from source is kept there between runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// A guest crate in the workspace.
#[derive(Debug, Clone)]
pub struct Guest {
    /// The package name, as in `-p NAME`.
    pub package: String,
    /// The library's name, as in `NAME.wasm`.
    pub lib_name: String,
    /// The directory holding its `Cargo.toml`.
    pub dir: PathBuf,
}

/// A component that was built.
#[derive(Debug, Clone)]
pub struct Built {
    pub package: String,
    pub path: PathBuf,
}

/// How guests get compiled on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Toolchain {
    /// rustup's `wasm32-wasip2` target of the current toolchain.
    Standard { cargo: PathBuf },
    /// Debian's `rustc-web` with build-std for `wasm32-wasip1`, plus the adapter.
    Fallback,
}

/// The script that installs the fallback, in the checkout this was built from (named
/// whole, since an author's crate is elsewhere).
const SETUP_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/setup-guest-toolchain");

const FALLBACK_CARGO: &str = "/usr/bin/cargo";
const FALLBACK_RUSTC: &str = "/usr/bin/rustc";
const FALLBACK_STD_SOURCE: &str = "/usr/lib/rustlib/src/rust/library";
const FALLBACK_LINKER: &str = "/usr/lib/llvm-19/bin/wasm-ld";
const FALLBACK_LIBC: &str = "/usr/lib/wasm32-wasi";

impl Toolchain {
    /// The standard target if the current rustc has it, else the fallback if it is
    /// installed, else an error that says how to get either.
    ///
    /// `FERRY_GUEST_TOOLCHAIN=standard|fallback` forces one.
    pub fn detect() -> Result<Toolchain> {
        let forced = std::env::var("FERRY_GUEST_TOOLCHAIN").ok();
        let standard = standard_toolchain();
        let fallback_missing = fallback_missing();
        match forced.as_deref() {
            Some("standard") => {
                return standard
                    .context("FERRY_GUEST_TOOLCHAIN=standard, but rustup's wasm32-wasip2 target is not installed");
            }
            Some("fallback") => {
                if let Some(missing) = fallback_missing {
                    bail!("FERRY_GUEST_TOOLCHAIN=fallback, but {missing} is missing; run {SETUP_SCRIPT}");
                }
                return Ok(Toolchain::Fallback);
            }
            Some(other) => bail!("FERRY_GUEST_TOOLCHAIN={other:?}: expected `standard` or `fallback`"),
            None => {}
        }
        if let Some(standard) = standard {
            return Ok(standard);
        }
        match fallback_missing {
            None => Ok(Toolchain::Fallback),
            Some(missing) => bail!(
                "no toolchain can build the wasm guests: rustup's wasm32-wasip2 target is not \
                 installed (`rustup target add wasm32-wasip2`), and the fallback is incomplete \
                 ({missing} is missing; `{SETUP_SCRIPT}` installs it)"
            ),
        }
    }

    fn target(&self) -> &'static str {
        match self {
            Toolchain::Standard { .. } => "wasm32-wasip2",
            Toolchain::Fallback => "wasm32-wasip1",
        }
    }
}

impl std::fmt::Display for Toolchain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Toolchain::Standard { .. } => f.write_str("rustup's wasm32-wasip2 target"),
            Toolchain::Fallback => {
                f.write_str("the fallback toolchain (Debian's rustc-web, wasm32-wasip1, the preview-1 adapter)")
            }
        }
    }
}

fn standard_toolchain() -> Option<Toolchain> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc).args(["--print", "sysroot"]).output().ok()?;
    let sysroot = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    let libdir = sysroot.join("lib/rustlib/wasm32-wasip2/lib");
    let has_std = std::fs::read_dir(libdir)
        .ok()?
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    has_std.then(|| Toolchain::Standard { cargo: cargo.into() })
}

fn fallback_missing() -> Option<&'static str> {
    [FALLBACK_CARGO, FALLBACK_RUSTC, FALLBACK_STD_SOURCE, FALLBACK_LINKER, FALLBACK_LIBC]
        .into_iter()
        .find(|path| !Path::new(path).exists())
}

/// The guest crates of the workspace at `root`: its `cdylib` packages.
pub fn workspace_guests(root: &Path) -> Result<Vec<Guest>> {
    let mut guests = guests_of(&metadata(&[], Some(root))?);
    guests.sort_by(|a, b| a.package.cmp(&b.package));
    Ok(guests)
}

/// `cargo metadata` (without dependencies) with `args`, run in `dir` if given.
fn metadata(args: &[&std::ffi::OsStr], dir: Option<&Path>) -> Result<serde_json::Value> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["metadata", "--format-version", "1", "--no-deps", "--offline"]).args(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let output = command.output().context("running `cargo metadata`")?;
    if !output.status.success() {
        bail!("`cargo metadata` failed: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// The `cdylib` packages `cargo metadata` lists.
fn guests_of(metadata: &serde_json::Value) -> Vec<Guest> {
    let mut guests = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        for target in package["targets"].as_array().into_iter().flatten() {
            let is_cdylib = target["kind"].as_array().into_iter().flatten().any(|k| k == "cdylib");
            if is_cdylib {
                let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
                guests.push(Guest {
                    package: package["name"].as_str().unwrap_or_default().to_string(),
                    lib_name: target["name"].as_str().unwrap_or_default().replace('-', "_"),
                    dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
                });
            }
        }
    }
    guests
}

/// Where guest builds go: `$CARGO_TARGET_DIR` or `ROOT/target`, plus `guests` for the
/// compiler's own files and `components` for the finished `.wasm` files.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

/// Build `guests` of the workspace at `root` into components under
/// `target_dir(root)/components`, and return where each one is.
pub fn build(root: &Path, guests: &[Guest], toolchain: &Toolchain) -> Result<Vec<Built>> {
    if guests.is_empty() {
        return Ok(Vec::new());
    }
    let target_dir = target_dir(root);
    let job = Job {
        manifest: &root.join("Cargo.toml"),
        guests,
        target_dir: &target_dir.join("guests"),
        components_dir: &target_dir.join("components"),
        // The workspace's lock file is part of the repository: a build must not change it.
        locked: true,
    };
    job.run(toolchain)
}

/// The guest crate whose manifest is `manifest` (a `Cargo.toml`), whatever workspace
/// it belongs to: an error naming the path if it is not a crate, or not a `cdylib`.
pub fn crate_guest(manifest: &Path) -> Result<Guest> {
    if !manifest.is_file() {
        bail!("{}: no such file; a connector crate is a directory with a Cargo.toml", manifest.display());
    }
    let manifest =
        manifest.canonicalize().with_context(|| format!("{}: cannot resolve the path", manifest.display()))?;
    let metadata = metadata(&["--manifest-path".as_ref(), manifest.as_os_str()], None)
        .with_context(|| format!("{}: cannot read the crate", manifest.display()))?;
    let guests = guests_of(&metadata);
    let dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
    if let Some(guest) = guests.into_iter().find(|g| g.dir == dir) {
        return Ok(guest);
    }
    let package = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["manifest_path"].as_str().map(Path::new) == Some(&manifest));
    match package {
        Some(package) => bail!(
            "{}: `{}` is not a connector crate: a connector is a library built as a `cdylib` \
             (add `[lib]` with `crate-type = [\"cdylib\"]`)",
            manifest.display(),
            package["name"].as_str().unwrap_or_default()
        ),
        // A virtual workspace manifest has no package of its own.
        None => bail!("{}: not a crate (no [package]); name the connector crate's directory", manifest.display()),
    }
}

/// Build the one guest crate whose manifest is `manifest` into a component, whatever
/// workspace it belongs to, and return where the component is.
///
/// The compiler's files go to `$CARGO_TARGET_DIR`, else to `target/` beside the
/// manifest (not Ferry's), so that the standard library the fallback builds from
/// source is kept per crate between builds. The component goes to
/// `target/components/<lib>.wasm` beside the manifest, and is copied to `out` if given.
pub fn build_crate(manifest: &Path, toolchain: &Toolchain, out: Option<&Path>) -> Result<Built> {
    let guest = crate_guest(manifest)?;
    let job = Job {
        manifest: &guest.dir.join("Cargo.toml"),
        guests: std::slice::from_ref(&guest),
        target_dir: &target_dir(&guest.dir),
        components_dir: &guest.dir.join("target/components"),
        // An author's crate may have no lock file yet: cargo writes one.
        locked: false,
    };
    let built = job.run(toolchain)?.pop().context("cargo built nothing")?;
    let Some(out) = out else {
        return Ok(built);
    };
    std::fs::copy(&built.path, out)
        .with_context(|| format!("copying {} to {}", built.path.display(), out.display()))?;
    Ok(Built { package: built.package, path: out.to_path_buf() })
}

/// One `cargo build` of guests of one workspace, and the components made of them.
struct Job<'a> {
    /// The manifest cargo runs with.
    manifest: &'a Path,
    guests: &'a [Guest],
    /// The compiler's own files.
    target_dir: &'a Path,
    /// Where the finished components go, as `<lib>.wasm`.
    components_dir: &'a Path,
    /// Refuse to change the lock file.
    locked: bool,
}

impl Job<'_> {
    fn run(&self, toolchain: &Toolchain) -> Result<Vec<Built>> {
        std::fs::create_dir_all(self.components_dir)
            .with_context(|| format!("creating {}", self.components_dir.display()))?;
        let mut cargo = cargo_command(toolchain);
        // Cargo reads the `.cargo/config.toml` files above the directory it runs in:
        // the crate's own, not those of wherever the build was asked for.
        if let Some(dir) = self.manifest.parent() {
            cargo.current_dir(dir);
        }
        cargo
            .arg("build")
            .arg("--manifest-path")
            .arg(self.manifest)
            .args(["--release", "--target", toolchain.target()])
            .arg("--target-dir")
            .arg(self.target_dir)
            // Guests ship without DWARF (it would triple their size); the name section
            // stays, so traps still show function names.
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
            // One optimised unit across the connector, the SDK and std: without it the
            // SDK's small functions stay calls into another crate from every message a
            // connector writes (the random source's poll of 1,000 records took a third
            // longer). It costs about a minute more to build every guest from scratch.
            .env("CARGO_PROFILE_RELEASE_LTO", "fat")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
        if self.locked {
            cargo.arg("--locked");
        }
        for guest in self.guests {
            cargo.args(["-p", &guest.package]);
        }
        let status = cargo.status().context("running cargo to build the guests")?;
        if !status.success() {
            bail!("{}: building failed ({status}); the compiler's messages are above", self.manifest.display());
        }

        let out_dir = self.target_dir.join(toolchain.target()).join("release");
        self.guests
            .iter()
            .map(|guest| {
                let wasm = out_dir.join(format!("{}.wasm", guest.lib_name));
                let bytes = std::fs::read(&wasm).with_context(|| format!("reading {}", wasm.display()))?;
                let component = match toolchain {
                    Toolchain::Standard { .. } => bytes,
                    Toolchain::Fallback => {
                        componentize(&bytes).with_context(|| format!("turning {} into a component", wasm.display()))?
                    }
                };
                let path = self.components_dir.join(format!("{}.wasm", guest.lib_name));
                write_if_changed(&path, &component)?;
                Ok(Built { package: guest.package.clone(), path })
            })
            .collect()
    }
}

/// A core module built for `wasm32-wasip1` becomes a component: its WIT world comes
/// from the custom section wit-bindgen embedded, its WASI preview-1 imports are
/// served by the reactor adapter (reactor, because guests are libraries, not
/// commands with a `main`).
pub fn componentize(module: &[u8]) -> Result<Vec<u8>> {
    wit_component::ComponentEncoder::default()
        .module(module)?
        .validate(true)
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .encode()
}

fn cargo_command(toolchain: &Toolchain) -> Command {
    let program = match toolchain {
        Toolchain::Standard { cargo } => cargo.clone(),
        Toolchain::Fallback => PathBuf::from(FALLBACK_CARGO),
    };
    let mut command = Command::new(program);
    // When this runs from a build script, cargo has set variables for *that* build
    // (its rustc, flags, jobserver, profile). None of them apply to the guests.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let inherited_build_setting = (key.starts_with("CARGO_")
            && !key.starts_with("CARGO_HOME")
            && !key.starts_with("CARGO_HTTP")
            && !key.starts_with("CARGO_NET")
            && !key.starts_with("CARGO_REGISTR"))
            || key.starts_with("RUSTC")
            || key.starts_with("RUSTDOC")
            || key == "RUSTFLAGS";
        if inherited_build_setting {
            command.env_remove(key.as_ref());
        }
    }
    if *toolchain == Toolchain::Fallback {
        // Debian's compiler must not be mixed with rustup's: put it first and name it.
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![PathBuf::from("/usr/bin")];
        paths.extend(std::env::split_paths(&path));
        command
            .env("PATH", std::env::join_paths(paths).unwrap_or(path))
            .env_remove("RUSTUP_TOOLCHAIN")
            .env("RUSTC", FALLBACK_RUSTC)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_UNSTABLE_BUILD_STD", "std,panic_abort")
            .env("CARGO_TARGET_WASM32_WASIP1_LINKER", FALLBACK_LINKER)
            .env("RUSTFLAGS", format!("-C link-self-contained=no -L {FALLBACK_LIBC}"));
    }
    command
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
