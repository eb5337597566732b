//! Builds this workspace's guest crates (every `cdylib`) into WebAssembly components.
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
//! when nothing changed), so tests never run a stale `.wasm`. The guest build uses its
//! own target directory (`target/guests`): it is a different compiler and a different
//! target, and the standard library it builds from source is kept there between runs.

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
                    bail!(
                        "FERRY_GUEST_TOOLCHAIN=fallback, but {missing} is missing; run scripts/setup-guest-toolchain"
                    );
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
                 ({missing} is missing; `scripts/setup-guest-toolchain` installs it)"
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
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root)
        .output()
        .context("running `cargo metadata`")?;
    if !output.status.success() {
        bail!("`cargo metadata` failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
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
    guests.sort_by(|a, b| a.package.cmp(&b.package));
    Ok(guests)
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
    let guest_target_dir = target_dir.join("guests");
    let components_dir = target_dir.join("components");
    std::fs::create_dir_all(&components_dir).with_context(|| format!("creating {}", components_dir.display()))?;

    let mut cargo = cargo_command(toolchain);
    cargo
        .current_dir(root)
        .args(["build", "--release", "--locked", "--target", toolchain.target()])
        .arg("--target-dir")
        .arg(&guest_target_dir)
        // Guests ship without DWARF (it would triple their size); the name section
        // stays, so traps still show function names.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false");
    for guest in guests {
        cargo.args(["-p", &guest.package]);
    }
    let status = cargo.status().context("running cargo to build the guests")?;
    if !status.success() {
        bail!("building the guests failed ({status}); the compiler's messages are above");
    }

    let out_dir = guest_target_dir.join(toolchain.target()).join("release");
    guests
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
            let path = components_dir.join(format!("{}.wasm", guest.lib_name));
            write_if_changed(&path, &component)?;
            Ok(Built { package: guest.package.clone(), path })
        })
        .collect()
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
