//! Directories: each `grants.dirs` entry preopened at its guest path, read-only
//! unless `writable = true`.
//!
//! wasmtime-wasi resolves every path inside its preopened directory and refuses
//! escapes (`..`, absolute symlinks). A path outside every preopen never reaches the
//! host at all: wasi-libc finds no directory to resolve it against and fails in the
//! guest, which is why such an attempt is not in the host log.

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::config::DirGrant;

pub fn grant(builder: &mut WasiCtxBuilder, dirs: &[DirGrant]) -> Result<(), String> {
    for dir in dirs {
        let perms = if dir.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
        builder
            .preopened_dir(&dir.host, &dir.guest, perms)
            .map_err(|e| format!("grants.dirs: cannot open {}: {e:#}", dir.host.display()))?;
    }
    Ok(())
}
