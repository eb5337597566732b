//! Sizes in the config are written the way people say them: `"64MiB"`, `"512KiB"`,
//! or a plain number of bytes.

use serde::{Deserialize, Deserializer};

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
        const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (size, unit) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{} {unit}", self.0 / size);
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// Parse `"64MiB"`, `"64 MiB"`, `"100"`, `"100B"`; units are binary (KiB, MiB, GiB).
pub fn parse(text: &str) -> Result<ByteSize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("invalid size {text:?}: it must start with a number"))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!("invalid size {text:?}: unknown unit {other:?}; use B, KiB, MiB or GiB"));
        }
    };
    number.checked_mul(factor).map(ByteSize).ok_or_else(|| format!("invalid size {text:?}: too large"))
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Bytes(u64),
            Text(String),
        }
        match Written::deserialize(deserializer)? {
            Written::Bytes(n) => Ok(ByteSize(n)),
            Written::Text(text) => parse(&text).map_err(serde::de::Error::custom),
        }
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
        assert_eq!(parse("512KiB").unwrap().to_string(), "512 KiB");
        assert!(parse("64MB").unwrap_err().contains("unknown unit \"MB\""));
        assert!(parse("lots").unwrap_err().contains("must start with a number"));
        assert!(parse("99999999999999GiB").unwrap_err().contains("too large"));
    }
}
