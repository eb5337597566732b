//! `numeric` carried exactly, as decimal text: a column's binary form (what the server
//! sends) written out as the text PostgreSQL itself would print, and a parameter sent
//! to the server as text, which it parses itself. Never through a float: a `numeric`
//! has up to 131,072 digits before the point and 16,383 after.
//!
//! The binary form (PostgreSQL's `numeric_send`), big-endian: `ndigits` (i16), `weight`
//! (i16, the power of 10,000 of the first digit), `sign` (u16), `dscale` (u16, the
//! digits shown after the point), then `ndigits` digits of base 10,000 (i16 each).
//! Digits before the first and after the last are zeros.

use std::fmt::Write as _;

use tokio_postgres::types::{FromSql, Type};

/// The `sign` of a positive number, and of the special values.
const POSITIVE: u16 = 0x0000;
const NEGATIVE: u16 = 0x4000;
const NAN: u16 = 0xC000;
const PLUS_INFINITY: u16 = 0xD000;
const MINUS_INFINITY: u16 = 0xF000;

/// Decimal digits in one base-10,000 digit.
const DIGITS_PER_WORD: i32 = 4;

/// A `numeric` column's value as decimal text.
pub struct NumericText(pub String);

impl<'a> FromSql<'a> for NumericText {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(NumericText(decimal_text(raw)?))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

/// The decimal text of the binary `numeric` in `raw`, as PostgreSQL prints it
/// (`-0.50` with a scale of 2, `NaN`, `Infinity`, `-Infinity`), or what is wrong
/// with it.
fn decimal_text(raw: &[u8]) -> Result<String, String> {
    let word = |at: usize| -> Result<u16, String> {
        raw.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| format!("a numeric cut short ({} bytes)", raw.len()))
    };
    let ndigits = word(0)? as i16;
    let weight = i32::from(word(2)? as i16);
    let sign = word(4)?;
    let dscale = i32::from(word(6)?);
    let special = match sign {
        NAN => Some("NaN"),
        PLUS_INFINITY => Some("Infinity"),
        MINUS_INFINITY => Some("-Infinity"),
        POSITIVE | NEGATIVE => None,
        other => return Err(format!("a numeric of an unknown sign {other:#06x}")),
    };
    if let Some(special) = special {
        return Ok(special.to_string());
    }
    if ndigits < 0 || raw.len() != 8 + 2 * ndigits as usize {
        return Err(format!("a numeric of {ndigits} digits in {} bytes", raw.len()));
    }
    let digits: Vec<u16> = (0..ndigits as usize).map(|i| word(8 + 2 * i)).collect::<Result<_, _>>()?;
    if let Some(digit) = digits.iter().find(|d| **d >= 10_000) {
        return Err(format!("a numeric digit {digit} out of base 10000"));
    }
    // The base-10,000 digit at `power` (10,000^power), zero outside those sent.
    let digit_at = |power: i32| -> u16 {
        let index = weight - power;
        if (0..i32::from(ndigits)).contains(&index) { digits[index as usize] } else { 0 }
    };
    let mut text = String::new();
    if sign == NEGATIVE {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        write!(text, "{}", digit_at(weight)).expect("writing to a String");
        for power in (0..weight).rev() {
            write!(text, "{:04}", digit_at(power)).expect("writing to a String");
        }
    }
    if dscale > 0 {
        text.push('.');
        let mut left = dscale;
        let mut power = -1;
        while left > 0 {
            let digit = digit_at(power);
            let four = [digit / 1000, digit / 100 % 10, digit / 10 % 10, digit % 10];
            let shown = left.min(DIGITS_PER_WORD) as usize;
            // Each a decimal digit (< 10, as every base-10,000 digit was checked).
            text.extend(four[..shown].iter().map(|d| char::from(b'0' + *d as u8)));
            left -= DIGITS_PER_WORD;
            power -= 1;
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary form of a numeric.
    fn raw(weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut raw = Vec::new();
        for word in [digits.len() as u16, weight as u16, sign, dscale].into_iter().chain(digits.iter().copied()) {
            raw.extend_from_slice(&word.to_be_bytes());
        }
        raw
    }

    fn text(raw: &[u8]) -> String {
        decimal_text(raw).unwrap()
    }

    #[test]
    fn numerics_read_as_postgresql_prints_them() {
        // 123456789012345678901234567890.000000001: weight 7, eight digits before the point.
        let big = raw(7, POSITIVE, 9, &[12, 3456, 7890, 1234, 5678, 9012, 3456, 7890, 0, 0, 1000]);
        assert_eq!(text(&big), "123456789012345678901234567890.000000001");
        assert_eq!(text(&raw(-1, NEGATIVE, 1, &[5000])), "-0.5");
        assert_eq!(text(&raw(-1, NEGATIVE, 2, &[5000])), "-0.50");
        assert_eq!(text(&raw(0, POSITIVE, 0, &[])), "0");
        assert_eq!(text(&raw(0, POSITIVE, 3, &[])), "0.000");
        // Zeros the server leaves out: trailing whole digits, leading fraction digits.
        assert_eq!(text(&raw(2, POSITIVE, 0, &[7])), "700000000");
        assert_eq!(text(&raw(-3, POSITIVE, 12, &[12])), "0.000000000012");
        assert_eq!(text(&raw(1, POSITIVE, 4, &[1, 2, 3400])), "10002.3400");
        assert_eq!(text(&raw(0, NAN, 0, &[])), "NaN");
        assert_eq!(text(&raw(0, PLUS_INFINITY, 0, &[])), "Infinity");
        assert_eq!(text(&raw(0, MINUS_INFINITY, 0, &[])), "-Infinity");
    }

    #[test]
    fn a_malformed_numeric_is_an_error_not_a_panic() {
        assert_eq!(decimal_text(&[0, 1]).unwrap_err(), "a numeric cut short (2 bytes)");
        let cut = &raw(0, POSITIVE, 0, &[1, 2])[..10];
        assert_eq!(decimal_text(cut).unwrap_err(), "a numeric of 2 digits in 10 bytes");
        assert!(decimal_text(&raw(0, 0x1234, 0, &[])).unwrap_err().contains("unknown sign 0x1234"));
        assert!(decimal_text(&raw(0, POSITIVE, 0, &[10_000])).unwrap_err().contains("10000"));
        // Read through the driver's trait, as a row's column is.
        assert_eq!(NumericText::from_sql(&Type::NUMERIC, &raw(-1, NEGATIVE, 1, &[5000])).unwrap().0, "-0.5");
    }
}
