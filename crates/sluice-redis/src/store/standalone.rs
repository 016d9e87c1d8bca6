//! A standalone Redis connection that is replaced when its node stops being the primary.
//!
//! Managed Redis services and Sentinel-fronted setups fail over by moving an address (a DNS
//! name, a virtual IP) to the promoted replica. A connection made before the failover stays
//! open to the demoted node, which now refuses every write with `READONLY`. redis-rs's
//! `ConnectionManager` reconnects only when its connection breaks, so without this every
//! check would answer by the failure mode for as long as the old connection lives. On the
//! first `READONLY`, a new connection is made to the same address, in the background, and
//! takes the old one's place; the checks meanwhile follow the failure mode.

use super::Origin;
use arc_swap::ArcSwap;
use redis::aio::ConnectionManager;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long after a replacement another may start: a failover that has not moved the
/// address yet answers `READONLY` on the new connection too, and every check would
/// otherwise open one more.
const REPLACEMENT_INTERVAL: Duration = Duration::from_millis(250);

/// The connection to a standalone Redis, shared by a store's clones.
pub(super) struct Standalone {
    current: ArcSwap<ConnectionManager>,
    /// Set while a replacement is being made (and for [`REPLACEMENT_INTERVAL`] after it).
    replacing: AtomicBool,
}

impl Standalone {
    pub(super) fn new(connection: ConnectionManager) -> Self {
        Standalone { current: ArcSwap::from_pointee(connection), replacing: AtomicBool::new(false) }
    }

    /// The connection to send a command on: clone the handle inside (cheap) to use it,
    /// and keep this `Arc` to name it to [`replace`](Self::replace).
    pub(super) fn current(&self) -> Arc<ConnectionManager> {
        self.current.load_full()
    }

    /// Replaces `refused`, the connection a command was refused on, with a new one to
    /// `origin`'s address, in the background; unless it was replaced already (a late
    /// answer on the old connection must not throw away the new one) or a replacement is
    /// under way. Needs a Tokio runtime, as every call of the store does.
    pub(super) fn replace(self: &Arc<Self>, refused: &Arc<ConnectionManager>, origin: &Arc<Origin>) {
        if !Arc::ptr_eq(&self.current.load(), refused) || self.replacing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (this, refused, origin) = (Arc::clone(self), Arc::clone(refused), Arc::clone(origin));
        tokio::spawn(async move {
            // Cleared however the task ends, also when its runtime drops it half-way.
            let _replacing = Replacing(Arc::clone(&this));
            match origin.connect_standalone().await {
                Ok(connection) => {
                    this.current.compare_and_swap(&refused, Arc::new(connection));
                    tracing::warn!("Redis answered READONLY (a failover?): connected again");
                }
                Err(error) => tracing::warn!(%error, "Redis answered READONLY; connecting again failed"),
            }
            tokio::time::sleep(REPLACEMENT_INTERVAL).await;
        });
    }
}

/// Clears [`Standalone::replacing`] when dropped.
struct Replacing(Arc<Standalone>);

impl Drop for Replacing {
    fn drop(&mut self) {
        self.0.replacing.store(false, Ordering::Release);
    }
}

/// Whether `error` is Redis refusing a write as a replica: the node this connection reached
/// is not the primary (any more).
pub(super) fn is_demoted(error: &redis::RedisError) -> bool {
    error.code() == Some("READONLY")
}
