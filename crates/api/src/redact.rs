//! No secret in any answer. The API never shows `plugin_config` or secrets, but a
//! guest's error (its `last_error`), its cursor or a message quoting it could carry a
//! secret it was handed, so every JSON answer and every state shown passes through
//! the [`Redactor`], which replaces the value of every secret the host knows with
//! `[redacted]`.

use std::borrow::Cow;

use ferry_config::{Config, Credentials};

/// What a secret is replaced with.
const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not searched for: replacing every `a` would make
/// answers unreadable, and a secret of two characters protects nothing.
const SHORTEST: usize = 4;

/// The values to take out of answers, longest first (so that a secret containing
/// another is replaced whole).
pub(super) struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Every secret of `config` that can be read now: the connectors' `[secrets]`,
    /// the secrets their grants reach (PostgreSQL passwords), the Iggy credentials
    /// (the host's and the tenants'), and the API key.
    pub fn from_config(config: &Config, api_key: Option<&str>) -> Redactor {
        let mut secrets: Vec<String> = Vec::new();
        for connector in config.connectors() {
            secrets.extend(connector.secrets().values().filter_map(|source| source.read().ok()));
            secrets.extend(connector.grants().secrets(&config.sections));
        }
        if let Some(iggy) = &config.iggy {
            let tenants =
                config.tenants.iter().filter_map(|t| t.iggy.as_ref()).map(|own| iggy.with_credentials_of(own));
            for credentials in std::iter::once(iggy.clone()).chain(tenants).filter_map(|i| i.credentials().ok()) {
                secrets.push(match credentials {
                    Credentials::UsernamePassword { password, .. } => password.expose().to_string(),
                    Credentials::Token(token) => token.expose().to_string(),
                });
            }
        }
        secrets.extend(api_key.map(str::to_string));
        Redactor::new(secrets)
    }

    fn new(mut secrets: Vec<String>) -> Redactor {
        secrets.retain(|s| s.chars().count() >= SHORTEST);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// `text` with every secret replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), REDACTED));
            }
        }
        text
    }

    /// `bytes` with every secret replaced (a cursor need not be text), and whether
    /// any was.
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> (Cow<'a, [u8]>, bool) {
        let mut bytes = Cow::Borrowed(bytes);
        let mut any = false;
        for secret in &self.secrets {
            let needle = secret.as_bytes();
            if bytes.windows(needle.len()).any(|w| w == needle) {
                any = true;
                bytes = Cow::Owned(replace_bytes(&bytes, needle, REDACTED.as_bytes()));
            }
        }
        (bytes, any)
    }

    /// Every string in `value` (keys too) with every secret replaced.
    pub fn json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.secrets.is_empty() {
            return;
        }
        match value {
            Value::String(text) => {
                if let Cow::Owned(clean) = self.text(text) {
                    *text = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.json(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.json(&mut item);
                    map.insert(self.text(&key).into_owned(), item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while !rest.is_empty() {
        if rest.starts_with(needle) {
            out.extend_from_slice(with);
            rest = &rest[needle.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_secret_is_taken_out_of_strings_keys_and_bytes() {
        let redactor = Redactor::new(vec!["s3cret".into(), "s3cret-longer".into(), "ab".into()]);
        let mut value = json!({
            "last_error": "cannot sign in with s3cret-longer or s3cret",
            "nested": [{ "s3cret": "ab stays: too short to be a secret" }],
        });
        redactor.json(&mut value);
        assert_eq!(
            value,
            json!({
                "last_error": "cannot sign in with [redacted] or [redacted]",
                "nested": [{ "[redacted]": "ab stays: too short to be a secret" }],
            })
        );
        let (bytes, any) = redactor.bytes(b"{\"token\":\"s3cret\"}\xff");
        assert!(any);
        assert_eq!(&*bytes, b"{\"token\":\"[redacted]\"}\xff");
        let (bytes, any) = redactor.bytes(b"nothing here");
        assert!(!any);
        assert_eq!(&*bytes, b"nothing here");
    }
}
