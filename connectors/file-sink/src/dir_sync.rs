//! Making a directory's entries durable: a new data file, a renamed checkpoint. A
//! file's own fsync does not cover its name in the directory; the directory's does.
//!
//! Natively that is `fsync` on the directory opened as a file. In the guest, the WASI
//! preview-1 adapter that the fallback toolchain builds with refuses to sync a
//! directory (`EBADF`), so the guest asks WASI 0.2 directly: it finds the granted
//! directory (preopen) that holds `dir`, opens `dir` through it, and syncs that.

use std::io;
use std::path::Path;

#[cfg(not(target_arch = "wasm32"))]
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(target_arch = "wasm32")]
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    use wasi::filesystem::preopens::get_directories;
    use wasi::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};

    let wasi_error = |e: wasi::filesystem::types::ErrorCode| io::Error::other(e.to_string());
    // The preopen with the longest path that is an ancestor of `dir` resolves it.
    let (preopen, rest) = get_directories()
        .into_iter()
        .filter_map(|(descriptor, path)| {
            let rest = dir.strip_prefix(&path).ok()?.to_path_buf();
            Some((path.len(), descriptor, rest))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, descriptor, rest)| (descriptor, rest))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not inside any granted directory"))?;
    let rest = rest.to_str().ok_or_else(|| io::Error::other("the path is not UTF-8"))?;
    if rest.is_empty() {
        return preopen.sync().map_err(wasi_error);
    }
    let opened = preopen
        .open_at(PathFlags::SYMLINK_FOLLOW, rest, OpenFlags::DIRECTORY, DescriptorFlags::READ)
        .map_err(wasi_error)?;
    opened.sync().map_err(wasi_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_syncs_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        sync_dir(dir.path()).unwrap();
        assert!(sync_dir(&dir.path().join("missing")).is_err());
    }
}
