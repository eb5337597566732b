//! The statements the connector runs, built once from the config with every name
//! quoted, and bound to the cursor's values as parameters (never spliced in).

use ferry_guest::Error;
use ferry_guest::bindings::iggy::connector::mysql::Statement;
use ferry_guest::mysql::{quote_identifier, quote_table};

use crate::config::{AfterAck, Config};
use crate::cursor::{Key, Position};

/// The connector's statements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sql {
    table: String,
    tracking: String,
    tie_breaker: Option<String>,
    /// With `after_ack.mark_column`: rows already marked are not read again.
    unmarked: Option<String>,
    limit: u32,
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
        let (unmarked, after_ack) = match &config.after_ack {
            None => (None, None),
            Some(AfterAck::Delete) => (None, Some(format!("DELETE FROM {table} WHERE {primary_key} IN ("))),
            Some(AfterAck::Mark(column)) => {
                let mark = quote_identifier(column).map_err(|e| e.context("plugin_config.after_ack.mark_column"))?;
                let update = format!("UPDATE {table} SET {mark} = TRUE WHERE {primary_key} IN (");
                (Some(mark), Some(update))
            }
        };
        Ok(Sql { table, tracking, tie_breaker, unmarked, limit: config.batch_size, after_ack })
    }

    /// The query for the rows after `after` (from the start when `None`), in order.
    pub fn next_rows(&self, after: Option<&Position>) -> Result<Statement, Error> {
        let tracking = &self.tracking;
        let mut conditions = Vec::new();
        let mut params = Vec::new();
        match (after, &self.tie_breaker) {
            (None, None) => conditions.push(format!("{tracking} IS NOT NULL")),
            (None, Some(tie)) => conditions.push(format!("{tracking} IS NOT NULL AND {tie} IS NOT NULL")),
            (Some(Position { tracking: last, tie_breaker: None }), None) => {
                conditions.push(format!("{tracking} > ?"));
                params.push(last.to_value());
            }
            (Some(Position { tracking: last, tie_breaker: Some(last_tie) }), Some(tie)) => {
                // A later tracking value, or the same one and a later tie-breaker. Written
                // out rather than as `(a, b) > (?, ?)`: the leading `>=` is a range the
                // server answers from an index on the tracking column, whatever its version.
                conditions.push(format!("{tracking} >= ? AND ({tracking} > ? OR {tie} > ?)"));
                params.extend([last.to_value(), last.to_value(), last_tie.to_value()]);
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
            None => tracking.clone(),
            Some(tie) => format!("{tracking}, {tie}"),
        };
        let sql = format!(
            "SELECT * FROM {} WHERE {} ORDER BY {order} LIMIT {}",
            self.table,
            conditions.join(" AND "),
            self.limit
        );
        Ok(Statement { sql, params })
    }

    /// The statement that deletes or marks the rows with these primary keys, if
    /// `after_ack` is configured and there are any.
    pub fn after_ack(&self, keys: &[Key]) -> Option<Statement> {
        let head = self.after_ack.as_ref()?;
        if keys.is_empty() {
            return None;
        }
        let placeholders = vec!["?"; keys.len()].join(", ");
        Some(Statement { sql: format!("{head}{placeholders})"), params: keys.iter().map(Key::to_value).collect() })
    }
}

#[cfg(test)]
mod tests {
    use ferry_guest::bindings::iggy::connector::mysql::Value;

    use super::*;

    fn sql(json: &str) -> Sql {
        Sql::new(&serde_json::from_str(json).unwrap()).unwrap()
    }

    #[test]
    fn a_bad_name_is_refused_naming_its_key() {
        let cases = [
            (r#"{"connection": "c", "table": "x`y"}"#, "plugin_config.table"),
            (r#"{"connection": "c", "table": "a.b.c"}"#, "plugin_config.table"),
            (r#"{"connection": "c", "table": "t", "tracking_column": ""}"#, "plugin_config.tracking_column"),
            (r#"{"connection": "c", "table": "t", "tie_breaker_column": "a`b"}"#, "plugin_config.tie_breaker_column"),
            (
                r#"{"connection": "c", "table": "t", "tracking_column": "n", "primary_key": "`id`"}"#,
                "plugin_config.primary_key",
            ),
            (
                r#"{"connection": "c", "table": "t", "after_ack": {"mark_column": ""}}"#,
                "plugin_config.after_ack.mark_column",
            ),
        ];
        for (json, key) in cases {
            let error = Sql::new(&serde_json::from_str(json).unwrap()).unwrap_err();
            assert!(error.message().starts_with(key), "{json}: {error}");
        }
    }

    #[test]
    fn by_id_from_the_start_then_after_the_last_row() {
        let sql = sql(r#"{"connection": "c", "table": "shop.events", "batch_size": 50}"#);
        let first = sql.next_rows(None).unwrap();
        assert_eq!(first.sql, "SELECT * FROM `shop`.`events` WHERE `id` IS NOT NULL ORDER BY `id` LIMIT 50");
        assert!(first.params.is_empty());
        let next = sql.next_rows(Some(&Position { tracking: Key::Int(7), tie_breaker: None })).unwrap();
        assert_eq!(next.sql, "SELECT * FROM `shop`.`events` WHERE `id` > ? ORDER BY `id` LIMIT 50");
        assert_eq!(next.params, [Value::Int(7)]);
    }

    #[test]
    fn by_timestamp_with_a_tie_breaker() {
        let sql = sql(r#"{"connection": "c", "table": "events", "tracking_column": "at", "tie_breaker_column": "id"}"#);
        let first = sql.next_rows(None).unwrap();
        assert_eq!(
            first.sql,
            "SELECT * FROM `events` WHERE `at` IS NOT NULL AND `id` IS NOT NULL ORDER BY `at`, `id` LIMIT 100"
        );
        let at = Key::Text("2026-12-07 10:46:16".into());
        let next = sql.next_rows(Some(&Position { tracking: at.clone(), tie_breaker: Some(Key::Int(9)) })).unwrap();
        assert_eq!(
            next.sql,
            "SELECT * FROM `events` WHERE `at` >= ? AND (`at` > ? OR `id` > ?) ORDER BY `at`, `id` LIMIT 100"
        );
        assert_eq!(next.params, [at.to_value(), at.to_value(), Value::Int(9)]);
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
    fn after_ack_deletes_or_marks_by_primary_key_and_marked_rows_are_not_read() {
        assert_eq!(sql(r#"{"connection": "c", "table": "t"}"#).after_ack(&[Key::Int(1)]), None);
        let delete =
            sql(r#"{"connection": "c", "table": "jobs", "primary_key": "job_id", "after_ack": {"delete": true}}"#);
        let statement = delete.after_ack(&[Key::Int(4), Key::Int(5)]).unwrap();
        assert_eq!(statement.sql, "DELETE FROM `jobs` WHERE `job_id` IN (?, ?)");
        assert_eq!(statement.params, [Value::Int(4), Value::Int(5)]);
        assert_eq!(delete.after_ack(&[]), None, "no statement for no rows");
        let mark = sql(r#"{"connection": "c", "table": "jobs", "after_ack": {"mark_column": "done"}}"#);
        let statement = mark.after_ack(&[Key::Text("a".into())]).unwrap();
        assert_eq!(statement.sql, "UPDATE `jobs` SET `done` = TRUE WHERE `id` IN (?)");
        assert_eq!(
            mark.next_rows(None).unwrap().sql,
            "SELECT * FROM `jobs` WHERE `id` IS NOT NULL AND `done` IS NOT TRUE ORDER BY `id` LIMIT 100"
        );
    }
}
