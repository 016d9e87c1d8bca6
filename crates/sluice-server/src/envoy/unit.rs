//! The time units of a `rate_limit` block.

use std::fmt;
use std::time::Duration;

/// The window of a `rate_limit` rule: `requests_per_unit` requests per one of these.
///
/// envoyproxy/ratelimit reads the unit case-insensitively (`second` and `SECOND` are the
/// same). Months and years are refused: they vary in length, so no fixed window fits them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// Sixty seconds.
    Minute,
    /// Sixty minutes.
    Hour,
    /// 24 hours (windows start at midnight UTC).
    Day,
    /// Seven days (windows start on Thursday at midnight UTC, as the Unix epoch did).
    Week,
}

/// The units in the order they are listed in messages.
const UNITS: [Unit; 5] = [Unit::Second, Unit::Minute, Unit::Hour, Unit::Day, Unit::Week];

impl Unit {
    /// The unit called `name`, in any case.
    ///
    /// # Errors
    ///
    /// A message naming the units that exist, when `name` is not one of them.
    pub(super) fn parse(name: &str) -> Result<Unit, String> {
        let lower = name.to_ascii_lowercase();
        if let Some(unit) = UNITS.into_iter().find(|unit| unit.as_str() == lower) {
            return Ok(unit);
        }
        let known = UNITS.map(Unit::as_str).join(", ");
        if matches!(lower.as_str(), "month" | "year") {
            return Err(format!("unit \"{name}\" is not supported: months and years vary in length ({known})"));
        }
        Err(format!("unknown unit \"{name}\" ({known})"))
    }

    /// The unit's name as written in files, lowercase.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
        }
    }

    /// The length of one unit.
    pub fn duration(self) -> Duration {
        let seconds = match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
        };
        Duration::from_secs(seconds)
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_any_case_and_refuses_variable_lengths() {
        assert_eq!(Unit::parse("SECOND"), Ok(Unit::Second));
        assert_eq!(Unit::parse("Week"), Ok(Unit::Week));
        assert_eq!(Unit::Week.duration(), Duration::from_secs(604_800));
        let unknown = Unit::parse("fortnight").unwrap_err();
        assert_eq!(unknown, "unknown unit \"fortnight\" (second, minute, hour, day, week)");
        assert!(Unit::parse("MONTH").unwrap_err().contains("vary in length"));
    }
}
