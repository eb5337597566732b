//! What a connector is made of, as one digest: its component's bytes, its whole
//! table in the config, the values of its secrets, what its grants reach on the host
//! (the PostgreSQL servers it is granted, say) and its tenant. A reload restarts a connector only when its fingerprint
//! changes, so a connector whose config and component are the same (even if the
//! file was touched or rewritten with the same bytes) keeps running untouched.

use sha2::{Digest as _, Sha256};

use ferry_config::{Config, ConnectorConfig};

/// A SHA-256.
pub type Digest = [u8; 32];

/// The digest of everything a connector is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint(Digest);

/// The fingerprint of `connector` of `config`, whose component's bytes hash to
/// `component`.
pub fn fingerprint(config: &Config, connector: &dyn ConnectorConfig, component: &Digest) -> Fingerprint {
    let mut hasher = Sha256::new();
    let mut part = |bytes: &[u8]| {
        // Each part with its length, so that no two different lists of parts hash alike.
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    part(component);
    part(format!("{connector:?}").as_bytes());
    // The secrets' values, not only where they are read from: a rotated password
    // is a change.
    part(format!("{:?}", connector.plugin_config_json()).as_bytes());
    // What its grants reach on the host: a server its grant names, redefined or with
    // a rotated password, is a change.
    part(connector.grants().reach(&config.sections).as_bytes());
    part(format!("{:?}", connector.tenant().and_then(|t| config.tenant(t))).as_bytes());
    part(config.state_dir_of(connector).as_os_str().as_encoded_bytes());
    // The Avro schemas it reads from files: a changed schema is a change (one that
    // cannot be read is refused when its chain is built).
    for file in connector.schema_files() {
        part(&std::fs::read(file).unwrap_or_default());
    }
    Fingerprint(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config(secret: &Path, plugin_config: &str) -> Config {
        let text = format!(
            r#"
[[sources]]
key = "a"
path = "a.wasm"
streams = [{{ stream = "s", topic = "t" }}]
plugin_config = {{ {plugin_config} }}
secrets = {{ token = {{ file = "{}" }} }}
"#,
            secret.display()
        );
        Config::parse(Path::new("conf/ferry.toml"), &text, Vec::new()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn of(config: &Config, component: &Digest) -> Fingerprint {
        fingerprint(config, config.connector("a").unwrap(), component)
    }

    #[test]
    fn a_connector_is_changed_by_its_config_its_secrets_values_or_its_components_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("token");
        std::fs::write(&secret, "one").unwrap();
        let base = config(&secret, "rows = 1");
        let component = [7; 32];
        assert_eq!(of(&base, &component), of(&config(&secret, "rows = 1"), &component), "the same, read again");
        assert_ne!(of(&base, &component), of(&config(&secret, "rows = 2"), &component), "plugin_config");
        assert_ne!(of(&base, &component), of(&base, &[8; 32]), "the component's bytes");
        let before = of(&base, &component);
        std::fs::write(&secret, "two").unwrap();
        assert_ne!(before, of(&base, &component), "a secret's value, from the same place");
    }

    #[test]
    fn a_connector_is_changed_by_the_avro_schema_file_its_stream_reads() {
        let dir = tempfile::tempdir().unwrap();
        let schema = dir.path().join("r.avsc");
        std::fs::write(&schema, r#""long""#).unwrap();
        let text = format!(
            "[[sources]]\nkey = \"a\"\npath = \"a.wasm\"\nstreams = [{{ stream = \"s\", topic = \"t\", schema = \"avro\", \
             avro_schema_path = \"{}\" }}]\n",
            schema.display()
        );
        let config = Config::parse(Path::new("conf/ferry.toml"), &text, Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        let before = of(&config, &[7; 32]);
        assert_eq!(before, of(&config, &[7; 32]));
        std::fs::write(&schema, r#""string""#).unwrap();
        assert_ne!(before, of(&config, &[7; 32]), "the schema's text");
    }
}
