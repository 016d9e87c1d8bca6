//! Sizes in bytes as an operator writes them: `1073741824`, `512MiB`, `1GiB`, `64KB`.

use serde::Deserialize;

/// A size in the configuration file: a number of bytes, or a number with a unit.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawSize {
    Bytes(u64),
    Text(String),
}

impl From<&str> for RawSize {
    fn from(text: &str) -> RawSize {
        RawSize::Text(text.to_owned())
    }
}

impl RawSize {
    /// A size as a flag or variable gives it: text, read when the settings are resolved
    /// (a `Result` that is never an error, since clap's value parsers return one).
    pub(crate) fn from_flag(text: &str) -> Result<RawSize, std::convert::Infallible> {
        Ok(RawSize::from(text))
    }

    /// The size in bytes.
    pub(crate) fn bytes(&self) -> Result<usize, String> {
        match self {
            RawSize::Bytes(bytes) => usize::try_from(*bytes).map_err(|_| format!("{bytes} bytes is too large")),
            RawSize::Text(text) => parse_size(text),
        }
    }
}

/// The units a size may carry: binary (`KiB` = 1024) and decimal (`KB` = 1000).
const UNITS: [(&str, u64); 9] = [
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];

/// Parses a whole number of bytes with an optional unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`,
/// `KB`, `MB`, `GB`, `TB`), such as `512MiB`.
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = (&text[..split], text[split..].trim());
    let unknown = || format!("`{text}` is not a size such as 512MiB, 1GiB or 1073741824");
    let number: u64 = number.parse().map_err(|_| unknown())?;
    let factor = match unit {
        "" => 1,
        unit => UNITS.iter().find(|(name, _)| *name == unit).map(|(_, factor)| *factor).ok_or_else(unknown)?,
    };
    let bytes = number.checked_mul(factor).ok_or_else(|| format!("`{text}` is too large"))?;
    usize::try_from(bytes).map_err(|_| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_with_binary_and_decimal_units() {
        assert_eq!(parse_size("1073741824"), Ok(1 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("10B"), Ok(10));
        for bad in ["", "MiB", "1.5GiB", "1gib", "-1", "1 parsec", "99999999999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
