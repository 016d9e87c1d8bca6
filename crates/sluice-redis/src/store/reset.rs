//! `RedisStore::reset`: an admin forgets a key's state, in Redis and in every local copy.

use super::RedisStore;
use super::channel::Request;
use crate::keys::state_key;
use sluice_core::{Key, Limit, StoreError};

impl RedisStore {
    /// Deletes `key`'s state for each of `limits` with one `DEL` (the keys share a hash tag,
    /// so one Cluster slot), and forgets the key's cached rejections and fallback states.
    ///
    /// No failure mode applies: when Redis cannot answer, the error is returned, since an
    /// admin told "done" must be able to trust it.
    pub(super) async fn reset_key(&self, key: Key<'_>, limits: &[Limit]) -> Result<(), StoreError> {
        if limits.is_empty() {
            return Ok(());
        }
        let common = self.common();
        let keys: Vec<Vec<u8>> =
            limits.iter().map(|limit| state_key(&common.settings.key_prefix, key, limit)).collect();
        common.fallback.reset_now(key, limits);
        let mut command = redis::cmd("DEL");
        command.arg(&keys);
        let deleted = self.channel.send::<()>(common.settings.timeout, Request::Command(&command)).await;
        // Forgotten after the DEL, so that a rejection cached by a check running meanwhile
        // goes too; also when the DEL failed, which only costs the next check a round trip.
        common.blocked.forget(&keys);
        deleted
    }
}
