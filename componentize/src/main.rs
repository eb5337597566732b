//! `ferry-componentize [PACKAGE...]`: build the workspace's guests (all of them when no
//! package is named) into components and print where each one is.

use anyhow::{Result, bail};

fn main() -> Result<()> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize()?;
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    if wanted.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "usage: ferry-componentize [PACKAGE...]\n\nBuilds the workspace's cdylib crates into WebAssembly components under target/components/."
        );
        return Ok(());
    }
    let mut guests = ferry_componentize::workspace_guests(&root)?;
    if !wanted.is_empty() {
        if let Some(unknown) = wanted.iter().find(|w| !guests.iter().any(|g| &g.package == *w)) {
            let known: Vec<_> = guests.iter().map(|g| g.package.as_str()).collect();
            bail!("`{unknown}` is not a guest crate of this workspace (guests: {})", known.join(", "));
        }
        guests.retain(|g| wanted.contains(&g.package));
    }
    let toolchain = ferry_componentize::Toolchain::detect()?;
    eprintln!("building {} guest(s) with the {toolchain:?} toolchain", guests.len());
    for built in ferry_componentize::build(&root, &guests, &toolchain)? {
        println!("{}", built.path.display());
    }
    Ok(())
}
