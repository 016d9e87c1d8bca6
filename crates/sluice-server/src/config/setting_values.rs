//! How the service settings' values are read from their text: addresses, modes, the
//! dashboard's access, the log format. Each returns the problem as text, reported with the
//! setting's name.

use sluice_redis::{FailureMode, ModuleUse};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Who may open the dashboard and its endpoints (`docs/service.md`, "The dashboard").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UiAccess {
    /// Clients on the loopback interface only (the default): the live view shows callers' keys.
    Loopback,
    /// Every client that reaches the HTTP port.
    Open,
    /// Nobody: the dashboard's paths answer 404.
    Off,
}

impl UiAccess {
    /// `loopback`, `open` or `off`.
    pub(crate) fn parse(text: &str) -> Result<UiAccess, String> {
        match text {
            "loopback" => Ok(UiAccess::Loopback),
            "open" => Ok(UiAccess::Open),
            "off" => Ok(UiAccess::Off),
            other => Err(format!("unknown dashboard access `{other}` (loopback, open, off)")),
        }
    }
}

/// How log lines are written on standard error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogFormat {
    /// Lines for people (coloured on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// `text` or `json`.
    pub(crate) fn parse(text: &str) -> Result<LogFormat, String> {
        match text {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("unknown log format `{other}` (text, json)")),
        }
    }
}

pub(crate) fn at_least_one(count: usize) -> Result<usize, String> {
    if count == 0 { Err("must be at least 1".to_owned()) } else { Ok(count) }
}

/// A memory cap below 1 MiB would leave room for a few thousand short keys at most.
pub(crate) fn at_least_a_mebibyte(bytes: usize) -> Result<usize, String> {
    if bytes < 1 << 20 { Err(format!("must be at least 1MiB, got {bytes} bytes")) } else { Ok(bytes) }
}

/// A listening address: an IP address and a port (`127.0.0.1:8080`, `[::1]:8080`,
/// `0.0.0.0:8080`), or `localhost:PORT` for the IPv4 loopback. Other names are refused
/// rather than looked up: a listener binds to an address, and start-up does no DNS.
pub(crate) fn address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let loopback = text
        .rsplit_once(':')
        .filter(|(host, _)| host.eq_ignore_ascii_case("localhost"))
        .and_then(|(_, port)| port.parse::<u16>().ok());
    loopback.map(|port| SocketAddr::from(([127, 0, 0, 1], port))).ok_or_else(|| {
        format!("`{text}` is not an address such as 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080 or localhost:8080")
    })
}

/// A listening address, or `off` (or nothing) for no listener.
pub(crate) fn optional_address(text: &str) -> Result<Option<SocketAddr>, String> {
    if matches!(text.trim(), "off" | "") { Ok(None) } else { address(text).map(Some) }
}

/// The snapshot's path; `off` (or nothing) turns snapshots off.
pub(crate) fn snapshot_path(text: &str) -> Option<PathBuf> {
    (text != "off" && !text.is_empty()).then(|| PathBuf::from(text))
}

pub(crate) fn failure_mode(text: &str) -> Result<FailureMode, String> {
    match text {
        "open" => Ok(FailureMode::Open),
        "closed" => Ok(FailureMode::Closed),
        "fallback" => Ok(FailureMode::Fallback),
        other => Err(format!("unknown failure mode `{other}` (open, closed, fallback)")),
    }
}

/// A lease period: a duration of at most a minute, or `0` (`off`) for no leases.
pub(crate) fn lease_period(text: &str) -> Result<Duration, String> {
    if matches!(text.trim(), "0" | "off") {
        return Ok(Duration::ZERO);
    }
    let period = sluice_core::config::parse_duration(text)?;
    if period > Duration::from_secs(60) {
        return Err(format!(
            "{text} is longer than a minute: a lease holds units out of everyone else's reach for that long"
        ));
    }
    Ok(period)
}

pub(crate) fn module_use(text: &str) -> Result<ModuleUse, String> {
    match text {
        "detect" => Ok(ModuleUse::Detect),
        "always" => Ok(ModuleUse::Always),
        "never" => Ok(ModuleUse::Never),
        other => Err(format!("unknown module use `{other}` (detect, always, never)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_ip_addresses_or_localhost() {
        assert_eq!(address("127.0.0.1:8180"), Ok(SocketAddr::from(([127, 0, 0, 1], 8180))));
        assert_eq!(address("localhost:8180"), Ok(SocketAddr::from(([127, 0, 0, 1], 8180))));
        assert_eq!(address("LocalHost:1"), Ok(SocketAddr::from(([127, 0, 0, 1], 1))));
        assert_eq!(address("[::1]:8180").map(|address| address.is_ipv6()), Ok(true));
        for refused in ["localhost", "localhost:http", "localhost:70000", "example.com:80", "nowhere", ""] {
            let message = address(refused).unwrap_err();
            assert!(message.contains("localhost:8080"), "{refused}: {message}");
        }
    }
}
