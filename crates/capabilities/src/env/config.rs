//! `grants.env = ["TZ", "LANG"]`: variables of the host, by name.

/// Each entry must be something the host could have as a variable's name.
pub(super) fn validate(names: &[String]) -> Result<(), String> {
    match names.iter().find(|name| name.is_empty() || name.contains('=') || name.contains('\0')) {
        Some(name) => Err(format!("{name:?} is not an environment variable name")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_name_with_an_equals_sign_or_nothing_is_refused() {
        assert_eq!(super::validate(&["TZ".into()]), Ok(()));
        assert_eq!(super::validate(&["A=B".into()]), Err("\"A=B\" is not an environment variable name".into()));
        assert!(super::validate(&[String::new()]).is_err());
    }
}
