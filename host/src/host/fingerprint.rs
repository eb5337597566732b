//! What a connector is made of, as one digest: its component's bytes, its whole
//! table in the config, the values of its secrets, the PostgreSQL servers it is
//! granted and its tenant. A reload restarts a connector only when its fingerprint
//! changes, so a connector whose config and component are the same (even if the
//! file was touched or rewritten with the same bytes) keeps running untouched.

use sha2::{Digest as _, Sha256};

use crate::config::{Config, ConnectorConfig};

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
    for name in &connector.grants().postgres {
        let server = config.postgres.get(name);
        part(format!("{name} {server:?}").as_bytes());
        part(format!("{:?}", server.and_then(|s| s.password.as_ref()).map(|p| p.read())).as_bytes());
    }
    part(format!("{:?}", connector.tenant().and_then(|t| config.tenant(t))).as_bytes());
    part(config.state_dir_of(connector).as_os_str().as_encoded_bytes());
    Fingerprint(hasher.finalize().into())
}
