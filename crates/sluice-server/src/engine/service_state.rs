//! The running service's shared state: the engine, settings, and where the config came from.

use crate::config::service_file::ServiceConfig;
use crate::config::settings::Settings;
use crate::engine::Engine;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Everything the front ends and background tasks share.
#[derive(Debug)]
pub(crate) struct ServiceState {
    pub(crate) engine: Engine,
    pub(crate) settings: Settings,
    /// The configuration file, or `None` for the built-in one.
    pub(crate) config_path: Option<PathBuf>,
    /// When the last snapshot was written.
    pub(crate) last_snapshot: Mutex<Option<Instant>>,
    /// Every worker can serve, and shutdown has not begun (`/readyz`).
    ready: AtomicBool,
    /// Serialises reloads (SIGHUP, file watch and the admin endpoint may race).
    reload_lock: tokio::sync::Mutex<()>,
    /// The configuration file's content as last read, at the start or by a reload (valid
    /// or not): the file watch reloads when the file no longer holds it.
    config_read: Mutex<Option<Vec<u8>>>,
}

/// What a reload did.
#[derive(Debug)]
pub(crate) struct ReloadReport {
    /// Policies now in force.
    pub(crate) policies: usize,
    /// Policies whose definition is new or changed (their keys start fresh).
    pub(crate) fresh: usize,
}

impl ServiceState {
    /// A service around `engine`.
    pub(crate) fn new(engine: Engine, settings: Settings, config_path: Option<PathBuf>) -> ServiceState {
        ServiceState {
            engine,
            settings,
            config_path,
            last_snapshot: Mutex::new(None),
            ready: AtomicBool::new(false),
            reload_lock: tokio::sync::Mutex::new(()),
            config_read: Mutex::new(None),
        }
    }

    /// Records `bytes` as the configuration file's content last read.
    pub(crate) fn config_read(&self, bytes: Vec<u8>) {
        *self.config_read.lock() = Some(bytes);
    }

    /// Whether the configuration file's content is `bytes`, as last read.
    pub(crate) fn config_unchanged(&self, bytes: &[u8]) -> bool {
        self.config_read.lock().as_deref() == Some(bytes)
    }

    /// Whether the service takes traffic: every worker has its store connection, and
    /// shutdown has not begun.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Marks the service ready, or no longer ready (shutdown).
    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Reads the configuration file again and, when valid, puts it in force atomically.
    /// An invalid file is refused (logged and counted) and the old configuration stays.
    pub(crate) async fn reload(&self) -> anyhow::Result<ReloadReport> {
        let _one_at_a_time = self.reload_lock.lock().await;
        let Some(path) = &self.config_path else {
            anyhow::bail!("the service runs the built-in configuration: there is no file to reload");
        };
        let loaded = ServiceConfig::read_file(path).and_then(|bytes| {
            let config = ServiceConfig::from_file_bytes(path, &bytes);
            self.config_read(bytes);
            let config = config?;
            crate::config::leases::check_leases(&self.settings, config.limits()).map_err(anyhow::Error::msg)?;
            Ok(config)
        });
        let config = loaded.inspect_err(|error| {
            self.engine.metrics().count_reload(false);
            tracing::error!("configuration reload refused, the old one stays: {error:#}");
        })?;
        if config.server != self.engine.loaded().config.server {
            tracing::warn!("the `server:` section changed; its settings take effect at the next restart");
        }
        let old = self.engine.loaded().config.limit_ids();
        let fresh = config.limit_ids().iter().filter(|id| !old.contains(id)).count();
        let report = ReloadReport { policies: config.policies().len(), fresh };
        self.engine.replace(config);
        // Units leased under the old limits go back (new limits lease afresh).
        self.engine.backend().settle_leases(self.engine.now(), sluice_core::lease::Unspent::All).await;
        // Counted once in force, so whoever sees the count also sees the new policies.
        self.engine.metrics().count_reload(true);
        tracing::info!(policies = report.policies, fresh = report.fresh, "configuration reloaded");
        Ok(report)
    }
}
