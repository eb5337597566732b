//! Embeds every `.wit` file of the contract (the workspace's `wit/`), so that a new
//! interface is part of the host's contract check by being added to that directory.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable wit/ entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".wit"))
        .collect();
    names.sort();
    let mut list = String::from("&[\n");
    for name in &names {
        let path = dir.join(name).canonicalize().expect("a .wit file of wit/");
        println!("cargo::rerun-if-changed={}", path.display());
        writeln!(list, "    ({name:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    list.push(']');
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("wit_files.rs");
    std::fs::write(out, list).expect("OUT_DIR is writable");
}
