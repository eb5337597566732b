//! The embedded store under both the state store and the local log: SQLite, in WAL
//! mode with `synchronous=FULL`, so that a committed transaction survives `kill -9`
//! and power loss (unless a writer relaxes it: see [`Database::relax_sync`]), a
//! half-written one is never read back, and other processes
//! (`ferry state show`, `ferry log read`) can read while `ferry run` writes.
//!
//! A database file is created whole or not at all (built under a temporary name,
//! then linked into place), so an existing file that is empty or not a database is
//! corruption to report, never a fresh start to assume.
//!
//! What goes wrong is reported as what it is. [`StoreError::Corrupt`] means the file
//! itself is damaged or not ours: SQLite says NOTADB or CORRUPT, the format version is
//! wrong, the integrity check fails (or, a layer up, a checksum). Everything else (a
//! file or directory that cannot be opened or written, a full disk, an I/O error, a
//! lock held too long) is [`StoreError::Io`], with the operating system's reason: the
//! data may well be intact, and calling it corrupt would invite an operator to throw
//! a healthy cursor away.
//!
//! A writer also notices when its path stops naming the file it has open (deleted or
//! replaced while ferry runs, see [`Database::check_in_place`]): whatever it wrote
//! from then on would be in no file anyone can find.

use std::fs::{Metadata, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use ferry_contract::files;

/// How long a writer waits for another process holding the write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a database file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The file exists but is not an intact database of ours.
    #[error("{}: corrupt: {detail}", path.display())]
    Corrupt { path: PathBuf, detail: String },
    /// The file could not be used (opened, read, written, found where it was), for a
    /// reason `detail` gives; its content may be intact.
    #[error("{}: {detail}", path.display())]
    Io { path: PathBuf, detail: String },
}

fn io(path: &Path, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Io { path: path.to_path_buf(), detail: detail.to_string() }
}

fn corrupt(path: &Path, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt { path: path.to_path_buf(), detail: detail.to_string() }
}

/// A kind of database file: what it is for people, and how to make and upgrade one.
#[derive(Debug)]
pub struct Format {
    /// What the file is, as error messages name it: "state database".
    pub what: &'static str,
    /// SQL creating the tables of the current version.
    pub schema: &'static str,
    /// The current version, kept in `PRAGMA user_version`.
    pub version: i64,
    /// For each older version still read, the SQL taking a file from it to the next.
    pub migrations: &'static [Migration],
}

/// SQL that takes a file of version `from` to version `from + 1`.
#[derive(Debug)]
pub struct Migration {
    pub from: i64,
    pub sql: &'static str,
}

impl Format {
    /// Whether a file of `version` can be read (and, by a writer, migrated).
    fn reads(&self, version: i64) -> bool {
        version == self.version
            || (version < self.version && (version..self.version).all(|v| self.migration(v).is_some()))
    }

    fn migration(&self, from: i64) -> Option<&Migration> {
        self.migrations.iter().find(|m| m.from == from)
    }
}

/// What a caller will do with a database it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only read, alongside a writer; an older format is read as it is, not migrated.
    Read,
    /// Write: an older format is migrated first, a file SQLite could only open
    /// read-only is refused, and [`Database::check_in_place`] watches the files.
    Write,
}

/// An open database file.
pub struct Database {
    connection: Connection,
    path: PathBuf,
    what: &'static str,
    version: i64,
    /// For a writer: the files it has open, to notice them deleted or replaced.
    in_place: Option<InPlace>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("path", &self.path).field("version", &self.version).finish()
    }
}

impl Database {
    /// Run SQLite's `pragma` (`quick_check` or `integrity_check`): corruption named if
    /// it finds any.
    fn integrity(&self, pragma: &str) -> Result<(), StoreError> {
        let found: Vec<String> = self
            .connection
            .prepare(&format!("PRAGMA {pragma}"))
            .and_then(|mut statement| statement.query_map([], |row| row.get(0))?.collect())
            .map_err(|e| self.error("integrity check failed", e))?;
        if found != ["ok"] {
            return Err(corrupt(&self.path, format!("integrity check failed: {}", found.join("; "))));
        }
        Ok(())
    }

    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    pub fn connection_mut(&mut self) -> &mut Connection {
        &mut self.connection
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Commit without an fsync from now on (`synchronous=NORMAL`): a committed
    /// transaction survives a crash of the process at once, and a crash of the
    /// machine once [`Database::sync`] (or SQLite's own checkpoint) has run.
    pub fn relax_sync(&self) -> Result<(), StoreError> {
        self.connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| self.error("cannot set up the connection", e))
    }

    /// Put everything committed on disk: a checkpoint, which fsyncs the write-ahead
    /// log before it copies it into the database (and the database after).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.connection
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(|e| self.error("cannot sync it to disk", e))
    }

    /// The format version of the file (older than the current one only for readers).
    pub fn version(&self) -> i64 {
        self.version
    }

    /// `error`, met while doing `doing` on this database, as an error that says what
    /// failed: corruption only if SQLite found the file damaged, otherwise the
    /// operating system's reason when SQLite recorded one.
    pub fn error(&self, doing: &str, error: rusqlite::Error) -> StoreError {
        failure(&self.path, doing, &error, os_cause(&self.connection, &self.path, &error))
    }

    /// For a writer: run `write` (one transaction), and report it done only if the path
    /// still names the file it went to (see [`Database::check_in_place`]). A file known
    /// to be gone is not written to again; one gone since the last check is found after
    /// the write, which is then not done: looking before as well would find nothing
    /// more, at the cost of a stat of each file in every commit.
    pub fn write<T>(
        &mut self,
        doing: &str,
        write: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        if let Some(lost) = self.in_place.as_ref().and_then(|in_place| in_place.lost.clone()) {
            return Err(lost);
        }
        let result = write(&mut self.connection);
        let written = result.map_err(|e| self.error(doing, e))?;
        self.check_in_place()?;
        Ok(written)
    }

    /// For a writer: fail if the path no longer names the files this connection writes
    /// (the database was deleted, renamed or replaced, or its write-ahead log was).
    /// Called after a commit, before it is reported as done: what was written to a file
    /// no longer under its name is in no file anyone will open again. Once that
    /// happened, every later call fails the same way: the writer does not go on, and
    /// it does not create a new file in its place either.
    pub fn check_in_place(&mut self) -> Result<(), StoreError> {
        let Some(in_place) = &mut self.in_place else { return Ok(()) };
        if let Some(lost) = &in_place.lost {
            return Err(lost.clone());
        }
        let Some(change) = in_place.change(&self.path) else { return Ok(()) };
        let lost = io(
            &self.path,
            format!(
                "the {what} was deleted or replaced while ferry was running ({change}): what is written to it now \
                 is in no file under that name, so ferry writes nothing more to it and does not create a new one \
                 in its place; stop ferry, then restore the file (with its -wal) or reset what depends on it",
                what = self.what
            ),
        );
        in_place.lost = Some(lost.clone());
        Err(lost)
    }
}

/// Open the database at `path` for writing, creating it with `format`'s schema if it
/// does not exist; check that it is intact, and migrate it from an older version.
pub fn open_or_create(path: &Path, format: &Format) -> Result<Database, StoreError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path, format)?,
        _ => {}
    }
    open_existing(path, format, Access::Write)
}

/// Open the existing database at `path` and check it, creating nothing.
pub fn open_existing(path: &Path, format: &Format, access: Access) -> Result<Database, StoreError> {
    let found = check_files(path, format.what)?;
    if found.len() == 0 {
        return Err(corrupt(path, "the file is empty (it was truncated, or not written by ferry)"));
    }
    let connection =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|e| failure(path, &format!("cannot open the {}", format.what), &e, why_cannot_open(path)))?;
    let mut database = Database { connection, path: path.to_path_buf(), what: format.what, version: 0, in_place: None };
    let opening = format!("cannot open the {}", format.what);
    let version: i64 =
        database.connection.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(|e| match e {
            e if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) => {
                corrupt(path, format!("not a database ferry can read ({e})"))
            }
            e => database.error(&opening, e),
        })?;
    if !format.reads(version) {
        return Err(corrupt(
            path,
            format!("format version {version}, but this ferry reads version {} (and none between)", format.version),
        ));
    }
    // A writer checks the whole file once, when it takes it; a reader (`ferry state
    // show`, `ferry log read`) reads the rows it needs, SQLite failing on a damaged
    // page it meets, and leaves the full check to `ferry state check` ([`check`]).
    if access == Access::Write {
        database.integrity("quick_check")?;
    }
    database.version = version;
    let connection = &database.connection;
    let set_up =
        connection.busy_timeout(BUSY_TIMEOUT).and_then(|()| connection.pragma_update(None, "synchronous", "FULL"));
    set_up.map_err(|e| database.error("cannot set up the connection", e))?;
    if access == Access::Write {
        database.in_place = Some(InPlace::record(path, &found)?);
        if database.connection.is_readonly("main").unwrap_or(false) {
            return Err(io(path, format!("cannot write the {}: {}", format.what, why_read_only(path))));
        }
        migrate(&mut database, format)?;
    }
    Ok(database)
}

/// Check the whole of the existing database at `path` (`PRAGMA integrity_check`):
/// every page, index and constraint, however long that takes.
pub fn check(path: &Path, format: &Format) -> Result<(), StoreError> {
    open_existing(path, format, Access::Read)?.integrity("integrity_check")
}

/// Take a writer's file from its version to the current one, in one transaction.
fn migrate(database: &mut Database, format: &Format) -> Result<(), StoreError> {
    if database.version == format.version {
        return Ok(());
    }
    let from = database.version;
    let steps = |connection: &mut Connection| -> rusqlite::Result<()> {
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Another process may have migrated it since it was read.
        let mut version: i64 = transaction.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        while let Some(migration) = format.migration(version).filter(|_| version < format.version) {
            transaction.execute_batch(migration.sql)?;
            version += 1;
        }
        transaction.pragma_update(None, "user_version", version)?;
        transaction.commit()
    };
    let result = steps(&mut database.connection);
    result.map_err(|e| database.error(&format!("cannot migrate the {} from format version {from}", format.what), e))?;
    database.version = format.version;
    tracing::info!(path = %database.path.display(), from, to = format.version, "migrated the {}", format.what);
    Ok(())
}

/// The path must name a regular file (following symlinks: one to `/dev/zero` is a
/// character device), and the write-ahead log and shared memory next to it, if they
/// exist, must be regular files too: SQLite would fail on them in ways that name
/// neither the file nor the problem.
fn check_files(path: &Path, what: &str) -> Result<Metadata, StoreError> {
    let metadata =
        std::fs::metadata(path).map_err(|e| io(path, format!("cannot open the {what}: {}", os_reason(&e))))?;
    if !metadata.is_file() {
        return Err(io(
            path,
            format!(
                "it is {}, not a regular file: ferry does not open it as the {what}",
                files::kind(metadata.file_type())
            ),
        ));
    }
    for (companion, role) in companion_files(path).iter().zip(["write-ahead log", "shared memory"]) {
        if let Ok(found) = std::fs::metadata(companion)
            && !found.is_file()
        {
            return Err(io(
                companion,
                format!(
                    "it is {}, where SQLite keeps the {role} of the {what}: it must be a regular file (or absent)",
                    files::kind(found.file_type())
                ),
            ));
        }
    }
    Ok(metadata)
}

fn create(path: &Path, format: &Format) -> Result<(), StoreError> {
    let what = format.what;
    let dir = path.parent().unwrap_or(Path::new("."));
    files::create_private_dir(dir).map_err(|e| io(dir, format!("cannot create the directory: {}", os_reason(&e))))?;
    // A write-ahead log without its database belongs to one that was deleted. A new
    // database next to it would take its pages in (SQLite replays a log it finds).
    let [wal, _] = companion_files(path);
    if let Ok(left) = std::fs::symlink_metadata(&wal)
        && left.len() > 0
    {
        return Err(io(
            &wal,
            format!(
                "a write-ahead log without its database: it belongs to a {what} that was deleted, and a new one \
                 created next to it would take in its pages; restore {} next to it, or move it away",
                path.display()
            ),
        ));
    }
    let temporary = path.with_extension(format!("creating-{}", std::process::id()));
    let creating = format!("cannot create the {what}");
    let _ = std::fs::remove_file(&temporary);
    // Created here rather than by SQLite, so that a refusal comes with the OS's reason,
    // and private: SQLite gives its write-ahead log and shared memory the same mode.
    files::private_file()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .map_err(|e| io(&temporary, format!("{creating}: {}", os_reason(&e))))?;
    {
        let connection = Connection::open(&temporary).map_err(|e| failure(&temporary, &creating, &e, None))?;
        let setup = format!("PRAGMA journal_mode = WAL; {}; PRAGMA user_version = {};", format.schema, format.version);
        let cause = |connection: &Connection, e: &rusqlite::Error| os_cause(connection, &temporary, e);
        connection.execute_batch(&setup).map_err(|e| failure(&temporary, &creating, &e, cause(&connection, &e)))?;
        // Closing checkpoints the WAL into the file and removes it.
        connection.close().map_err(|(connection, e)| failure(&temporary, &creating, &e, cause(&connection, &e)))?;
    }
    let synced = std::fs::File::open(&temporary).and_then(|f| f.sync_all());
    synced.map_err(|e| io(&temporary, format!("{creating}: {}", os_reason(&e))))?;
    // A hard link never replaces: if another process created the file meanwhile, its
    // database (and whatever it already wrote) wins and ours is discarded.
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(path, format!("{creating}: {}", os_reason(&e)))),
    }
    let synced = std::fs::File::open(dir).and_then(|d| d.sync_all());
    synced.map_err(|e| io(dir, format!("cannot sync the directory: {}", os_reason(&e))))?;
    Ok(())
}

/// The files SQLite keeps next to `path` (write-ahead log and shared memory).
pub fn companion_files(path: &Path) -> [PathBuf; 2] {
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [with("-wal"), with("-shm")]
}

/// `error`, met while doing `doing` on the database at `path`, as a [`StoreError`]:
/// corrupt only when SQLite found the file damaged or not a database (CORRUPT,
/// NOTADB) or a stored value is not of the type ferry wrote; an I/O problem
/// otherwise, explained by `cause` (what the operating system said) when known.
pub fn failure(path: &Path, doing: &str, error: &rusqlite::Error, cause: Option<String>) -> StoreError {
    use rusqlite::Error as E;
    match error {
        E::SqliteFailure(failure, message) => {
            let said = message.clone().unwrap_or_else(|| failure.to_string());
            match failure.code {
                ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => corrupt(path, format!("{doing}: {said}")),
                code => io(path, format!("{doing}: {}", explain(code, &said, cause))),
            }
        }
        E::InvalidColumnType(..) | E::FromSqlConversionFailure(..) | E::IntegralValueOutOfRange(..) => {
            corrupt(path, format!("{doing}: a stored value is not of the type ferry wrote ({error})"))
        }
        other => io(path, format!("{doing}: {other}")),
    }
}

/// What SQLite's `said` means, with the OS's reason when there is one.
fn explain(code: ErrorCode, said: &str, cause: Option<String>) -> String {
    if let Some(cause) = cause {
        return format!("{cause} (SQLite: {said})");
    }
    let hint = match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
            Some("another process held the database's lock for longer than 5 s")
        }
        ErrorCode::DiskFull => Some("the disk is full"),
        ErrorCode::ReadOnly => Some("the file or its directory is read-only to ferry"),
        ErrorCode::PermissionDenied => Some("access was refused"),
        _ => None,
    };
    match hint {
        Some(hint) => format!("{said}: {hint}"),
        None => said.to_string(),
    }
}

/// The OS's reason for a failed file operation, with what usually causes it.
pub fn os_reason(error: &std::io::Error) -> String {
    let hint = match error.raw_os_error() {
        Some(libc::EACCES) => "is it, and its directory, writable by the user running ferry?",
        Some(libc::EPERM) => {
            "is the file or its directory immutable or append-only (see `lsattr`), or does a security policy refuse it?"
        }
        Some(libc::EROFS) => "the file system is mounted read-only",
        Some(libc::ENOSPC) => "the disk is full",
        Some(libc::EDQUOT) => "the disk quota is used up",
        Some(libc::EISDIR) => "a directory is where a file is expected (the database, or its -wal or -shm)",
        Some(libc::EMFILE | libc::ENFILE) => "too many open files (see `ulimit -n`)",
        Some(libc::EIO) => "the disk reported an error (see the system log)",
        _ => return error.to_string(),
    };
    format!("{error}: {hint}")
}

/// What the operating system said to the operation behind `error`, met on the
/// database at `path`, when it is an I/O error (CANTOPEN, IOERR).
fn os_cause(connection: &Connection, path: &Path, error: &rusqlite::Error) -> Option<String> {
    match error.sqlite_error_code()? {
        // SQLite records the errno of its last attempt, which is often a fallback
        // that failed differently (opening a file read-only that it could not
        // create: "No such file"): ask the OS the same questions instead.
        ErrorCode::CannotOpen => why_cannot_open(path).or_else(|| recorded_errno(connection)),
        ErrorCode::SystemIoFailure => recorded_errno(connection),
        _ => None,
    }
}

/// The errno SQLite recorded on `connection`, as the OS's reason.
fn recorded_errno(connection: &Connection) -> Option<String> {
    // SAFETY: the handle is valid for as long as `connection` lives, and
    // sqlite3_system_errno only reads the errno recorded on it.
    let errno = unsafe { rusqlite::ffi::sqlite3_system_errno(connection.handle()) };
    (errno != 0).then(|| os_reason(&std::io::Error::from_raw_os_error(errno)))
}

/// Why the database at `path`, or the write-ahead log and shared memory SQLite
/// keeps (and creates) next to it, cannot be opened for reading and writing: the
/// first of them the OS refuses, and its reason.
fn why_cannot_open(path: &Path) -> Option<String> {
    let refused = |what: String, e: std::io::Error| Some(format!("{what}: {}", os_reason(&e)));
    if let Err(e) = OpenOptions::new().read(true).write(true).open(path) {
        return refused(format!("opening {}", path.display()), e);
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    for companion in companion_files(path) {
        let found = std::fs::symlink_metadata(&companion);
        if matches!(&found, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            if let Err(e) = may_create_in(dir) {
                return refused(format!("creating {}", companion.display()), e);
            }
        } else if let Err(e) = OpenOptions::new().read(true).write(true).open(&companion) {
            return refused(format!("opening {}", companion.display()), e);
        }
    }
    None
}

/// Whether this process may create files in `dir`, asked without creating one.
fn may_create_in(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path; access(2) does not keep the pointer. It
    // answers for root too: an immutable directory is EPERM, a read-only mount EROFS.
    match unsafe { libc::access(name.as_ptr(), libc::W_OK | libc::X_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Why SQLite opened a file read-only: what opening it for writing says.
fn why_read_only(path: &Path) -> String {
    match OpenOptions::new().write(true).open(path) {
        Err(e) => os_reason(&e),
        Ok(_) => "SQLite could open it only read-only".into(),
    }
}

/// A file as the kernel knows it: the same (device, inode) is the same file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    device: u64,
    inode: u64,
}

impl FileId {
    fn of(metadata: &Metadata) -> FileId {
        FileId { device: metadata.dev(), inode: metadata.ino() }
    }

    /// The file `path` names now, if any.
    fn at(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId::of(&m))
    }
}

/// The files a writer has open, as they were when it opened them.
struct InPlace {
    database: FileId,
    /// The write-ahead log, once it exists (SQLite creates it at the first read).
    wal: Option<FileId>,
    /// Set once the files were found gone.
    lost: Option<StoreError>,
}

impl InPlace {
    /// Record the files `connection` has just opened at `path`, which was checked to
    /// be the regular file `found` before: it must still be that file.
    fn record(path: &Path, found: &Metadata) -> Result<InPlace, StoreError> {
        let mut in_place = InPlace { database: FileId::of(found), wal: None, lost: None };
        if let Some(change) = in_place.change(path) {
            return Err(io(path, format!("it was replaced while being opened ({change}); try again")));
        }
        Ok(in_place)
    }

    /// How the files under `path` differ from the ones open, if they do.
    fn change(&mut self, path: &Path) -> Option<String> {
        // (SQLite's own check, `SQLITE_FCNTL_HAS_MOVED`, is this one: the inode the
        // path names against the open file's.)
        match FileId::at(path) {
            None => return Some(format!("{} no longer exists", path.display())),
            Some(now) if now != self.database => {
                return Some(format!("{} is now another file", path.display()));
            }
            Some(_) => {}
        }
        let [wal, _] = companion_files(path);
        match (self.wal, FileId::at(&wal)) {
            (None, now) => self.wal = now,
            (Some(_), None) => return Some(format!("its write-ahead log {} no longer exists", wal.display())),
            (Some(open), Some(now)) if open != now => {
                return Some(format!("its write-ahead log {} is now another file", wal.display()));
            }
            (Some(_), Some(_)) => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMAT: Format =
        Format { what: "test database", schema: "CREATE TABLE t (x INTEGER)", version: 3, migrations: &[] };

    #[test]
    fn creates_once_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/db.sqlite");
        let database = open_or_create(&path, &FORMAT).unwrap();
        database.connection().execute("INSERT INTO t VALUES (7)", []).unwrap();
        drop(database);
        let database = open_or_create(&path, &FORMAT).unwrap();
        let x: i64 = database.connection().query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(x, 7);
    }

    #[test]
    fn empty_garbage_and_wrong_version_are_corrupt_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.sqlite");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(open_or_create(&empty, &FORMAT), Err(StoreError::Corrupt { .. })));
        assert_eq!(std::fs::read(&empty).unwrap(), b"", "an empty file must not be initialised");

        let garbage = dir.path().join("garbage.sqlite");
        let junk = vec![0x5a_u8; 8192];
        std::fs::write(&garbage, &junk).unwrap();
        let error = open_or_create(&garbage, &FORMAT).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
        assert_eq!(std::fs::read(&garbage).unwrap(), junk);

        let other = dir.path().join("other.sqlite");
        drop(open_or_create(&other, &Format { version: 1, ..FORMAT }).unwrap());
        let error = open_existing(&other, &Format { version: 2, ..FORMAT }, Access::Read).unwrap_err();
        assert!(
            matches!(error, StoreError::Corrupt { .. }) && error.to_string().contains("format version 1"),
            "{error}"
        );
        let newer = open_existing(&other, &Format { version: 0, ..FORMAT }, Access::Read).unwrap_err();
        assert!(newer.to_string().contains("format version 1, but this ferry reads version 0"), "{newer}");
    }

    #[test]
    fn sqlite_errors_are_classified_by_their_code() {
        let path = Path::new("/state/a.sqlite");
        let sqlite = |code: i32, message: &str| {
            rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(message.into()))
        };
        use rusqlite::ffi;

        for code in [ffi::SQLITE_CORRUPT, ffi::SQLITE_NOTADB, ffi::SQLITE_CORRUPT_INDEX] {
            let error = failure(path, "cannot read", &sqlite(code, "malformed"), None);
            assert!(matches!(error, StoreError::Corrupt { .. }), "code {code}: {error}");
        }
        for code in [
            ffi::SQLITE_CANTOPEN,
            ffi::SQLITE_PERM,
            ffi::SQLITE_READONLY,
            ffi::SQLITE_IOERR,
            ffi::SQLITE_IOERR_SHMOPEN,
            ffi::SQLITE_FULL,
            ffi::SQLITE_BUSY,
            ffi::SQLITE_LOCKED,
            ffi::SQLITE_ERROR,
        ] {
            let error = failure(path, "cannot read", &sqlite(code, "it failed"), None);
            assert!(matches!(error, StoreError::Io { .. }), "code {code}: {error}");
            assert!(!error.to_string().contains("corrupt"), "{error}");
        }

        // With the errno SQLite recorded, the OS's reason and what usually causes it.
        let cant_open = sqlite(ffi::SQLITE_CANTOPEN, "unable to open database file");
        let os = |errno: i32| Some(os_reason(&std::io::Error::from_raw_os_error(errno)));
        let error = failure(path, "cannot open the state database", &cant_open, os(libc::EACCES));
        assert_eq!(
            error.to_string(),
            "/state/a.sqlite: cannot open the state database: Permission denied (os error 13): is it, and its \
             directory, writable by the user running ferry? (SQLite: unable to open database file)"
        );
        let error = failure(path, "cannot open", &cant_open, os(libc::EPERM));
        assert!(
            error.to_string().contains("Operation not permitted") && error.to_string().contains("lsattr"),
            "{error}"
        );
        let error = failure(path, "cannot write", &sqlite(ffi::SQLITE_IOERR_WRITE, "disk I/O error"), os(libc::ENOSPC));
        assert!(error.to_string().contains("No space left on device (os error 28): the disk is full"), "{error}");
        let busy = failure(path, "cannot save", &sqlite(ffi::SQLITE_BUSY, "database is locked"), None);
        assert!(
            busy.to_string()
                .ends_with("database is locked: another process held the database's lock for longer than 5 s"),
            "{busy}"
        );

        // A value of the wrong type was not written by ferry: damage.
        let mistyped = rusqlite::Error::InvalidColumnType(0, "generation".into(), rusqlite::types::Type::Text);
        assert!(matches!(failure(path, "cannot read", &mistyped, None), StoreError::Corrupt { .. }));
    }

    #[test]
    fn paths_that_are_not_regular_files_are_refused_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.sqlite");
        mkfifo(&fifo);
        let zero = dir.path().join("zero.sqlite");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let directory = dir.path().join("dir.sqlite");
        std::fs::create_dir(&directory).unwrap();
        for (path, kind) in [(&fifo, "a named pipe"), (&zero, "a character device"), (&directory, "a directory")] {
            for access in [Access::Read, Access::Write] {
                let error = open_existing(path, &FORMAT, access).unwrap_err();
                assert_eq!(
                    error,
                    io(path, format!("it is {kind}, not a regular file: ferry does not open it as the test database"))
                );
            }
            let error = open_or_create(path, &FORMAT).unwrap_err();
            assert!(error.to_string().contains(kind), "{error}");
        }
        assert!(fifo.exists() && directory.is_dir(), "nothing is replaced");
    }

    #[test]
    fn a_companion_that_is_not_a_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        drop(open_or_create(&path, &FORMAT).unwrap());
        let [wal, shm] = companion_files(&path);
        for companion in [&wal, &shm] {
            std::fs::create_dir(companion).unwrap();
            let error = open_existing(&path, &FORMAT, Access::Read).unwrap_err();
            assert!(matches!(&error, StoreError::Io { path, .. } if path == companion), "{error}");
            assert!(error.to_string().contains("it is a directory, where SQLite keeps the"), "{error}");
            std::fs::remove_dir(companion).unwrap();
        }
        open_existing(&path, &FORMAT, Access::Read).unwrap();
    }

    #[test]
    fn a_write_ahead_log_without_its_database_is_not_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let [wal, _] = companion_files(&path);
        std::fs::write(&wal, b"frames of a database that was deleted").unwrap();
        let error = open_or_create(&path, &FORMAT).unwrap_err();
        assert!(error.to_string().contains("a write-ahead log without its database"), "{error}");
        assert!(!path.exists(), "no database was created next to it");
    }

    #[test]
    fn a_writer_notices_its_file_deleted_or_replaced_and_stays_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let mut database = open_or_create(&path, &FORMAT).unwrap();
        database.connection().execute("INSERT INTO t VALUES (1)", []).unwrap();
        database.check_in_place().unwrap();

        std::fs::remove_file(&path).unwrap();
        let error = database.check_in_place().unwrap_err();
        assert!(error.to_string().contains("deleted or replaced while ferry was running"), "{error}");
        assert!(error.to_string().contains("no longer exists"), "{error}");
        // A file put back under the name is not the one open: still refused, and
        // nothing is created.
        drop(open_or_create(&dir.path().join("other.sqlite"), &FORMAT).unwrap());
        std::fs::rename(dir.path().join("other.sqlite"), &path).unwrap();
        assert_eq!(database.check_in_place().unwrap_err(), error, "once lost, always lost");

        let mut replaced = open_or_create(&path, &FORMAT).unwrap();
        let copy = dir.path().join("copy.sqlite");
        std::fs::copy(&path, &copy).unwrap();
        std::fs::rename(&copy, &path).unwrap();
        let error = replaced.check_in_place().unwrap_err();
        assert!(error.to_string().contains("is now another file"), "{error}");

        let mut wal_deleted = open_or_create(&dir.path().join("w.sqlite"), &FORMAT).unwrap();
        wal_deleted.connection().execute("INSERT INTO t VALUES (1)", []).unwrap();
        wal_deleted.check_in_place().unwrap();
        std::fs::remove_file(companion_files(&dir.path().join("w.sqlite"))[0].clone()).unwrap();
        let error = wal_deleted.check_in_place().unwrap_err();
        assert!(
            error.to_string().contains("its write-ahead log") && error.to_string().contains("no longer exists"),
            "{error}"
        );
    }

    #[test]
    fn a_writer_migrates_an_older_file_and_a_reader_reads_it_as_it_is() {
        const OLD: Format =
            Format { what: "test database", schema: "CREATE TABLE t (x INTEGER)", version: 1, migrations: &[] };
        const NEW: Format = Format {
            what: "test database",
            schema: "CREATE TABLE t (x INTEGER, y TEXT NOT NULL DEFAULT 'none')",
            version: 2,
            migrations: &[Migration { from: 1, sql: "ALTER TABLE t ADD COLUMN y TEXT NOT NULL DEFAULT 'none'" }],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        open_or_create(&path, &OLD).unwrap().connection().execute("INSERT INTO t VALUES (5)", []).unwrap();

        let reader = open_existing(&path, &NEW, Access::Read).unwrap();
        assert_eq!(reader.version(), 1, "a reader does not migrate");
        drop(reader);
        let writer = open_existing(&path, &NEW, Access::Write).unwrap();
        assert_eq!(writer.version(), 2);
        let row: (i64, String) =
            writer.connection().query_row("SELECT x, y FROM t", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        assert_eq!(row, (5, "none".to_string()));
        drop(writer);
        assert_eq!(open_existing(&path, &NEW, Access::Read).unwrap().version(), 2, "the migration was committed");
    }

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
    }
}
