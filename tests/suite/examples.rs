//! The configs in `examples/` are documentation people copy: each must load as it
//! stands, and name components the workspace builds.

use std::path::{Path, PathBuf};

use ferry::config::Config;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_config_loads_and_names_built_components() {
    let files = examples();
    assert!(files.len() >= 3, "quickstart, iggy and sandbox at least: {files:?}");
    for file in files {
        let config = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.connectors().next().is_some(), "{}: no connector", file.display());
        for connector in config.connectors() {
            assert!(
                connector.path().exists(),
                "{}: `{}` names {}, which is not built",
                file.display(),
                connector.key(),
                connector.path().display()
            );
        }
    }
}
