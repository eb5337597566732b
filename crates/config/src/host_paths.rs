//! Where guests may not reach: the places on the host ferry keeps for itself (state,
//! local log, compile cache, components, secrets, keys, this config) and the files
//! granted to other connectors.
//!
//! A grant that opens a host directory to a guest (`grants.dirs`, or any capability's
//! [`ferry_capabilities::HostFile`]) is checked against all of them, by real path:
//! the same directory, a parent, a child, a symlink to one or a `..` path to one are
//! all the same place. A hostile guest with such a grant could rewrite a neighbour's
//! topic file in the local log (the neighbour then NACKs "corrupt" forever), a cursor,
//! the compiled native code ferry loads, or read another tenant's records and keys.
//!
//! The rules, each refused at load (and so at every reload, which loads the file
//! again) with both paths and the real path named:
//! * no grant may write a place ferry keeps, nor read one that holds records or
//!   secrets (a component file may be read: it is code, not data);
//! * two connectors may not both write one place (each could corrupt the other's
//!   files);
//! * connectors of different tenants share no place at all: a tenant's files are
//!   its own, to write and to read.

use std::path::{Component, Path, PathBuf};

use super::{Config, SecretSource};

/// A place ferry keeps for itself.
struct Kept {
    /// What it is, for the error: `the local log ([local_log] path)`.
    what: String,
    path: PathBuf,
    real: PathBuf,
    /// Whether a guest may read it (a component file) or not (records, secrets).
    readable: bool,
    /// What a guest could do with it, for the error.
    harm: &'static str,
}

/// A host file or directory a connector's grant opens to its guest.
struct Reach<'a> {
    /// `sources[0] (key `orders`)`.
    connector: String,
    tenant: Option<&'a str>,
    key: &'static str,
    path: &'a Path,
    real: PathBuf,
    writable: bool,
}

/// See the module documentation.
pub(super) fn validate(config: &Config) -> Result<(), String> {
    let reaches = reaches(config);
    if reaches.is_empty() {
        return Ok(());
    }
    let kept = kept(config);
    for reach in &reaches {
        for place in &kept {
            let Some(relation) = relation(&reach.real, &place.real) else { continue };
            if reach.writable || !place.readable {
                return Err(format!(
                    "{}: {} {relation} {} ({}, real path {}): {}; grant another directory",
                    reach.describe(),
                    if reach.writable { "writable" } else { "readable" },
                    place.what,
                    place.path.display(),
                    place.real.display(),
                    place.harm,
                ));
            }
        }
    }
    for (index, reach) in reaches.iter().enumerate() {
        for other in &reaches[index + 1..] {
            if other.connector == reach.connector {
                continue;
            }
            let Some(relation) = relation(&reach.real, &other.real) else { continue };
            let why = if reach.tenant != other.tenant {
                format!(
                    "{} and {} would share files, and a tenant's files are its own",
                    tenant_name(reach.tenant),
                    tenant_name(other.tenant)
                )
            } else if reach.writable && other.writable {
                "two connectors writing one place can corrupt each other's files".to_string()
            } else {
                continue;
            };
            return Err(format!(
                "{}: {relation} {} of {} ({}, real path {}): {why}; grant another directory",
                reach.describe(),
                other.key,
                other.connector,
                other.path.display(),
                other.real.display(),
            ));
        }
    }
    Ok(())
}

impl Reach<'_> {
    fn describe(&self) -> String {
        format!("{}: {}: {} (real path {})", self.connector, self.key, self.path.display(), self.real.display())
    }
}

fn tenant_name(tenant: Option<&str>) -> String {
    match tenant {
        Some(tenant) => format!("tenant `{tenant}`"),
        None => "the connectors of no tenant".to_string(),
    }
}

/// How `a` stands to `b`, both real paths: `None` when neither holds the other.
fn relation(a: &Path, b: &Path) -> Option<&'static str> {
    if a == b {
        Some("is")
    } else if b.starts_with(a) {
        Some("holds")
    } else if a.starts_with(b) {
        Some("is inside")
    } else {
        None
    }
}

fn reaches(config: &Config) -> Vec<Reach<'_>> {
    let mut reaches = Vec::new();
    for (place, connector) in config.connectors_with_places() {
        for file in connector.grants().host_files() {
            reaches.push(Reach {
                connector: format!("{place} (key `{}`)", connector.key()),
                tenant: connector.tenant(),
                key: file.key,
                path: file.path,
                real: resolved(file.path),
                writable: file.writable,
            });
        }
    }
    reaches
}

fn kept(config: &Config) -> Vec<Kept> {
    const RECORDS: &str = "it holds every connector's records and cursors";
    const SECRET: &str = "it is a secret of the host's";
    let mut kept = Vec::new();
    let mut keep = |what: String, path: &Path, readable: bool, harm: &'static str| {
        kept.push(Kept { what, path: path.to_path_buf(), real: resolved(path), readable, harm });
    };
    keep("the state directory ([state] path)".into(), &config.state.path, false, RECORDS);
    keep("the local log ([local_log] path)".into(), &config.local_log.path, false, RECORDS);
    if let Some(cache) = config.compile_cache_dir() {
        let harm = "whoever can write the compile cache can run native code in ferry";
        keep("the compile cache ([runtime] compile_cache)".into(), &cache, false, harm);
    }
    if !config.file.as_os_str().is_empty() {
        keep("the config file".into(), &config.file, false, "it holds the host's settings and passwords");
    }
    for (place, connector) in config.connectors_with_places() {
        let at = format!("{place} (key `{}`)", connector.key());
        let harm = "a guest that writes it changes the code ferry runs";
        keep(format!("the component of {at}"), connector.path(), true, harm);
        for (name, secret) in connector.secrets() {
            if let SecretSource::File(file) = secret {
                keep(format!("the file of secret `{name}` of {at}"), file, false, SECRET);
            }
        }
    }
    if let Some(iggy) = &config.iggy {
        if let Some(file) = &iggy.token_file {
            keep("[iggy] token_file".into(), file, false, SECRET);
        }
        if let Some(file) = &iggy.tls.ca_file {
            keep("[iggy.tls] ca_file".into(), file, true, "whoever writes it decides which server ferry trusts");
        }
    }
    for tenant in &config.tenants {
        if let Some(file) = tenant.iggy.as_ref().and_then(|i| i.token_file.as_ref()) {
            keep(format!("[tenants.iggy] token_file of tenant `{}`", tenant.key), file, false, SECRET);
        }
    }
    if let Some(http) = &config.http {
        if let Some(SecretSource::File(file)) = &http.api_key {
            keep("[http] api_key's file".into(), file, false, SECRET);
        }
        if let Some(tls) = &http.tls {
            keep("[http.tls] cert_file".into(), &tls.cert_file, true, "whoever writes it can impersonate the API");
            keep("[http.tls] key_file".into(), &tls.key_file, false, SECRET);
        }
    }
    for file in config.sections.files() {
        keep("a file of a capability's section (a password or certificate)".into(), &file, false, SECRET);
    }
    kept
}

/// `path` as the real path it names: absolute, with symlinks, `.` and `..` resolved
/// component by component as far as it exists (the compile cache or the local log may
/// not exist yet), the rest appended as written.
fn resolved(path: &Path) -> PathBuf {
    let absolute = match std::env::current_dir() {
        Ok(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    };
    let mut real = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::CurDir => {}
            // `real` has no symlink left in it, so its parent is the real parent.
            Component::ParentDir => {
                real.pop();
            }
            Component::Prefix(_) | Component::RootDir => real.push(part),
            Component::Normal(name) => {
                real.push(name);
                if let Ok(target) = real.canonicalize() {
                    real = target;
                }
            }
        }
    }
    real
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::Config;

    /// A site with the default state and log directories, a component in `bin/`, a
    /// secret in `keys/` and free directories `data/` and `shared/`.
    fn site() -> tempfile::TempDir {
        let site = tempfile::tempdir().unwrap();
        for dir in ["state", "log", "bin", "keys", "data", "shared"] {
            std::fs::create_dir(site.path().join(dir)).unwrap();
        }
        std::fs::write(site.path().join("keys/token"), "s3cret").unwrap();
        site
    }

    fn source(key: &str, tenant: Option<&str>, dirs: &[(&str, bool)]) -> String {
        let dirs: Vec<String> = dirs
            .iter()
            .enumerate()
            .map(|(i, (host, writable))| format!("{{ host = \"{host}\", guest = \"/d{i}\", writable = {writable} }}"))
            .collect();
        let tenant = tenant.map(|t| format!("tenant = \"{t}\"\n")).unwrap_or_default();
        format!(
            "[[sources]]\nkey = \"{key}\"\n{tenant}path = \"bin/source.wasm\"\n\
             streams = [{{ stream = \"s\", topic = \"t\" }}]\n\
             secrets = {{ token = {{ file = \"keys/token\" }} }}\n\
             [sources.grants]\ndirs = [{}]\n",
            dirs.join(", ")
        )
    }

    fn load(site: &Path, text: &str) -> Result<Config, String> {
        let tenants = "[[tenants]]\nkey = \"acme\"\n[[tenants]]\nkey = \"globex\"\n";
        Config::parse(&site.join("ferry.toml"), &format!("{tenants}{text}"), Vec::new()).map_err(|e| e.to_string())
    }

    fn refused(site: &Path, text: &str) -> String {
        match load(site, text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(error) => error,
        }
    }

    #[test]
    fn a_grant_reaching_the_local_log_by_any_path_is_refused_naming_both_and_the_real_path() {
        let site = site();
        let log = site.path().join("log").canonicalize().unwrap();
        std::os::unix::fs::symlink(&log, site.path().join("link")).unwrap();
        // The same directory, a parent, a child, a symlink, a `..` path, an absolute one.
        std::fs::create_dir(log.join("child")).unwrap();
        let absolute = log.display().to_string();
        for (host, relation) in [
            ("log", "is"),
            ("log/child", "is inside"),
            ("link", "is"),
            ("data/../log", "is"),
            ("./link/child", "is inside"),
            (absolute.as_str(), "is"),
        ] {
            let error = refused(site.path(), &source("evil", None, &[(host, true)]));
            let named = format!("sources[0] (key `evil`): grants.dirs: {}", site.path().join(host).display());
            assert!(error.contains(&named), "{host}: {error}");
            assert!(
                error.contains(&format!("writable {relation} the local log ([local_log] path)")),
                "{host}: {error}"
            );
            assert!(error.contains(&format!("real path {}", log.display())), "{host}: {error}");
            assert!(error.contains("records and cursors"), "{error}");
        }
        // A parent holds the state directory first of all.
        let error = refused(site.path(), &source("evil", None, &[(".", true)]));
        assert!(error.contains("holds the state directory ([state] path)"), "{error}");
    }

    #[test]
    fn a_grant_reaching_a_postgres_ca_file_is_refused() {
        let site = site();
        std::fs::create_dir(site.path().join("shared/certs")).unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["db".to_string()]).unwrap().cert.pem();
        std::fs::write(site.path().join("shared/certs/db-ca.pem"), ca).unwrap();
        // Relative to the config's directory, as a password file is.
        let server =
            "[postgres.db]\nhost = \"db\"\ndatabase = \"d\"\nuser = \"u\"\nca_file = \"shared/certs/db-ca.pem\"\n";
        let config = load(site.path(), &format!("{server}{}", source("fine", None, &[("data", true)]))).unwrap();
        assert_eq!(config.sections.postgres["db"].ca_file, Some(site.path().join("shared/certs/db-ca.pem")));
        // Whoever writes it decides which server ferry trusts; reading is refused too.
        for writable in [true, false] {
            let error = refused(site.path(), &format!("{server}{}", source("evil", None, &[("shared", writable)])));
            assert!(error.contains("holds a file of a capability's section (a password or certificate)"), "{error}");
            assert!(error.contains("db-ca.pem"), "{error}");
        }
    }

    #[test]
    fn a_guest_may_read_its_component_but_nothing_holding_records_or_secrets() {
        let site = site();
        load(site.path(), &source("a", None, &[("bin", false), ("data", true)])).unwrap();
        for (host, what) in [
            ("state", "is the state directory"),
            ("log", "is the local log"),
            ("keys", "holds the file of secret `token` of sources[0] (key `a`)"),
            (".", "holds the state directory"),
        ] {
            let error = refused(site.path(), &source("a", None, &[(host, false)]));
            assert!(error.contains(&format!("readable {what}")), "{host}: {error}");
        }
        let error = refused(site.path(), &source("a", None, &[("bin", true)]));
        assert!(error.contains("writable holds the component of sources[0] (key `a`)"), "{error}");
        assert!(error.contains("changes the code ferry runs"), "{error}");
        // The config file, and the files of the host's own keys.
        std::fs::create_dir(site.path().join("conf")).unwrap();
        let config = site.path().join("conf/ferry.toml");
        let text =
            format!("[http]\napi_key = {{ file = \"data/api-key\" }}\n{}", source("a", None, &[("data", false)]));
        let error = refused(site.path(), &text);
        assert!(error.contains("holds [http] api_key's file") && error.contains("a secret of the host's"), "{error}");
        let elsewhere = "[state]\npath = \"../state\"\n[local_log]\npath = \"../log\"\n";
        let text = format!("{elsewhere}{}", source("a", None, &[(".", false)]));
        let moved = Config::parse(&config, &text, Vec::new()).unwrap_err().to_string();
        assert!(moved.contains("grants.dirs: ") && moved.contains("holds the config file"), "{moved}");
    }

    #[test]
    fn connectors_share_no_place_to_write_and_tenants_none_at_all() {
        let site = site();
        let two = |a: (Option<&str>, bool), b: (Option<&str>, bool), b_host: &str| {
            format!("{}{}", source("one", a.0, &[("shared", a.1)]), source("two", b.0, &[(b_host, b.1)]))
        };
        // One tenant: one may write what another reads; two may read one place.
        load(site.path(), &two((Some("acme"), true), (Some("acme"), false), "shared")).unwrap();
        load(site.path(), &two((None, false), (None, false), "shared")).unwrap();
        // Both writing: refused, whoever they belong to, a child as much as the place.
        std::fs::create_dir(site.path().join("shared/inner")).unwrap();
        let error = refused(site.path(), &two((None, true), (None, true), "shared/inner"));
        assert!(error.contains("sources[0] (key `one`): grants.dirs:"), "{error}");
        assert!(error.contains("holds grants.dirs of sources[1] (key `two`)"), "{error}");
        assert!(error.contains("corrupt each other's files"), "{error}");
        // Tenants apart share nothing, not even to read.
        let error = refused(site.path(), &two((Some("acme"), false), (Some("globex"), false), "shared"));
        assert!(error.contains("tenant `acme` and tenant `globex` would share files"), "{error}");
        let error = refused(site.path(), &two((Some("acme"), false), (None, true), "shared"));
        assert!(error.contains("tenant `acme` and the connectors of no tenant"), "{error}");
        load(site.path(), &two((Some("acme"), false), (Some("globex"), true), "data")).unwrap();
    }
}
