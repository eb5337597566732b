//! Making a directory's entries durable: a new data file, a renamed checkpoint. A
//! file's own fsync does not cover its name in the directory; the directory's does.
//!
//! Natively that is `fsync` on the directory opened as a file. In the guest, the WASI
//! preview-1 adapter that the fallback toolchain builds with refuses to sync a
//! directory (`EBADF`), so the guest asks WASI 0.2 directly: it opens `dir` through
//! the granted directory that holds it, and syncs that.

use std::io;
use std::path::Path;

#[cfg(not(target_arch = "wasm32"))]
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(target_arch = "wasm32")]
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    use wasi::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};

    use ferry_guest::granted;

    let (preopen, rest) = granted::resolve(dir)?;
    if rest.is_empty() {
        return preopen.sync().map_err(granted::io_error);
    }
    let opened = preopen
        .open_at(PathFlags::SYMLINK_FOLLOW, &rest, OpenFlags::DIRECTORY, DescriptorFlags::READ)
        .map_err(granted::io_error)?;
    opened.sync().map_err(granted::io_error)
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
