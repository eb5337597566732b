//! The granted PostgreSQL connection, with the host's errors turned into the
//! connector's, saying what the connector was doing. They are returned, not logged
//! here: the host logs a failed statement, and a failed poll with the guest's
//! message, then backs off and polls again (replacing a broken connection on its
//! next use); a third line of the same would be noise.

use ferry_guest::Error;
use ferry_guest::bindings::iggy::connector::postgres::{Connection, Error as PgError, PackedRows, Statement};
use ferry_guest::sql::describe;

/// What the connector needs of a database: the granted connection in a component,
/// a fake in the native tests of what the connector does with it.
pub trait Database: Sized + 'static {
    /// Open the connection `name`.
    fn open(name: &str) -> Result<Self, Error>;

    /// Run a query, its rows packed (`query-packed`: one buffer, read in place),
    /// saying `what` it is for when it fails.
    fn query(&self, statement: &Statement, what: &str) -> Result<PackedRows, Error>;

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

    fn query(&self, statement: &Statement, what: &str) -> Result<PackedRows, Error> {
        self.connection.query_packed(&statement.sql, &statement.params).map_err(|e| failed(&self.name, what, &e))
    }

    fn execute(&self, statement: &Statement, what: &str) -> Result<u64, Error> {
        self.connection.execute(&statement.sql, &statement.params).map_err(|e| failed(&self.name, what, &e))
    }
}

fn failed(name: &str, what: &str, error: &PgError) -> Error {
    Error::msg(format!("postgres `{name}`: {what}: {}", describe(error)))
}
