//! Sizes in the config are written the way people say them: `"64MiB"`, `"512KiB"`,
//! or a plain number of bytes.
//!
//! Parsed here, not by a crate: the grammar is a whole number and one of five
//! case-sensitive binary units, and what the crates that parse sizes accept beyond it
//! is what ferry refuses on purpose. `bytesize` and `parse-size` (both tried) take
//! `"64MB"` (64,000,000 bytes to the first; 64 MiB to the second in binary mode, or
//! 64,000,000 in its default), `"1.5GiB"` and `"64mib"`; `bytesize` turns
//! `"99999999999999GiB"` into 16 EiB rather than an error, and `parse-size`'s errors
//! (`InvalidDigit`) say neither which unit is unknown nor how to write the size. A
//! limit misread by a factor of 1.05 is worse than one refused with the units to use.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn kib(n: u64) -> Self {
        ByteSize(n * 1024)
    }

    pub const fn mib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024)
    }

    pub const fn gib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024 * 1024)
    }

    pub const fn tib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024 * 1024 * 1024)
    }

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// As a `usize`, saturating (a limit larger than the address space is no limit).
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (size, unit) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{} {unit}", self.0 / size);
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// Parse `"64MiB"`, `"64 MiB"`, `"100"`, `"100B"`; units are binary (KiB, MiB, GiB, TiB).
pub fn parse(text: &str) -> Result<ByteSize, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!("invalid size {text:?}: a size cannot be negative"));
    }
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!("invalid size {text:?}: it must start with a number"));
    }
    if unit.starts_with(['.', ',']) {
        return Err(format!("invalid size {text:?}: write a whole number, e.g. \"1536KiB\" for 1.5 MiB"));
    }
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        other => {
            return Err(format!("invalid size {text:?}: unknown unit {other:?}; use B, KiB, MiB, GiB or TiB"));
        }
    };
    let too_large = || format!("invalid size {text:?}: too large");
    let number: u64 = number.parse().map_err(|_| too_large())?;
    number.checked_mul(factor).map(ByteSize).ok_or_else(too_large)
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A size is an integer (bytes) or a string with a unit; anything else is an error
/// that says which, rather than serde's "did not match any variant".
struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = ByteSize;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a size: a number of bytes, or a string like \"64MiB\"")
    }

    fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<ByteSize, E> {
        Ok(ByteSize(bytes))
    }

    fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<ByteSize, E> {
        u64::try_from(bytes)
            .map(ByteSize)
            .map_err(|_| E::custom(format!("invalid size {bytes}: a size cannot be negative")))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<ByteSize, E> {
        Err(E::custom(format!("invalid size {value}: write a whole number of bytes, or a string like \"64MiB\"")))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<ByteSize, E> {
        parse(text).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::{ByteSize, parse};

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse("100"), Ok(ByteSize(100)));
        assert_eq!(parse("64MiB"), Ok(ByteSize(64 << 20)));
        assert_eq!(parse("2 GiB"), Ok(ByteSize(2 << 30)));
        assert_eq!(parse("1TiB"), Ok(ByteSize::tib(1)));
        assert_eq!(parse("512KiB").unwrap().to_string(), "512 KiB");
        assert!(parse("64MB").unwrap_err().contains("unknown unit \"MB\""));
        assert!(parse("lots").unwrap_err().contains("must start with a number"));
        assert!(parse("99999999999999GiB").unwrap_err().contains("too large"));
        assert!(parse("99999999999999999999999").unwrap_err().contains("too large"));
        assert!(parse("-5MiB").unwrap_err().contains("a size cannot be negative"));
        assert!(parse("1.5GiB").unwrap_err().contains("whole number"));
    }

    #[derive(Debug, serde::Deserialize)]
    struct Holder {
        #[allow(dead_code)]
        size: ByteSize,
    }

    fn read(value: &str) -> Result<ByteSize, String> {
        toml::from_str::<Holder>(&format!("size = {value}")).map(|h| h.size).map_err(|e| e.to_string())
    }

    #[test]
    fn integers_and_strings_are_sizes_and_anything_else_says_what_is_wrong() {
        assert_eq!(read("1048576"), Ok(ByteSize::mib(1)));
        assert_eq!(read("\"1MiB\""), Ok(ByteSize::mib(1)));
        let negative = read("-5").unwrap_err();
        assert!(negative.contains("invalid size -5: a size cannot be negative"), "{negative}");
        let float = read("1.5").unwrap_err();
        assert!(float.contains("invalid size 1.5: write a whole number"), "{float}");
        let boolean = read("true").unwrap_err();
        assert!(boolean.contains("a size: a number of bytes, or a string like \"64MiB\""), "{boolean}");
    }
}
