//! Shared by the Redis benches: the three peers (Sluice's sliding log through `RedisStore`,
//! the textbook sorted-set script, an INCR+PEXPIRE fixed window), their keys, and the
//! virtual-time workload that keeps every peer's logs in the same steady state.
//!
//! Time is injected (`RedisSettings::injected_time()` for Sluice, `now` in `ARGV` for the
//! two scripts, as the textbook script takes it): check number `t` of a peer happens at
//! `BASE + t · step` µs on a pseudo-random key among [`KEYS`]. `step` is chosen per limit `N`
//! so that, once the window has elapsed, a key holds about `N / 2` live entries: nearly every
//! check is allowed, yet the logs are half full and expire about one entry per check, whatever
//! speed the machine runs at. (At N = 100 000 that state is 50 M checks away: the benches stop
//! warming up at [`WARMUP_CAP`] and say so.)
#![allow(dead_code)]

use redis::aio::ConnectionManager;
use sluice_core::{Check, Key, Limit, SlidingLog, SlidingLogVariant, Source, Store, Timestamp};
use sluice_redis::{FailureMode, RedisSettings, RedisStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The textbook sorted-set sliding log, exactly as it is usually written, flaws included:
/// `ZREMRANGEBYSCORE` also removes an entry exactly one window old, two requests in the same
/// millisecond are one member, `EXPIRE` takes whole seconds. Times in milliseconds.
pub(crate) const SORTED_SET_SCRIPT: &str = r"
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local window_start = now - window
redis.call('ZREMRANGEBYSCORE', key, 0, window_start)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, now, now)
  redis.call('EXPIRE', key, window/1000)
  return true
end
return false
";

/// The floor: the fixed-window counter of Redis's INCR documentation ("rate limiter 2", in
/// Lua): one key per window, named by the caller; PEXPIRE only when the counter is created.
pub(crate) const FIXED_WINDOW_SCRIPT: &str = r"
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
if count <= tonumber(ARGV[2]) then
  return 1
end
return 0
";

/// Caller keys each peer spreads its checks over.
pub(crate) const KEYS: usize = 1_000;
/// Checks in flight at once, all on one multiplexed connection per peer, unless
/// `SLUICE_BENCH_IN_FLIGHT` says otherwise.
const IN_FLIGHT: u64 = 64;
/// The limits `N` measured, unless `SLUICE_BENCH_LIMITS` lists others (`10,1000`).
const LIMITS: [u64; 3] = [10, 1_000, 100_000];

/// The limits `N` to measure: [`LIMITS`] or `SLUICE_BENCH_LIMITS`.
pub(crate) fn limits() -> Vec<u64> {
    match std::env::var("SLUICE_BENCH_LIMITS") {
        Ok(list) => list.split(',').map(|n| n.trim().parse().expect("SLUICE_BENCH_LIMITS: numbers")).collect(),
        Err(_) => LIMITS.to_vec(),
    }
}

/// Checks in flight at once: [`IN_FLIGHT`] or `SLUICE_BENCH_IN_FLIGHT`.
pub(crate) fn in_flight() -> usize {
    env_u64("SLUICE_BENCH_IN_FLIGHT", IN_FLIGHT).max(1) as usize
}

/// `name` from the environment, or `default`.
pub(crate) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Most warm-up checks per peer: enough for N ≤ 1 000 to reach the steady state.
pub(crate) const WARMUP_CAP: u64 = 600_000;
/// Longest any call may take before the bench fails (the machine is shared and noisy).
const TIMEOUT: Duration = Duration::from_secs(10);

/// Which algorithm a peer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Sluice's sliding log (`accepted` variant) through `RedisStore::check`.
    SlidingLog,
    /// The textbook sorted-set script (`ZREMRANGEBYSCORE`, `ZCARD`, `ZADD`, `EXPIRE`).
    SortedSet,
    /// INCR+PEXPIRE fixed window.
    FixedWindow,
}

impl Kind {
    pub(crate) const ALL: [Kind; 3] = [Kind::SlidingLog, Kind::SortedSet, Kind::FixedWindow];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::SlidingLog => "sluice sliding log",
            Kind::SortedSet => "textbook sorted set",
            Kind::FixedWindow => "INCR+PEXPIRE",
        }
    }
}

/// Limit, window and virtual time of one `N`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    /// `N`.
    pub(crate) limit: u64,
    /// The window, a whole number of seconds (the textbook's `EXPIRE window/1000` needs one).
    pub(crate) window: Duration,
    /// Virtual µs between two consecutive checks of a peer (over all keys).
    pub(crate) step_us: u64,
}

impl Workload {
    /// 10 s windows for N ≤ 1 000, N/100 s above; a key's mean spacing is 2·window/N, so
    /// N/2 entries live in a window (2 s apart at N = 10, 20 ms at N = 1 000 and 100 000).
    pub(crate) fn for_limit(limit: u64) -> Workload {
        let window = Duration::from_secs((limit / 100).max(10));
        let window_us = window.as_micros() as u64;
        let key_spacing_us = 2 * window_us / limit;
        Workload { limit, window, step_us: (key_spacing_us / KEYS as u64).max(1) }
    }

    /// Checks after which the window has elapsed once: the steady state.
    pub(crate) fn steady_after(&self) -> u64 {
        self.window.as_micros() as u64 / self.step_us
    }

    pub(crate) fn window_ms(&self) -> u64 {
        self.window.as_millis() as u64
    }
}

/// A 16-byte caller key: `key-` and twelve decimal digits.
pub(crate) fn caller_key(index: usize) -> String {
    format!("key-{index:012}")
}

/// The key index of check `t`: splitmix64, so any task can compute it.
pub(crate) fn key_of(t: u64) -> usize {
    let mut z = t.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((u128::from(z) * KEYS as u128) >> 64) as usize
}

/// The wall clock now, in µs, rounded down to a whole second: the virtual time's origin.
pub(crate) fn base_us() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970");
    now.as_secs() * 1_000_000
}

pub(crate) async fn connect(url: &str) -> ConnectionManager {
    let client = redis::Client::open(url).expect("a valid Redis URL");
    ConnectionManager::new(client).await.expect("cannot connect to Redis")
}

/// One peer: an algorithm, its own connection and keys, and its own virtual clock.
pub(crate) struct Peer {
    pub(crate) kind: Kind,
    pub(crate) workload: Workload,
    store: RedisStore,
    connection: ConnectionManager,
    script: redis::Script,
    limit: Limit,
    /// Caller keys (Sluice builds its own Redis keys from them).
    callers: Vec<String>,
    /// Redis keys of the sorted sets; prefixes of the fixed windows' keys.
    redis_keys: Vec<String>,
    base_us: u64,
    /// Number of the next check.
    tick: AtomicU64,
    allowed: AtomicU64,
    checked: AtomicU64,
}

impl Peer {
    pub(crate) async fn new(kind: Kind, workload: Workload, url: &str) -> Arc<Peer> {
        // Every check goes to Redis: no local cache of rejections, and a failure is a failure.
        let settings = RedisSettings {
            timeout: TIMEOUT,
            failure_mode: FailureMode::Closed,
            blocked_cache: false,
            ..RedisSettings::injected_time()
        };
        let store = RedisStore::connect(url, settings).await.expect("cannot connect the store");
        let policy =
            SlidingLog::new(workload.limit, workload.window, SlidingLogVariant::Accepted).expect("a valid sliding log");
        let limit = Limit::new("bench", policy);
        let callers: Vec<String> = (0..KEYS).map(caller_key).collect();
        // The same length as Sluice's own keys, `sluice:{<caller>}:<limit id>`.
        let prefix = match kind {
            Kind::FixedWindow => "fixedw:",
            _ => "sorted:",
        };
        let redis_keys = callers.iter().map(|caller| format!("{prefix}{{{caller}}}:{}", limit.id())).collect();
        let script = match kind {
            Kind::FixedWindow => FIXED_WINDOW_SCRIPT,
            _ => SORTED_SET_SCRIPT,
        };
        Arc::new(Peer {
            kind,
            workload,
            store,
            connection: connect(url).await,
            script: redis::Script::new(script),
            limit,
            callers,
            redis_keys,
            base_us: base_us(),
            tick: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
            checked: AtomicU64::new(0),
        })
    }

    /// The Redis key Sluice uses for caller `index` (as `keys.rs` builds it).
    pub(crate) fn sluice_key(&self, index: usize) -> String {
        format!("sluice:{{{}}}:{}", self.callers[index], self.limit.id())
    }

    /// The Redis key of caller `index` for this peer (a fixed window's current key aside).
    pub(crate) fn redis_key(&self, index: usize) -> String {
        match self.kind {
            Kind::SlidingLog => self.sluice_key(index),
            _ => self.redis_keys[index].clone(),
        }
    }

    /// Check number `t`: whether it was allowed.
    pub(crate) async fn check(&self, t: u64) -> bool {
        let index = key_of(t);
        let now_us = self.base_us + t * self.workload.step_us;
        self.check_at(index, now_us).await
    }

    /// One check of caller `index` at `now_us`: whether it was allowed.
    pub(crate) async fn check_at(&self, index: usize, now_us: u64) -> bool {
        let workload = &self.workload;
        let mut connection = self.connection.clone();
        let allowed = match self.kind {
            Kind::SlidingLog => {
                let key = Key::new(self.callers[index].as_bytes()).expect("a valid key");
                let verdict = self
                    .store
                    .check(Check::new(key, std::slice::from_ref(&self.limit), Timestamp::from_micros(now_us), 1))
                    .await
                    .expect("Sluice check failed");
                assert_eq!(verdict.source, Source::Store, "Redis did not decide");
                verdict.decision.allowed
            }
            Kind::SortedSet => {
                let mut invocation = self.script.key(&self.redis_keys[index]);
                invocation.arg(now_us / 1000).arg(workload.window_ms()).arg(workload.limit);
                let call = invocation.invoke_async::<Option<i64>>(&mut connection);
                let reply = tokio::time::timeout(TIMEOUT, call)
                    .await
                    .expect("sorted-set script timed out")
                    .expect("sorted-set script failed");
                reply == Some(1)
            }
            Kind::FixedWindow => {
                let window_us = workload.window.as_micros() as u64;
                let key = format!("{}:{}", self.redis_keys[index], now_us / window_us);
                let mut invocation = self.script.key(key);
                invocation.arg(workload.window_ms()).arg(workload.limit);
                let call = invocation.invoke_async::<i64>(&mut connection);
                let reply = tokio::time::timeout(TIMEOUT, call)
                    .await
                    .expect("fixed-window script timed out")
                    .expect("fixed-window script failed");
                reply == 1
            }
        };
        self.checked.fetch_add(1, Ordering::Relaxed);
        if allowed {
            self.allowed.fetch_add(1, Ordering::Relaxed);
        }
        allowed
    }

    /// Runs the next `checks` checks, [`in_flight`] at a time (tokio tasks pulling from the
    /// peer's tick), and returns how long they took.
    pub(crate) async fn run(self: &Arc<Self>, checks: u64) -> Duration {
        let end = self.tick.load(Ordering::Relaxed) + checks;
        let started = Instant::now();
        let workers: Vec<_> = (0..in_flight())
            .map(|_| {
                let peer = Arc::clone(self);
                tokio::spawn(async move {
                    loop {
                        let t = peer.tick.fetch_add(1, Ordering::Relaxed);
                        if t >= end {
                            break;
                        }
                        peer.check(t).await;
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.await.expect("a bench task panicked");
        }
        let elapsed = started.elapsed();
        self.tick.store(end, Ordering::Relaxed);
        elapsed
    }

    /// Allowed and total checks since the last call.
    pub(crate) fn take_tally(&self) -> (u64, u64) {
        (self.allowed.swap(0, Ordering::Relaxed), self.checked.swap(0, Ordering::Relaxed))
    }

    pub(crate) fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }
}

/// `INFO <section>` as text.
pub(crate) async fn info(connection: &mut ConnectionManager, section: &str) -> String {
    redis::cmd("INFO").arg(section).query_async(connection).await.expect("INFO failed")
}

/// Redis's CPU time so far (`used_cpu_sys + used_cpu_user` of `INFO cpu`), in seconds.
pub(crate) async fn server_cpu_seconds(admin: &mut ConnectionManager) -> f64 {
    info(admin, "cpu")
        .await
        .lines()
        .filter_map(|line| {
            let (name, value) = line.trim_end().split_once(':')?;
            matches!(name, "used_cpu_sys" | "used_cpu_user").then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// `calls` and `usec` of every command in `INFO commandstats`, by name (`evalsha`, `zadd`…).
pub(crate) fn command_stats(info: &str) -> Vec<(String, u64, u64)> {
    info.lines()
        .filter_map(|line| {
            let (name, fields) = line.trim_end().strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |wanted: &str| {
                fields
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(wanted)?.strip_prefix('='))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            Some((name.to_owned(), field("calls")?, field("usec")?))
        })
        .collect()
}

/// The median of `values` (the mean of the middle two for an even count).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

/// The 1-, 5- and 15-minute load averages, to tell a disturbed run.
pub(crate) fn machine_load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}
