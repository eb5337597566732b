//! `[runtime] compile_cache`: where compiled components are kept between runs (see
//! `runtime::compile_cache`), or `false` for nowhere.
//!
//! On by default, in `<state.path>/compiled`: the state directory is already the
//! operator's, private to ferry, and outside every guest's reach, which is what a
//! directory ferry loads native code from must be. A grant that reaches the cache is
//! refused (`host_paths`): the guest could write native code ferry would load.

use std::fmt;
use std::path::PathBuf;

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

#[cfg(test)]
mod tests {
    use std::path::Path;

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
        std::fs::create_dir_all(site.path().join("data")).unwrap();
        let granting = |runtime: &str, host: &str, writable: bool| {
            format!(
                "[runtime]\n{runtime}\n{SOURCE}[sources.grants]\n\
                 dirs = [{{ host = \"{host}\", guest = \"/d\", writable = {writable} }}]\n"
            )
        };
        let cached = "compile_cache = \"data/cache\"";
        let error = parse(site.path(), &granting(cached, "data", true), &[]).unwrap_err().to_string();
        assert!(error.contains("sources[0] (key `random`): grants.dirs:"), "{error}");
        assert!(error.contains("holds the compile cache") && error.contains("run native code"), "{error}");
        // The cache elsewhere, or off: fine.
        parse(site.path(), &granting("compile_cache = \"/var/cache/ferry-test\"", "data", true), &[]).unwrap();
        parse(site.path(), &granting("compile_cache = false", "data", true), &[]).unwrap();
    }
}
