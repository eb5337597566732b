//! Compiled components kept on disk, so that a restart does not compile again.
//!
//! Compiling costs ~130 ms for a small Rust guest and seconds for a large one (a
//! Python or JavaScript guest of 12–18 MB takes 7–18 s), at every `ferry run`. The
//! cache keeps what the compiler produced (wasmtime's serialized artifact) in one file
//! per component and engine: `<dir>/<key>.cwasm`, where the key is the SHA-256 of
//!
//! - the component's bytes (their SHA-256), and
//! - everything about the engine that decides the compiled code: wasmtime's own
//!   compatibility hash (its version, the target and the CPU features Cranelift uses,
//!   the compiler's flags, the tunables such as fuel metering and epoch interruption,
//!   the WebAssembly features), the fuel setting once more, and this file's format.
//!
//! So a changed component, another wasmtime, another CPU or another fuel setting is
//! another key, and the entry it would have used is never looked at.
//!
//! **Trust.** Loading an entry is loading native code into ferry: wasmtime's
//! `Component::deserialize` is `unsafe` because it trusts the bytes to be what its own
//! compiler produced. Whoever can write the cache directory can therefore run native
//! code in ferry, outside every sandbox. The directory must be one only the operator
//! can write: ferry creates it mode 0700, uses it only if it is owned by ferry's user
//! and writable by no one else (otherwise it warns and compiles without the cache),
//! and the config refuses a writable `grants.dirs` entry that holds it.
//!
//! **Damage.** An entry carries a header (magic, format, its own key, the artifact's
//! length and SHA-256) before the artifact, and is written to a temporary file renamed
//! into place, so a reader sees a whole entry or none. A torn, truncated, overwritten
//! or misplaced entry fails the checks before anything is deserialized (and wasmtime
//! checks its own header again): it is logged, treated as a miss, compiled again and
//! replaced. A cache that cannot be read or written is a warning; the component is
//! compiled as if there were no cache. Entries are not fsynced: one lost or torn by a
//! power cut is detected the same way.
//!
//! Nothing is ever evicted: a new component version or engine adds an entry. The
//! directory can be deleted at any time; it is only a cache.

use std::fs::{DirBuilder, OpenOptions};
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

use ferry_contract::files;

/// The first bytes of every entry.
const MAGIC: &[u8; 8] = b"ferry-cc";

/// The entry format this ferry reads and writes (part of every key, too).
const FORMAT: u32 = 1;

/// magic, format, key, artifact length, artifact SHA-256.
const HEADER_BYTES: usize = MAGIC.len() + 4 + 32 + 8 + 32;

/// The largest entry read: far past any artifact of a component ferry accepts (a
/// component is at most 1 GiB), so that a file that is not an entry cannot make ferry
/// read without end.
const MAX_ENTRY_BYTES: u64 = 8 << 30;

/// The cache in one directory, for one engine.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
    /// The SHA-256 of everything about the engine that decides the compiled code.
    engine: [u8; 32],
}

/// Where a component's entry is, or would be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKey {
    key: [u8; 32],
    path: PathBuf,
}

impl EntryKey {
    /// The entry's file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What the cache holds for a key.
#[derive(Debug)]
pub enum Lookup {
    /// A whole entry whose key and checksum match: the artifact to deserialize.
    Hit(Artifact),
    /// No entry (or no directory yet).
    Miss,
    /// An entry that cannot be used: damaged, or not an entry. It is compiled again
    /// and replaced.
    Damaged(String),
    /// The directory is not one ferry may load native code from, or cannot be read:
    /// the cache is not used, neither read nor written.
    Unusable(String),
}

/// A checked entry's artifact (the entry as read, without copying the artifact out).
#[derive(Debug)]
pub struct Artifact {
    entry: Vec<u8>,
}

impl Artifact {
    /// The serialized component, as the compiler produced it.
    pub fn bytes(&self) -> &[u8] {
        &self.entry[HEADER_BYTES..]
    }
}

impl CompileCache {
    /// The cache in `dir` for components compiled by (or for) `engine`, an engine
    /// metering fuel when `fuel` is set. Touches no file.
    pub fn new(dir: PathBuf, engine: &Engine, fuel: bool) -> CompileCache {
        CompileCache { dir, engine: engine_key(engine, fuel) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry of the component `wasm`.
    pub fn key(&self, wasm: &[u8]) -> EntryKey {
        let mut hasher = Sha256::new();
        hasher.update(self.engine);
        hasher.update(Sha256::digest(wasm));
        let key: [u8; 32] = hasher.finalize().into();
        let path = self.dir.join(format!("{}.cwasm", hex(&key)));
        EntryKey { key, path }
    }

    /// What the cache holds for `key`, checked (magic, format, key, length,
    /// checksum) but not deserialized.
    pub fn lookup(&self, key: &EntryKey) -> Lookup {
        match trusted(&self.dir) {
            Ok(true) => {}
            Ok(false) => return Lookup::Miss,
            Err(problem) => return Lookup::Unusable(problem),
        }
        let entry = match read_entry(&key.path) {
            Ok(Some(entry)) => entry,
            Ok(None) => return Lookup::Miss,
            Err(problem) => return Lookup::Damaged(problem),
        };
        match check_entry(&entry, &key.key) {
            Ok(()) => Lookup::Hit(Artifact { entry }),
            Err(problem) => Lookup::Damaged(problem),
        }
    }

    /// Keep `artifact` as the entry of `key`, replacing any entry there: written whole
    /// to a temporary file, then renamed into place. Creates the directory (mode 0700)
    /// if needed. The error says what could not be done, naming the path.
    pub fn store(&self, key: &EntryKey, artifact: &[u8]) -> Result<(), String> {
        if let Some(parent) = self.dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            files::create_private_dir(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        match DirBuilder::new().mode(0o700).create(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(format!("cannot create {}: {e}", self.dir.display()));
            }
            _ => {}
        }
        if !trusted(&self.dir)? {
            return Err(format!("{} vanished while being created", self.dir.display()));
        }
        let temporary = self.dir.join(format!(".{}.{}.{}.tmp", hex(&key.key), std::process::id(), fastrand::u64(..)));
        let written = write_entry(&temporary, &key.key, artifact)
            .and_then(|()| std::fs::rename(&temporary, &key.path))
            .map_err(|e| format!("cannot write {}: {e}", key.path.display()));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written
    }
}

/// Whether `dir` exists (`false`: not yet), and is a directory ferry may load native
/// code from: owned by ferry's user and writable by no one else.
fn trusted(dir: &Path) -> Result<bool, String> {
    let metadata = match std::fs::metadata(dir) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let why = "whoever can write the compile cache can run native code in ferry";
    if !metadata.is_dir() {
        return Err(format!(
            "{} is {}, not a directory",
            dir.display(),
            ferry_contract::files::kind(metadata.file_type())
        ));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let user = unsafe { libc::geteuid() };
    if metadata.uid() != user {
        return Err(format!(
            "{} is owned by uid {}, not by ferry's user (uid {user}), and {why}: not used",
            dir.display(),
            metadata.uid()
        ));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is writable by its group or by others (mode {:o}), and {why}: not used (chmod go-w it)",
            dir.display(),
            metadata.mode() & 0o7777
        ));
    }
    Ok(true)
}

/// The entry at `path`, `None` if there is none.
fn read_entry(path: &Path) -> Result<Option<Vec<u8>>, String> {
    // Non-blocking, so that a named pipe put there does not hang the open.
    let file = match OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    let metadata = file.metadata().map_err(|e| format!("cannot read its metadata: {e}"))?;
    if !metadata.is_file() {
        return Err(format!("it is {}, not a regular file", ferry_contract::files::kind(metadata.file_type())));
    }
    if metadata.len() > MAX_ENTRY_BYTES {
        return Err(format!("it is {} bytes, more than any entry", metadata.len()));
    }
    let mut entry = Vec::with_capacity(metadata.len() as usize);
    (&file).take(MAX_ENTRY_BYTES).read_to_end(&mut entry).map_err(|e| format!("cannot read it: {e}"))?;
    Ok(Some(entry))
}

/// Write an entry for `artifact` under `key` into a new file at `path`.
fn write_entry(path: &Path, key: &[u8; 32], artifact: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(&header(key, artifact))?;
    file.write_all(artifact)
}

fn header(key: &[u8; 32], artifact: &[u8]) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER_BYTES);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&FORMAT.to_le_bytes());
    header.extend_from_slice(key);
    header.extend_from_slice(&(artifact.len() as u64).to_le_bytes());
    header.extend_from_slice(&Sha256::digest(artifact));
    header
}

/// Check a whole entry against the key it is read for; the problem otherwise.
fn check_entry(entry: &[u8], key: &[u8; 32]) -> Result<(), String> {
    let Some((header, artifact)) = entry.split_at_checked(HEADER_BYTES) else {
        return Err(format!("truncated: {} bytes, shorter than an entry's header ({HEADER_BYTES} bytes)", entry.len()));
    };
    let (magic, rest) = header.split_at(MAGIC.len());
    let (format, rest) = rest.split_at(4);
    let (own_key, rest) = rest.split_at(32);
    let (length, checksum) = rest.split_at(8);
    if magic != MAGIC {
        return Err("not a compile cache entry (wrong magic bytes)".into());
    }
    let format = u32::from_le_bytes(format.try_into().expect("4 bytes"));
    if format != FORMAT {
        return Err(format!("entry format {format}, where this ferry writes format {FORMAT}"));
    }
    if own_key != key {
        return Err("its header names another key (another component or engine settings)".into());
    }
    let length = u64::from_le_bytes(length.try_into().expect("8 bytes"));
    if length != artifact.len() as u64 {
        return Err(format!(
            "truncated or overlong: its header announces {length} bytes of compiled code, the file holds {}",
            artifact.len()
        ));
    }
    if Sha256::digest(artifact).as_slice() != checksum {
        return Err("the checksum of its compiled code does not match (damaged)".into());
    }
    Ok(())
}

/// The SHA-256 of what decides the code `engine` compiles.
fn engine_key(engine: &Engine, fuel: bool) -> [u8; 32] {
    let mut hasher = Sha256Hasher(Sha256::new());
    hasher.0.update(b"ferry compile cache");
    hasher.0.update(FORMAT.to_le_bytes());
    hasher.0.update([u8::from(fuel)]);
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    hasher.0.finalize().into()
}

/// Feeds what a [`std::hash::Hash`] writes into SHA-256 (a `Hasher`'s own 64 bits
/// would not do for a key that names native code).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compiling_engine;

    fn cache(dir: &Path, fuel: bool) -> CompileCache {
        CompileCache::new(dir.join("compiled"), &compiling_engine(fuel).unwrap(), fuel)
    }

    fn hit(lookup: Lookup) -> Vec<u8> {
        match lookup {
            Lookup::Hit(artifact) => artifact.bytes().to_vec(),
            other => panic!("expected a hit, got {other:?}"),
        }
    }

    fn damaged(lookup: Lookup) -> String {
        match lookup {
            Lookup::Damaged(problem) => problem,
            other => panic!("expected a damaged entry, got {other:?}"),
        }
    }

    #[test]
    fn an_entry_stored_is_read_back_whole_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), false);
        let key = cache.key(b"component");
        assert!(matches!(cache.lookup(&key), Lookup::Miss), "no directory yet is a miss");
        cache.store(&key, b"compiled code").unwrap();
        assert_eq!(hit(cache.lookup(&key)), b"compiled code");
        let files: Vec<_> = std::fs::read_dir(cache.dir()).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files, vec![key.path().to_path_buf()], "no temporary file left behind");
        let mode = std::fs::metadata(cache.dir()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "only ferry's user may write (or read) the cache");
        // Stored again (another process compiled it too): replaced, still whole.
        cache.store(&key, b"compiled again").unwrap();
        assert_eq!(hit(cache.lookup(&key)), b"compiled again");
    }

    #[test]
    fn the_key_follows_the_component_and_the_engine_settings() {
        let dir = tempfile::tempdir().unwrap();
        let plain = cache(dir.path(), false);
        assert_eq!(plain.key(b"a"), cache(dir.path(), false).key(b"a"), "two engines alike give one key");
        assert_ne!(plain.key(b"a"), plain.key(b"b"), "another component");
        assert_ne!(plain.key(b"a"), cache(dir.path(), true).key(b"a"), "fuel metering changes the code");
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).cranelift_opt_level(wasmtime::OptLevel::None);
        let other = CompileCache::new(dir.path().join("compiled"), &Engine::new(&config).unwrap(), false);
        assert_ne!(plain.key(b"a"), other.key(b"a"), "other compiler settings");
        assert!(plain.key(b"a").path().starts_with(plain.dir()));
    }

    #[test]
    fn an_entry_under_another_key_is_never_a_hit() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, fuel) = (cache(dir.path(), false), cache(dir.path(), true));
        let (key, fuel_key) = (plain.key(b"component"), fuel.key(b"component"));
        plain.store(&key, b"code without fuel").unwrap();
        assert!(matches!(fuel.lookup(&fuel_key), Lookup::Miss));
        // The entry copied over the other key's file: its header gives it away.
        std::fs::copy(key.path(), fuel_key.path()).unwrap();
        assert!(damaged(fuel.lookup(&fuel_key)).contains("another key"));
    }

    #[test]
    fn every_kind_of_damage_is_detected_before_the_artifact_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), false);
        let key = cache.key(b"component");
        let artifact = vec![7u8; 1000];
        cache.store(&key, &artifact).unwrap();
        let whole = std::fs::read(key.path()).unwrap();
        let damage = |bytes: &[u8], expected: &str| {
            std::fs::write(key.path(), bytes).unwrap();
            let problem = damaged(cache.lookup(&key));
            assert!(problem.contains(expected), "{expected:?} not in {problem:?}");
        };
        let flipped = |at: usize| {
            let mut bytes = whole.clone();
            bytes[at] ^= 0x01;
            bytes
        };
        damage(&[], "truncated: 0 bytes");
        damage(&whole[..HEADER_BYTES - 1], "shorter than an entry's header");
        damage(&whole[..whole.len() - 1], "announces 1000 bytes of compiled code, the file holds 999");
        damage(&[whole.as_slice(), b"x"].concat(), "the file holds 1001");
        damage(&flipped(0), "wrong magic bytes");
        damage(&flipped(MAGIC.len()), "entry format 0");
        damage(&flipped(MAGIC.len() + 4), "another key");
        damage(&flipped(HEADER_BYTES + 500), "checksum");
        damage(&flipped(HEADER_BYTES - 1), "checksum");
        // And replaced by a good one, it is a hit again.
        cache.store(&key, &artifact).unwrap();
        assert_eq!(hit(cache.lookup(&key)), artifact);
    }

    #[test]
    fn an_entry_that_is_not_a_file_is_damage_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), false);
        let key = cache.key(b"component");
        std::fs::create_dir_all(key.path()).unwrap();
        assert!(damaged(cache.lookup(&key)).contains("a directory, not a regular file"));
        std::fs::remove_dir(key.path()).unwrap();
        ferry_contract::files::mkfifo(key.path());
        assert!(damaged(cache.lookup(&key)).contains("a named pipe, not a regular file"));
    }

    #[test]
    fn a_directory_others_can_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path(), false);
        let key = cache.key(b"component");
        cache.store(&key, b"code").unwrap();
        std::fs::set_permissions(cache.dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
        match cache.lookup(&key) {
            Lookup::Unusable(problem) => {
                assert!(problem.contains("writable by its group or by others (mode 777)"), "{problem}");
                assert!(problem.contains("run native code in ferry"), "{problem}");
            }
            other => panic!("expected the directory to be refused, got {other:?}"),
        }
        let refused = cache.store(&key, b"code").unwrap_err();
        assert!(refused.contains("mode 777"), "{refused}");
    }

    #[test]
    fn a_directory_that_cannot_be_created_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"").unwrap();
        let cache = CompileCache::new(dir.path().join("file/compiled"), &compiling_engine(false).unwrap(), false);
        let key = cache.key(b"component");
        let problem = cache.store(&key, b"code").unwrap_err();
        assert!(problem.starts_with("cannot create") && problem.contains("/file"), "{problem}");
        match cache.lookup(&key) {
            Lookup::Unusable(problem) => assert!(problem.contains("Not a directory"), "{problem}"),
            other => panic!("expected an unusable cache, got {other:?}"),
        }
    }

    /// The smallest component there is, with `tag` in a custom section so that each
    /// tag is a component of its own.
    fn component(tag: &[u8]) -> Vec<u8> {
        let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
        bytes.extend_from_slice(&[0x00, 2 + tag.len() as u8, 1, b't']);
        bytes.extend_from_slice(tag);
        bytes
    }

    fn runtime(dir: &Path) -> crate::Runtime {
        crate::Runtime::new().unwrap().with_compile_cache(dir.join("compiled"))
    }

    fn stored(provenance: Provenance) -> PathBuf {
        match provenance {
            Provenance::Compiled { cache: Caching::Stored { entry } } => entry,
            other => panic!("expected a compile kept in the cache, got {other:?}"),
        }
    }

    use crate::{Caching, Provenance};

    #[tokio::test]
    async fn the_in_process_compiler_fills_the_cache_and_the_next_compile_hits() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime(dir.path());
        let path = Path::new("c.wasm");
        let (_, first) = runtime.compile_cached(path, component(b"a")).await.unwrap();
        let entry = stored(first);
        let (_, second) = runtime.compile_cached(path, component(b"a")).await.unwrap();
        assert_eq!(second, Provenance::CacheHit { entry: entry.clone() });
        let (_, other) = runtime.compile_cached(path, component(b"b")).await.unwrap();
        assert_ne!(stored(other), entry, "another component, another entry");
    }

    #[tokio::test]
    async fn an_entry_wasmtime_refuses_is_compiled_again_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime(dir.path());
        let cache = runtime.cache.clone().unwrap();
        let path = Path::new("c.wasm");
        let key = cache.key(&component(b"a"));
        // Whole and with a matching checksum, but no compiled code: only wasmtime's
        // own check can tell.
        cache.store(&key, b"not compiled code").unwrap();
        let (_, provenance) = runtime.compile_cached(path, component(b"a")).await.unwrap();
        assert_eq!(stored(provenance), key.path());
        // Code compiled for an engine metering fuel, under this engine's key.
        let metered = compiling_engine(true).unwrap().precompile_component(&component(b"a")).unwrap();
        cache.store(&key, &metered).unwrap();
        let (_, provenance) = runtime.compile_cached(path, component(b"a")).await.unwrap();
        assert_eq!(stored(provenance), key.path(), "refused by wasmtime, compiled again");
        assert_ne!(hit(cache.lookup(&key)), metered, "and replaced");
        let (_, provenance) = runtime.compile_cached(path, component(b"a")).await.unwrap();
        assert_eq!(provenance, Provenance::CacheHit { entry: key.path().to_path_buf() });
    }

    #[tokio::test]
    async fn a_cache_that_cannot_be_used_still_compiles_the_component() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"").unwrap();
        let runtime = crate::Runtime::new().unwrap().with_compile_cache(dir.path().join("file/compiled"));
        let (_, provenance) = runtime.compile_cached(Path::new("c.wasm"), component(b"a")).await.unwrap();
        match provenance {
            Provenance::Compiled { cache: Caching::Failed(problem) } => {
                assert!(problem.contains("file/compiled") && problem.contains("Not a directory"), "{problem}")
            }
            other => panic!("expected a compile without the cache, got {other:?}"),
        }
    }
}
