//! `grants.dirs = [{ host = "data/in", guest = "/in" }]`: host directories, each at
//! the path the guest sees it, read-only unless `writable = true`.

use std::path::PathBuf;

use ferry_contract::files;
use serde::Deserialize;

/// One preopened directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The directory on the host (relative to the config file).
    pub host: PathBuf,
    /// Where the guest finds it, e.g. `/data`.
    pub guest: String,
    /// Read-write instead of read-only.
    #[serde(default)]
    pub writable: bool,
}

impl DirGrant {
    /// The guest's path is absolute and the host's a directory; the key at fault.
    pub(super) fn validate(&self) -> Result<(), (&'static str, String)> {
        if !self.guest.starts_with('/') {
            return Err(("grants.dirs.guest", format!("{:?} must be an absolute path, like \"/data\"", self.guest)));
        }
        files::directory(&self.host, "grants.dirs.host")
            .map_err(|e| ("grants.dirs.host", format!("{}: {}", e.path.display(), e.problem)))
    }
}
