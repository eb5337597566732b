//! `[runtime] compile_cache`: where compiled components are kept between runs (see
//! `runtime::compile_cache`), or `false` for nowhere.
//!
//! On by default, in `<state.path>/compiled`: the state directory is already the
//! operator's, private to ferry, and outside every guest's reach, which is what a
//! directory ferry loads native code from must be. A writable `grants.dirs` entry that
//! holds the cache is refused: the guest could write native code ferry would load.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};

use super::Config;

/// The name of the cache's directory in `[state] path` when none is configured.
pub const DEFAULT_DIR_NAME: &str = "compiled";

/// `[runtime] compile_cache`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CompileCacheSetting {
    /// Not set (or `true`): `<state.path>/compiled`.
    #[default]
    Default,
    /// `false`: every component is compiled at every start.
    Off,
    /// A directory (relative to the config file until paths are resolved).
    Dir(PathBuf),
}

impl<'de> serde::Deserialize<'de> for CompileCacheSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Setting;
        impl Visitor<'_> for Setting {
            type Value = CompileCacheSetting;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a directory (a string), or false to turn the compile cache off")
            }

            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
                Ok(if on { CompileCacheSetting::Default } else { CompileCacheSetting::Off })
            }

            fn visit_str<E: de::Error>(self, dir: &str) -> Result<Self::Value, E> {
                if dir.is_empty() {
                    return Err(E::custom("an empty path: give a directory, or false to turn the compile cache off"));
                }
                Ok(CompileCacheSetting::Dir(PathBuf::from(dir)))
            }
        }
        deserializer.deserialize_any(Setting)
    }
}

impl Config {
    /// The directory of the compile cache, `None` when it is off.
    pub fn compile_cache_dir(&self) -> Option<PathBuf> {
        match &self.runtime.compile_cache {
            CompileCacheSetting::Default => Some(self.state.path.join(DEFAULT_DIR_NAME)),
            CompileCacheSetting::Off => None,
            CompileCacheSetting::Dir(dir) => Some(dir.clone()),
        }
    }
}

/// No guest may write the compile cache: a writable `grants.dirs` entry that is the
/// cache's directory or holds it is refused.
pub(super) fn validate(config: &Config) -> Result<(), String> {
    let Some(cache) = config.compile_cache_dir() else { return Ok(()) };
    let cache = resolved(&cache);
    for connector in config.connectors() {
        for grant in connector.grants().dirs.iter().filter(|d| d.writable) {
            let Ok(host) = grant.host.canonicalize() else { continue };
            if cache.starts_with(&host) {
                return Err(format!(
                    "{}s (key `{}`): grants.dirs: {} is writable by the guest and holds the compile cache ({}); \
                     whoever can write the cache can run native code in ferry: grant another directory, or move \
                     [runtime] compile_cache out of it",
                    connector.role(),
                    connector.key(),
                    grant.host.display(),
                    cache.display(),
                ));
            }
        }
    }
    Ok(())
}

/// `path` with symlinks and `..` resolved as far as it exists (the cache's directory
/// may not exist yet), the rest appended as written.
fn resolved(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |path, part| path.join(part));
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}
