//! A query's rows as `query-packed` returns them (`packed-rows` in
//! `wit/postgres.wit`): one buffer the host fills, read here in place. Each value is
//! a [`ValueRef`] borrowing its text and bytes from the buffer, so reading a
//! thousand rows allocates one vector, not a string per value.
//!
//! ```text
//! let packed = connection.query_packed(&sql, &params)?;
//! let table = Table::of(&packed)?;
//! for row in table.rows() {
//!     // row: &[ValueRef], one per column of table.columns()
//! }
//! ```

use crate::bindings::iggy::connector::postgres::{PackedRows, Rows, Value};

/// The tag of each case of `value`, in the WIT's order.
const NULL: u8 = 0;
const BOOLEAN: u8 = 1;
const INT: u8 = 2;
const FLOAT: u8 = 3;
const TEXT: u8 = 4;
const BYTES: u8 = 5;
const JSON: u8 = 6;
const TIMESTAMP: u8 = 7;

/// A column's value, its text or bytes borrowed: the contract's `value` by reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Boolean(bool),
    Int(i64),
    Float(f64),
    Text(&'a str),
    Bytes(&'a [u8]),
    /// The document's text.
    Json(&'a str),
    /// Microseconds since the Unix epoch.
    Timestamp(i64),
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(value: &'a Value) -> Self {
        match value {
            Value::Null => ValueRef::Null,
            Value::Boolean(v) => ValueRef::Boolean(*v),
            Value::Int(v) => ValueRef::Int(*v),
            Value::Float(v) => ValueRef::Float(*v),
            Value::Text(v) => ValueRef::Text(v),
            Value::Bytes(v) => ValueRef::Bytes(v),
            Value::Json(v) => ValueRef::Json(v),
            Value::Timestamp(v) => ValueRef::Timestamp(*v),
        }
    }
}

/// The rows of a packed result, decoded and checked once: PostgreSQL's values by
/// default, MySQL's with [`crate::mysql::table`].
#[derive(Debug, Clone, PartialEq)]
pub struct Table<'a, V = ValueRef<'a>> {
    columns: &'a [String],
    count: usize,
    /// Row after row, one value per column.
    values: Vec<V>,
}

impl<'a> Table<'a> {
    /// The rows of `packed`, or what is wrong with its buffer (which the host does
    /// not write: it would be a host's bug, reported rather than trusted).
    pub fn of(packed: &'a PackedRows) -> Result<Table<'a>, String> {
        Table::decode(&packed.columns, packed.count, &packed.data, Reader::value)
    }
}

impl<'a, V> Table<'a, V> {
    /// `count` rows of `columns` out of `data`, each value read by `value`.
    pub(crate) fn decode(
        columns: &'a [String],
        count: u32,
        data: &'a [u8],
        value: impl Fn(&mut Reader<'a>) -> Result<V, String>,
    ) -> Result<Table<'a, V>, String> {
        let count = count as usize;
        let mut reader = Reader { bytes: data };
        // Each value takes a byte at least: a count the buffer cannot hold is not
        // trusted for an allocation.
        let mut values = Vec::with_capacity(columns.len().saturating_mul(count).min(data.len()));
        for row in 0..count {
            for column in 0..columns.len() {
                let value =
                    value(&mut reader).map_err(|what| format!("packed rows: row {row}, column {column}: {what}"))?;
                values.push(value);
            }
        }
        if !reader.bytes.is_empty() {
            return Err(format!("packed rows: {} bytes after the last of {count} rows", reader.bytes.len()));
        }
        Ok(Table { columns, count, values })
    }

    /// Column names, in order.
    pub fn columns(&self) -> &'a [String] {
        self.columns
    }

    /// How many rows there are.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Row `index`: one value per column.
    pub fn row(&self, index: usize) -> &[V] {
        let width = self.columns.len();
        &self.values[index * width..(index + 1) * width]
    }

    /// The rows, in order.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[V]> {
        (0..self.count).map(|index| self.row(index))
    }
}

/// `rows` in the packed form, as the host packs them: for a connector's tests, whose
/// fake database answers `query-packed` with rows written as values.
pub fn pack(rows: &Rows) -> PackedRows {
    let mut data = Vec::new();
    for value in rows.rows.iter().flatten() {
        let counted = |data: &mut Vec<u8>, tag: u8, bytes: &[u8]| {
            data.push(tag);
            data.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            data.extend_from_slice(bytes);
        };
        match value {
            Value::Null => data.push(NULL),
            Value::Boolean(v) => data.extend_from_slice(&[BOOLEAN, u8::from(*v)]),
            Value::Int(v) => data.extend_from_slice(&[&[INT], v.to_le_bytes().as_slice()].concat()),
            Value::Float(v) => data.extend_from_slice(&[&[FLOAT], v.to_le_bytes().as_slice()].concat()),
            Value::Text(v) => counted(&mut data, TEXT, v.as_bytes()),
            Value::Bytes(v) => counted(&mut data, BYTES, v),
            Value::Json(v) => counted(&mut data, JSON, v.as_bytes()),
            Value::Timestamp(v) => data.extend_from_slice(&[&[TIMESTAMP], v.to_le_bytes().as_slice()].concat()),
        }
    }
    PackedRows { columns: rows.columns.clone(), count: rows.rows.len() as u32, data }
}

/// What is left of the buffer.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn value(&mut self) -> Result<ValueRef<'a>, String> {
        let [tag] = self.take()?;
        Ok(match tag {
            NULL => ValueRef::Null,
            BOOLEAN => match self.take()? {
                [0] => ValueRef::Boolean(false),
                [1] => ValueRef::Boolean(true),
                [other] => return Err(format!("a boolean of {other} (0 or 1)")),
            },
            INT => ValueRef::Int(i64::from_le_bytes(self.take()?)),
            FLOAT => ValueRef::Float(f64::from_le_bytes(self.take()?)),
            TEXT => ValueRef::Text(self.text()?),
            BYTES => ValueRef::Bytes(self.counted()?),
            JSON => ValueRef::Json(self.text()?),
            TIMESTAMP => ValueRef::Timestamp(i64::from_le_bytes(self.take()?)),
            other => return Err(format!("unknown tag {other} (0 to 7, the cases of value in order)")),
        })
    }

    pub(crate) fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let (bytes, rest) = self.bytes.split_first_chunk().ok_or("the buffer ends inside a value")?;
        self.bytes = rest;
        Ok(*bytes)
    }

    pub(crate) fn counted(&mut self) -> Result<&'a [u8], String> {
        let length = u32::from_le_bytes(self.take()?) as usize;
        if length > self.bytes.len() {
            return Err(format!("a length of {length} with {} bytes left", self.bytes.len()));
        }
        let (bytes, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(bytes)
    }

    pub(crate) fn text(&mut self) -> Result<&'a str, String> {
        std::str::from_utf8(self.counted()?).map_err(|e| format!("text that is not UTF-8 ({e})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Rows {
        Rows {
            columns: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            rows: vec![
                vec![Value::Null, Value::Boolean(true), Value::Int(-3), Value::Float(1.5)],
                vec![
                    Value::Text("é".into()),
                    Value::Bytes(vec![0, 255]),
                    Value::Json("{}".into()),
                    Value::Timestamp(7),
                ],
            ],
        }
    }

    #[test]
    fn packed_rows_read_back_as_the_values_they_were() {
        let rows = every_kind();
        let packed = pack(&rows);
        let table = Table::of(&packed).unwrap();
        assert_eq!((table.len(), table.columns()), (2, rows.columns.as_slice()));
        for (got, want) in table.rows().zip(&rows.rows) {
            assert_eq!(got, want.iter().map(ValueRef::from).collect::<Vec<_>>().as_slice());
        }
    }

    #[test]
    fn the_encoding_is_the_one_in_the_wit() {
        let rows =
            Rows { columns: vec!["x".into(), "y".into()], rows: vec![vec![Value::Int(1), Value::Text("hi".into())]] };
        let packed = pack(&rows);
        assert_eq!(packed.data, [&[2u8][..], &1i64.to_le_bytes(), &[4, 2, 0, 0, 0], b"hi"].concat());
        assert_eq!(packed.count, 1);
    }

    #[test]
    fn a_buffer_that_does_not_decode_is_an_error_naming_where() {
        let good = pack(&every_kind());
        let cut = PackedRows { data: good.data[..good.data.len() - 1].to_vec(), ..good.clone() };
        let error = Table::of(&cut).unwrap_err();
        assert!(error.starts_with("packed rows: row 1, column 3"), "{error}");
        let long = PackedRows { data: [good.data.as_slice(), &[0]].concat(), ..good.clone() };
        assert!(Table::of(&long).unwrap_err().contains("1 bytes after the last of 2 rows"));
        let tag = PackedRows { data: vec![9], count: 1, columns: vec!["a".into()] };
        assert!(Table::of(&tag).unwrap_err().contains("unknown tag 9"));
        let not_text = PackedRows { data: vec![4, 1, 0, 0, 0, 0xff], count: 1, columns: vec!["a".into()] };
        assert!(Table::of(&not_text).unwrap_err().contains("not UTF-8"));
        let huge = PackedRows { data: vec![], count: u32::MAX, columns: vec!["a".into(); 3] };
        assert!(Table::of(&huge).unwrap_err().contains("row 0, column 0"));
    }
}
