//! A source that drives the host's PostgreSQL import, for Ferry's own tests.
//!
//! Its config lists `steps`, each a `query` (or `query_packed`, the same rows in one
//! buffer, read with `ferry_guest::rows::Table`), an `execute` or a `transaction` on the
//! connection named `connection` (opened once per instance). Each poll runs the next
//! step and delivers one message whose payload is the step's outcome as JSON:
//! `{"step":N,"ok":...}` or `{"step":N,"error":{"kind":...,...}}`. A test reads the
//! outcomes from the log and checks what the host answered, value by value.
//!
//! Values cross as JSON objects with one key naming the case: `{"int":5}`,
//! `{"text":"x"}`, `{"null":null}`, `{"boolean":true}`, `{"float":1.5}`,
//! `{"bytes":[1,2]}`, `{"json":"{}"}`, `{"timestamp":micros}`.

use ferry_guest::bindings::iggy::connector::postgres::{Connection, Error as PgError, Statement, Value};
use ferry_guest::rows::{Table, ValueRef};
use ferry_guest::{Batch, Error, Message, Source};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    connection: String,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum Step {
    Query {
        sql: String,
        #[serde(default)]
        params: Vec<Json>,
    },
    QueryPacked {
        sql: String,
        #[serde(default)]
        params: Vec<Json>,
    },
    Execute {
        sql: String,
        #[serde(default)]
        params: Vec<Json>,
    },
    Transaction(Vec<StepStatement>),
    /// Open `count` more connections, holding them all, then drop them: how many
    /// opened, and the error that stopped it, if any.
    OpenMany {
        count: usize,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepStatement {
    sql: String,
    #[serde(default)]
    params: Vec<Json>,
}

#[derive(Serialize, Deserialize, Default)]
struct Cursor {
    next_step: usize,
}

struct Probe {
    config: Config,
    connection: Option<Connection>,
}

impl Source for Probe {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, _cursor: &Cursor) -> Result<Self, Error> {
        Ok(Probe { config, connection: None })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let Some(step) = self.config.steps.get(cursor.next_step) else { return Ok(None) };
        let outcome = match run(&mut self.connection, &self.config.connection, step) {
            Ok(ok) => json!({ "step": cursor.next_step, "ok": ok }),
            Err(error) => json!({ "step": cursor.next_step, "error": error_json(&error) }),
        };
        let message = Message::new(outcome.to_string());
        Ok(Some(Batch::new(vec![message], Cursor { next_step: cursor.next_step + 1 })))
    }
}

/// Run `step` on the connection `name`, opened on first use.
fn run(connection: &mut Option<Connection>, name: &str, step: &Step) -> Result<Json, PgError> {
    if connection.is_none() {
        *connection = Some(Connection::open(name)?);
    }
    let connection = connection.as_ref().expect("opened above");
    {
        match step {
            Step::Query { sql, params } => {
                let rows = connection.query(sql, &values(params))?;
                let rows: Vec<Json> = rows
                    .rows
                    .iter()
                    .map(|row| Json::Array(row.iter().map(|v| value_json(v.into())).collect()))
                    .collect();
                Ok(json!(rows))
            }
            Step::QueryPacked { sql, params } => {
                let packed = connection.query_packed(sql, &values(params))?;
                let table = match Table::of(&packed) {
                    Ok(table) => table,
                    Err(undecodable) => return Ok(json!({ "undecodable": undecodable })),
                };
                let rows: Vec<Json> =
                    table.rows().map(|row| Json::Array(row.iter().copied().map(value_json).collect())).collect();
                Ok(json!({ "columns": table.columns(), "rows": rows }))
            }
            Step::Execute { sql, params } => Ok(json!(connection.execute(sql, &values(params))?)),
            Step::OpenMany { count } => {
                let mut held = Vec::new();
                let error = (0..*count).find_map(|_| match Connection::open(name) {
                    Ok(opened) => {
                        held.push(opened);
                        None
                    }
                    Err(error) => Some(error_json(&error)),
                });
                Ok(json!({ "opened": held.len(), "error": error }))
            }
            Step::Transaction(statements) => {
                let statements: Vec<Statement> =
                    statements.iter().map(|s| Statement { sql: s.sql.clone(), params: values(&s.params) }).collect();
                Ok(json!(connection.transaction(&statements)?))
            }
        }
    }
}

fn values(params: &[Json]) -> Vec<Value> {
    params.iter().map(value_of).collect()
}

fn value_of(json: &Json) -> Value {
    let (case, inner) = json.as_object().and_then(|o| o.iter().next()).expect("a value is {\"case\": ...}");
    match case.as_str() {
        "null" => Value::Null,
        "boolean" => Value::Boolean(inner.as_bool().expect("a bool")),
        "int" => Value::Int(inner.as_i64().expect("an int")),
        "float" => Value::Float(inner.as_f64().expect("a float")),
        "text" => Value::Text(inner.as_str().expect("text").to_string()),
        "json" => Value::Json(inner.as_str().expect("json text").to_string()),
        "timestamp" => Value::Timestamp(inner.as_i64().expect("micros")),
        "bytes" => {
            Value::Bytes(inner.as_array().expect("bytes").iter().map(|b| b.as_u64().expect("a byte") as u8).collect())
        }
        other => panic!("unknown value case {other}"),
    }
}

fn value_json(value: ValueRef) -> Json {
    match value {
        ValueRef::Null => json!({ "null": null }),
        ValueRef::Boolean(v) => json!({ "boolean": v }),
        ValueRef::Int(v) => json!({ "int": v }),
        ValueRef::Float(v) => json!({ "float": v }),
        ValueRef::Text(v) => json!({ "text": v }),
        ValueRef::Bytes(v) => json!({ "bytes": v }),
        ValueRef::Json(v) => json!({ "json": v }),
        ValueRef::Timestamp(v) => json!({ "timestamp": v }),
    }
}

fn error_json(error: &PgError) -> Json {
    match error {
        PgError::NotGranted(m) => json!({ "kind": "not-granted", "message": m }),
        PgError::Connection(m) => json!({ "kind": "connection", "message": m }),
        PgError::TimedOut(m) => json!({ "kind": "timed-out", "message": m }),
        PgError::Refused(r) => json!({
            "kind": "refused", "message": r.message, "code": r.code, "permanent": r.permanent, "statement": r.statement,
        }),
    }
}

ferry_guest::export_source!(Probe);
