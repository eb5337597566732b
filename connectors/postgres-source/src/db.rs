//! The granted PostgreSQL connection, with the host's errors turned into the
//! connector's, saying what the connector was doing. They are returned, not logged
//! here: the host logs a failed statement, and a failed poll with the guest's
//! message, then backs off and polls again (replacing a broken connection on its
//! next use); a third line of the same would be noise.

use ferry_guest::Error;
use ferry_guest::bindings::iggy::connector::postgres::{Connection, Error as PgError, Rows, Statement};

/// What the connector needs of a database: the granted connection in a component,
/// a fake in the native tests of what the connector does with it.
pub trait Database: Sized + 'static {
    /// Open the connection `name`.
    fn open(name: &str) -> Result<Self, Error>;

    /// Run a query, saying `what` it is for when it fails.
    fn query(&self, statement: &Statement, what: &str) -> Result<Rows, Error>;

    /// Run a statement, returning how many rows it affected.
    fn execute(&self, statement: &Statement, what: &str) -> Result<u64, Error>;
}

/// A connection to the server the operator named.
pub struct Db {
    name: String,
    connection: Connection,
}

impl Database for Db {
    /// Fails only when `name` is not granted: the server is reached on first use.
    fn open(name: &str) -> Result<Db, Error> {
        let connection = Connection::open(name).map_err(|e| failed(name, "opening the connection", &e))?;
        Ok(Db { name: name.to_string(), connection })
    }

    fn query(&self, statement: &Statement, what: &str) -> Result<Rows, Error> {
        self.connection.query(&statement.sql, &statement.params).map_err(|e| failed(&self.name, what, &e))
    }

    fn execute(&self, statement: &Statement, what: &str) -> Result<u64, Error> {
        self.connection.execute(&statement.sql, &statement.params).map_err(|e| failed(&self.name, what, &e))
    }
}

fn failed(name: &str, what: &str, error: &PgError) -> Error {
    Error::msg(format!("postgres `{name}`: {what}: {}", describe(error)))
}

/// The host's error, for people.
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
    use ferry_guest::bindings::iggy::connector::postgres::Refusal;

    use super::*;

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
