//! A query's rows in the packed form of `packed-rows` (`wit/postgres.wit`), written
//! from the driver's rows as they arrive: each value straight from the bytes the
//! server sent, with no `Value` or `String` made for it.
//!
//! The list form `rows` (what `query` returns) is read back out of the same buffer,
//! so that the two forms come from one conversion and cannot disagree.

use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

use super::POSTGRES_EPOCH_MICROS;
use super::numeric::NumericText;
use ferry_contract::wit::postgres::Value;

/// The tag of each case of `value`, in the WIT's order.
const NULL: u8 = 0;
const BOOLEAN: u8 = 1;
const INT: u8 = 2;
const FLOAT: u8 = 3;
const TEXT: u8 = 4;
const BYTES: u8 = 5;
const JSON: u8 = 6;
const TIMESTAMP: u8 = 7;

/// Rows packed one after the other.
#[derive(Debug, Default)]
pub struct Packer {
    pub data: Vec<u8>,
    pub count: u32,
}

impl Packer {
    /// Append `row`, whose columns are all of types `super::readable` accepts.
    pub fn push(&mut self, row: &Row) -> Result<(), tokio_postgres::Error> {
        for index in 0..row.len() {
            self.value(row, index)?;
        }
        self.count += 1;
        Ok(())
    }

    fn value(&mut self, row: &Row, i: usize) -> Result<(), tokio_postgres::Error> {
        let out = &mut self.data;
        match *row.columns()[i].type_() {
            Type::BOOL => fixed(out, BOOLEAN, row.try_get::<_, Option<bool>>(i)?.map(|v| [u8::from(v)])),
            Type::INT2 => int(out, row.try_get::<_, Option<i16>>(i)?.map(i64::from)),
            Type::INT4 => int(out, row.try_get::<_, Option<i32>>(i)?.map(i64::from)),
            Type::INT8 => int(out, row.try_get::<_, Option<i64>>(i)?),
            Type::OID => int(out, row.try_get::<_, Option<u32>>(i)?.map(i64::from)),
            Type::FLOAT4 => float(out, row.try_get::<_, Option<f32>>(i)?.map(f64::from)),
            Type::FLOAT8 => float(out, row.try_get::<_, Option<f64>>(i)?),
            Type::BYTEA => counted(out, BYTES, row.try_get::<_, Option<&[u8]>>(i)?),
            Type::JSON | Type::JSONB => counted(out, JSON, row.try_get::<_, Option<JsonText>>(i)?.map(|j| j.0)),
            // Exact, as the decimal text PostgreSQL prints: never through a float.
            Type::NUMERIC => {
                let text = row.try_get::<_, Option<NumericText>>(i)?;
                counted(out, TEXT, text.as_ref().map(|n| n.0.as_bytes()))
            }
            Type::TIMESTAMP | Type::TIMESTAMPTZ => {
                fixed(out, TIMESTAMP, row.try_get::<_, Option<Micros>>(i)?.map(|t| t.0.to_le_bytes()))
            }
            // The text types, and `unknown` (a literal's type), which is read as text.
            _ => counted(out, TEXT, row.try_get::<_, Option<&str>>(i)?.map(str::as_bytes)),
        }
        Ok(())
    }
}

fn int(out: &mut Vec<u8>, value: Option<i64>) {
    fixed(out, INT, value.map(i64::to_le_bytes));
}

fn float(out: &mut Vec<u8>, value: Option<f64>) {
    fixed(out, FLOAT, value.map(f64::to_le_bytes));
}

/// A value of a fixed size: its tag and bytes, or NULL.
fn fixed<const N: usize>(out: &mut Vec<u8>, tag: u8, bytes: Option<[u8; N]>) {
    match bytes {
        Some(bytes) => {
            out.push(tag);
            out.extend_from_slice(&bytes);
        }
        None => out.push(NULL),
    }
}

/// A value of any length: its tag, length and bytes, or NULL.
fn counted(out: &mut Vec<u8>, tag: u8, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            out.push(tag);
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        None => out.push(NULL),
    }
}

/// The rows a [`Packer`] wrote, each of `columns` values, as the list form.
pub fn unpack(columns: usize, count: u32, data: &[u8]) -> Vec<Vec<Value>> {
    let mut reader = Reader { data, at: 0 };
    (0..count).map(|_| (0..columns).map(|_| reader.value()).collect()).collect()
}

/// A place in a buffer a [`Packer`] wrote (so every read is in bounds).
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn value(&mut self) -> Value {
        match self.take::<1>()[0] {
            NULL => Value::Null,
            BOOLEAN => Value::Boolean(self.take::<1>()[0] != 0),
            INT => Value::Int(i64::from_le_bytes(self.take())),
            FLOAT => Value::Float(f64::from_le_bytes(self.take())),
            TEXT => Value::Text(self.text()),
            BYTES => Value::Bytes(self.counted().to_vec()),
            JSON => Value::Json(self.text()),
            TIMESTAMP => Value::Timestamp(i64::from_le_bytes(self.take())),
            other => unreachable!("no tag {other} is written"),
        }
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        let bytes = self.data[self.at..self.at + N].try_into().expect("N bytes");
        self.at += N;
        bytes
    }

    fn counted(&mut self) -> &[u8] {
        let length = u32::from_le_bytes(self.take()) as usize;
        self.at += length;
        &self.data[self.at - length..self.at]
    }

    fn text(&mut self) -> String {
        String::from_utf8(self.counted().to_vec()).expect("packed from UTF-8")
    }
}

/// The bytes the server sent for `row`'s values, what packing it costs at least.
pub fn raw_size(row: &Row) -> u64 {
    (0..row.len()).map(|i| row.try_get::<_, RawSize>(i).map_or(0, |size| size.0)).sum()
}

/// The size of a value as the server sent it, of any type (NULL: none).
struct RawSize(u64);

impl<'a> FromSql<'a> for RawSize {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawSize(raw.len() as u64))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawSize(0))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A `json` or `jsonb` column's document, as text borrowed from the row.
pub struct JsonText<'a>(pub &'a [u8]);

impl<'a> FromSql<'a> for JsonText<'a> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let text = match *ty {
            Type::JSONB => raw.split_first().filter(|(version, _)| **version == 1).map(|(_, text)| text),
            _ => Some(raw),
        };
        let text = text.ok_or("an unknown jsonb format")?;
        std::str::from_utf8(text)?;
        Ok(JsonText(text))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSON | Type::JSONB)
    }
}

/// A `timestamp` or `timestamptz` column, in microseconds since the Unix epoch.
pub struct Micros(pub i64);

impl<'a> FromSql<'a> for Micros {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let since_2000 = i64::from_sql(&Type::INT8, raw).map_err(|_| format!("an unreadable {ty}"))?;
        // ±infinity are kept at the ends of the range.
        Ok(Micros(since_2000.saturating_add(POSTGRES_EPOCH_MICROS)))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::TIMESTAMP | Type::TIMESTAMPTZ)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_packed_reads_back_as_the_list_form() {
        let mut data = Vec::new();
        fixed(&mut data, BOOLEAN, Some([1]));
        int(&mut data, Some(-7));
        float(&mut data, Some(0.5));
        counted(&mut data, TEXT, Some("é".as_bytes()));
        counted(&mut data, BYTES, Some(&[0, 255]));
        counted(&mut data, JSON, Some(b"[1]"));
        fixed(&mut data, TIMESTAMP, Some(42i64.to_le_bytes()));
        int(&mut data, None);
        // Tags, fixed widths and lengths as `wit/postgres.wit` gives them.
        assert_eq!(&data[..2], [1, 1]);
        assert_eq!(&data[2..11], [[2].as_slice(), &(-7i64).to_le_bytes()].concat());
        assert_eq!(&data[20..27], [4, 2, 0, 0, 0, 0xc3, 0xa9]);
        assert_eq!(data.last(), Some(&NULL));
        let rows = unpack(4, 2, &data);
        assert_eq!(
            rows,
            [
                vec![Value::Boolean(true), Value::Int(-7), Value::Float(0.5), Value::Text("é".into())],
                vec![Value::Bytes(vec![0, 255]), Value::Json("[1]".into()), Value::Timestamp(42), Value::Null],
            ]
        );
    }

    #[test]
    fn columns_read_back_what_parameters_write() {
        let raw = 42i64.to_be_bytes();
        assert_eq!(Micros::from_sql(&Type::TIMESTAMP, &raw).unwrap().0, POSTGRES_EPOCH_MICROS + 42);
        assert_eq!(JsonText::from_sql(&Type::JSONB, b"\x01[1]").unwrap().0, b"[1]");
        assert_eq!(JsonText::from_sql(&Type::JSON, b"[1]").unwrap().0, b"[1]");
        assert!(JsonText::from_sql(&Type::JSONB, b"\x02[1]").is_err());
        assert!(JsonText::from_sql(&Type::JSON, b"\xff").is_err());
    }
}
