//! `[http]`: the HTTP API and Prometheus metrics of a running `ferry` (see
//! `ferry-api`). Off unless the section is there; it listens on loopback by
//! default, and with `api_key` every request must carry the key in an `api-key`
//! header.
//!
//! ```toml
//! [http]
//! address = "127.0.0.1:8081"              # host:port to listen on
//! api_key = { env = "FERRY_API_KEY" }     # or { file = "secrets/api-key" }; optional
//! tls = { cert_file = "tls/cert.pem", key_file = "tls/key.pem" }   # optional: HTTPS
//! ```
//!
//! The key is read like every other secret of the config (an environment variable
//! or a file, never written in the config itself) and never printed.

use std::path::PathBuf;

use serde::Deserialize;

use ferry_contract::settings::{SecretSource, split_host_port};

/// `[http]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Whether to serve (an environment override can switch it off:
    /// `FERRY__HTTP__ENABLED=false`).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `host:port` to listen on; a host name is resolved when ferry starts.
    #[serde(default = "default_address")]
    pub address: String,
    /// Where the key every request must present is read from; none means every
    /// request is served (keep such an API on loopback).
    #[serde(default)]
    pub api_key: Option<SecretSource>,
    /// Serve HTTPS with this certificate and key, instead of HTTP.
    #[serde(default)]
    pub tls: Option<HttpTls>,
    /// Which web pages may call the API from a browser; none unless enabled.
    #[serde(default)]
    pub cors: CorsConfig,
}

/// `[http.cors]`, as Iggy's runtime has it: the origins whose pages a browser lets
/// call the API (`["*"]`: any), the methods and headers they may use, the headers
/// they may read, and whether with credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CorsConfig {
    pub enabled: bool,
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    pub allowed_headers: Vec<String>,
    pub exposed_headers: Vec<String>,
    pub allow_credentials: bool,
    pub allow_private_network: bool,
}

/// The methods `allowed_methods` may name.
const METHODS: [&str; 9] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "CONNECT", "PATCH", "TRACE"];

impl CorsConfig {
    /// What a browser would refuse, or what means nothing, naming the key.
    fn validate(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        let origins = &self.allowed_origins;
        if origins.is_empty() {
            return Err("cors.allowed_origins: name the origins that may call the API (or [\"*\"] for any)".into());
        }
        let any = origins.iter().any(|origin| origin == "*");
        if any && origins.len() > 1 {
            return Err("cors.allowed_origins: \"*\" allows any origin; give it alone or not at all".into());
        }
        for origin in origins.iter().filter(|origin| *origin != "*") {
            let host = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
            if !host.is_some_and(|host| !host.is_empty() && !host.contains(['/', ' ', '?', '#'])) {
                return Err(format!(
                    "cors.allowed_origins: {origin:?} is not an origin: write scheme://host[:port], e.g. \
                     \"https://console.example:8443\", with no path{}",
                    if origin == "null" {
                        " (\"null\" is what sandboxed and file:// pages send: any of them)"
                    } else {
                        ""
                    }
                ));
            }
        }
        if any && self.allow_credentials {
            return Err(
                "cors.allow_credentials: browsers refuse credentials for any origin (\"*\"); name the origins".into()
            );
        }
        for method in &self.allowed_methods {
            if !METHODS.contains(&method.to_ascii_uppercase().as_str()) {
                return Err(format!("cors.allowed_methods: {method:?} is none of {}", METHODS.join(", ")));
            }
        }
        let token = |name: &str| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        };
        for (key, names) in [("allowed_headers", &self.allowed_headers), ("exposed_headers", &self.exposed_headers)] {
            if let Some(name) = names.iter().find(|name| !token(name) || *name == "*") {
                return Err(format!("cors.{key}: {name:?} is not a header name"));
            }
        }
        Ok(())
    }
}

/// `[http] tls`: PEM files, relative to the config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpTls {
    /// The certificate chain, the server's own first.
    pub cert_file: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
}

/// The address of Iggy's connectors runtime API, on loopback.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:8081";

fn default_address() -> String {
    DEFAULT_ADDRESS.to_string()
}

fn yes() -> bool {
    true
}

impl HttpConfig {
    /// Problems serde cannot see, naming the key.
    pub(super) fn validate(&self) -> Result<(), String> {
        split_host_port(&self.address).map_err(|p| format!("address: {p}"))?;
        self.cors.validate()?;
        match &self.api_key {
            Some(SecretSource::Env(variable)) if variable.is_empty() || variable.contains('=') => {
                Err(format!("api_key: {variable:?} is not an environment variable name"))
            }
            _ => Ok(()),
        }
    }

    /// The key requests must carry, read now; the error names where it was looked
    /// for, never a byte of it. An empty key is refused: it would look like
    /// protection and be none.
    pub fn read_api_key(&self) -> Result<Option<String>, String> {
        let Some(source) = &self.api_key else { return Ok(None) };
        let key = source.read().map_err(|p| format!("[http] api_key: {p}"))?;
        if key.trim().is_empty() {
            return Err(format!("[http] api_key: {} is empty", describe(source)));
        }
        Ok(Some(key))
    }
}

/// Where a secret comes from, in words.
fn describe(source: &SecretSource) -> String {
    match source {
        SecretSource::Env(variable) => format!("the environment variable {variable}"),
        SecretSource::File(path) => format!("the file {}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{Config, ConfigError};

    #[test]
    fn cors_names_what_a_browser_would_refuse() {
        let check = |cors: &str| {
            let http: HttpConfig = toml::from_str(&format!("[cors]\nenabled = true\n{cors}")).unwrap();
            http.validate()
        };
        assert_eq!(check("allowed_origins = [\"https://console.example:8443\", \"http://localhost:3000\"]"), Ok(()));
        assert_eq!(check("allowed_origins = [\"*\"]\nallowed_methods = [\"get\"]"), Ok(()));
        for (cors, words) in [
            ("", "name the origins"),
            ("allowed_origins = [\"*\", \"https://a.example\"]", "give it alone"),
            ("allowed_origins = [\"https://a.example/app\"]", "is not an origin"),
            ("allowed_origins = [\"null\"]", "sandboxed and file:// pages"),
            ("allowed_origins = [\"*\"]\nallow_credentials = true", "cors.allow_credentials"),
            ("allowed_origins = [\"*\"]\nallowed_methods = [\"FETCH\"]", "\"FETCH\" is none of GET"),
            ("allowed_origins = [\"*\"]\nallowed_headers = [\"api key\"]", "cors.allowed_headers: \"api key\""),
        ] {
            let error = check(cors).unwrap_err();
            assert!(error.contains(words), "{cors}: {error}");
        }
        // Off, it is not looked at.
        let http: HttpConfig = toml::from_str("[cors]\nallowed_origins = [\"*\", \"x\"]").unwrap();
        assert_eq!(http.validate(), Ok(()));
    }

    const SOURCE: &str = r#"
[[sources]]
key = "random"
path = "random_source.wasm"
streams = [{ stream = "demo", topic = "random" }]
"#;

    fn parse(http: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("conf/ferry.toml"), &format!("{SOURCE}\n{http}"), Vec::new())
    }

    fn problem(http: &str) -> String {
        parse(http).unwrap_err().to_string()
    }

    #[test]
    fn off_unless_configured_and_on_loopback_by_default() {
        assert_eq!(parse("").unwrap().http, None);
        let http = parse("[http]").unwrap().http.unwrap();
        assert_eq!(
            http,
            HttpConfig {
                enabled: true,
                address: "127.0.0.1:8081".into(),
                api_key: None,
                tls: None,
                cors: CorsConfig::default()
            }
        );
        assert_eq!(http.read_api_key(), Ok(None));
    }

    #[test]
    fn key_and_tls_files_are_relative_to_the_config_file() {
        let http = parse(
            "[http]\naddress = \"0.0.0.0:9000\"\napi_key = { file = \"secrets/api\" }\n\
             tls = { cert_file = \"tls/cert.pem\", key_file = \"/etc/ferry/key.pem\" }",
        )
        .unwrap()
        .http;
        let http = http.unwrap();
        assert_eq!(http.address, "0.0.0.0:9000");
        assert_eq!(http.api_key, Some(SecretSource::File("conf/secrets/api".into())));
        let tls = http.tls.unwrap();
        assert_eq!((tls.cert_file, tls.key_file), ("conf/tls/cert.pem".into(), "/etc/ferry/key.pem".into()));
    }

    #[test]
    fn bad_values_name_the_file_the_key_and_the_value() {
        for (http, words) in [
            (
                "[http]\naddress = \"localhost\"",
                &["conf/ferry.toml", "[http] address", "\"localhost\" is not `host:port`"][..],
            ),
            ("[http]\naddress = \"127.0.0.1:http\"", &["[http] address", "\"http\" is not a port number"]),
            ("[http]\naddress = \":8081\"", &["[http] address", "names no host"]),
            ("[http]\napikey = { env = \"K\" }", &["conf/ferry.toml", "unknown field `apikey`"]),
            ("[http]\napi_key = \"written-in-the-file\"", &["conf/ferry.toml", "api_key"]),
            ("[http]\napi_key = { env = \"\" }", &["[http] api_key", "is not an environment variable name"]),
            ("[http]\nenabled = \"yes\"", &["conf/ferry.toml", "enabled"]),
            ("[http]\ntls = { cert_file = \"c.pem\" }", &["conf/ferry.toml", "missing field `key_file`"]),
            ("[http]\ntls = { cert_file = \"c.pem\", key_file = \"k.pem\", ca = 1 }", &["unknown field `ca`"]),
        ] {
            let error = problem(http);
            for word in words {
                assert!(error.contains(word), "{http:?}: the error should say {word:?}: {error}");
            }
        }
    }

    #[test]
    fn a_key_that_cannot_be_read_is_named_without_a_value() {
        let unset = HttpConfig {
            api_key: Some(SecretSource::Env("FERRY_TEST_HTTP_KEY_NEVER_SET".into())),
            ..parse("[http]").unwrap().http.unwrap()
        };
        let error = unset.read_api_key().unwrap_err();
        assert!(
            error.contains("[http] api_key") && error.contains("FERRY_TEST_HTTP_KEY_NEVER_SET is not set"),
            "{error}"
        );

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("api-key");
        std::fs::write(&file, "  \n").unwrap();
        let empty = HttpConfig { api_key: Some(SecretSource::File(file.clone())), ..unset.clone() };
        let error = empty.read_api_key().unwrap_err();
        assert!(error.contains("[http] api_key") && error.contains("is empty"), "{error}");

        std::fs::write(&file, "k3y-from-a-file\n").unwrap();
        let good = HttpConfig { api_key: Some(SecretSource::File(file)), ..unset };
        assert_eq!(good.read_api_key(), Ok(Some("k3y-from-a-file".to_string())), "one trailing newline is dropped");
    }
}
