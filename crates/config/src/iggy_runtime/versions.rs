//! Every version of one connector's config that Iggy's runtime files hold, as Iggy's
//! API shows them (`/sources/{key}/configs`, `.../configs/{version}`,
//! `.../configs/active`): the connector file's keys as JSON (without `type`), and
//! whether it is the version in force. Read from the files at each request, as
//! Iggy's runtime asks its provider.

use std::path::Path;

use ferry_contract::Role;

use super::connector_file;
use super::env::IggyEnv;
use super::is_iggy_runtime;
use super::runtime_file::{self, Provider};

/// One version of a connector's config.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigVersion {
    pub version: u64,
    /// Whether it is the version in force (pinned, else the highest).
    pub active: bool,
    /// The file's keys, with Iggy's optional ones `null` when not written.
    pub config: serde_json::Value,
}

/// Every version of the `role` `key` in the files of the Iggy runtime file `file`
/// (with Iggy's overrides among `vars`), by version; an error saying why there are
/// none to show (a Ferry config, a config server, no such connector).
pub fn versions(file: &Path, role: Role, key: &str, vars: &[(String, String)]) -> Result<Vec<ConfigVersion>, String> {
    let text = ferry_contract::files::read_regular_text(file, crate::MAX_CONFIG_BYTES, "the file", "the limit")
        .map_err(|e| format!("{}: {}", file.display(), e.problem))?;
    let mut document: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {}", file.display(), e.to_string().trim()))?;
    if !is_iggy_runtime(&document) {
        return Err(format!(
            "{} is a Ferry config, which holds one version of each connector: see /{}s/{key}",
            file.display(),
            role.noun()
        ));
    }
    let mut env = IggyEnv::new(vars);
    env.apply_runtime(&mut document)?;
    let base = runtime_file::base_dir(file);
    let dir = match runtime_file::connectors_section(file, &base, &mut document)?.0 {
        Provider::Local(config_dir) => runtime_file::connector_dir(&base, &config_dir)?,
        Provider::Http(server) => {
            let url = server.active_configs_url();
            return Err(format!("the configs of `{key}` are kept by the config server (active ones at {url}): ask it"));
        }
    };
    let (found, active) = connector_file::versions_of(&dir, role, key, &mut env)?;
    if found.is_empty() {
        return Err(format!("no {} has the key `{key}` in {}", role.noun(), dir.display()));
    }
    found
        .into_iter()
        .map(|(version, mut table)| {
            table.remove("type");
            let mut config = serde_json::to_value(&table).map_err(|e| format!("{}: {e}", dir.display()))?;
            for optional in ["transforms", "plugin_config_format", "plugin_config"] {
                config.as_object_mut().map(|c| c.entry(optional).or_insert(serde_json::Value::Null));
            }
            Ok(ConfigVersion { version, active: version == active, config })
        })
        .collect()
}
