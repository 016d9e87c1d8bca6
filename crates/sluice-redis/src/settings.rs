//! How a Redis store reads time, waits and names its keys.

use crate::{FailureMode, TlsFiles};
use std::time::Duration;

/// Where a check's `now` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// Redis `TIME`, read inside the script: every application server shares one clock,
    /// whatever their own clocks say. The default.
    Redis,
    /// The caller's `now` (the application's clock, or injected time in tests and the
    /// simulator). TTLs are lengthened by `max_skew`, the clock difference allowed between
    /// application servers. The scripts still read Redis `TIME`, for each check's deadline.
    Application {
        /// The largest difference between two application servers' clocks.
        max_skew: Duration,
    },
}

/// Whether checks run as the `SLUICE.CHECK` command of the Sluice Redis module
/// (`crates/sluice-redis-module`) or as the Lua scripts; both decide alike, on the same keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModuleUse {
    /// The module when Redis has it loaded, else the scripts: every probe (at connect, and
    /// when an outage ends) asks `COMMAND INFO SLUICE.CHECK`. The default.
    #[default]
    Detect,
    /// The module, without asking (a Redis without it answers every check with an error).
    Always,
    /// The scripts, even where the module is loaded.
    Never,
}

/// Settings of a [`RedisStore`](crate::RedisStore).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisSettings {
    /// Where `now` comes from (default: Redis `TIME`).
    pub time: TimeSource,
    /// How long one check may wait for Redis before it fails (default 50 ms: a check is
    /// an RPC on a request path).
    pub timeout: Duration,
    /// Prefix of every key Sluice writes (default `sluice:`).
    pub key_prefix: String,
    /// The shortest TTL a state gets (default 1 ms). Injected-time runs set it long (the
    /// simulator uses an hour), since a trace's time can run far ahead of Redis's clock
    /// and a state must not vanish while it is live in the trace's time.
    pub min_ttl: Duration,
    /// What to decide while Redis cannot answer (default: allow).
    pub failure_mode: FailureMode,
    /// Answer rejections locally while Redis said they hold, without a round trip
    /// (default: on). Exact: see the `blocked` module.
    pub blocked_cache: bool,
    /// The most states [`FailureMode::Fallback`] keeps in this process while Redis is down
    /// (default [`sluice_core::store::memory::DEFAULT_MAX_KEYS`]), dropped as the memory store
    /// drops them when full: the states that would become fresh soonest.
    pub fallback_max_keys: usize,
    /// Certificates for `rediss://` connections (default: the system's trusted roots, no
    /// client certificate).
    pub tls: TlsFiles,
    /// Whether checks use the Sluice Redis module (default: when Redis has it).
    pub module: ModuleUse,
}

impl Default for RedisSettings {
    fn default() -> Self {
        RedisSettings {
            time: TimeSource::Redis,
            timeout: Duration::from_millis(50),
            key_prefix: "sluice:".to_owned(),
            min_ttl: Duration::from_millis(1),
            failure_mode: FailureMode::Open,
            blocked_cache: true,
            fallback_max_keys: sluice_core::store::memory::DEFAULT_MAX_KEYS,
            tls: TlsFiles::default(),
            module: ModuleUse::Detect,
        }
    }
}

impl RedisSettings {
    /// Settings for injected time (tests, the simulator): the caller's `now`, no skew, and
    /// TTLs of at least an hour.
    pub fn injected_time() -> Self {
        RedisSettings {
            time: TimeSource::Application { max_skew: Duration::ZERO },
            min_ttl: Duration::from_secs(3600),
            ..RedisSettings::default()
        }
    }

    pub(crate) fn extra_ttl_ms(&self) -> u64 {
        match self.time {
            TimeSource::Redis => 0,
            TimeSource::Application { max_skew } => u64::try_from(max_skew.as_millis()).unwrap_or(u64::MAX / 2),
        }
    }

    pub(crate) fn min_ttl_ms(&self) -> u64 {
        u64::try_from(self.min_ttl.as_millis()).unwrap_or(u64::MAX / 2).max(1)
    }
}
