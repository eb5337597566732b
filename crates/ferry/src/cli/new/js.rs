//! The files of a new JavaScript connector: a `package.json` that `ferry build` reads
//! (which module, source, sink or transform), the module, and a ferry.toml that gives it the
//! memory a JavaScript engine needs. The module imports `./ferry-guest.js`, a copy
//! of the helper this ferry was built with: the project names no path outside
//! itself, so it builds wherever it is moved or cloned; `ferry build` bundles the
//! helper in.

use super::{File, Kind, Names};

/// The `limits.memory` a new project's ferry.toml gives its connector: the
/// JavaScript engine's heap (see the README, "JavaScript").
const JS_MEMORY: &str = "128MiB";

pub(super) fn files(kind: Kind, names: &Names) -> Vec<File> {
    let (module, module_js, ferry_toml) = match kind {
        Kind::Source => ("source.js", include_str!("js/source.js.in"), include_str!("js/source.toml.in")),
        Kind::Sink => ("sink.js", include_str!("js/sink.js.in"), include_str!("js/sink.toml.in")),
        Kind::Transform => ("transform.js", include_str!("js/transform.js.in"), include_str!("js/transform.toml.in")),
    };
    vec![
        ("package.json", names.fill(include_str!("js/package.json.in"))),
        (module, names.fill(module_js)),
        ("ferry.toml", names.fill(ferry_toml).replace("{{js_memory}}", JS_MEMORY)),
        ("README.md", names.fill(include_str!("js/README.md.in")).replace("{{js_memory}}", JS_MEMORY)),
        (".gitignore", "/target\n/data\n".to_string()),
        ("ferry-guest.js", include_str!("../../../../../guest-sdk/js/ferry-guest.js").to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_names_its_module_and_kind_and_the_module_imports_the_helper_beside_it() {
        let names = Names { name: "my-source", kind: Kind::Source, guest_sdk: "/x/guest-sdk".to_string(), http: None };
        let files = files(Kind::Source, &names);
        let text = |path: &str| files.iter().find(|(p, _)| *p == path).unwrap().1.clone();
        let package: serde_json::Value = serde_json::from_str(&text("package.json")).unwrap();
        assert_eq!(package["main"], "source.js");
        assert_eq!(package["ferry"]["kind"], "source");
        assert!(text("source.js").contains("from \"./ferry-guest.js\""));
        assert!(text("ferry-guest.js").contains("export function source("), "the helper itself");
        assert!(text("ferry.toml").contains(&format!("memory = \"{JS_MEMORY}\"")));
        assert!(text("ferry.toml").contains("path = \"target/components/my_source.wasm\""));
        for kind in [Kind::Source, Kind::Sink, Kind::Transform] {
            for (path, text) in super::files(kind, &names) {
                assert!(!text.contains("{{"), "{path} has an unfilled placeholder:\n{text}");
                assert!(!text.contains("/x/"), "{path} names a path outside the project:\n{text}");
            }
        }
    }
}
