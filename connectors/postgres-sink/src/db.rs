//! The granted PostgreSQL connection, behind a trait so that the native tests run
//! the connector over a fake. Errors stay the import's own: the sink decides from
//! their kind (and a refusal's SQLSTATE and statement index) what becomes of a batch.

use ferry_guest::bindings::iggy::connector::postgres::{Connection, Error as PgError, Statement};

/// What the connector needs of a database: the granted connection in a component,
/// a fake in the native tests.
pub trait Database: Sized + 'static {
    /// Open the connection `name`.
    fn open(name: &str) -> Result<Self, PgError>;

    /// Run one statement, returning how many rows it affected.
    fn execute(&self, statement: &Statement) -> Result<u64, PgError>;

    /// Run `statements` in one transaction: all of them or none.
    fn transaction(&self, statements: &[Statement]) -> Result<Vec<u64>, PgError>;
}

/// A connection to the server the operator named.
pub struct Db {
    connection: Connection,
}

impl Database for Db {
    /// Fails only when `name` is not granted: the server is reached on first use.
    fn open(name: &str) -> Result<Db, PgError> {
        Ok(Db { connection: Connection::open(name)? })
    }

    fn execute(&self, statement: &Statement) -> Result<u64, PgError> {
        self.connection.execute(&statement.sql, &statement.params)
    }

    fn transaction(&self, statements: &[Statement]) -> Result<Vec<u64>, PgError> {
        self.connection.transaction(statements)
    }
}
