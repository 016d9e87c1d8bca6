//! Whether Redis takes a store's configuration: asked once before a server starts, and
//! followed afterwards (`refusal` module).

use super::{CONNECT_TIMEOUT, Common, RedisStore};
use crate::deadline::wall_clock;
use crate::refusal::{MetBy, Refused};
use sluice_core::{Alignment, FixedWindow, Key, Limit, StoreError, Timestamp};
use std::time::Duration;

impl RedisStore {
    /// Asks Redis once (within two seconds) whether it takes this store's configuration:
    /// what a server does before it starts. The probe runs, then a peek (cost 0, nothing
    /// written) at a throwaway key, so that an ACL denying the command checks use (the
    /// module's `SLUICE.CHECK`, or `EVALSHA`) is found too. An outage (Redis unreachable,
    /// loading, out of memory) is not a refusal: the store starts in it, as
    /// [`RedisStore::open`] says.
    ///
    /// # Errors
    ///
    /// The refusal: a wrong user or password, an ACL that denies a command Sluice needs, a
    /// certificate one side does not trust; its text says what to change.
    pub async fn verify_configuration(&self) -> Result<(), Refused> {
        if let Err(error) = self.channel.probe_once(CONNECT_TIMEOUT, false).await {
            return Refused::of(&error).map_or(Ok(()), Err);
        }
        let window = FixedWindow::new(1, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO);
        let Ok(window) = window else { return Ok(()) };
        let Ok(key) = Key::new(b"verify-configuration") else { return Ok(()) };
        let now = Timestamp::from_micros(wall_clock());
        // A refusal the peek meets is recorded as any check's is (answered by the failure
        // mode meanwhile).
        let _peek = self.check_limits(key, &[Limit::new("verify-configuration", window)], now, 0).await;
        self.refusal().map_or(Ok(()), Err)
    }

    /// The refusal under way: Redis refuses this store's configuration (wrong password,
    /// ACL, certificate), met by a check or a probe and not yet ended by one that succeeded.
    /// Checks meanwhile follow the failure mode; a server reports itself not ready.
    pub fn refusal(&self) -> Option<Refused> {
        self.common().refusals.current()
    }
}

impl Common {
    /// Records the refusal inside `error`, if it is one.
    pub(super) fn note_refusal(&self, error: &StoreError, met_by: MetBy) {
        if let Some(refused) = Refused::of(error) {
            self.refusals.met(refused, met_by, self.outages.target());
        }
    }
}
