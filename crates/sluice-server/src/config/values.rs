//! Setting values as an operator writes them: a duration above zero (or `off`), a count
//! within bounds. Each parser returns the problem as text, for [`crate::config::settings`]
//! to report with the setting's name.

use sluice_core::config::parse_duration;
use std::time::Duration;

/// `text` as a duration longer than 0.
pub(crate) fn positive(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err("must be longer than 0".to_owned()),
        duration => Ok(duration),
    }
}

pub(crate) fn positive_or_off(text: &str) -> Result<Option<Duration>, String> {
    if text == "off" { Ok(None) } else { positive(text).map(Some) }
}

/// `value`, when it is within `min..=max`.
pub(crate) fn within(value: usize, min: usize, max: usize) -> Result<usize, String> {
    if (min..=max).contains(&value) { Ok(value) } else { Err(format!("must be between {min} and {max}")) }
}
