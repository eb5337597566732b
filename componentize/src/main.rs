//! `ferry-componentize [PACKAGE...]`: build the workspace's guests (all of them when no
//! package is named) into components and print where each one is.
//! `ferry-componentize --manifest-path PATH/Cargo.toml`: build that one guest crate,
//! whatever workspace it belongs to (what `ferry build` does).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: ferry-componentize [PACKAGE...]\n       ferry-componentize --manifest-path PATH/Cargo.toml\n\n\
Builds the workspace's cdylib crates into WebAssembly components under target/components/,\n\
or the one crate of --manifest-path into <crate>/target/components/.";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return Ok(());
    }
    if args.first().map(String::as_str) == Some("--manifest-path") {
        let [_, manifest] = args.as_slice() else {
            bail!("--manifest-path takes one Cargo.toml and nothing else\n\n{USAGE}");
        };
        let toolchain = ferry_componentize::Toolchain::detect()?;
        eprintln!("building {manifest} with the {toolchain:?} toolchain");
        let built = ferry_componentize::build_crate(&PathBuf::from(manifest), &toolchain, None)?;
        println!("{}", built.path.display());
        return Ok(());
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().context("finding the workspace")?;
    let mut guests = ferry_componentize::workspace_guests(&root)?;
    if !args.is_empty() {
        if let Some(unknown) = args.iter().find(|w| !guests.iter().any(|g| &g.package == *w)) {
            let known: Vec<_> = guests.iter().map(|g| g.package.as_str()).collect();
            bail!(
                "`{unknown}` is not a guest crate of this workspace (guests: {}); for a crate elsewhere, \
                 use `ferry build DIR` or `--manifest-path DIR/Cargo.toml`",
                known.join(", ")
            );
        }
        guests.retain(|g| args.contains(&g.package));
    }
    let toolchain = ferry_componentize::Toolchain::detect()?;
    eprintln!("building {} guest(s) with the {toolchain:?} toolchain", guests.len());
    for built in ferry_componentize::build(&root, &guests, &toolchain)? {
        println!("{}", built.path.display());
    }
    Ok(())
}
