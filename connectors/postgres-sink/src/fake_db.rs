//! A database in memory for the native tests of the sink: the sink's table keyed by
//! `id`, transactions that commit all or nothing, `ON CONFLICT ("id") DO NOTHING`
//! honoured (and a duplicate id refused without it, as PostgreSQL does), poison ids
//! refused for good, and failures on demand. Its state is per thread.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use ferry_guest::bindings::iggy::connector::postgres::{Error as PgError, Refusal, Statement, Value};

use crate::db::Database;

#[derive(Default)]
pub struct State {
    /// The committed rows: each row's parameters, by id.
    pub rows: BTreeMap<String, Vec<Value>>,
    /// Every transaction run (committed or not), in order.
    pub transactions: Vec<Vec<Statement>>,
    /// The single statements run, in order.
    pub executed: Vec<Statement>,
    /// Ids whose insert the server refuses for good (a check constraint).
    pub poison: BTreeSet<String>,
    /// The errors the next calls fail with, before doing anything.
    pub failures: VecDeque<PgError>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Look at or change this thread's database.
pub fn with<R>(change: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|state| change(&mut state.borrow_mut()))
}

/// A refusal of the statement at `index`.
pub fn refusal(code: &str, message: &str, permanent: bool, index: Option<u32>) -> PgError {
    PgError::Refused(Refusal { message: message.into(), code: code.into(), permanent, statement: index })
}

pub struct FakeDb;

impl Database for FakeDb {
    fn open(_name: &str) -> Result<Self, PgError> {
        Ok(FakeDb)
    }

    fn execute(&self, statement: &Statement) -> Result<u64, PgError> {
        with(|state| {
            state.fail()?;
            state.executed.push(statement.clone());
            Ok(0)
        })
    }

    fn transaction(&self, statements: &[Statement]) -> Result<Vec<u64>, PgError> {
        with(|state| {
            state.fail()?;
            state.transactions.push(statements.to_vec());
            let mut staged = state.rows.clone();
            let mut affected = Vec::new();
            for (index, statement) in statements.iter().enumerate() {
                let index = Some(index as u32);
                assert!(statement.sql.starts_with("INSERT INTO"), "the fake inserts only, not {}", statement.sql);
                let Some(Value::Text(id)) = statement.params.first() else {
                    panic!("the fake keys rows by a text id, not {:?}", statement.params.first())
                };
                if state.poison.contains(id) {
                    let message = "new row violates check constraint \"sane\"";
                    return Err(refusal("23514", message, true, index));
                }
                if staged.contains_key(id) {
                    if !statement.sql.ends_with("ON CONFLICT (\"id\") DO NOTHING") {
                        let message = "duplicate key value violates unique constraint";
                        return Err(refusal("23505", message, true, index));
                    }
                    affected.push(0);
                } else {
                    staged.insert(id.clone(), statement.params.clone());
                    affected.push(1);
                }
            }
            state.rows = staged;
            Ok(affected)
        })
    }
}

impl State {
    fn fail(&mut self) -> Result<(), PgError> {
        self.failures.pop_front().map_or(Ok(()), Err)
    }
}
