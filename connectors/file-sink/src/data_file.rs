//! The data file being appended to, as a handle that writes a whole batch at a known
//! offset in as few calls as it can, syncs it, and cuts it back.
//!
//! Why not `std::fs` in the guest: the WASI preview-1 adapter (the fallback
//! toolchain's) turns one `write_all` into a `blocking-write-and-flush` of at most
//! 4096 bytes per call on an output stream, and wasmtime-wasi runs each on a blocking
//! task of its own: ~280 host round trips for 1000 lines of 1 KB, 9-10 ms of the
//! ~25 ms that batch took (timed in the guest). So the guest opens the file through WASI 0.2 directly and writes with
//! `descriptor.write` (a `pwrite`): one host call per `MAX_WRITE` bytes. Natively
//! (the unit tests) the same calls are `pwrite`, `fdatasync` and `ftruncate` on a
//! `std::fs::File`; the writing loop is shared.
//!
//! Writes are positioned (at the end of the last complete line, which the store
//! knows) rather than in append mode: a retry after a failed write lands where the
//! failed one began, whatever it left behind.

use std::io;
use std::path::Path;

/// The most one call carries. wasmtime lets one host call carry only so much from
/// the guest's memory (its *hostcall fuel*: 128 MiB by default, at least 1 MiB in
/// Ferry, which derives it from the connector's batch limits), and a batch's lines
/// can be several times its payload (JSON escapes, base64): a bounded chunk never
/// trips it, and 512 KiB still makes a batch of 1 MB three calls instead of ~280.
const MAX_WRITE: usize = 512 << 10;

/// A data file open for writing.
#[cfg(not(target_arch = "wasm32"))]
pub struct DataFile(std::fs::File);

/// A data file open for writing.
#[cfg(target_arch = "wasm32")]
pub struct DataFile(wasi::filesystem::types::Descriptor);

impl DataFile {
    /// Write all of `bytes` at `offset`, `MAX_WRITE` bytes a call at most.
    pub fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        write_in_chunks(bytes, offset, |chunk, at| self.write_at(chunk, at))
    }
}

/// Write all of `bytes` at `offset` with `write_at`, which may take fewer bytes than
/// it is given (as `pwrite` may), handing it `MAX_WRITE` bytes at most.
fn write_in_chunks(
    bytes: &[u8],
    offset: u64,
    mut write_at: impl FnMut(&[u8], u64) -> io::Result<usize>,
) -> io::Result<()> {
    let mut done = 0;
    while done < bytes.len() {
        let chunk = &bytes[done..bytes.len().min(done + MAX_WRITE)];
        match write_at(chunk, offset + done as u64) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the file took none of the bytes")),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(not(target_arch = "wasm32"))]
impl DataFile {
    /// Open `path` for writing, creating it if it is missing.
    pub fn open(path: &Path) -> io::Result<DataFile> {
        std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path).map(DataFile)
    }

    /// A handle on an open file; the tests use a read-only one to make writes fail.
    #[cfg(test)]
    pub fn from_file(file: std::fs::File) -> DataFile {
        DataFile(file)
    }

    /// Write some of `bytes` at `offset`; how many.
    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::write_at(&self.0, bytes, offset)
    }

    /// Make the file's data (and its length) durable.
    pub fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    /// Cut the file (or extend it with zeros) to `len` bytes.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

#[cfg(target_arch = "wasm32")]
impl DataFile {
    /// Open `path` for writing, creating it if it is missing, through the granted
    /// directory that holds it.
    pub fn open(path: &Path) -> io::Result<DataFile> {
        use wasi::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};

        let (preopen, rest) = ferry_guest::granted::resolve(path)?;
        preopen
            .open_at(PathFlags::SYMLINK_FOLLOW, &rest, OpenFlags::CREATE, DescriptorFlags::WRITE)
            .map(DataFile)
            .map_err(ferry_guest::granted::io_error)
    }

    /// Write some of `bytes` at `offset`; how many.
    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<usize> {
        // At most `bytes.len()`, so it fits a `usize`.
        self.0.write(bytes, offset).map(|written| written as usize).map_err(ferry_guest::granted::io_error)
    }

    /// Make the file's data (and its length) durable.
    pub fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data().map_err(ferry_guest::granted::io_error)
    }

    /// Cut the file (or extend it with zeros) to `len` bytes.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_size(len).map_err(ferry_guest::granted::io_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_write_is_cut_into_bounded_calls_and_short_writes_resume() {
        let bytes: Vec<u8> = (0..2 * MAX_WRITE + 7).map(|i| (i % 251) as u8).collect();
        let mut written = vec![0u8; 10 + bytes.len()];
        let mut calls = Vec::new();
        let mut interrupted = false;
        write_in_chunks(&bytes, 10, |chunk, at| {
            calls.push((at, chunk.len()));
            // The OS is interrupted once, and otherwise takes a little less than asked.
            if !interrupted {
                interrupted = true;
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let n = chunk.len().min(MAX_WRITE - 3);
            written[at as usize..at as usize + n].copy_from_slice(&chunk[..n]);
            Ok(n)
        })
        .unwrap();
        assert_eq!(&written[10..], &bytes[..]);
        let full = MAX_WRITE as u64;
        assert_eq!(
            calls,
            [(10, MAX_WRITE), (10, MAX_WRITE), (10 + full - 3, MAX_WRITE), (10 + 2 * (full - 3), 13),],
            "no call carries more than MAX_WRITE, each starts where the last one stopped"
        );
        // A file that takes nothing is an error, not a loop without end.
        let error = write_in_chunks(b"x", 0, |_, _| Ok(0)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::WriteZero);
    }

    #[test]
    fn a_write_longer_than_one_call_lands_whole_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = DataFile::open(&path).unwrap();
        // Three calls' worth and a bit, every byte telling where it belongs.
        let bytes: Vec<u8> = (0..3 * MAX_WRITE + 7).map(|i| (i % 251) as u8).collect();
        file.write_all_at(&bytes, 4).unwrap();
        file.sync_data().unwrap();
        let read = std::fs::read(&path).unwrap();
        assert_eq!(&read[..4], b"0123", "what was before the offset stays");
        assert_eq!(&read[4..], &bytes[..], "every chunk in its place, nothing more");
    }

    #[test]
    fn opening_keeps_what_the_file_holds_and_set_len_cuts_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"line\ntorn").unwrap();
        let file = DataFile::open(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"line\ntorn", "opening does not truncate");
        file.set_len(5).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"line\n");
        // A file that is not there yet is created.
        DataFile::open(&dir.path().join("new")).unwrap().write_all_at(b"x\n", 0).unwrap();
        assert_eq!(std::fs::read(dir.path().join("new")).unwrap(), b"x\n");
    }

    #[test]
    fn a_refused_write_is_the_os_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"").unwrap();
        let file = DataFile::from_file(std::fs::File::open(&path).unwrap());
        let error = file.write_all_at(b"x\n", 0).unwrap_err();
        assert!(error.raw_os_error().is_some(), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }
}
