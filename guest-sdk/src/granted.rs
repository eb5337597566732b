//! The granted directory (WASI preopen) that holds a path, for the calls a guest
//! makes through WASI 0.2 directly rather than through `std::fs`: what the
//! preview-1 adapter the guests are built with cannot do (sync a directory, write at
//! an offset without a seek, tell one file from another across a rename).
//!
//! `std::fs` paths are resolved by wasi-libc against the preopens; WASI 0.2 calls
//! take a descriptor and a path relative to it, so this resolves the path the same
//! way: against the preopen with the longest guest path that contains it, a
//! relative path being relative to `/` (wasi-libc's working directory).

use std::io;
use std::path::Path;

use wasi::filesystem::preopens::get_directories;
use wasi::filesystem::types::{Descriptor, ErrorCode};

/// The preopen that holds `path`, and `path` relative to it (empty for the preopen
/// itself).
pub fn resolve(path: &Path) -> io::Result<(Descriptor, String)> {
    let path = Path::new("/").join(path);
    let (preopen, rest) = get_directories()
        .into_iter()
        .filter_map(|(descriptor, guest)| {
            let rest = path.strip_prefix(&guest).ok()?.to_path_buf();
            Some((guest.len(), descriptor, rest))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, descriptor, rest)| (descriptor, rest))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not inside any granted directory"))?;
    let rest = rest.into_os_string().into_string().map_err(|_| io::Error::other("the path is not UTF-8"))?;
    Ok((preopen, rest))
}

/// Which file `path` is: the same value for the same file under any name (a rename
/// keeps it), another for another file, as long as both exist. WASI's
/// `metadata-hash` of the file (the host hashes its device and inode).
pub fn identity(path: &Path) -> io::Result<u128> {
    use wasi::filesystem::types::PathFlags;

    let (preopen, rest) = resolve(path)?;
    let hash = if rest.is_empty() {
        preopen.metadata_hash()
    } else {
        preopen.metadata_hash_at(PathFlags::SYMLINK_FOLLOW, &rest)
    }
    .map_err(io_error)?;
    Ok((u128::from(hash.upper) << 64) | u128::from(hash.lower))
}

/// A WASI error as an I/O error, worded like the OS's own: "No space left on
/// device, similar to `ENOSPC` in POSIX (no-space)".
pub fn io_error(code: ErrorCode) -> io::Error {
    io::Error::other(format!("{} ({})", code.message().trim_end_matches('.'), code.name()))
}
