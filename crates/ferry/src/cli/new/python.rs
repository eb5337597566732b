//! The files of a new Python connector: an `app.py` built with componentize-py, and
//! a copy of the `ferry_guest` helper this ferry was built with, beside it: the
//! project names no path outside itself, so it builds wherever it is moved or cloned.

use super::{File, Kind, Names};

pub(super) fn files(kind: Kind, names: &Names) -> Vec<File> {
    let (app, ferry_toml) = match kind {
        Kind::Source => (include_str!("python/source.py.in"), include_str!("python/source.toml.in")),
        Kind::Sink => (include_str!("python/sink.py.in"), include_str!("python/sink.toml.in")),
        Kind::Transform => (include_str!("python/transform.py.in"), include_str!("python/transform.toml.in")),
    };
    vec![
        ("pyproject.toml", names.fill(include_str!("python/pyproject.toml.in"))),
        ("app.py", names.fill(app)),
        ("ferry.toml", names.fill(ferry_toml)),
        ("README.md", names.fill(include_str!("python/README.md.in"))),
        (".gitignore", "/target\n/data\n__pycache__/\n".to_string()),
        ("ferry_guest.py", include_str!("../../../../../guest-sdk/python/ferry_guest.py").to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_says_its_kind_and_carries_its_helper() {
        let names = Names { name: "my-sink", kind: Kind::Sink, guest_sdk: "/x/guest-sdk".to_string(), http: None };
        let files = files(Kind::Sink, &names);
        let manifest = &files.iter().find(|(path, _)| *path == "pyproject.toml").unwrap().1;
        assert!(manifest.contains("name = \"my-sink\""), "{manifest}");
        assert!(manifest.contains("kind = \"sink\""), "{manifest}");
        for (path, text) in &files {
            assert!(!text.contains("/x/"), "{path} names a path outside the project:\n{text}");
        }
        let helper = &files.iter().find(|(path, _)| *path == "ferry_guest.py").unwrap().1;
        assert!(helper.contains("def sink("), "{helper}");
        let app = &files.iter().find(|(path, _)| *path == "app.py").unwrap().1;
        assert!(app.contains("Sink = ferry_guest.sink("), "{app}");
        let config = &files.iter().find(|(path, _)| *path == "ferry.toml").unwrap().1;
        assert!(config.contains("path = \"target/components/my_sink.wasm\""), "{config}");
    }
}
