//! The `postgres` interface of the contract, served to one instance through its
//! [`PostgresView`]: the pools its connector was granted, its table of handles, its
//! log and the time left of the call.
//!
//! Every statement runs within what is left of the guest's call (less a margin, so
//! that the guest can still answer): one that would outlive it is cancelled on the
//! server and comes back as `timed-out`. Every failure is a value for the guest and
//! a warning in the log under the connector's key, within the guest's log budget.
//! A connection whose statement timed out or broke is not reused.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use deadpool_postgres::{Object, Pool};
use ferry_contract::wit::postgres::{
    self, Connection, Error, Host, HostConnection, PackedRows, Refusal, Rows, Statement, Value,
};
use futures::{StreamExt, pin_mut};
use tokio_postgres::types::{Format, IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{NoTls, Statement as Prepared};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::tls::PgTls;
use super::{POSTGRES_EPOCH_MICROS, PgState, rows};
use crate::GuestData;
use crate::handles::hold;
use crate::logging::GuestLog;

/// Prepared statements kept per connection; past this the cache starts afresh.
const MAX_CACHED_STATEMENTS: usize = 256;

/// A guest's open connection: a pooled client, replaced on next use after it broke
/// or timed out. Kept in the instance's table; the guest holds a handle to it.
struct PgConnection {
    name: String,
    pool: Pool,
    /// The server's TLS, for a cancel request (it goes over a connection of its own).
    tls: Option<PgTls>,
    client: Option<Object>,
}

/// What a PostgreSQL call sees of the store.
pub struct PostgresView<'a> {
    state: &'a mut PgState,
    table: &'a mut ResourceTable,
    log: &'a GuestLog,
    /// What is left of the guest's call.
    remaining: Duration,
}

struct PostgresHost;

impl HasData for PostgresHost {
    type Data<'a> = PostgresView<'a>;
}

pub(super) fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    postgres::add_to_linker::<T, PostgresHost>(linker, |data| {
        let guest = data.guest();
        let states = guest.states;
        PostgresView {
            state: &mut states.postgres,
            table: guest.table,
            log: &states.logging,
            remaining: guest.remaining,
        }
    })
}

/// The connection behind a guest's handle: the table holds it under the handle's
/// number, as a `PgConnection` (the contract's `Connection` is bindgen's placeholder).
fn ours(handle: &Resource<Connection>) -> Resource<PgConnection> {
    Resource::new_borrow(handle.rep())
}

impl Host for PostgresView<'_> {}

impl HostConnection for PostgresView<'_> {
    async fn open(&mut self, name: String) -> Result<Resource<Connection>, Error> {
        let Some(served) = self.state.pools.get(&name) else {
            let problem = format!("the connection `{name}` is not in this connector's grants.postgres");
            self.log.host_warning(&format!("postgres: {problem}"));
            return Err(Error::NotGranted(problem));
        };
        let connection = PgConnection { name, pool: served.pool.clone(), tls: served.tls.clone(), client: None };
        hold(self.table, connection).map_err(|problem| {
            self.log.host_warning(&format!("postgres: {problem}"));
            Error::Connection(problem)
        })
    }

    async fn query(&mut self, this: Resource<Connection>, sql: String, params: Vec<Value>) -> Result<Rows, Error> {
        let PackedRows { columns, count, data } = self.query_packed(this, sql, params).await?;
        Ok(Rows { rows: rows::unpack(columns.len(), count, &data), columns })
    }

    async fn query_packed(
        &mut self,
        this: Resource<Connection>,
        sql: String,
        params: Vec<Value>,
    ) -> Result<PackedRows, Error> {
        let max = self.state.max_result_bytes;
        self.run(&this, "query", async |client| query(client, &sql, &params, max).await).await
    }

    async fn execute(&mut self, this: Resource<Connection>, sql: String, params: Vec<Value>) -> Result<u64, Error> {
        self.run(&this, "execute", async |client| {
            let prepared = prepare(client, &sql, &params, None).await?;
            let params = as_params(&params);
            client.execute(&prepared, &refs(&params)).await.map_err(|e| classify(e, None))
        })
        .await
    }

    async fn transaction(&mut self, this: Resource<Connection>, statements: Vec<Statement>) -> Result<Vec<u64>, Error> {
        self.run(&this, "transaction", async |client| {
            let mut prepared: Vec<Prepared> = Vec::with_capacity(statements.len());
            for (index, statement) in statements.iter().enumerate() {
                // A sink's batch is one statement text a row: checked and looked up in
                // the cache once, not a row at a time.
                let before = index.checked_sub(1).map(|i| &statements[i]);
                let next = match before {
                    Some(before) if before.sql == statement.sql && before.params.len() == statement.params.len() => {
                        prepared[index - 1].clone()
                    }
                    _ => prepare(client, &statement.sql, &statement.params, Some(index)).await?,
                };
                prepared.push(next);
            }
            let transaction = client.transaction().await.map_err(|e| classify(e, None))?;
            // Pipelined: every statement is sent before the first answer is read, so a
            // batch costs a round trip or two rather than one a statement. The server
            // runs them in order; once one fails it refuses the rest as part of an
            // aborted transaction, so the first failure in order is the statement at
            // fault.
            let params: Vec<Vec<Param>> = statements.iter().map(|statement| as_params(&statement.params)).collect();
            let bound: Vec<_> = params.iter().map(|params| refs(params)).collect();
            let executions = prepared.iter().zip(&bound).map(|(prepared, params)| transaction.execute(prepared, params));
            let results = futures::future::join_all(executions).await;
            let mut affected = Vec::with_capacity(statements.len());
            for (index, rows) in results.into_iter().enumerate() {
                // Dropping the transaction on error rolls it back.
                affected.push(rows.map_err(|e| classify(e, Some(index)))?);
            }
            transaction.commit().await.map_err(|e| classify(e, None))?;
            Ok(affected)
        })
        .await
    }

    async fn drop(&mut self, this: Resource<Connection>) -> wasmtime::Result<()> {
        // Its client goes back to the pool.
        self.table.delete(Resource::<PgConnection>::new_own(this.rep()))?;
        Ok(())
    }
}

impl PostgresView<'_> {
    /// Run `work` on the client of `this` within what is left of the call, logging
    /// a failure; a client whose work broke, failed inside a transaction or timed
    /// out is dropped from the pool rather than handed out again in an unknown state.
    async fn run<T>(
        &mut self,
        this: &Resource<Connection>,
        what: &str,
        work: impl AsyncFnOnce(&mut deadpool_postgres::ClientWrapper) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let budget = statement_budget(self.remaining);
        let connection = self.table.get_mut(&ours(this)).map_err(|e| Error::Connection(e.to_string()))?;
        let name = connection.name.clone();
        let outcome = tokio::time::timeout(budget, async {
            if connection.client.is_none() {
                let client = connection.pool.get().await.map_err(|e| connect_error(&connection.name, e))?;
                connection.client = Some(client);
            }
            work(connection.client.as_mut().expect("a client was just taken from the pool")).await
        })
        .await;
        let result = match outcome {
            Ok(result) => result,
            Err(_) => {
                if let Some(client) = &connection.client {
                    let cancel = client.cancel_token();
                    let tls = connection.tls.clone();
                    tokio::spawn(async move {
                        match tls {
                            Some(tls) => cancel.cancel_query(tls).await,
                            None => cancel.cancel_query(NoTls).await,
                        }
                    });
                }
                Err(Error::TimedOut(format!(
                    "the {what} ran past the call's deadline ({budget:?} were left of limits.call_timeout) and was \
                     cancelled"
                )))
            }
        };
        if let Err(error) = &result {
            let kept = matches!(error, Error::Refused(r) if r.statement.is_none() && r.code != TOO_BIG);
            if !kept {
                // Broken, timed out, refused inside a transaction, or with the rest of a
                // result too big still coming (closing the connection stops the server
                // sending it): start afresh.
                connection.client.take().map(Object::take);
            }
            self.log.host_warning(&format!("postgres `{name}`: {what} failed: {}", describe(error)));
        }
        result
    }
}

/// How long a statement may run when `remaining` is left of the call: a tenth less,
/// at most 100 ms less, so that the guest can still answer in time.
fn statement_budget(remaining: Duration) -> Duration {
    remaining.saturating_sub((remaining / 10).min(Duration::from_millis(100)))
}

/// The statement `sql`, prepared (and cached on the connection), checked against
/// `params` and against the column types this interface carries.
async fn prepare(
    client: &deadpool_postgres::ClientWrapper,
    sql: &str,
    params: &[Value],
    index: Option<usize>,
) -> Result<Prepared, Error> {
    // The cache is per connection and keyed by the guest's text: a guest sending ever
    // new statements would grow it (and the server's prepared statements) without end.
    if client.statement_cache.size() >= MAX_CACHED_STATEMENTS {
        client.statement_cache.clear();
    }
    let prepared = client.prepare_cached(sql).await.map_err(|e| classify(e, index))?;
    let refused = |message: String| {
        let statement = index.map(|i| i as u32);
        Error::Refused(Refusal { message, code: "08P01".into(), permanent: true, statement })
    };
    if prepared.params().len() != params.len() {
        return Err(refused(format!(
            "the statement takes {} parameter(s), {} were given",
            prepared.params().len(),
            params.len()
        )));
    }
    if let Some(column) = prepared.columns().iter().find(|c| !readable(c.type_())) {
        return Err(refused(format!(
            "column `{}` is of type {}, which this interface does not carry: cast it in the query (`{}::text`)",
            column.name(),
            column.type_(),
            column.name()
        )));
    }
    Ok(prepared)
}

/// The SQLSTATE of a result refused for its size (PostgreSQL's "program limit exceeded").
const TOO_BIG: &str = "54000";

/// Run a query, packing its rows as they come, refusing a result past `max` bytes.
///
/// A row is measured before it is packed, so that one past the limit is refused
/// without a second copy of it. The driver has already read that row whole (one
/// `DataRow` message: a value may be up to 1 GB, PostgreSQL's own limit), and that is
/// the most the host holds of a result beyond `max`.
async fn query(
    client: &deadpool_postgres::ClientWrapper,
    sql: &str,
    params: &[Value],
    max: u64,
) -> Result<PackedRows, Error> {
    let prepared = prepare(client, sql, params, None).await?;
    let columns = prepared.columns().iter().map(|c| c.name().to_string()).collect();
    let stream = client.query_raw(&prepared, as_params(params)).await.map_err(|e| classify(e, None))?;
    pin_mut!(stream);
    let mut packer = rows::Packer::default();
    let too_big = |rows: u32| {
        Error::Refused(Refusal {
            message: format!(
                "the result is over {max} bytes (limits.max_batch_bytes) after {rows} rows: ask for fewer (LIMIT)"
            ),
            code: TOO_BIG.into(),
            permanent: true,
            statement: None,
        })
    };
    while let Some(row) = stream.next().await {
        let row = row.map_err(|e| classify(e, None))?;
        if packer.data.len() as u64 + rows::raw_size(&row) > max {
            return Err(too_big(packer.count));
        }
        let before = packer.count;
        packer.push(&row).map_err(|e| classify(e, None))?;
        if packer.data.len() as u64 > max {
            return Err(too_big(before));
        }
    }
    Ok(PackedRows { columns, count: packer.count, data: packer.data })
}

/// Whether a column of type `ty` comes back as a [`Value`].
fn readable(ty: &Type) -> bool {
    [
        Type::BOOL,
        Type::INT2,
        Type::INT4,
        Type::INT8,
        Type::OID,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::TEXT,
        Type::VARCHAR,
        Type::BPCHAR,
        Type::NAME,
        Type::UNKNOWN,
        Type::NUMERIC,
        Type::BYTEA,
        Type::JSON,
        Type::JSONB,
        Type::TIMESTAMP,
        Type::TIMESTAMPTZ,
    ]
    .contains(ty)
}

/// The parameters of a statement, as tokio-postgres takes them.
fn as_params(params: &[Value]) -> Vec<Param<'_>> {
    params.iter().map(Param).collect()
}

/// The parameters as the driver's slice of references.
fn refs<'a>(params: &'a [Param<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

/// A guest's value bound to a parameter of whatever type the statement gives it.
#[derive(Debug)]
struct Param<'a>(&'a Value);

/// A value that does not fit its parameter: the statement is refused for good.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ParamError(String);

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let unfit = |what: &str| -> Box<dyn std::error::Error + Sync + Send> {
            Box::new(ParamError(format!("{what} for a parameter of type {ty}")))
        };
        let narrow = |_| unfit("an int out of range");
        match (self.0, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Boolean(v), &Type::BOOL) => v.to_sql(ty, out),
            (Value::Int(v), &Type::INT2) => i16::try_from(*v).map_err(narrow)?.to_sql(ty, out),
            (Value::Int(v), &Type::INT4) => i32::try_from(*v).map_err(narrow)?.to_sql(ty, out),
            (Value::Int(v), &Type::INT8) => v.to_sql(ty, out),
            (Value::Int(v), &Type::OID) => u32::try_from(*v).map_err(narrow)?.to_sql(ty, out),
            (Value::Int(v), &Type::FLOAT4) => (*v as f32).to_sql(ty, out),
            (Value::Int(v), &Type::FLOAT8) => (*v as f64).to_sql(ty, out),
            (Value::Float(v), &Type::FLOAT4) => (*v as f32).to_sql(ty, out),
            (Value::Float(v), &Type::FLOAT8) => v.to_sql(ty, out),
            (Value::Text(v), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME | &Type::UNKNOWN) => {
                v.as_str().to_sql(ty, out)
            }
            (Value::Text(v) | Value::Json(v), &Type::JSON) => {
                out.put_slice(v.as_bytes());
                Ok(IsNull::No)
            }
            (Value::Text(v) | Value::Json(v), &Type::JSONB) => {
                // jsonb's binary form: a version byte, then the text.
                out.put_u8(1);
                out.put_slice(v.as_bytes());
                Ok(IsNull::No)
            }
            // Sent as text (see `encode_format`), parsed by the server's own `numeric_in`:
            // exact to the last digit, and a malformed number refused by the server (22P02).
            (Value::Text(v), &Type::NUMERIC) => {
                out.put_slice(v.as_bytes());
                Ok(IsNull::No)
            }
            (Value::Int(v), &Type::NUMERIC) => {
                out.put_slice(v.to_string().as_bytes());
                Ok(IsNull::No)
            }
            (Value::Bytes(v), &Type::BYTEA) => v.as_slice().to_sql(ty, out),
            (Value::Timestamp(micros), &Type::TIMESTAMP | &Type::TIMESTAMPTZ) => {
                let since_2000 =
                    micros.checked_sub(POSTGRES_EPOCH_MICROS).ok_or_else(|| unfit("a timestamp too early"))?;
                out.put_i64(since_2000);
                Ok(IsNull::No)
            }
            (value, _) => Err(unfit(&format!(
                "a{} value (cast the parameter in the statement, e.g. `$1::text::{ty}`)",
                match value {
                    Value::Boolean(_) => " boolean",
                    Value::Int(_) => "n int",
                    Value::Float(_) => " float",
                    Value::Text(_) => " text",
                    Value::Bytes(_) => " bytes",
                    Value::Json(_) => " json",
                    _ => " timestamp",
                }
            ))),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Whether the value fits is decided per value in `to_sql`, with a clear error.
        true
    }

    fn encode_format(&self, ty: &Type) -> Format {
        // A `numeric` goes as its decimal text, which no float ever touches.
        if *ty == Type::NUMERIC && matches!(self.0, Value::Text(_) | Value::Int(_)) {
            Format::Text
        } else {
            Format::Binary
        }
    }

    to_sql_checked!();
}

/// A driver error as the guest's error: the server's refusals with their SQLSTATE
/// (data, integrity and syntax/access problems are permanent), a value that did not
/// fit its parameter (permanent), and anything else as a connection problem, worth
/// trying again.
fn classify(error: tokio_postgres::Error, statement: Option<usize>) -> Error {
    let statement = statement.map(|i| i as u32);
    if let Some(db) = error.as_db_error() {
        let code = db.code().code().to_string();
        let permanent = ["22", "23", "42"].iter().any(|class| code.starts_with(class));
        return Error::Refused(Refusal { message: db.message().to_string(), code, permanent, statement });
    }
    let unfit = std::error::Error::source(&error).and_then(|e| e.downcast_ref::<ParamError>());
    if let Some(unfit) = unfit {
        return Error::Refused(Refusal {
            message: format!("{error}: {unfit}"),
            code: "22023".into(),
            permanent: true,
            statement,
        });
    }
    Error::Connection(format!("{error}"))
}

/// Why no connection could be had to the server `name`: the server's own words when it
/// refused (a wrong password, an unknown database), or the driver's (no TLS offered, a
/// certificate not trusted); always a connection problem for the guest.
fn connect_error(name: &str, error: deadpool_postgres::PoolError) -> Error {
    let why = match error {
        deadpool_postgres::PoolError::Backend(e) => match e.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => with_causes(&e),
        },
        other => with_causes(&other),
    };
    Error::Connection(format!("cannot connect to `{name}`: {why}"))
}

/// `error` and what caused it, each after a colon: the driver says "error performing
/// TLS handshake" and keeps the why (no TLS offered, a certificate refused) in its source.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

/// One line on an error, for the log.
fn describe(error: &Error) -> String {
    match error {
        Error::NotGranted(m) | Error::Connection(m) | Error::TimedOut(m) => m.clone(),
        Error::Refused(r) => match r.statement {
            Some(i) => format!("statement {i} refused ({}): {}", r.code, r.message),
            None => format!("refused ({}): {}", r.code, r.message),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_leaves_the_guest_time_to_answer() {
        assert_eq!(statement_budget(Duration::from_secs(5)), Duration::from_millis(4900));
        assert_eq!(statement_budget(Duration::from_millis(50)), Duration::from_millis(45));
        assert_eq!(statement_budget(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn values_are_encoded_as_the_parameter_type_or_refused_naming_it() {
        let mut out = BytesMut::new();
        assert!(Param(&Value::Int(7)).to_sql(&Type::INT2, &mut out).is_ok());
        assert_eq!(&out[..], &[0, 7]);
        let error = Param(&Value::Int(1 << 40)).to_sql(&Type::INT4, &mut out).err().unwrap().to_string();
        assert_eq!(error, "an int out of range for a parameter of type int4");
        let error = Param(&Value::Text("x".into())).to_sql(&Type::UUID, &mut out).err().unwrap().to_string();
        assert!(error.contains("a text value (cast the parameter in the statement, e.g. `$1::text::uuid`)"), "{error}");
        out.clear();
        Param(&Value::Timestamp(POSTGRES_EPOCH_MICROS + 3)).to_sql(&Type::TIMESTAMPTZ, &mut out).unwrap();
        assert_eq!(&out[..], &3i64.to_be_bytes());
        out.clear();
        Param(&Value::Json("{}".into())).to_sql(&Type::JSONB, &mut out).unwrap();
        assert_eq!(&out[..], b"\x01{}");
        assert!(matches!(Param(&Value::Null).to_sql(&Type::UUID, &mut out), Ok(IsNull::Yes)));
    }

    #[test]
    fn a_numeric_parameter_is_sent_as_its_exact_text_never_as_a_float() {
        let exact = "123456789012345678901234567890.000000001";
        let mut out = BytesMut::new();
        let text = Value::Text(exact.into());
        assert!(matches!(Param(&text).encode_format(&Type::NUMERIC), Format::Text));
        Param(&text).to_sql(&Type::NUMERIC, &mut out).unwrap();
        assert_eq!(&out[..], exact.as_bytes());
        out.clear();
        Param(&Value::Int(-7)).to_sql(&Type::NUMERIC, &mut out).unwrap();
        assert_eq!(&out[..], b"-7");
        // A float has lost the digits already: refused, naming the way to say it exactly.
        let error = Param(&Value::Float(0.1)).to_sql(&Type::NUMERIC, &mut out).err().unwrap().to_string();
        assert!(error.contains("a float value (cast the parameter in the statement"), "{error}");
        // Other types keep the binary form.
        assert!(matches!(Param(&text).encode_format(&Type::TEXT), Format::Binary));
    }
}
