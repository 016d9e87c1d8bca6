//! Where shares are paid from: the limit's own state, through the store's ordinary
//! check with a cost, so that RLS checks, RLQS shares and every Sluice server sharing the
//! store draw on one quota. Behind a trait, so that a lease API on the store can replace
//! it without touching the allocator.

use crate::engine::{Engine, RequestError};
use sluice_core::{Key, Limit, StoreError};
use std::future::Future;

/// Takes quota from a limit's state, at the payer's own time.
pub(crate) trait QuotaPayer: Send + Sync {
    /// What `limit` has left at `key` now, taking nothing.
    fn remaining(&self, key: Key<'_>, limit: &Limit) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Takes up to `tokens` of `limit` at `key` now, as admitted requests of that cost
    /// would; how many it took (fewer when fewer are left, 0 when none is).
    fn take(&self, key: Key<'_>, limit: &Limit, tokens: u64) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

impl QuotaPayer for Engine {
    async fn remaining(&self, key: Key<'_>, limit: &Limit) -> Result<u64, StoreError> {
        Ok(self.envoy().take_quota(key, limit, 0).await.map_err(store_error)?.remaining)
    }

    async fn take(&self, key: Key<'_>, limit: &Limit, tokens: u64) -> Result<u64, StoreError> {
        if tokens == 0 {
            return Ok(0);
        }
        let first = self.envoy().take_quota(key, limit, tokens).await.map_err(store_error)?;
        if first.allowed {
            return Ok(tokens);
        }
        // Fewer are left: take what is (another server may have taken it meanwhile).
        let fits = first.remaining.min(tokens);
        if fits == 0 {
            return Ok(0);
        }
        let second = self.envoy().take_quota(key, limit, fits).await.map_err(store_error)?;
        Ok(if second.allowed { fits } else { 0 })
    }
}

fn store_error(error: RequestError) -> StoreError {
    match error {
        RequestError::Store(error) => error,
        other => StoreError::Refused(other.to_string()),
    }
}
