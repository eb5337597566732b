//! Building a Rust connector crate: the toolchain work is the componentize crate's,
//! shared with the workspace's own build of its guests.

use std::path::{Path, PathBuf};

use anyhow::Result;
use ferry_componentize::Toolchain;

pub(super) fn build(dir: &Path, out: Option<&Path>) -> Result<PathBuf> {
    let toolchain = Toolchain::detect()?;
    eprintln!("building {} with {toolchain}", dir.display());
    let built = ferry_componentize::build_crate(&dir.join("Cargo.toml"), &toolchain, out)?;
    Ok(built.path)
}
