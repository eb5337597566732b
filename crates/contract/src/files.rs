//! Files and directories the operator names (the config, components, secrets, tokens,
//! the state and log directories), opened without being fooled by things that are not
//! files.
//!
//! A path in a config can point anywhere: at `/dev/zero` (reads forever), at a named
//! pipe (opening it blocks until a writer comes), at `/dev/null` (a "directory" that
//! swallows everything). So a file is opened without blocking, checked to be a regular
//! file *after* opening (the check is on what was opened, not on what the path named a
//! moment before), and read with a cap on its size; a directory must be a directory.
//!
//! What ferry writes (cursors, the local log's records, the status file, the compile
//! cache) holds data and guest text no other user should read: it is created private,
//! files 0600 in directories 0700, whatever the umask ([`create_private_dir`],
//! [`private_file`]); [`open_to_others`] says when a directory already there is not.

use std::fs::{DirBuilder, File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a named file or directory cannot be used. Names the path and what it was for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {what}: {problem}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    /// What the path was meant to be, e.g. "the component".
    pub what: String,
    pub problem: String,
}

/// Create `dir` and every missing directory above it, each readable by ferry's user
/// alone (0700, whatever the umask). A directory already there is left as it is.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Options that create a file readable by ferry's user alone (0600, whatever the
/// umask); set what else to do (write, create_new...) on them.
pub fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(0o600);
    options
}

/// The mode of `dir` when its group or others may write it (and so change what ferry
/// keeps there), `None` when they may not or it does not exist.
pub fn open_to_others(dir: &Path) -> Option<u32> {
    let mode = std::fs::metadata(dir).ok()?.permissions().mode() & 0o7777;
    (mode & 0o022 != 0).then_some(mode)
}

/// Read the regular file at `path`, at most `max_bytes` of it. `what` says what the
/// file is for, and `limit` names the setting that caps it, for the error messages.
pub fn read_regular(path: &Path, max_bytes: u64, what: &str, limit: &str) -> Result<Vec<u8>, FileError> {
    let fail = |problem: String| FileError { path: path.to_path_buf(), what: what.to_string(), problem };
    // Non-blocking, so that a named pipe does not hang the open; it is refused below.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(format!("cannot open it: {e}")))?;
    let metadata = file.metadata().map_err(|e| fail(format!("cannot read its metadata: {e}")))?;
    if !metadata.is_file() {
        return Err(fail(format!("it is {}, not a regular file", kind(metadata.file_type()))));
    }
    if metadata.len() > max_bytes {
        return Err(fail(format!("it is {} bytes, over {limit} ({max_bytes} bytes)", metadata.len())));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    // The file may grow after the check: read one byte past the cap to notice.
    (&file as &File)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(fail(format!("it grew past {limit} ({max_bytes} bytes) while being read")));
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_text(path: &Path, max_bytes: u64, what: &str, limit: &str) -> Result<String, FileError> {
    let bytes = read_regular(path, max_bytes, what, limit)?;
    String::from_utf8(bytes).map_err(|e| FileError {
        path: path.to_path_buf(),
        what: what.to_string(),
        problem: format!("it is not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
    })
}

/// Check that `path` is a directory, or does not exist yet (ferry creates it).
pub fn directory_or_absent(path: &Path, what: &str) -> Result<(), FileError> {
    check_directory(path, what, true)
}

/// Check that `path` is an existing directory.
pub fn directory(path: &Path, what: &str) -> Result<(), FileError> {
    check_directory(path, what, false)
}

fn check_directory(path: &Path, what: &str, absent_is_fine: bool) -> Result<(), FileError> {
    let fail = |problem: String| FileError { path: path.to_path_buf(), what: what.to_string(), problem };
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(metadata) => Err(fail(format!("it is {}, not a directory", kind(metadata.file_type())))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && absent_is_fine => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(fail("it does not exist".into())),
        Err(e) => Err(fail(format!("{e}"))),
    }
}

/// What kind of thing a file type is, for people.
pub fn kind(file_type: FileType) -> &'static str {
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a named pipe"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Create a named pipe at `path`: for tests (of every crate) of what is not a file.
pub fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("no NUL in the path");
    // SAFETY: a valid NUL-terminated path; mkfifo does not keep the pointer.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_whole_within_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wasm");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular(&path, 10, "the component", "max").unwrap(), b"0123456789");
        let error = read_regular(&path, 9, "the component", "[runtime] max_component_bytes").unwrap_err();
        assert_eq!(error.path, path);
        assert!(error.to_string().contains("10 bytes, over [runtime] max_component_bytes (9 bytes)"), "{error}");
        let missing = read_regular(&dir.path().join("nope"), 9, "the component", "max").unwrap_err();
        assert!(missing.to_string().contains("nope: the component: cannot open it"), "{missing}");
    }

    #[test]
    fn devices_pipes_and_directories_are_not_files() {
        let dir = tempfile::tempdir().unwrap();
        let zero = read_regular(Path::new("/dev/zero"), 1 << 30, "the component", "max").unwrap_err();
        assert!(zero.to_string().contains("a character device, not a regular file"), "{zero}");
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        // Without O_NONBLOCK this open would block forever: no writer ever comes.
        let pipe = read_regular(&fifo, 1 << 30, "the component", "max").unwrap_err();
        assert!(pipe.to_string().contains("a named pipe"), "{pipe}");
        let not_file = read_regular(dir.path(), 1 << 30, "the component", "max").unwrap_err();
        assert!(not_file.to_string().contains("a directory, not a regular file"), "{not_file}");
    }

    #[test]
    fn directories_must_be_directories_or_absent() {
        let dir = tempfile::tempdir().unwrap();
        assert!(directory_or_absent(dir.path(), "[state] path").is_ok());
        assert!(directory_or_absent(&dir.path().join("later"), "[state] path").is_ok());
        let error = directory_or_absent(Path::new("/dev/null"), "[local_log] path").unwrap_err();
        assert_eq!(error.to_string(), "/dev/null: [local_log] path: it is a character device, not a directory");
        assert!(directory(dir.path(), "grants.dirs.host").is_ok());
        let missing = directory(&dir.path().join("later"), "grants.dirs.host").unwrap_err();
        assert_eq!(missing.problem, "it does not exist");
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let error = directory(&file, "grants.dirs.host").unwrap_err();
        assert_eq!(error.problem, "it is a regular file, not a directory");
    }

    #[test]
    fn text_must_be_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, b"ab\xffcd").unwrap();
        let error = read_regular_text(&path, 100, "token_file", "max").unwrap_err();
        assert!(error.to_string().contains("not UTF-8 text (invalid byte at offset 2)"), "{error}");
    }
}
