//! [`reset`]: an admin forgets a key's state, in Redis and in every local copy.

use super::channel::{Channel, Request};
use sluice_core::{Key, Limit, StoreError};
use std::sync::Arc;

/// Deletes `key`'s state for each of `limits` with one `DEL` (the keys share a hash tag,
/// so one Cluster slot), and forgets the key's cached rejections and fallback states.
///
/// No failure mode applies: when Redis cannot answer, the error is returned, since an
/// admin told "done" must be able to trust it.
pub(super) async fn reset(channel: &Arc<Channel>, key: Key<'_>, limits: &[Limit]) -> Result<(), StoreError> {
    if limits.is_empty() {
        return Ok(());
    }
    let common = &channel.common;
    let keys = common.state_keys(key, limits);
    common.fallback.reset_now(key, limits);
    let mut command = redis::cmd("DEL");
    command.arg(&keys);
    let deleted = channel.send::<()>(common.settings.timeout, Request::Command(&command)).await;
    // Forgotten after the DEL, so that a rejection cached by a check running meanwhile
    // goes too; also when the DEL failed, which only costs the next check a round trip.
    common.blocked.forget(&keys);
    deleted
}
