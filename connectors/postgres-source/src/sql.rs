//! The statements the connector runs, built once from the config with every name
//! quoted, and bound to the cursor's values as parameters (never spliced in).

use ferry_guest::Error;
use ferry_guest::bindings::iggy::connector::postgres::Statement;
use ferry_guest::sql::{quote_identifier, quote_table};

use crate::config::{AfterAck, Config};
use crate::cursor::{Key, Position};

/// The connector's statements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sql {
    /// `SELECT * FROM ...`: the table, or the configured query as a subquery.
    select_from: String,
    tracking: String,
    tie_breaker: Option<String>,
    /// With `after_ack.mark_column`: rows already marked are not read again.
    unmarked: Option<String>,
    limit: u32,
    /// `initial_offset` as an SQL literal, for the read before there is a cursor.
    initial_offset: Option<String>,
    /// The statement of `after_ack`, up to its list of keys.
    after_ack: Option<String>,
}

impl Sql {
    pub fn new(config: &Config) -> Result<Sql, Error> {
        let table = quote_table(&config.table).map_err(|e| e.context("plugin_config.table"))?;
        let tracking =
            quote_identifier(&config.tracking_column).map_err(|e| e.context("plugin_config.tracking_column"))?;
        let tie_breaker = config
            .tie_breaker_column
            .as_deref()
            .map(quote_identifier)
            .transpose()
            .map_err(|e| e.context("plugin_config.tie_breaker_column"))?;
        let primary_key = quote_identifier(&config.primary_key).map_err(|e| e.context("plugin_config.primary_key"))?;
        let select_from = match &config.query {
            None => format!("SELECT * FROM {table}"),
            Some(query) => format!("SELECT * FROM ({query}) AS \"ferry_rows\""),
        };
        let (unmarked, after_ack) = match &config.after_ack {
            None => (None, None),
            Some(AfterAck::Delete) => (None, Some(format!("DELETE FROM {table} WHERE {primary_key} IN ("))),
            Some(AfterAck::Mark(column)) => {
                let mark = quote_identifier(column).map_err(|e| e.context("plugin_config.after_ack.mark_column"))?;
                let update = format!("UPDATE {table} SET {mark} = true WHERE {primary_key} IN (");
                (Some(mark), Some(update))
            }
        };
        // A string literal, not a parameter: PostgreSQL reads it as the column's type
        // (an integer, a timestamp), as Iggy's source has it read.
        let initial_offset = config.initial_offset.as_ref().map(|text| format!("'{}'", text.replace('\'', "''")));
        Ok(Sql { select_from, tracking, tie_breaker, unmarked, limit: config.batch_size, initial_offset, after_ack })
    }

    /// The query for the rows after `after` (from the start when `None`), in order.
    pub fn next_rows(&self, after: Option<&Position>) -> Result<Statement, Error> {
        let mut conditions = Vec::new();
        let mut params = Vec::new();
        match (after, &self.tie_breaker) {
            (None, None) => match &self.initial_offset {
                None => conditions.push(format!("{} IS NOT NULL", self.tracking)),
                Some(literal) => conditions.push(format!("{} > {literal}", self.tracking)),
            },
            (None, Some(tie)) => conditions.push(format!("{} IS NOT NULL AND {tie} IS NOT NULL", self.tracking)),
            (Some(Position { tracking, tie_breaker: None }), None) => {
                conditions.push(format!("{} > $1", self.tracking));
                params.push(tracking.to_value());
            }
            (Some(Position { tracking, tie_breaker: Some(last) }), Some(tie)) => {
                // A row comparison: later tracking value, or the same one and a later
                // tie-breaker. PostgreSQL answers it from an index on both columns.
                conditions.push(format!("({}, {tie}) > ($1, $2)", self.tracking));
                params.push(tracking.to_value());
                params.push(last.to_value());
            }
            (Some(_), _) => {
                return Err(Error::msg(
                    "the committed cursor was made with another plugin_config.tie_breaker_column (one has a \
                     tie-breaker value, the other not): restore the setting, or start the connector afresh",
                ));
            }
        }
        if let Some(mark) = &self.unmarked {
            conditions.push(format!("{mark} IS NOT TRUE"));
        }
        let order = match &self.tie_breaker {
            None => self.tracking.clone(),
            Some(tie) => format!("{}, {tie}", self.tracking),
        };
        let sql =
            format!("{} WHERE {} ORDER BY {order} LIMIT {}", self.select_from, conditions.join(" AND "), self.limit);
        Ok(Statement { sql, params })
    }

    /// The statement that deletes or marks the rows with these primary keys, if
    /// `after_ack` is configured and there are any.
    pub fn after_ack(&self, keys: &[Key]) -> Option<Statement> {
        let head = self.after_ack.as_ref()?;
        if keys.is_empty() {
            return None;
        }
        let placeholders: Vec<String> = (1..=keys.len()).map(|n| format!("${n}")).collect();
        Some(Statement {
            sql: format!("{head}{})", placeholders.join(", ")),
            params: keys.iter().map(Key::to_value).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use ferry_guest::bindings::iggy::connector::postgres::Value;

    use super::*;

    fn config(json: &str) -> Config {
        serde_json::from_str(json).unwrap()
    }

    fn sql(json: &str) -> Sql {
        Sql::new(&config(json)).unwrap()
    }

    #[test]
    fn a_bad_name_is_refused_naming_its_key() {
        let cases = [
            (r#"{"connection": "c", "table": "x\"y"}"#, "plugin_config.table"),
            (r#"{"connection": "c", "table": "t", "tracking_column": ""}"#, "plugin_config.tracking_column"),
            (r#"{"connection": "c", "table": "t", "tie_breaker_column": "a\"b"}"#, "plugin_config.tie_breaker_column"),
            (
                r#"{"connection": "c", "table": "t", "tracking_column": "n", "primary_key": "\"id\""}"#,
                "plugin_config.primary_key",
            ),
            (
                r#"{"connection": "c", "table": "t", "after_ack": {"mark_column": ""}}"#,
                "plugin_config.after_ack.mark_column",
            ),
        ];
        for (json, key) in cases {
            let error = Sql::new(&config(json)).unwrap_err();
            assert!(error.message().starts_with(key), "{json}: {error}");
        }
    }

    #[test]
    fn by_id_from_the_start_then_after_the_last_row() {
        let sql = sql(r#"{"connection": "c", "table": "public.events", "batch_size": 50}"#);
        let first = sql.next_rows(None).unwrap();
        assert_eq!(first.sql, r#"SELECT * FROM "public"."events" WHERE "id" IS NOT NULL ORDER BY "id" LIMIT 50"#);
        assert!(first.params.is_empty());
        let next = sql.next_rows(Some(&Position { tracking: Key::Int(7), tie_breaker: None })).unwrap();
        assert_eq!(next.sql, r#"SELECT * FROM "public"."events" WHERE "id" > $1 ORDER BY "id" LIMIT 50"#);
        assert_eq!(next.params, [Value::Int(7)]);
    }

    #[test]
    fn an_initial_offset_starts_the_read_until_there_is_a_cursor() {
        let sql = sql(r#"{"connection": "c", "mode": "polling", "tables": ["users"], "initial_offset": "it's 5"}"#);
        let first = sql.next_rows(None).unwrap();
        assert_eq!(first.sql, r#"SELECT * FROM "users" WHERE "id" > 'it''s 5' ORDER BY "id" LIMIT 1000"#);
        assert!(first.params.is_empty());
        let next = sql.next_rows(Some(&Position { tracking: Key::Int(7), tie_breaker: None })).unwrap();
        assert_eq!(next.sql, r#"SELECT * FROM "users" WHERE "id" > $1 ORDER BY "id" LIMIT 1000"#);
    }

    #[test]
    fn by_timestamp_with_a_tie_breaker() {
        let sql = sql(r#"{"connection": "c", "table": "events", "tracking_column": "created_at",
                "tie_breaker_column": "id"}"#);
        let first = sql.next_rows(None).unwrap();
        assert_eq!(
            first.sql,
            r#"SELECT * FROM "events" WHERE "created_at" IS NOT NULL AND "id" IS NOT NULL ORDER BY "created_at", "id" LIMIT 100"#
        );
        let position = Position { tracking: Key::Timestamp(5), tie_breaker: Some(Key::Int(9)) };
        let next = sql.next_rows(Some(&position)).unwrap();
        assert_eq!(
            next.sql,
            r#"SELECT * FROM "events" WHERE ("created_at", "id") > ($1, $2) ORDER BY "created_at", "id" LIMIT 100"#
        );
        assert_eq!(next.params, [Value::Timestamp(5), Value::Int(9)]);
    }

    #[test]
    fn a_cursor_made_with_other_tie_breaker_settings_is_refused() {
        let with = sql(r#"{"connection": "c", "table": "t", "tie_breaker_column": "pk"}"#);
        let without = sql(r#"{"connection": "c", "table": "t"}"#);
        let plain = Position { tracking: Key::Int(1), tie_breaker: None };
        let tied = Position { tracking: Key::Int(1), tie_breaker: Some(Key::Int(2)) };
        assert!(with.next_rows(Some(&plain)).unwrap_err().message().contains("tie_breaker_column"));
        assert!(without.next_rows(Some(&tied)).unwrap_err().message().contains("tie_breaker_column"));
    }

    #[test]
    fn a_query_is_read_as_a_subquery() {
        let sql =
            sql(r#"{"connection": "c", "table": "orders", "query": "SELECT id, total::text AS total FROM orders;"}"#);
        let next = sql.next_rows(Some(&Position { tracking: Key::Int(3), tie_breaker: None })).unwrap();
        assert_eq!(
            next.sql,
            r#"SELECT * FROM (SELECT id, total::text AS total FROM orders) AS "ferry_rows" WHERE "id" > $1 ORDER BY "id" LIMIT 100"#
        );
    }

    #[test]
    fn after_ack_deletes_or_marks_by_primary_key() {
        let none = sql(r#"{"connection": "c", "table": "t"}"#);
        assert_eq!(none.after_ack(&[Key::Int(1)]), None);

        let delete =
            sql(r#"{"connection": "c", "table": "jobs", "primary_key": "job_id", "after_ack": {"delete": true}}"#);
        let statement = delete.after_ack(&[Key::Int(4), Key::Int(5)]).unwrap();
        assert_eq!(statement.sql, r#"DELETE FROM "jobs" WHERE "job_id" IN ($1, $2)"#);
        assert_eq!(statement.params, [Value::Int(4), Value::Int(5)]);
        assert_eq!(delete.after_ack(&[]), None, "no statement for no rows");

        let mark = sql(r#"{"connection": "c", "table": "jobs", "after_ack": {"mark_column": "processed"}}"#);
        let statement = mark.after_ack(&[Key::Text("a".into())]).unwrap();
        assert_eq!(statement.sql, r#"UPDATE "jobs" SET "processed" = true WHERE "id" IN ($1)"#);
        assert_eq!(statement.params, [Value::Text("a".into())]);
        // Marked rows are done: not read again, even from the start.
        assert_eq!(
            mark.next_rows(None).unwrap().sql,
            r#"SELECT * FROM "jobs" WHERE "id" IS NOT NULL AND "processed" IS NOT TRUE ORDER BY "id" LIMIT 100"#
        );
    }
}
