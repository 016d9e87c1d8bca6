//! Times written as text in logs, read and written by hand (no calendar crate): nginx's
//! `$time_local` (`10/Oct/2000:13:55:36 -0700`) and RFC 3339 (`2000-10-10T20:55:36.5Z`).
//! Both carry the writer's offset from UTC, which the replay keeps to show times as the
//! log's readers know them.

use sluice_core::Timestamp;
use std::fmt;

const MICROS_PER_SECOND: i64 = 1_000_000;

/// An offset east of UTC, in whole minutes as logs write it (`+0100`, `-07:00`, `Z`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UtcOffset {
    seconds: i32,
}

impl UtcOffset {
    /// UTC itself.
    pub(crate) const UTC: UtcOffset = UtcOffset { seconds: 0 };
}

impl fmt::Display for UtcOffset {
    /// `+01:00`, `-07:00`; `+00:00` for UTC.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.seconds < 0 { '-' } else { '+' };
        let minutes = self.seconds.unsigned_abs() / 60;
        write!(f, "{sign}{:02}:{:02}", minutes / 60, minutes % 60)
    }
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian; Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The civil date of a day counted from 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Reads the decimal number in `digits` (all ASCII digits, at most 18 of them).
fn number(digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    digits.iter().try_fold(0i64, |sum, &digit| digit.is_ascii_digit().then(|| sum * 10 + i64::from(digit - b'0')))
}

/// The timestamp of a UTC civil time, when the fields are in range and the time is not
/// before the epoch.
fn timestamp(date: (i64, i64, i64), time: (i64, i64, i64), micros: i64, offset: UtcOffset) -> Option<Timestamp> {
    let (year, month, day) = date;
    let (hour, minute, second) = time;
    let in_range = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..=23).contains(&hour)
        && (0..=59).contains(&minute)
        && (0..=60).contains(&second);
    if !in_range || !(0..=9999).contains(&year) {
        return None;
    }
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - i64::from(offset.seconds);
    let micros = seconds.checked_mul(MICROS_PER_SECOND)?.checked_add(micros)?;
    u64::try_from(micros).ok().map(Timestamp::from_micros)
}

/// The month number of an English three-letter abbreviation.
fn month_of(name: &[u8]) -> Option<i64> {
    const MONTHS: [&[u8; 3]; 12] =
        [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
    MONTHS.iter().position(|month| month.as_slice() == name).and_then(|index| i64::try_from(index + 1).ok())
}

/// A `+hhmm` / `-hhmm` (or `+hh:mm`) offset east of UTC.
fn offset(text: &[u8]) -> Option<UtcOffset> {
    let (sign, rest) = match text.split_first()? {
        (b'+', rest) => (1, rest),
        (b'-', rest) => (-1, rest),
        _ => return None,
    };
    let (hours, minutes) = match rest {
        [h1, h2, b':', m1, m2] | [h1, h2, m1, m2] => (number(&[*h1, *h2])?, number(&[*m1, *m2])?),
        _ => return None,
    };
    let seconds = i32::try_from(sign * (hours * 3600 + minutes * 60)).ok()?;
    (hours <= 23 && minutes <= 59).then_some(UtcOffset { seconds })
}

/// Parses nginx's and Apache's `$time_local`, `10/Oct/2000:13:55:36 -0700`: the time and
/// its offset.
pub(crate) fn parse_time_local(text: &[u8]) -> Option<(Timestamp, UtcOffset)> {
    let [d1, d2, b'/', m1, m2, m3, b'/', y1, y2, y3, y4, b':', h1, h2, b':', n1, n2, b':', s1, s2, b' ', zone @ ..] =
        text
    else {
        return None;
    };
    let date = (number(&[*y1, *y2, *y3, *y4])?, month_of(&[*m1, *m2, *m3])?, number(&[*d1, *d2])?);
    let time = (number(&[*h1, *h2])?, number(&[*n1, *n2])?, number(&[*s1, *s2])?);
    let offset = offset(zone)?;
    Some((timestamp(date, time, 0, offset)?, offset))
}

/// Parses an RFC 3339 time, `2000-10-10T20:55:36Z` with optional fractional seconds (kept
/// to the microsecond) and a `Z` or `±hh:mm` offset; `t` and a space may stand for `T`.
/// The time and its offset.
pub(crate) fn parse_rfc3339(text: &[u8]) -> Option<(Timestamp, UtcOffset)> {
    let [y1, y2, y3, y4, b'-', m1, m2, b'-', d1, d2, b'T' | b't' | b' ', h1, h2, b':', n1, n2, b':', s1, s2, rest @ ..] =
        text
    else {
        return None;
    };
    let date = (number(&[*y1, *y2, *y3, *y4])?, number(&[*m1, *m2])?, number(&[*d1, *d2])?);
    let time = (number(&[*h1, *h2])?, number(&[*n1, *n2])?, number(&[*s1, *s2])?);
    let (micros, zone) = fraction(rest)?;
    let offset = if matches!(zone, b"Z" | b"z") { UtcOffset::UTC } else { offset(zone)? };
    Some((timestamp(date, time, micros, offset)?, offset))
}

/// Splits `.123456789…` off the front of `rest`: the microseconds and what follows.
fn fraction(rest: &[u8]) -> Option<(i64, &[u8])> {
    let Some(digits) = rest.strip_prefix(b".") else {
        return Some((0, rest));
    };
    let count = digits.iter().take_while(|digit| digit.is_ascii_digit()).count();
    if count == 0 {
        return None;
    }
    let kept = &digits[..count.min(6)];
    let micros = number(kept)? * 10i64.pow(u32::try_from(6 - kept.len()).ok()?);
    Some((micros, &digits[count..]))
}

/// Writes `time` as RFC 3339 at `offset` (`Z` for UTC), to the second when it has no fraction.
pub(crate) fn format_rfc3339(time: Timestamp, offset: UtcOffset) -> String {
    let utc = i64::try_from(time.as_micros()).unwrap_or(i64::MAX);
    let micros = utc.saturating_add(i64::from(offset.seconds) * MICROS_PER_SECOND);
    let (seconds, fraction) = (micros.div_euclid(MICROS_PER_SECOND), micros.rem_euclid(MICROS_PER_SECOND));
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
    let whole = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}");
    let zone = if offset == UtcOffset::UTC { "Z".to_owned() } else { offset.to_string() };
    if fraction == 0 { format!("{whole}{zone}") } else { format!("{whole}.{fraction:06}{zone}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_time_local_with_its_offset() {
        // 10/Oct/2000:13:55:36 -0700 is 20:55:36 UTC: 971211336 seconds after the epoch.
        let (time, offset) = parse_time_local(b"10/Oct/2000:13:55:36 -0700").unwrap();
        assert_eq!((time.as_micros(), offset.seconds), (971_211_336_000_000, -7 * 3600));
        assert_eq!(format_rfc3339(time, UtcOffset::UTC), "2000-10-10T20:55:36Z");
        assert_eq!(format_rfc3339(time, offset), "2000-10-10T13:55:36-07:00");
        assert_eq!(parse_time_local(b"01/Jan/1970:00:00:00 +0000").unwrap(), (Timestamp::EPOCH, UtcOffset::UTC));
        assert!(parse_time_local(b"10/Foo/2000:13:55:36 -0700").is_none());
        assert!(parse_time_local(b"10/Oct/2000:13:55:36").is_none());
        assert!(parse_time_local(b"32/Oct/2000:13:55:36 +0000").is_none());
    }

    #[test]
    fn reads_rfc3339_with_fractions_and_offsets() {
        let time = |text: &str| parse_rfc3339(text.as_bytes()).map(|(time, _)| time.as_micros());
        assert_eq!(time("2000-10-10T20:55:36Z"), Some(971_211_336_000_000));
        assert_eq!(time("2000-10-10T13:55:36-07:00"), Some(971_211_336_000_000));
        assert_eq!(time("2000-10-10 20:55:36.25Z"), Some(971_211_336_250_000));
        assert_eq!(time("2000-10-10T20:55:36.123456789+00:00"), Some(971_211_336_123_456));
        assert_eq!(time("2000-10-10T20:55:36"), None);
        assert_eq!(time("2000-10-10T20:55:36.Z"), None);
        assert_eq!(time("1969-12-31T23:59:59Z"), None);
        let (_, offset) = parse_rfc3339(b"2000-10-10T21:25:36+00:30").unwrap();
        assert_eq!((offset.seconds, offset.to_string()), (1800, "+00:30".to_owned()));
    }

    #[test]
    fn formats_fractions_only_when_present() {
        assert_eq!(format_rfc3339(Timestamp::from_micros(1_500_000), UtcOffset::UTC), "1970-01-01T00:00:01.500000Z");
        assert_eq!(format_rfc3339(Timestamp::from_micros(951_782_400_000_000), UtcOffset::UTC), "2000-02-29T00:00:00Z");
        // 23:30 UTC is the next day at +01:00.
        let (late, _) = parse_rfc3339(b"2000-02-28T23:30:00Z").unwrap();
        assert_eq!(format_rfc3339(late, UtcOffset { seconds: 3600 }), "2000-02-29T00:30:00+01:00");
    }

    proptest! {
        #[test]
        fn never_panic(text in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = parse_time_local(&text);
            let _ = parse_rfc3339(&text);
        }

        #[test]
        fn rfc3339_round_trips(micros in 86_400_000_000u64..253_402_214_399_000_000, minutes in -1439i32..=1439) {
            let (time, offset) = (Timestamp::from_micros(micros), UtcOffset { seconds: minutes * 60 });
            let expected = if minutes == 0 { UtcOffset::UTC } else { offset };
            prop_assert_eq!(parse_rfc3339(format_rfc3339(time, offset).as_bytes()), Some((time, expected)));
        }
    }
}
