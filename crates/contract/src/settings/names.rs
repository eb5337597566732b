//! The names the operator chooses that become file names, directory names and log
//! fields: connector, tenant and server keys, stream and topic names. Each kept to a
//! safe alphabet, checked where the config is read.

/// Connector keys name files and log spans: keep them to a safe alphabet.
pub fn valid_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 64 {
        return Err("must be 1 to 64 characters".into());
    }
    if let Some(c) = key.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
        return Err(format!("contains {c:?}; use letters, digits, `-` and `_`"));
    }
    Ok(())
}

/// Stream and topic names become directory and file names in the local log.
pub fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 255 {
        return Err("must be 1 to 255 characters".into());
    }
    if name.starts_with('.') {
        return Err("must not start with `.`".into());
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(format!("contains {c:?}; use letters, digits, `-`, `_` and `.`"));
    }
    Ok(())
}
