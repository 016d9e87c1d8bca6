//! [`sweep_in_background`]: a [`LeasedStore`]'s give-back sweep, run on the tokio runtime
//! for as long as the store is in use.

use sluice_core::lease::{LeasedStore, Unspent};
use sluice_core::{Clock, Store};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Shares `store` and starts, on the current tokio runtime, the task that settles its
/// leases by itself, as `sluice serve` does: once every lease period it gives up the units
/// that can no longer be spent, gives back to the shared store the unspent units of keys
/// this instance saw no request for over a whole period, and forgets idle keys. Without it
/// an idle instance keeps its units out of every other instance's reach until their
/// window or bucket ends (docs/leases.md, "Giving back").
///
/// `clock` must be the one the checks' `now` comes from (the limiter's: the system clock
/// by default); the store's answers are timed on it too ([`LeasedStore::with_clock`]).
///
/// The task holds the returned store weakly: at its first tick after the last clone of the
/// returned `Arc` is dropped (a limiter or a layer built on it holds one), it gives every
/// unspent unit back ([`Unspent::All`]) and ends. With a zero lease period nothing is leased
/// and no task is started.
///
/// # Panics
///
/// Outside a tokio runtime, as [`tokio::spawn`].
///
/// # Examples
///
/// ```
/// use sluice_tower::{LeasedStore, MemoryStore, RateLimiter, SystemClock, sweep_in_background};
/// use sluice_tower::{Alignment, FixedWindow, Limit};
/// use std::{sync::Arc, time::Duration};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shared = Arc::new(MemoryStore::new()); // standing in for a RedisStore
/// let leased = LeasedStore::new(shared, Duration::from_millis(100));
/// let store = sweep_in_background(leased, SystemClock::new());
/// let window = FixedWindow::new(100, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO)?;
/// let limiter = RateLimiter::builder().limit(Limit::new("api", window)).store(store).build()?;
/// # let _ = limiter;
/// # Ok(())
/// # }
/// ```
pub fn sweep_in_background<S, C>(store: LeasedStore<S>, clock: C) -> Arc<LeasedStore<S>>
where
    S: Store + Clone,
    C: Clock + Clone,
{
    let period = store.period();
    let store = Arc::new(store.with_clock(clock.clone()));
    if !period.is_zero() {
        let last = LeasedStore::clone(&store);
        tokio::spawn(sweep(Arc::downgrade(&store), last, clock, period));
    }
    store
}

/// Every `period`, settles the leases of `store` while it is in use; then gives back what
/// `last` (the same leases) still holds, and returns.
async fn sweep<S: Store, C: Clock>(store: Weak<LeasedStore<S>>, last: LeasedStore<S>, clock: C, period: Duration) {
    let mut ticks = tokio::time::interval(period);
    loop {
        ticks.tick().await;
        let Some(store) = store.upgrade() else { break };
        let now = clock.now();
        store.sweep(now);
        // `LeasedStore`'s own give-back, not the `Store` method of the `Arc`.
        LeasedStore::give_back(&store, now, Unspent::OfQuietKeys).await;
    }
    last.give_back(clock.now(), Unspent::All).await;
}
