//! `[[tenants]]`: connectors grouped under one owner, with limits on the group.
//!
//! ```toml
//! [[tenants]]
//! key = "acme"
//! max_connectors = 10
//! max_memory = "512MiB"          # the sum of its connectors' limits.memory
//!
//! [tenants.iggy]                 # its own sign-in (with [iggy]); same server
//! username = "acme"
//! password = "…"                 # or token / token_file / token_env
//! ```
//!
//! A tenant's connectors keep their state in a namespace of their own
//! (`<state.path>/tenants/<key>/`), sign in to Iggy with the tenant's credentials (so
//! the server's permissions decide which streams they reach), and carry the tenant in
//! every log line and in status.

use std::path::PathBuf;

use serde::Deserialize;

use super::iggy::Secret;
use ferry_contract::settings::ByteSize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub key: String,
    /// How many enabled connectors the tenant may have.
    #[serde(default)]
    pub max_connectors: Option<u32>,
    /// The most memory all its connectors together may be allowed (`limits.memory`
    /// summed over them).
    #[serde(default)]
    pub max_memory: Option<ByteSize>,
    /// How the tenant's connectors sign in to Iggy.
    #[serde(default)]
    pub iggy: Option<TenantIggy>,
}

/// `[tenants.iggy]`: credentials only; address, transport and TLS are the host's.
///
/// The same five keys as in [`super::IggyConfig`], spelled out rather than shared
/// through `#[serde(flatten)]`, which serde cannot combine with
/// `deny_unknown_fields`. [`super::IggyConfig::with_credentials_of`] puts them into
/// a copy of `[iggy]`, so the rules about them (exactly one way to sign in, where a
/// token comes from) are checked by the one [`super::IggyConfig::credentials`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantIggy {
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<Secret>,
    #[serde(default)]
    pub token: Option<Secret>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    #[serde(default)]
    pub token_env: Option<String>,
}
