//! Hot reload: on SIGHUP, and when the configuration file's content changes.
//!
//! The file is polled once a second rather than watched with inotify: polling sees every
//! way a file gets replaced (editors' rename-over, ConfigMap symlink swaps, network file
//! systems) with one code path, at the cost of reading a small file each second.

use crate::engine::service_state::ServiceState;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the configuration file is compared with what was last loaded.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// Installs the SIGHUP handler now (so a SIGHUP never kills the process once this returns)
/// and reloads on each SIGHUP until the process ends.
pub(crate) fn on_sighup(service: Arc<ServiceState>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: reload by file change or POST /v1/reload");
            return;
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading the configuration");
                let _ = service.reload().await;
            }
        });
    }
    #[cfg(not(unix))]
    let _ = service;
}

/// Starts reloading when the file's content changes, until the process ends. The content
/// compared with is the one last read ([`ServiceState::config_unchanged`]): the one parsed at
/// the start, so that a change made while the service started is reloaded, or by the
/// last reload, whatever asked for it (a SIGHUP, the admin endpoint), so that the same
/// content is not reloaded twice.
pub(crate) fn on_file_change(service: Arc<ServiceState>) {
    let Some(path) = service.config_path.clone() else { return };
    tokio::spawn(poll_file(service, path));
}

/// Compares the file with the content last read every [`POLL_EVERY`], reloading when it
/// changed. A file that cannot be read is reported once, until it can be again.
async fn poll_file(service: Arc<ServiceState>, path: PathBuf) {
    let mut ticks = tokio::time::interval(POLL_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut unreadable = false;
    loop {
        ticks.tick().await;
        let now = match tokio::fs::read(&path).await {
            Ok(now) => now,
            Err(error) => {
                if !unreadable {
                    tracing::warn!(path = %path.display(), "cannot read the configuration file, the one in force stays: {error}");
                }
                unreadable = true;
                continue;
            }
        };
        unreadable = false;
        if !service.config_unchanged(&now) {
            tracing::info!(path = %path.display(), "the configuration file changed: reloading");
            let _ = service.reload().await;
        }
    }
}
