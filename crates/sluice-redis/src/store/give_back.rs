//! `RedisStore::give_back`: a lease's unspent units taken back (`lua/give_back.lua`).

use super::RedisStore;
use super::channel::Request;
use crate::keys::state_key;
use sluice_core::{Alignment, Key, Limit, Policy, StoreError};

/// The script: rare (a key gone quiet, a shutdown), so sent with `EVAL`.
const GIVE_BACK: &str = include_str!("../../lua/give_back.lua");

impl RedisStore {
    /// Takes `units` back from `key`'s state under each of `limits`, in the window or
    /// bucket that starts at `starts[i]`, in one script (the keys share a hash tag).
    pub(super) async fn give_back_units(
        &self,
        key: Key<'_>,
        limits: &[Limit],
        starts: &[u64],
        units: u64,
    ) -> Result<(), StoreError> {
        if limits.is_empty() || units == 0 {
            return Ok(());
        }
        let common = self.common();
        let keys: Vec<Vec<u8>> =
            limits.iter().map(|limit| state_key(&common.settings.key_prefix, key, limit)).collect();
        let mut command = redis::cmd("EVAL");
        command.arg(GIVE_BACK).arg(keys.len()).arg(&keys).arg(units);
        for (limit, start) in limits.iter().zip(starts) {
            command.arg(&where_debited(limit.policy(), *start));
        }
        let given = self.channel.send::<()>(common.settings.timeout, Request::Command(&command)).await;
        // A rejection this process cached may no longer hold.
        common.blocked.forget(&keys);
        given
    }
}

/// The script's five values for a limit: its kind, the start, and the sliding window's grid.
fn where_debited(policy: &Policy, start: u64) -> [u64; 5] {
    match policy {
        Policy::FixedWindow(_) => [1, start, 0, 0, 0],
        Policy::SlidingWindow(window) => {
            let anchored = u64::from(window.alignment() == Alignment::Anchored);
            [2, start, window.width(), window.buckets(), anchored]
        }
        // Not leased: nothing to take back.
        _ => [0, start, 0, 0, 0],
    }
}
