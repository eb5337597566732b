//! Directories: each `grants.dirs` entry preopened at its guest path, read-only
//! unless `writable = true`.
//!
//! wasmtime-wasi resolves every path inside its preopened directory and refuses
//! escapes (`..`, absolute symlinks). A path outside every preopen never reaches the
//! host at all: wasi-libc finds no directory to resolve it against and fails in the
//! guest, which is why such an attempt is not in the host log.

mod config;

use std::path::PathBuf;

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

pub use config::DirGrant;

use crate::{Capability, HostFile, Import, InstanceBuilder, NoSection, Verdict};

/// The capability: `grants.dirs`, the directories preopened.
pub struct Dirs;

impl Capability for Dirs {
    const NAME: &'static str = "dirs";
    type Grant = Vec<DirGrant>;
    type Section = NoSection;
    type Shared = ();
    type State = ();

    fn validate(dirs: &Vec<DirGrant>, _: &NoSection) -> Result<(), (&'static str, String)> {
        dirs.iter().try_for_each(DirGrant::validate)
    }

    fn grant_paths(dirs: &mut Vec<DirGrant>) -> Vec<&mut PathBuf> {
        dirs.iter_mut().map(|dir| &mut dir.host).collect()
    }

    fn host_files(dirs: &Vec<DirGrant>) -> Vec<HostFile<'_>> {
        dirs.iter().map(|dir| HostFile { key: "grants.dirs", path: &dir.host, writable: dir.writable }).collect()
    }

    fn verdict(import: &Import<'_>, dirs: &Vec<DirGrant>) -> Option<Verdict> {
        (import.package == "wasi:filesystem")
            .then(|| Verdict::by(!dirs.is_empty(), "grants.dirs", "no directories: grants.dirs is empty"))
    }

    async fn instantiate(dirs: &Vec<DirGrant>, _: &(), instance: &mut InstanceBuilder<'_>) -> Result<(), String> {
        grant(instance.wasi, dirs)
    }
}

fn grant(builder: &mut WasiCtxBuilder, dirs: &[DirGrant]) -> Result<(), String> {
    for dir in dirs {
        let perms = if dir.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
        builder
            .preopened_dir(&dir.host, &dir.guest, perms)
            .map_err(|e| format!("grants.dirs: cannot open {}: {e:#}", dir.host.display()))?;
    }
    Ok(())
}
