//! Hot reload: on SIGHUP, and when the configuration file's content changes.
//!
//! The file is polled once a second rather than watched with inotify: polling sees every
//! way a file gets replaced (editors' rename-over, ConfigMap symlink swaps, network file
//! systems) with one code path, at the cost of reading a small file each second.

use crate::service::Service;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the configuration file is compared with what was last loaded.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// Installs the SIGHUP handler now (so a SIGHUP never kills the process once this returns)
/// and reloads on each SIGHUP until the process ends.
pub(crate) fn on_sighup(service: Arc<Service>) {
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
/// compared with is read before this returns, so before the service is announced: read
/// later by the polling task, a change made right after the announcement could be taken
/// for the starting content, and never reloaded.
pub(crate) async fn on_file_change(service: Arc<Service>) {
    let Some(path) = service.config_path.clone() else { return };
    let seen = tokio::fs::read(&path).await.ok();
    tokio::spawn(poll_file(service, path, seen));
}

/// Compares the file with `seen` every [`POLL_EVERY`], reloading when it changed.
async fn poll_file(service: Arc<Service>, path: PathBuf, mut seen: Option<Vec<u8>>) {
    let mut ticks = tokio::time::interval(POLL_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now = tokio::fs::read(&path).await.ok();
        if now.is_some() && now != seen {
            tracing::info!(path = %path.display(), "the configuration file changed: reloading");
            let _ = service.reload().await;
            seen = now;
        }
    }
}
