//! `RedisStore::reset`: an admin forgets a key's state, in Redis and in every local copy.

use super::{Connection, RedisStore, within};
use crate::keys::state_key;
use redis::aio::ConnectionManager;
use sluice::{Key, Limit, StoreError};

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
        let keys: Vec<Vec<u8>> = limits.iter().map(|limit| state_key(&self.settings.key_prefix, key, limit)).collect();
        self.fallback.reset_now(key, limits);
        let mut command = redis::cmd("DEL");
        command.arg(&keys);
        let deleted = match &self.connection {
            Connection::Standalone(connection) => {
                let used = connection.current();
                let mut handle = ConnectionManager::clone(&used);
                let deleted = within(self.settings.timeout, command.query_async::<()>(&mut handle)).await;
                self.replace_if_demoted(connection, &used, deleted)
            }
            Connection::Cluster(connection) => {
                within(self.settings.timeout, command.query_async::<()>(&mut connection.clone())).await
            }
        };
        // Forgotten after the DEL, so that a rejection cached by a check running meanwhile
        // goes too; also when the DEL failed, which only costs the next check a round trip.
        self.blocked.forget(&keys);
        deleted
    }
}
