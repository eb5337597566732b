//! The `mysql` interface of the contract, served to one instance through its
//! [`MysqlView`]: the servers its connector was granted, its table of handles, its log
//! and the time left of the call.
//!
//! Every call runs within what is left of the guest's call (less a margin, so that the
//! guest can still answer); past it the call is `timed-out` and its connection is
//! dropped (the server rolls back what it had not committed), as it is when it breaks:
//! the next call connects again. Every failure is a value for the guest and a warning
//! in the log under the connector's key.

use std::time::Duration;

use ferry_contract::wit::mysql::{
    self as contract, Connection, Error, Host, HostConnection, PackedRows, Refusal, Rows, Statement, Value,
};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, TxOpts};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::MysqlState;
use super::servers::Reached;
use super::values::{column, pack, param};
use crate::GuestData;
use crate::deadline::Deadline;
use crate::handles::hold;
use crate::logging::GuestLog;

/// The most rows a query may read.
const MAX_ROWS: usize = 100_000;

/// What `row` takes, near enough: its text and bytes, and 8 bytes for any other value.
fn row_size(row: &mysql_async::Row) -> u64 {
    let values = (0..row.len()).filter_map(|index| row.as_ref(index));
    values.map(|value| if let mysql_async::Value::Bytes(bytes) = value { bytes.len() as u64 } else { 8 }).sum()
}

/// A guest's open connection: connected when first used, and again after it broke.
struct MysqlConnection {
    name: String,
    reached: Reached,
    conn: Option<Conn>,
}

impl MysqlConnection {
    async fn conn(&mut self) -> Result<&mut Conn, Error> {
        if self.conn.is_none() {
            let connecting = Conn::new(self.reached.options.clone());
            let conn = match tokio::time::timeout(self.reached.connect_timeout, connecting).await {
                Ok(conn) => conn.map_err(|e| failed("cannot connect", e))?,
                Err(_) => return Err(Error::Connection(format!("connecting took over {:?}", self.reached.connect_timeout))),
            };
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("connected just now"))
    }
}

/// What a MySQL call sees of the store.
pub struct MysqlView<'a> {
    state: &'a mut MysqlState,
    table: &'a mut ResourceTable,
    log: &'a GuestLog,
    /// What is left of the guest's call.
    remaining: Duration,
}

struct MysqlHost;

impl HasData for MysqlHost {
    type Data<'a> = MysqlView<'a>;
}

pub(super) fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    contract::add_to_linker::<T, MysqlHost>(linker, |data| {
        let guest = data.guest();
        let states = guest.states;
        MysqlView { state: &mut states.mysql, table: guest.table, log: &states.logging, remaining: guest.remaining }
    })
}

/// The connection behind a guest's handle (the contract's `Connection` is bindgen's
/// placeholder; the table holds ours under the handle's number).
fn ours(handle: &Resource<Connection>) -> Resource<MysqlConnection> {
    Resource::new_borrow(handle.rep())
}

impl Host for MysqlView<'_> {}

impl HostConnection for MysqlView<'_> {
    async fn open(&mut self, name: String) -> Result<Resource<Connection>, Error> {
        let Some(reached) = self.state.servers.get(&name) else {
            let problem = format!("the connection `{name}` is not in this connector's grants.mysql");
            self.log.host_warning(&format!("mysql: {problem}"));
            return Err(Error::NotGranted(problem));
        };
        let connection = MysqlConnection { name, reached: reached.clone(), conn: None };
        hold(self.table, connection).map_err(|problem| {
            self.log.host_warning(&format!("mysql: {problem}"));
            Error::Connection(problem)
        })
    }

    async fn query(&mut self, this: Resource<Connection>, sql: String, params: Vec<Value>) -> Result<Rows, Error> {
        let (columns, rows) = self.read(this, sql, params, Vec::new(), |rows, values| rows.push(values.collect())).await?;
        Ok(Rows { columns, rows })
    }

    async fn query_packed(
        &mut self,
        this: Resource<Connection>,
        sql: String,
        params: Vec<Value>,
    ) -> Result<PackedRows, Error> {
        let (columns, (count, data)) = self
            .read(this, sql, params, (0u32, Vec::new()), |(count, data), values| {
                *count += 1;
                values.for_each(|value| pack(&value, data));
            })
            .await?;
        Ok(PackedRows { columns, count, data })
    }

    async fn execute(&mut self, this: Resource<Connection>, sql: String, params: Vec<Value>) -> Result<u64, Error> {
        self.within(&this, async |connection| {
            let conn = connection.conn().await?;
            let params = Params::Positional(params.into_iter().map(param).collect());
            conn.exec_drop(sql, params).await.map_err(|e| refused(e, None))?;
            Ok(conn.affected_rows())
        })
        .await
    }

    async fn transaction(&mut self, this: Resource<Connection>, statements: Vec<Statement>) -> Result<Vec<u64>, Error> {
        self.within(&this, async |connection| {
            let conn = connection.conn().await?;
            let mut transaction = conn.start_transaction(TxOpts::default()).await.map_err(|e| refused(e, None))?;
            let mut affected = Vec::with_capacity(statements.len());
            for (index, Statement { sql, params }) in statements.into_iter().enumerate() {
                let params = Params::Positional(params.into_iter().map(param).collect());
                if let Err(error) = transaction.exec_drop(sql, params).await {
                    let error = refused(error, Some(index as u32));
                    let _ = transaction.rollback().await;
                    return Err(error);
                }
                affected.push(transaction.affected_rows());
            }
            transaction.commit().await.map_err(|e| refused(e, None))?;
            Ok(affected)
        })
        .await
    }

    async fn drop(&mut self, this: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(Resource::<MysqlConnection>::new_own(this.rep()))?;
        Ok(())
    }
}

impl MysqlView<'_> {
    /// Run the query `sql` on `this` and give each row's values to `keep`, into `rows`:
    /// at most [`MAX_ROWS`] rows and the connector's byte budget. Its columns and
    /// `rows`.
    async fn read<R: Send>(
        &mut self,
        this: Resource<Connection>,
        sql: String,
        params: Vec<Value>,
        rows: R,
        keep: impl Fn(&mut R, &mut dyn Iterator<Item = Value>) + Send,
    ) -> Result<(Vec<String>, R), Error> {
        let max_bytes = self.state.max_result_bytes;
        self.within(&this, async |connection| {
            let mut rows = rows;
            let conn = connection.conn().await?;
            let params = Params::Positional(params.into_iter().map(param).collect());
            let mut result = conn.exec_iter(sql, params).await.map_err(|e| refused(e, None))?;
            let (mut columns, mut kinds) = (Vec::new(), Vec::new());
            let (mut count, mut bytes) = (0usize, 0u64);
            while let Some(row) = result.next().await.map_err(|e| refused(e, None))? {
                // Every row of a result has its columns: named and typed once.
                if columns.is_empty() {
                    columns = row.columns_ref().iter().map(|c| c.name_str().into_owned()).collect();
                    kinds = row.columns_ref().iter().map(|c| (c.column_type(), c.character_set())).collect();
                }
                if count == MAX_ROWS {
                    // The rest is not read: the connection is not reused.
                    return Err(Error::Connection(format!("the query returned more than {MAX_ROWS} rows")));
                }
                bytes += row_size(&row);
                if bytes > max_bytes {
                    return Err(Error::Connection(format!(
                        "the query's rows are more than {max_bytes} bytes, the most this connector may take \
                         (limits.max_batch_bytes): ask for fewer rows at a time"
                    )));
                }
                let mut values =
                    row.unwrap().into_iter().zip(&kinds).map(|(value, &(kind, charset))| column(value, kind, charset));
                keep(&mut rows, &mut values);
                count += 1;
            }
            Ok((columns, rows))
        })
        .await
    }

    /// Run `call` on the connection behind `this` within what is left of the guest's
    /// call; a failure of the connection (or the deadline) drops it, and every failure
    /// is logged.
    async fn within<R>(
        &mut self,
        this: &Resource<Connection>,
        call: impl AsyncFnOnce(&mut MysqlConnection) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let connection = self.table.get_mut(&ours(this)).map_err(|e| Error::Connection(e.to_string()))?;
        let result = Deadline::of_call(self.remaining)
            .run("the call", call(connection))
            .await
            .unwrap_or_else(|late| Err(Error::TimedOut(late)));
        if let Err(error) = &result {
            if !matches!(error, Error::Refused(_)) {
                connection.conn = None;
            }
            self.log.host_warning(&format!("mysql `{}`: {}", connection.name, describe(error)));
        }
        result
    }
}

/// A statement's failure: the server's refusal, or the connection's.
fn refused(error: mysql_async::Error, statement: Option<u32>) -> Error {
    match error {
        mysql_async::Error::Server(server) => {
            Error::Refused(Refusal { message: server.message, code: server.code, state: server.state, statement })
        }
        other => failed("the connection failed", other),
    }
}

fn failed(what: &str, error: mysql_async::Error) -> Error {
    Error::Connection(format!("{what}: {error}"))
}

fn describe(error: &Error) -> String {
    match error {
        Error::NotGranted(p) | Error::Connection(p) => p.clone(),
        Error::Refused(r) => format!("refused ({} {}): {}", r.code, r.state, r.message),
        Error::TimedOut(p) => format!("timed out: {p}"),
    }
}
