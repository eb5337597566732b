//! The component a native plugin's `path` stands for.
//!
//! Iggy's runtime loads `path` as a shared library
//! (`target/release/libiggy_connector_random_source`, `.so` added). Ferry runs the
//! component of the same connector: the library's name without `lib`, the
//! `iggy_connector_` prefix and the extension (`random_source`), as
//! `random_source.wasm` or `random-source.wasm`, from `[connectors] components_dir`
//! (relative to the runtime file), or by default from `components/` next to the
//! runtime file and then next to the `ferry` binary. A `path` ending in `.wasm` is a
//! component already, relative to the runtime file as every Ferry path is.

use std::path::{Path, PathBuf};

/// The most components an error names: a directory may hold thousands.
const MAX_NAMED: usize = 20;

/// Where components are looked for.
pub(super) struct Components {
    base: PathBuf,
    dirs: Vec<PathBuf>,
}

impl Components {
    /// The directories to search, for a runtime file in `base`.
    pub fn new(base: &Path, components_dir: Option<&str>) -> Components {
        let dirs = match components_dir {
            Some(dir) => vec![base.join(dir)],
            None => {
                let beside_binary = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join("components")));
                std::iter::once(base.join("components")).chain(beside_binary).collect()
            }
        };
        Components { base: base.to_path_buf(), dirs }
    }

    /// The component for `path`; for a connector that is not `enabled`, where it
    /// would be when none is found (it is not loaded, as Iggy does not load it).
    pub fn find(&self, path: &str, enabled: bool) -> Result<PathBuf, String> {
        if path.ends_with(".wasm") {
            return Ok(self.base.join(path));
        }
        let name = connector_name(path);
        let files = [format!("{name}.wasm"), format!("{}.wasm", name.replace('_', "-"))];
        let found = self.dirs.iter().flat_map(|dir| files.iter().map(move |file| dir.join(file))).find(|p| p.is_file());
        match found {
            Some(component) => Ok(component),
            None if !enabled => Ok(self.dirs[0].join(&files[0])),
            None => Err(format!(
                "{path:?} is a native library; ferry runs the component of connector `{name}` instead and looked \
                 for {} in {}, which hold {}: build the connector as a component into one of them, or set \
                 [connectors] components_dir",
                files.join(" or "),
                self.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" and "),
                self.present(),
            )),
        }
    }

    /// The components the directories hold (the first [`MAX_NAMED`] by name), for
    /// the error that says none fits.
    fn present(&self) -> String {
        let mut names: Vec<String> = self
            .dirs
            .iter()
            .filter_map(|dir| std::fs::read_dir(dir).ok())
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".wasm"))
            .collect();
        names.sort();
        names.dedup();
        let more = names.len().saturating_sub(MAX_NAMED);
        names.truncate(MAX_NAMED);
        match (names.is_empty(), more) {
            (true, _) => "no components".into(),
            (false, 0) => names.join(", "),
            (false, more) => format!("{} and {more} more", names.join(", ")),
        }
    }
}

/// The connector a native library's path names: `.../libiggy_connector_random_source.so`
/// is `random_source`.
fn connector_name(path: &str) -> String {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let file = [".so", ".dylib", ".dll"].iter().find_map(|ext| file.strip_suffix(ext)).unwrap_or(file);
    let file = file.strip_prefix("lib").unwrap_or(file);
    file.strip_prefix("iggy_connector_").unwrap_or(file).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_library_names_its_connector() {
        assert_eq!(connector_name("target/release/libiggy_connector_random_source"), "random_source");
        assert_eq!(connector_name("/opt/libiggy_connector_postgres_sink.so"), "postgres_sink");
        assert_eq!(connector_name("C:\\x\\iggy_connector_stdout_sink.dll"), "stdout_sink");
        assert_eq!(connector_name("libmine.dylib"), "mine");
    }
}
