//! `ferry new source|sink NAME [--path DIR]`: write a connector crate, outside any
//! workspace, that `ferry build` builds and `ferry run` runs as it stands. The files
//! are templates in `new/`, filled with the name and the SDK's path.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

/// What the connector is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Source,
    Sink,
}

/// The language the connector is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// The SDK of the checkout this ferry was built from: what the new crate depends on.
const GUEST_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

pub fn new(kind: Kind, name: &str, lang: Lang, parent: &Path) -> Result<ExitCode> {
    if lang != Lang::Rust {
        bail!("--lang {lang:?}: not supported yet; `ferry new` writes Rust connectors (--lang rust)");
    }
    check_name(name)?;
    let dir = parent.join(name);
    if dir.symlink_metadata().is_ok() {
        bail!("{}: already exists; `ferry new` writes a new directory and overwrites nothing", dir.display());
    }
    let guest_sdk = Path::new(GUEST_SDK).canonicalize().with_context(|| {
        format!("the guest SDK this ferry was built with ({GUEST_SDK}) is gone; run a ferry built from a checkout")
    })?;
    let guest_sdk = guest_sdk.to_str().context("the guest SDK's path is not UTF-8")?;
    let lib = name.replace('-', "_");
    let noun = match kind {
        Kind::Source => "source",
        Kind::Sink => "sink",
    };
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{lib}}", &lib)
            .replace("{{kind}}", noun)
            .replace("{{guest_sdk}}", guest_sdk)
    };
    let (lib_rs, ferry_toml) = match kind {
        Kind::Source => (include_str!("new/source.rs.in"), include_str!("new/source.toml.in")),
        Kind::Sink => (include_str!("new/sink.rs.in"), include_str!("new/sink.toml.in")),
    };
    let files: [(&str, String); 5] = [
        ("Cargo.toml", fill(include_str!("new/Cargo.toml.in"))),
        ("src/lib.rs", fill(lib_rs)),
        ("ferry.toml", fill(ferry_toml)),
        ("README.md", fill(include_str!("new/README.md.in"))),
        (".gitignore", "/target\n/data\n".to_string()),
    ];
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    // `create_dir`, not `create_dir_all`: if the directory appeared since the check
    // above, this fails rather than write into it.
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (file, text) in files {
        let path: PathBuf = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!("created the {noun} `{name}` in {}", dir.display());
    println!("next: cd {} && ferry build && ferry run ferry.toml", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// A name cargo takes as a package name, and ferry as a connector key.
fn check_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!(
            "{name:?} cannot name a connector: use ASCII letters, digits, `-` and `_`, starting with a letter \
             (it becomes the crate's name and the connector's key)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cargo_and_ferry_take_pass_and_others_are_refused() {
        for good in ["demo", "my-source", "pg_sink2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "2fast", "-x", "a b", "../x", "a/b", "é"] {
            let error = check_name(bad).unwrap_err().to_string();
            assert!(error.contains("cannot name a connector"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_crate_is_written_once_and_never_over_an_existing_directory() {
        let parent = tempfile::tempdir().unwrap();
        new(Kind::Sink, "out", Lang::Rust, parent.path()).unwrap();
        let manifest = std::fs::read_to_string(parent.path().join("out/Cargo.toml")).unwrap();
        assert!(manifest.contains("crate-type = [\"cdylib\"]") && manifest.contains("\n[workspace]\n"), "{manifest}");
        let sdk = Path::new(GUEST_SDK).canonicalize().unwrap();
        assert!(manifest.contains(&format!("path = \"{}\"", sdk.display())), "{manifest}");
        for file in ["src/lib.rs", "ferry.toml", "README.md"] {
            let text = std::fs::read_to_string(parent.path().join("out").join(file)).unwrap();
            assert!(!text.contains("{{"), "{file} has an unfilled placeholder:\n{text}");
        }
        std::fs::write(parent.path().join("out/src/lib.rs"), "mine").unwrap();
        let error = new(Kind::Source, "out", Lang::Rust, parent.path()).unwrap_err().to_string();
        assert!(error.contains("out: already exists"), "{error}");
        assert_eq!(std::fs::read_to_string(parent.path().join("out/src/lib.rs")).unwrap(), "mine");
    }

    #[test]
    fn other_languages_are_refused_for_now() {
        let parent = tempfile::tempdir().unwrap();
        let error = new(Kind::Source, "py", Lang::Python, parent.path()).unwrap_err().to_string();
        assert!(error.contains("not supported yet"), "{error}");
        assert!(!parent.path().join("py").exists());
    }
}
