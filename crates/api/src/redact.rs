//! No secret in any answer. The API shows no secret, and `plugin_config` only where
//! asked for it (`/.../configs/plugin`), but that config, a guest's error (its
//! `last_error`), its cursor or a message quoting it could carry a secret it was
//! handed, so every answer and every state shown passes through
//! the [`Redactor`], which replaces the value of every secret the host knows with
//! `[redacted]`.

use std::borrow::Cow;

use ferry_config::Config;
use ferry_contract::secrets::Secrets;

/// The secrets to take out of answers (see [`ferry_contract::secrets`]: whole, in any
/// ASCII case, and pieces at a line's edges).
pub(super) struct Redactor {
    secrets: Secrets,
}

impl Redactor {
    /// Every secret of `config` that can be read now ([`Config::secret_values`]),
    /// and the API key in force.
    pub fn from_config(config: &Config, api_key: Option<&str>) -> Redactor {
        let mut secrets = config.secret_values();
        secrets.extend(api_key.map(str::to_string));
        Redactor::new(secrets)
    }

    fn new(secrets: Vec<String>) -> Redactor {
        Redactor { secrets: Secrets::new(secrets) }
    }

    /// `text` with every secret replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.secrets.redact(text)
    }

    /// `bytes` with every secret replaced (a cursor need not be text), and whether
    /// any was.
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> (Cow<'a, [u8]>, bool) {
        self.secrets.redact_bytes(bytes)
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
