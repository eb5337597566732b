//! Helpers for connectors that speak MySQL or MariaDB through the host's `mysql`
//! import: names quoted for SQL text (values need no quoting: the server binds them),
//! the import's errors in words for an operator, and the rows of `query-packed` read
//! in place ([`table`]).

use crate::Error;
use crate::bindings::iggy::connector::mysql::{Error as MysqlError, PackedRows, Rows, Value};
use crate::rows::{Reader, Table};

/// A column's value, its text or bytes borrowed from the packed buffer: the contract's
/// `value` by reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Int(i64),
    Uint(u64),
    Float(f64),
    Text(&'a str),
    Bytes(&'a [u8]),
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(value: &'a Value) -> Self {
        match value {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Int(*v),
            Value::Uint(v) => ValueRef::Uint(*v),
            Value::Float(v) => ValueRef::Float(*v),
            Value::Text(v) => ValueRef::Text(v),
            Value::Bytes(v) => ValueRef::Bytes(v),
        }
    }
}

impl ValueRef<'_> {
    /// The value, owned: to keep it past the buffer (a cursor's key).
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Int(v) => Value::Int(v),
            ValueRef::Uint(v) => Value::Uint(v),
            ValueRef::Float(v) => Value::Float(v),
            ValueRef::Text(v) => Value::Text(v.to_string()),
            ValueRef::Bytes(v) => Value::Bytes(v.to_vec()),
        }
    }
}

/// The rows of `packed` (`query-packed`), or what is wrong with its buffer.
pub fn table(packed: &PackedRows) -> Result<Table<'_, ValueRef<'_>>, String> {
    Table::decode(&packed.columns, packed.count, &packed.data, |reader: &mut Reader<'_>| {
        let [tag] = reader.take()?;
        Ok(match tag {
            0 => ValueRef::Null,
            1 => ValueRef::Int(i64::from_le_bytes(reader.take()?)),
            2 => ValueRef::Uint(u64::from_le_bytes(reader.take()?)),
            3 => ValueRef::Float(f64::from_le_bytes(reader.take()?)),
            4 => ValueRef::Text(reader.text()?),
            5 => ValueRef::Bytes(reader.counted()?),
            other => return Err(format!("unknown tag {other} (0 to 5, the cases of value in order)")),
        })
    })
}

/// `rows` packed as the host packs them: for a connector's native tests.
pub fn pack(rows: &Rows) -> PackedRows {
    let mut data = Vec::new();
    for value in rows.rows.iter().flatten() {
        let (tag, bytes): (u8, std::borrow::Cow<[u8]>) = match value {
            Value::Null => (0, [].as_slice().into()),
            Value::Int(v) => (1, v.to_le_bytes().to_vec().into()),
            Value::Uint(v) => (2, v.to_le_bytes().to_vec().into()),
            Value::Float(v) => (3, v.to_le_bytes().to_vec().into()),
            Value::Text(v) => (4, v.as_bytes().into()),
            Value::Bytes(v) => (5, v.as_slice().into()),
        };
        data.push(tag);
        if tag >= 4 {
            data.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        }
        data.extend_from_slice(&bytes);
    }
    PackedRows { columns: rows.columns.clone(), count: rows.rows.len() as u32, data }
}

/// The longest name MySQL takes for a table or a column.
const MAX_NAME: usize = 64;

/// `name` as a quoted identifier (`` `name` ``), taken literally; a name with a
/// backtick, a NUL or more than 64 characters is refused rather than guessed at.
pub fn quote_identifier(name: &str) -> Result<String, Error> {
    if name.is_empty() {
        return Err(Error::msg("is empty"));
    }
    if name.contains('`') || name.contains('\0') || name.chars().count() > MAX_NAME {
        return Err(Error::msg(format!(
            "`{name}` has a backtick or NUL, or is longer than {MAX_NAME} characters: write the name without \
             quotes (the connector quotes it)"
        )));
    }
    Ok(format!("`{name}`"))
}

/// `table` or `database.table`, each part quoted.
pub fn quote_table(name: &str) -> Result<String, Error> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2 {
        return Err(Error::msg(format!("`{name}` has more than one dot: write `table` or `database.table`")));
    }
    let quoted = parts.into_iter().map(quote_identifier).collect::<Result<Vec<_>, _>>()?;
    Ok(quoted.join("."))
}

/// The import's error, for people.
pub fn describe(error: &MysqlError) -> String {
    match error {
        MysqlError::NotGranted(detail) => format!("not granted ({detail})"),
        MysqlError::Connection(detail) => format!("no connection ({detail})"),
        MysqlError::Refused(r) => {
            format!("refused by the server: {} (error {}, SQLSTATE {})", r.message, r.code, r.state)
        }
        MysqlError::TimedOut(detail) => format!("timed out ({detail})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::iggy::connector::mysql::Refusal;

    #[test]
    fn names_are_quoted_literally_and_backticks_inside_are_refused() {
        assert_eq!(quote_identifier("Events").unwrap(), "`Events`");
        assert_eq!(quote_identifier("order; DROP TABLE x").unwrap(), "`order; DROP TABLE x`");
        assert_eq!(quote_table("shop.orders").unwrap(), "`shop`.`orders`");
        assert_eq!(quote_table("orders").unwrap(), "`orders`");
        let long = "x".repeat(65);
        for bad in ["", "a`b", "`events`", "a\0b", long.as_str()] {
            assert!(quote_identifier(bad).is_err(), "{bad:?}");
        }
        for bad in ["a.b.c", "a.", ".b", "s.`t`"] {
            assert!(quote_table(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn packed_rows_read_back_as_the_values_they_were_and_a_bad_buffer_is_named() {
        let rows = Rows {
            columns: vec!["a".into(), "b".into(), "c".into()],
            rows: vec![
                vec![Value::Null, Value::Int(-3), Value::Uint(u64::MAX)],
                vec![Value::Float(1.5), Value::Text("é".into()), Value::Bytes(vec![0, 255])],
            ],
        };
        let packed = pack(&rows);
        assert_eq!(&packed.data[..10], [0u8, 1, 253, 255, 255, 255, 255, 255, 255, 255]);
        let table = table(&packed).unwrap();
        assert_eq!((table.len(), table.columns()), (2, rows.columns.as_slice()));
        for (got, want) in table.rows().zip(&rows.rows) {
            assert_eq!(got, want.iter().map(ValueRef::from).collect::<Vec<_>>().as_slice());
            assert_eq!(&got.iter().map(|v| v.to_value()).collect::<Vec<_>>(), want);
        }
        let cut = PackedRows { data: packed.data[..packed.data.len() - 1].to_vec(), ..packed.clone() };
        assert!(super::table(&cut).unwrap_err().starts_with("packed rows: row 1, column 2"));
        let tag = PackedRows { data: vec![9], count: 1, columns: vec!["a".into()] };
        assert!(super::table(&tag).unwrap_err().contains("unknown tag 9"));
    }

    #[test]
    fn errors_say_what_went_wrong() {
        let refused = MysqlError::Refused(Refusal {
            message: "Table 'ferry.evnts' doesn't exist".into(),
            code: 1146,
            state: "42S02".into(),
            statement: None,
        });
        assert_eq!(
            describe(&refused),
            "refused by the server: Table 'ferry.evnts' doesn't exist (error 1146, SQLSTATE 42S02)"
        );
        assert_eq!(describe(&MysqlError::Connection("reset".into())), "no connection (reset)");
        assert!(describe(&MysqlError::NotGranted("no `x`".into())).contains("no `x`"));
        assert!(describe(&MysqlError::TimedOut("2s".into())).contains("timed out"));
    }
}
