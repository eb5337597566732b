//! Helpers for connectors that speak PostgreSQL through the host's `postgres` import:
//! names quoted for SQL text (parameters need no quoting: the server binds them), and
//! the import's errors in words for an operator.

use crate::Error;
use crate::bindings::iggy::connector::postgres::Error as PgError;

/// `name` as a quoted identifier: taken literally (case and all), so a name needs no
/// quotes of its own, and one with a `"` is refused rather than guessed at.
pub fn quote_identifier(name: &str) -> Result<String, Error> {
    if name.is_empty() {
        return Err(Error::msg("is empty"));
    }
    if name.contains('"') || name.contains('\0') {
        return Err(Error::msg(format!(
            "`{name}` has a double quote or NUL: write the name without quotes (the connector quotes it, \
             keeping its case)"
        )));
    }
    Ok(format!("\"{name}\""))
}

/// `table` or `schema.table`, each part quoted.
pub fn quote_table(name: &str) -> Result<String, Error> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2 {
        return Err(Error::msg(format!("`{name}` has more than one dot: write `table` or `schema.table`")));
    }
    let quoted = parts.into_iter().map(quote_identifier).collect::<Result<Vec<_>, _>>()?;
    Ok(quoted.join("."))
}

/// The import's error, for people.
pub fn describe(error: &PgError) -> String {
    match error {
        PgError::NotGranted(detail) => format!("not granted ({detail})"),
        PgError::Connection(detail) => format!("no connection ({detail})"),
        PgError::Refused(refusal) => {
            let retry = if refusal.permanent { "" } else { "; worth trying again" };
            format!("refused by the server: {} (SQLSTATE {}{retry})", refusal.message, refusal.code)
        }
        PgError::TimedOut(detail) => format!("timed out ({detail})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::iggy::connector::postgres::Refusal;

    #[test]
    fn names_are_quoted_literally_and_quotes_inside_are_refused() {
        assert_eq!(quote_identifier("Events").unwrap(), "\"Events\"");
        assert_eq!(quote_identifier("order; DROP TABLE x").unwrap(), "\"order; DROP TABLE x\"");
        assert_eq!(quote_table("audit.Events").unwrap(), "\"audit\".\"Events\"");
        assert_eq!(quote_table("events").unwrap(), "\"events\"");
        for bad in ["", "a\"b", "\"events\"", "a\0b"] {
            assert!(quote_identifier(bad).is_err(), "{bad:?}");
        }
        for bad in ["a.b.c", "a.", ".b", "s.\"t\""] {
            assert!(quote_table(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn errors_say_what_went_wrong() {
        let refused = PgError::Refused(Refusal {
            message: "relation \"evnts\" does not exist".into(),
            code: "42P01".into(),
            permanent: true,
            statement: None,
        });
        assert_eq!(describe(&refused), "refused by the server: relation \"evnts\" does not exist (SQLSTATE 42P01)");
        let busy = PgError::Refused(Refusal {
            message: "deadlock detected".into(),
            code: "40P01".into(),
            permanent: false,
            statement: None,
        });
        assert!(describe(&busy).ends_with("(SQLSTATE 40P01; worth trying again)"), "{}", describe(&busy));
        assert_eq!(describe(&PgError::Connection("reset".into())), "no connection (reset)");
        assert!(describe(&PgError::NotGranted("no `x`".into())).contains("no `x`"));
        assert!(describe(&PgError::TimedOut("2s".into())).contains("timed out"));
    }
}
