//! Not an API: the service's check path as `benches/figures.rs` drives it, on the
//! embedded store, with the per-policy figures on or off, so that one run compares both.

use crate::config::service_file::ServiceConfig;
use crate::engine::Engine;
use crate::engine::backend::Backend;
use crate::metrics::{FigureSettings, Metrics};
use futures_util::FutureExt;
use sluice_core::MemoryStore;

/// The configuration benchmarked: `roomy` allows every check, `tight` denies all but one
/// per key and hour.
const CONFIG: &str = r"
policies:
  roomy: {algorithm: fixed_window, limit: 1000000000, window: 1h}
  tight: {algorithm: fixed_window, limit: 1, window: 1h}
";

/// Whether the per-policy figures are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figures {
    /// Counted, as `sluice serve` does by default (`top_keys: 64`).
    On,
    /// Not counted: the check path as it was before them.
    Off,
}

/// The check path of `sluice serve` on the embedded store.
#[derive(Debug)]
pub struct CheckPath {
    engine: Engine,
}

impl CheckPath {
    /// A check path with the figures on or off.
    ///
    /// # Panics
    ///
    /// Never: the configuration is a constant that parses.
    #[must_use]
    pub fn new(figures: Figures) -> CheckPath {
        let config = ServiceConfig::parse(CONFIG).expect("the bench configuration parses");
        let metrics = Metrics::new(FigureSettings::default());
        let metrics = if figures == Figures::On { metrics } else { metrics.without_figures() };
        let backend = Backend::Memory(MemoryStore::builder().build());
        CheckPath { engine: Engine::new(backend, config, metrics, false) }
    }

    /// Checks `key` against `policy` (`roomy` or `tight`) at cost 1; whether it was allowed.
    ///
    /// # Panics
    ///
    /// When the check is refused (an unknown policy or an invalid key) or does not decide
    /// at once (the embedded store always does).
    pub fn check(&self, policy: &str, key: &[u8]) -> bool {
        let answer = self.engine.check(key, &[policy], 1).now_or_never().expect("the embedded store decides at once");
        answer.expect("a valid check").decision.allowed
    }
}
