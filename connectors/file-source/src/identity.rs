//! Which file a path is: the same value under any name (a rotated file keeps its
//! identity when it is renamed), another for a new file under the old name. A file's
//! identity is its device and inode; in the guest, WASI's `metadata-hash` of them
//! (`ferry_guest::granted::identity`), since the preview-1 adapter does not show
//! inodes.

use std::io;
use std::path::Path;

#[cfg(target_arch = "wasm32")]
pub fn identity(path: &Path) -> io::Result<String> {
    ferry_guest::granted::identity(path).map(|id| format!("{id:032x}"))
}

#[cfg(not(target_arch = "wasm32"))]
pub fn identity(path: &Path) -> io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path)?;
    Ok(format!("{:016x}{:016x}", metadata.dev(), metadata.ino()))
}
