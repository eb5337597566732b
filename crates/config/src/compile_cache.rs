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

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r#"
[[sources]]
key = "random"
path = "random_source.wasm"
[[sources.streams]]
stream = "demo"
topic = "random"
"#;

    fn parse(dir: &Path, text: &str, vars: &[(&str, &str)]) -> Result<Config, super::super::ConfigError> {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Config::parse(&dir.join("ferry.toml"), text, vars)
    }

    #[test]
    fn on_by_default_in_the_state_directory_off_with_false_elsewhere_with_a_path() {
        let dir = Path::new("conf");
        let cache = |runtime: &str| parse(dir, &format!("[runtime]\n{runtime}\n{SOURCE}"), &[]).unwrap();
        assert_eq!(cache("").compile_cache_dir(), Some(dir.join("state/compiled")));
        let moved = parse(dir, &format!("[state]\npath = \"/srv/ferry\"\n{SOURCE}"), &[]).unwrap().compile_cache_dir();
        assert_eq!(moved, Some("/srv/ferry/compiled".into()), "it follows the state directory");
        assert_eq!(cache("compile_cache = true").compile_cache_dir(), Some(dir.join("state/compiled")));
        assert_eq!(cache("compile_cache = false").compile_cache_dir(), None);
        assert_eq!(cache("compile_cache = \"cache\"").compile_cache_dir(), Some(dir.join("cache")));
        assert_eq!(cache("compile_cache = \"/var/cache/ferry\"").compile_cache_dir(), Some("/var/cache/ferry".into()));
        // Turned off (or moved) from the environment too.
        let off = parse(dir, SOURCE, &[("FERRY__RUNTIME__COMPILE_CACHE", "false")]).unwrap();
        assert_eq!(off.compile_cache_dir(), None);
    }

    #[test]
    fn a_bad_value_is_an_error_naming_the_key() {
        let dir = Path::new("conf");
        let problem = |value: &str| {
            parse(dir, &format!("[runtime]\ncompile_cache = {value}\n{SOURCE}"), &[]).unwrap_err().to_string()
        };
        let error = problem("\"\"");
        assert!(error.contains("compile_cache") && error.contains("an empty path"), "{error}");
        let error = problem("3");
        assert!(error.contains("compile_cache") && error.contains("a directory (a string), or false"), "{error}");
    }

    #[test]
    fn a_writable_grant_holding_the_cache_is_refused() {
        let site = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(site.path().join("state")).unwrap();
        let granting = |host: &str, writable: bool| {
            format!(
                "{SOURCE}[sources.grants]\ndirs = [{{ host = \"{host}\", guest = \"/d\", writable = {writable} }}]\n"
            )
        };
        // The state directory (which holds the default cache), and the directory above it.
        for host in ["state", "."] {
            let error = parse(site.path(), &granting(host, true), &[]).unwrap_err().to_string();
            assert!(error.contains("sources (key `random`): grants.dirs:"), "{error}");
            assert!(error.contains("holds the compile cache") && error.contains("run native code"), "{error}");
        }
        // Read-only, another directory, or the cache elsewhere: fine.
        parse(site.path(), &granting("state", false), &[]).unwrap();
        std::fs::create_dir(site.path().join("data")).unwrap();
        parse(site.path(), &granting("data", true), &[]).unwrap();
        let elsewhere = format!("[runtime]\ncompile_cache = \"/var/cache/ferry-test\"\n{}", granting("state", true));
        parse(site.path(), &elsewhere, &[]).unwrap();
        let off = format!("[runtime]\ncompile_cache = false\n{}", granting(".", true));
        parse(site.path(), &off, &[]).unwrap();
    }
}
