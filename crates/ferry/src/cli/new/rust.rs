//! The files of a new Rust connector: a crate of its own (not a member of any
//! workspace) depending on the ferry-guest SDK of this checkout by path.

use super::{File, Kind, Names};

pub(super) fn files(kind: Kind, names: &Names) -> Vec<File> {
    let (lib_rs, ferry_toml) = match kind {
        Kind::Source if names.http.is_some() => {
            (include_str!("rust/http_source.rs.in"), include_str!("rust/http_source.toml.in"))
        }
        Kind::Source => (include_str!("rust/source.rs.in"), include_str!("rust/source.toml.in")),
        Kind::Sink if names.http.is_some() => {
            (include_str!("rust/http_sink.rs.in"), include_str!("rust/http_sink.toml.in"))
        }
        Kind::Sink => (include_str!("rust/sink.rs.in"), include_str!("rust/sink.toml.in")),
        Kind::Transform => (include_str!("rust/transform.rs.in"), include_str!("rust/transform.toml.in")),
    };
    vec![
        ("Cargo.toml", names.fill(include_str!("rust/Cargo.toml.in"))),
        ("src/lib.rs", names.fill(lib_rs)),
        ("ferry.toml", names.fill(ferry_toml)),
        ("README.md", names.fill(include_str!("rust/README.md.in"))),
        (".gitignore", "/target\n/data\n".to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_is_a_cdylib_of_no_workspace_that_depends_on_this_checkouts_sdk() {
        let names = Names { name: "my-sink", kind: Kind::Sink, guest_sdk: "/x/guest-sdk".to_string(), http: None };
        let files = files(Kind::Sink, &names);
        let manifest = &files.iter().find(|(path, _)| *path == "Cargo.toml").unwrap().1;
        assert!(manifest.contains("crate-type = [\"cdylib\"]") && manifest.contains("\n[workspace]\n"), "{manifest}");
        assert!(manifest.contains("path = \"/x/guest-sdk\""), "{manifest}");
        assert!(manifest.contains("name = \"my-sink\""), "{manifest}");
    }

    #[test]
    fn an_http_sink_sends_through_the_sdk_to_the_url_it_is_granted() {
        let http = Some(("http://127.0.0.1:8080/in".to_string(), "127.0.0.1:8080".to_string()));
        let names = Names { name: "hooks", kind: Kind::Sink, guest_sdk: "/x".to_string(), http };
        let files = files(Kind::Sink, &names);
        let file = |name: &str| &files.iter().find(|(path, _)| *path == name).unwrap().1;
        assert!(file("src/lib.rs").contains("ferry_guest::http::send(&request)"));
        assert!(file("ferry.toml").contains("grants = { network = [\"127.0.0.1:8080\"] }"), "{}", file("ferry.toml"));
        assert!(file("ferry.toml").contains("plugin_config = { url = \"http://127.0.0.1:8080/in\" }"));
    }

    #[test]
    fn an_http_source_polls_through_the_sdk_the_url_it_is_granted() {
        let http = Some(("https://api.example.com/items".to_string(), "api.example.com:443".to_string()));
        let names = Names { name: "feed", kind: Kind::Source, guest_sdk: "/x".to_string(), http };
        let files = files(Kind::Source, &names);
        let file = |name: &str| &files.iter().find(|(path, _)| *path == name).unwrap().1;
        assert!(file("src/lib.rs").contains("ferry_guest::http::send(&Request::new(\"GET\""));
        assert!(file("src/lib.rs").contains("export_source!"));
        assert!(file("ferry.toml").contains("[[sources]]") && file("ferry.toml").contains("api.example.com:443"));
        assert!(file("ferry.toml").contains("plugin_config = { url = \"https://api.example.com/items\" }"));
    }
}
