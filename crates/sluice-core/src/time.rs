//! Time as the algorithms see it (whole microseconds since the Unix epoch), and the clocks
//! that give it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
///
/// Not nanoseconds: Redis Lua numbers are doubles, so every value a script sees must stay
/// below 2^53, which microseconds do until the year 2255.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch itself.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// A timestamp `micros` microseconds after the Unix epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Timestamp(micros)
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// The wall-clock time `time`, truncated to whole microseconds (the epoch if earlier).
    pub fn from_system_time(time: SystemTime) -> Self {
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(u64::try_from(since.as_micros()).unwrap_or(u64::MAX))
    }

    /// This timestamp moved `duration` later, saturating at the largest timestamp.
    pub fn saturating_add(self, duration: Duration) -> Self {
        let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(micros))
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

/// A source of the current time.
///
/// Implementations must be cheap: the limiter reads the clock once per check.
///
/// # Which clock does what
///
/// - **Deciding.** [`RateLimiter`](crate::RateLimiter) reads its [`Clock`] once per check and
///   hands `now` down: the algorithms and [`Store::check`](crate::Store::check) take it as a
///   parameter, so tests and the simulator inject any time they like. On the Redis store
///   under its default `TimeSource::Redis`, the scripts decide at Redis `TIME` instead, so
///   that application servers with skewed clocks share one timeline (docs/redis.md).
/// - **Dropping states.** The [`MemoryStore`](crate::MemoryStore) has a clock of its own
///   ([`MemoryStoreBuilder::clock`](crate::MemoryStoreBuilder::clock), the system clock by
///   default) that only judges when a state has expired and may be dropped; it never decides.
///   Redis drops states by their TTLs, on its own clock.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// Waits for `duration` to pass on this clock.
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send;
}

/// The system's wall clock, read through a monotonic counter so it never runs backwards.
///
/// It captures the wall-clock time once, at construction, and adds the time elapsed on a
/// monotonic clock (TSC-based where available, via `quanta`): reading it costs a few
/// nanoseconds and no shared atomic, and `now` never decreases, as docs/semantics.md requires of the
/// in-memory store's clock.
#[derive(Clone, Debug)]
pub struct SystemClock {
    origin: Timestamp,
    /// The clock's raw reading at `origin` (TSC ticks where available).
    started: u64,
    /// Read directly: `quanta::Instant::now()` looks up a thread-local override and a
    /// global on every call.
    clock: quanta::Clock,
}

impl SystemClock {
    /// The system clock. Every `SystemClock` of a process shares one anchor, taken at the
    /// first call, so they all read the same time (a limiter and its store agree exactly).
    pub fn new() -> Self {
        static ANCHOR: OnceLock<SystemClock> = OnceLock::new();
        ANCHOR
            .get_or_init(|| {
                // Calibrated once, here.
                let clock = quanta::Clock::new();
                SystemClock { origin: Timestamp::from_system_time(SystemTime::now()), started: clock.raw(), clock }
            })
            .clone()
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Timestamp {
        // Raw ticks scaled to nanoseconds in one multiply and shift: cheaper than building an
        // `Instant` and a `Duration` on every check.
        let elapsed = self.clock.delta_as_nanos(self.started, self.clock.raw());
        Timestamp(self.origin.0.saturating_add(elapsed / 1_000))
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send {
        futures_timer::Delay::new(duration)
    }
}

/// A clock that moves only when told to. Clones share one time.
///
/// Use it in tests: `sleep` advances the clock instead of waiting, so code that waits on a
/// limiter (such as [`RateLimiter::acquire`](crate::RateLimiter::acquire)) runs instantly
/// and deterministically.
///
/// # Examples
///
/// ```
/// use sluice_core::{Clock, ManualClock, Timestamp};
/// use std::time::Duration;
///
/// let clock = ManualClock::at(Timestamp::from_micros(1_000));
/// clock.advance(Duration::from_millis(2));
/// assert_eq!(clock.now(), Timestamp::from_micros(3_000));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn at(start: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicU64::new(start.as_micros())))
    }

    /// Moves the clock `duration` forward.
    pub fn advance(&self, duration: Duration) {
        let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.0.fetch_add(micros, Ordering::SeqCst);
    }

    /// Sets the clock to `time`, forwards or backwards.
    pub fn set(&self, time: Timestamp) {
        self.0.store(time.as_micros(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send {
        self.advance(duration);
        std::future::ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_never_runs_backwards_and_tracks_wall_time() {
        let clock = SystemClock::new();
        let wall = Timestamp::from_system_time(SystemTime::now());
        let mut last = clock.now();
        for _ in 0..10_000 {
            let now = clock.now();
            assert!(now >= last);
            last = now;
        }
        let drift = last.as_micros().abs_diff(wall.as_micros());
        assert!(drift < 1_000_000, "system clock is {drift} µs from wall time");
    }

    #[tokio::test]
    async fn manual_clock_clones_share_time_and_sleep_advances() {
        let clock = ManualClock::default();
        let other = clock.clone();
        other.sleep(Duration::from_micros(7)).await;
        assert_eq!(clock.now(), Timestamp::from_micros(7));
        clock.set(Timestamp::from_micros(3));
        assert_eq!(other.now(), Timestamp::from_micros(3));
    }
}
