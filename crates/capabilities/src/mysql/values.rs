//! Values across the boundary: a guest's parameters into the server's, and a column's
//! value into the guest's, by the column's type (see `wit/mysql.wit`).

use ferry_contract::wit::mysql::Value;
use mysql_async::Value as Server;
use mysql_async::consts::ColumnType;

/// The character set number of binary strings (`BLOB`, `BINARY`, `VARBINARY`).
const BINARY: u16 = 63;

/// A guest's parameter, as the server binds it.
pub fn param(value: Value) -> Server {
    match value {
        Value::Null => Server::NULL,
        Value::Int(n) => Server::Int(n),
        Value::Uint(n) => Server::UInt(n),
        Value::Float(x) => Server::Double(x),
        Value::Text(text) => Server::Bytes(text.into_bytes()),
        Value::Bytes(bytes) => Server::Bytes(bytes),
    }
}

/// A column's value, for the guest, by the column's type and character set.
pub fn column(value: Server, kind: ColumnType, charset: u16) -> Value {
    match value {
        Server::NULL => Value::Null,
        Server::Int(n) => Value::Int(n),
        Server::UInt(n) => i64::try_from(n).map_or(Value::Uint(n), Value::Int),
        Server::Float(x) => Value::Float(f64::from(x)),
        Server::Double(x) => Value::Float(x),
        Server::Bytes(bytes) => {
            let textual = charset != BINARY || matches!(kind, ColumnType::MYSQL_TYPE_NEWDECIMAL | ColumnType::MYSQL_TYPE_DECIMAL | ColumnType::MYSQL_TYPE_JSON);
            if !textual {
                return Value::Bytes(bytes);
            }
            String::from_utf8(bytes).map_or_else(|not_utf8| Value::Bytes(not_utf8.into_bytes()), Value::Text)
        }
        Server::Date(year, month, day, hour, minute, second, micros) => {
            let date = format!("{year:04}-{month:02}-{day:02}");
            if kind == ColumnType::MYSQL_TYPE_DATE {
                return Value::Text(date);
            }
            Value::Text(format!("{date} {hour:02}:{minute:02}:{second:02}{}", fraction(micros)))
        }
        Server::Time(negative, days, hours, minutes, seconds, micros) => {
            let hours = u32::from(hours) + days * 24;
            let sign = if negative { "-" } else { "" };
            Value::Text(format!("{sign}{hours:02}:{minutes:02}:{seconds:02}{}", fraction(micros)))
        }
    }
}

/// `value` packed at the end of `data`, as `packed-rows` has it (`wit/mysql.wit`).
pub fn pack(value: &Value, data: &mut Vec<u8>) {
    let counted = |data: &mut Vec<u8>, tag: u8, bytes: &[u8]| {
        data.push(tag);
        data.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        data.extend_from_slice(bytes);
    };
    match value {
        Value::Null => data.push(0),
        Value::Int(n) => {
            data.push(1);
            data.extend_from_slice(&n.to_le_bytes());
        }
        Value::Uint(n) => {
            data.push(2);
            data.extend_from_slice(&n.to_le_bytes());
        }
        Value::Float(x) => {
            data.push(3);
            data.extend_from_slice(&x.to_le_bytes());
        }
        Value::Text(text) => counted(data, 4, text.as_bytes()),
        Value::Bytes(bytes) => counted(data, 5, bytes),
    }
}

/// `.ffffff` without trailing zeros; nothing for a whole second.
fn fraction(micros: u32) -> String {
    if micros == 0 {
        return String::new();
    }
    let digits = format!("{micros:06}");
    format!(".{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_cross_as_their_kind_says() {
        let text = |v: Server, kind, charset| column(v, kind, charset);
        assert_eq!(text(Server::UInt(u64::MAX), ColumnType::MYSQL_TYPE_LONGLONG, BINARY), Value::Uint(u64::MAX));
        assert_eq!(text(Server::UInt(7), ColumnType::MYSQL_TYPE_LONGLONG, BINARY), Value::Int(7));
        assert_eq!(text(Server::Bytes(b"-0.50".to_vec()), ColumnType::MYSQL_TYPE_NEWDECIMAL, BINARY), Value::Text("-0.50".into()));
        assert_eq!(text(Server::Bytes(vec![0xff]), ColumnType::MYSQL_TYPE_BLOB, BINARY), Value::Bytes(vec![0xff]));
        assert_eq!(text(Server::Bytes(b"hi".to_vec()), ColumnType::MYSQL_TYPE_VAR_STRING, 45), Value::Text("hi".into()));
        let at = Server::Date(2026, 12, 7, 10, 46, 16, 500_000);
        assert_eq!(text(at.clone(), ColumnType::MYSQL_TYPE_DATETIME, BINARY), Value::Text("2026-12-07 10:46:16.5".into()));
        assert_eq!(text(at, ColumnType::MYSQL_TYPE_DATE, BINARY), Value::Text("2026-12-07".into()));
        let time = Server::Time(true, 1, 2, 3, 4, 0);
        assert_eq!(text(time, ColumnType::MYSQL_TYPE_TIME, BINARY), Value::Text("-26:03:04".into()));
        assert_eq!(param(Value::Text("é".into())), Server::Bytes("é".as_bytes().to_vec()));
    }
}
