//! A database in memory for the native tests of the source: one table of
//! `(id int, name text, processed bool)`, the statement shapes the connector runs,
//! a log of what ran, and lost connections on demand. Its state is per thread, so a
//! "restarted" instance in a test sees the table the previous one left.

use std::cell::RefCell;
use std::collections::BTreeSet;

use ferry_guest::Error;
use ferry_guest::bindings::iggy::connector::postgres::{PackedRows, Rows, Statement, Value};

use crate::db::Database;

#[derive(Default)]
pub struct State {
    /// The table's ids.
    pub ids: BTreeSet<i64>,
    /// The ids whose `processed` is true.
    pub marked: BTreeSet<i64>,
    /// The queries run, in order.
    pub queries: Vec<Statement>,
    /// The other statements run, in order.
    pub executed: Vec<Statement>,
    /// How many of the next calls fail as if the connection broke.
    pub failures: u32,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Look at or change this thread's database.
pub fn with<R>(change: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|state| change(&mut state.borrow_mut()))
}

pub struct FakeDb;

impl Database for FakeDb {
    fn open(_name: &str) -> Result<Self, Error> {
        Ok(FakeDb)
    }

    fn query(&self, statement: &Statement, what: &str) -> Result<PackedRows, Error> {
        with(|state| {
            state.fail(what)?;
            state.queries.push(statement.clone());
            let after = match statement.params.as_slice() {
                [] => i64::MIN,
                [Value::Int(after)] => *after,
                other => panic!("the fake reads by an int id only, not {other:?}"),
            };
            let limit: usize = statement.sql.rsplit(' ').next().unwrap().parse().unwrap();
            let unmarked_only = statement.sql.contains("IS NOT TRUE");
            let rows = state
                .ids
                .range(after + 1..)
                .filter(|id| !unmarked_only || !state.marked.contains(id))
                .take(limit)
                .map(|id| {
                    vec![Value::Int(*id), Value::Text(format!("row {id}")), Value::Boolean(state.marked.contains(id))]
                })
                .collect();
            Ok(ferry_guest::rows::pack(&Rows { columns: vec!["id".into(), "name".into(), "processed".into()], rows }))
        })
    }

    fn execute(&self, statement: &Statement, what: &str) -> Result<u64, Error> {
        with(|state| {
            state.fail(what)?;
            state.executed.push(statement.clone());
            let ids = statement.params.iter().map(|p| match p {
                Value::Int(id) => *id,
                other => panic!("the fake keys rows by int, not {other:?}"),
            });
            let affected = if statement.sql.starts_with("DELETE") {
                ids.filter(|id| state.ids.remove(id)).count()
            } else if statement.sql.starts_with("UPDATE") {
                ids.filter(|id| state.ids.contains(id)).inspect(|id| _ = state.marked.insert(*id)).count()
            } else {
                panic!("the fake does not know {}", statement.sql)
            };
            Ok(affected as u64)
        })
    }
}

impl State {
    fn fail(&mut self, what: &str) -> Result<(), Error> {
        if self.failures == 0 {
            return Ok(());
        }
        self.failures -= 1;
        Err(Error::msg(format!("postgres `main`: {what}: no connection (connection reset by peer)")))
    }
}
