//! Helpers for connectors that speak MySQL or MariaDB through the host's `mysql`
//! import: names quoted for SQL text (values need no quoting: the server binds them),
//! and the import's errors in words for an operator.

use crate::Error;
use crate::bindings::iggy::connector::mysql::Error as MysqlError;

/// The longest name MySQL takes for a table or a column.
const MAX_NAME: usize = 64;

/// `name` as a quoted identifier (`` `name` ``), taken literally; a name with a
/// backtick, a NUL or more than 64 characters is refused rather than guessed at.
pub fn quote_identifier(name: &str) -> Result<String, Error> {
    if name.is_empty() {
        return Err(Error::msg("is empty"));
    }
    if name.contains('`') || name.contains('\0') || name.chars().count() > MAX_NAME {
        return Err(Error::msg(format!(
            "`{name}` has a backtick or NUL, or is longer than {MAX_NAME} characters: write the name without \
             quotes (the connector quotes it)"
        )));
    }
    Ok(format!("`{name}`"))
}

/// `table` or `database.table`, each part quoted.
pub fn quote_table(name: &str) -> Result<String, Error> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2 {
        return Err(Error::msg(format!("`{name}` has more than one dot: write `table` or `database.table`")));
    }
    let quoted = parts.into_iter().map(quote_identifier).collect::<Result<Vec<_>, _>>()?;
    Ok(quoted.join("."))
}

/// The import's error, for people.
pub fn describe(error: &MysqlError) -> String {
    match error {
        MysqlError::NotGranted(detail) => format!("not granted ({detail})"),
        MysqlError::Connection(detail) => format!("no connection ({detail})"),
        MysqlError::Refused(r) => {
            format!("refused by the server: {} (error {}, SQLSTATE {})", r.message, r.code, r.state)
        }
        MysqlError::TimedOut(detail) => format!("timed out ({detail})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::iggy::connector::mysql::Refusal;

    #[test]
    fn names_are_quoted_literally_and_backticks_inside_are_refused() {
        assert_eq!(quote_identifier("Events").unwrap(), "`Events`");
        assert_eq!(quote_identifier("order; DROP TABLE x").unwrap(), "`order; DROP TABLE x`");
        assert_eq!(quote_table("shop.orders").unwrap(), "`shop`.`orders`");
        assert_eq!(quote_table("orders").unwrap(), "`orders`");
        let long = "x".repeat(65);
        for bad in ["", "a`b", "`events`", "a\0b", long.as_str()] {
            assert!(quote_identifier(bad).is_err(), "{bad:?}");
        }
        for bad in ["a.b.c", "a.", ".b", "s.`t`"] {
            assert!(quote_table(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn errors_say_what_went_wrong() {
        let refused = MysqlError::Refused(Refusal {
            message: "Table 'ferry.evnts' doesn't exist".into(),
            code: 1146,
            state: "42S02".into(),
            statement: None,
        });
        assert_eq!(
            describe(&refused),
            "refused by the server: Table 'ferry.evnts' doesn't exist (error 1146, SQLSTATE 42S02)"
        );
        assert_eq!(describe(&MysqlError::Connection("reset".into())), "no connection (reset)");
        assert!(describe(&MysqlError::NotGranted("no `x`".into())).contains("no `x`"));
        assert!(describe(&MysqlError::TimedOut("2s".into())).contains("timed out"));
    }
}
