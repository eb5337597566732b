//! `ferry new source|sink|transform NAME [--lang rust|python|js] [--path DIR] [--http URL]`:
//! write a connector (or transform) project, outside any workspace, that `ferry build` builds and `ferry run`
//! runs as it stands. What is common to every language is here (the name, the
//! directory, never overwriting anything); each language's files are templates in
//! `new/<lang>/`, chosen by `new/<lang>.rs`.

mod js;
mod python;
mod rust;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

/// What the connector is: a source, a sink, or a transform to chain in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Source,
    Sink,
    Transform,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Source => "source",
            Kind::Sink => "sink",
            Kind::Transform => "transform",
        }
    }
}

/// The language the connector is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// The guest SDKs of the checkout this ferry was built from: what a new Rust crate
/// depends on (`guest-sdk/`), and where `ferry build` finds a Python helper that a
/// project does not carry (`guest-sdk/python/`).
const GUEST_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest-sdk");

/// The names a template may use: `{{name}}` (as given), `{{lib}}` (with `_` for `-`),
/// `{{kind}}` (`source` or `sink`) and `{{guest_sdk}}` (the absolute path of the
/// Rust SDK in this checkout: a crate depends on it by path; Python and JavaScript
/// projects carry a copy of their one-file helper instead, and name no path).
struct Names<'a> {
    name: &'a str,
    kind: Kind,
    guest_sdk: String,
    /// `--http URL`: the URL, and its `host:port` (`{{url}}`, `{{authority}}`).
    http: Option<(String, String)>,
}

impl Names<'_> {
    fn fill(&self, template: &str) -> String {
        template
            .replace("{{name}}", self.name)
            .replace("{{lib}}", &self.name.replace('-', "_"))
            .replace("{{kind}}", self.kind.noun())
            .replace("{{guest_sdk}}", &self.guest_sdk)
            .replace("{{url}}", self.http.as_ref().map_or("", |(url, _)| url))
            .replace("{{authority}}", self.http.as_ref().map_or("", |(_, authority)| authority))
    }
}

/// One file of a new project: its path inside the project, and its text.
type File = (&'static str, String);

/// A language's files for a new project (`new/<lang>.rs`).
type Files = fn(Kind, &Names) -> Vec<File>;

pub fn new(kind: Kind, name: &str, lang: Lang, parent: &Path, http: Option<&str>) -> Result<ExitCode> {
    check_name(name)?;
    let http = match http {
        None => None,
        Some(_) if kind == Kind::Transform || lang != Lang::Rust => bail!(
            "--http writes a Rust source or sink: use it with `ferry new source NAME` or `ferry new sink NAME` (and \
             --lang rust, the default)"
        ),
        Some(url) => Some((url.to_string(), authority(url)?)),
    };
    let dir = parent.join(name);
    if dir.symlink_metadata().is_ok() {
        bail!("{}: already exists; `ferry new` writes a new directory and overwrites nothing", dir.display());
    }
    let (guest_sdk, files): (String, Files) = match lang {
        Lang::Rust => (guest_sdk("")?, rust::files),
        Lang::Python => (String::new(), python::files),
        Lang::Js => (String::new(), js::files),
    };
    let names = Names { name, kind, guest_sdk, http };
    let files = files(kind, &names);

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
    println!("created the {} `{name}` in {}", kind.noun(), dir.display());
    println!("next: cd {} && ferry build && ferry run ferry.toml", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// The absolute path of a language's SDK (`sub` of `guest-sdk/`) in this checkout.
pub(super) fn guest_sdk(sub: &str) -> Result<String> {
    let path = Path::new(GUEST_SDK).join(sub);
    let path = path.canonicalize().with_context(|| {
        format!(
            "the guest SDK this ferry was built with ({}) is gone; run a ferry built from a checkout",
            path.display()
        )
    })?;
    Ok(path.to_str().context("the guest SDK's path is not UTF-8")?.to_string())
}

/// The `host:port` of `url`, which the new connector's ferry.toml grants (the scheme's
/// default port when the URL has none).
fn authority(url: &str) -> Result<String> {
    let invalid =
        || anyhow::anyhow!("--http {url:?}: give an http:// or https:// URL, e.g. http://127.0.0.1:8080/ingest");
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if !matches!(scheme, "http" | "https") || authority.is_empty() || authority.contains('@') {
        return Err(invalid());
    }
    let has_port = authority.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok());
    Ok(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if scheme == "https" { 443 } else { 80 })
    })
}

/// A name cargo takes as a package name, and ferry as a connector key.
fn check_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!(
            "{name:?} cannot name a connector: use ASCII letters, digits, `-` and `_`, starting with a letter \
             (it becomes the project's name and the connector's key)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_names_the_url_it_grants_and_is_only_for_rust_sources_and_sinks() {
        assert_eq!(authority("http://127.0.0.1:8080/in").unwrap(), "127.0.0.1:8080");
        assert_eq!(authority("https://api.example.com/v1?x").unwrap(), "api.example.com:443");
        assert_eq!(authority("http://hooks").unwrap(), "hooks:80");
        for bad in ["ftp://x/", "127.0.0.1:8080/in", "http:///in", "http://user@host/"] {
            assert!(authority(bad).unwrap_err().to_string().contains("give an http:// or https:// URL"), "{bad}");
        }
        let parent = tempfile::tempdir().unwrap();
        for (kind, lang) in [(Kind::Transform, Lang::Rust), (Kind::Sink, Lang::Python), (Kind::Source, Lang::Js)] {
            let error = new(kind, "h", lang, parent.path(), Some("http://a:1/")).unwrap_err().to_string();
            assert!(error.contains("--http writes a Rust source or sink"), "{error}");
        }
    }

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
    fn a_project_is_written_once_and_never_over_an_existing_directory() {
        let parent = tempfile::tempdir().unwrap();
        new(Kind::Sink, "out", Lang::Rust, parent.path(), None).unwrap();
        for file in ["Cargo.toml", "src/lib.rs", "ferry.toml", "README.md"] {
            let text = std::fs::read_to_string(parent.path().join("out").join(file)).unwrap();
            assert!(!text.contains("{{"), "{file} has an unfilled placeholder:\n{text}");
        }
        std::fs::write(parent.path().join("out/src/lib.rs"), "mine").unwrap();
        let error = new(Kind::Source, "out", Lang::Rust, parent.path(), None).unwrap_err().to_string();
        assert!(error.contains("out: already exists"), "{error}");
        assert_eq!(std::fs::read_to_string(parent.path().join("out/src/lib.rs")).unwrap(), "mine");
    }

    #[test]
    fn a_python_project_has_no_placeholder_left() {
        let parent = tempfile::tempdir().unwrap();
        for kind in [Kind::Source, Kind::Sink, Kind::Transform] {
            let name = format!("py-{}", kind.noun());
            new(kind, &name, Lang::Python, parent.path(), None).unwrap();
            for file in ["pyproject.toml", "app.py", "ferry.toml", "README.md", ".gitignore", "ferry_guest.py"] {
                let text = std::fs::read_to_string(parent.path().join(&name).join(file)).unwrap();
                assert!(!text.contains("{{"), "{file} has an unfilled placeholder:\n{text}");
            }
        }
    }
}
