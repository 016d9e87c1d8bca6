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
use super::origin::OnDisconnect;
use super::standalone_connection::StandaloneConnection;
use arc_swap::ArcSwapOption;
use sluice_core::StoreError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long after a replacement another may start: a failover that has not moved the
/// address yet answers `READONLY` on the new connection too, and every check would
/// otherwise open one more.
const REPLACEMENT_INTERVAL: Duration = Duration::from_millis(250);

/// The connection to a standalone Redis, shared by a store's clones (clones share it).
#[derive(Clone, Default)]
pub(super) struct Standalone(Arc<Slot>);

/// The connection in use, and whether it is being replaced.
#[derive(Default)]
struct Slot {
    /// Set once the channel that owns it exists (its connection reports to it).
    current: ArcSwapOption<StandaloneConnection>,
    /// Set while a replacement is being made (and for [`REPLACEMENT_INTERVAL`] after it).
    replacing: AtomicBool,
    /// Held while a TLS connection is being made: one at a time, the others wait for it.
    connecting: tokio::sync::Mutex<()>,
}

impl Standalone {
    /// Puts `connection` in use.
    pub(super) fn set(&self, connection: StandaloneConnection) {
        self.0.current.store(Some(Arc::new(connection)));
    }

    /// True when there is no connection, or it has closed (and must be made again).
    pub(super) fn needs_connecting(&self) -> bool {
        self.0.current.load().as_ref().is_none_or(|current| current.is_closed())
    }

    /// Connects to `origin` when there is no connection or it has closed (a TLS one: see
    /// [`StandaloneConnection`]); a caller that finds a connection being made waits for it.
    pub(super) async fn connect_if_needed(
        &self,
        origin: &Origin,
        on_disconnect: OnDisconnect,
    ) -> Result<(), StoreError> {
        if !self.needs_connecting() {
            return Ok(());
        }
        let _one_at_a_time = self.0.connecting.lock().await;
        if self.needs_connecting() {
            self.set(origin.connect_standalone(on_disconnect).await?);
        }
        Ok(())
    }

    /// The connection to send a command on: clone the handle inside (cheap) to use it,
    /// and keep this `Arc` to name it to [`replace`](Self::replace).
    pub(super) fn current(&self) -> Option<Arc<StandaloneConnection>> {
        self.0.current.load_full()
    }

    /// Replaces `refused`, the connection a command was refused on, with a new one to
    /// `origin`'s address, in the background; unless it was replaced already (a late
    /// answer on the old connection must not throw away the new one) or a replacement is
    /// under way. Needs a Tokio runtime, as every call of the store does.
    pub(super) fn replace(&self, refused: &Arc<StandaloneConnection>, origin: &Origin, on_disconnect: OnDisconnect) {
        let is_current = self.0.current.load().as_ref().is_some_and(|current| Arc::ptr_eq(current, refused));
        if !is_current || self.0.replacing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (refused, origin, slot) = (Arc::clone(refused), origin.clone(), Arc::clone(&self.0));
        tokio::spawn(async move {
            // Cleared however the task ends, also when its runtime drops it half-way.
            let _replacing = Replacing(&slot.replacing);
            match origin.connect_standalone(on_disconnect).await {
                Ok(connection) => {
                    slot.current.compare_and_swap(&Some(refused), Some(Arc::new(connection)));
                    tracing::warn!("Redis answered READONLY (a failover?): connected again");
                }
                Err(error) => tracing::warn!(%error, "Redis answered READONLY; connecting again failed"),
            }
            tokio::time::sleep(REPLACEMENT_INTERVAL).await;
        });
    }
}

/// Clears a replacement's flag when dropped.
struct Replacing<'a>(&'a AtomicBool);

impl Drop for Replacing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Whether `error` is Redis refusing a write as a replica: the node this connection reached
/// is not the primary (any more).
pub(super) fn is_demoted(error: &redis::RedisError) -> bool {
    error.code() == Some("READONLY")
}
