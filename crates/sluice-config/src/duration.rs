//! Durations written with a unit: `250ms`, `1500000us`, `15m`.

use std::time::Duration;

/// Parses a duration written as a whole number and a unit: `us` (or `µs`), `ms`, `s`, `m`,
/// `h`, `d`.
///
/// # Errors
///
/// A message saying what is wrong, for a missing or unknown unit, a number that is not
/// whole, or a duration too long to count in microseconds.
///
/// # Examples
///
/// ```
/// use sluice_config::parse_duration;
/// use std::time::Duration;
///
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
/// assert!(parse_duration("15").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let expected = "must be a whole number with a unit (us, ms, s, m, h, d), such as 250ms";
    if number.is_empty() || unit.is_empty() {
        return Err(expected.to_owned());
    }
    let micros_per_unit: u64 = match unit {
        "us" | "µs" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => return Err(format!("unknown unit `{unit}`: {expected}")),
    };
    let too_long = || "is too long".to_owned();
    let count: u64 = number.parse().map_err(|_| too_long())?;
    let micros = count.checked_mul(micros_per_unit).ok_or_else(too_long)?;
    Ok(Duration::from_micros(micros))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_unit_parses() {
        let cases = [("7us", 7), ("7µs", 7), ("7ms", 7_000), ("7s", 7_000_000), ("2m", 120_000_000)];
        for (text, micros) in cases {
            assert_eq!(parse_duration(text), Ok(Duration::from_micros(micros)), "{text}");
        }
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn bad_durations_say_why() {
        for text in ["", "ms", "15", "1.5s", "-1s", "10 parsecs", "99999999999999999999d"] {
            assert!(parse_duration(text).is_err(), "{text:?} should be refused");
        }
        assert!(parse_duration("3y").unwrap_err().contains("unknown unit `y`"));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse_duration(&text);
        }

        #[test]
        fn round_trips_microseconds(micros in 0u64..u64::MAX) {
            prop_assert_eq!(parse_duration(&format!("{micros}us")), Ok(Duration::from_micros(micros)));
        }
    }
}
