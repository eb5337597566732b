//! What every test server (PostgreSQL, ClickHouse, InfluxDB, Redis) needs alike: the
//! user it runs as when the tests run as root, and the part of its log file one start
//! wrote.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// `user`'s uid and gid when the tests run as root (as CI does: servers refuse to run
/// as root, or should not), or `None` to run the server as ourselves. The panic names
/// the `setup` script that makes the user.
pub fn run_as(user: &str, setup: &str) -> Option<(u32, u32)> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = CString::new(user).expect("a user name without NUL");
    // SAFETY: a valid C string; the entry is copied out before another getpw* call.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !entry.is_null(),
        "the tests run as root, and run the server as the user {user}, which does not exist: run {setup} (as root) \
         to create it"
    );
    // SAFETY: getpwnam returned a valid entry.
    Some(unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

/// What `path` holds from byte `from` on (empty if it does not exist yet).
pub fn read_from(path: &Path, from: u64) -> String {
    let mut text = Vec::new();
    if let Ok(mut file) = File::open(path) {
        file.seek(SeekFrom::Start(from)).expect("a seekable log");
        file.read_to_end(&mut text).expect("a readable log");
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// `kill -9` the server in `child`, if it runs; returns once it is gone (reaped).
pub fn kill_9(child: &mut Option<std::process::Child>) {
    let Some(mut child) = child.take() else { return };
    // SAFETY: kill(2) on our own child's pid, which `wait` has not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    child.wait().expect("the killed server is reaped");
}

/// The program `name` on the `PATH`; the panic names the `setup` script that installs
/// it.
pub fn on_path(name: &str, setup: &str) -> std::path::PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    found.unwrap_or_else(|| panic!("no {name} on the PATH: run {setup} to install it"))
}
