//! The in-memory store's snapshot file: loaded at start, written periodically and at
//! shutdown, always atomically (temporary file, fsync, rename, fsync of the folder), so a
//! crash at any moment leaves either the old snapshot or the new one, never a torn file.
//! What a crash mid-save leaves behind is removed at the next start ([`temporary`]); a
//! file that cannot be loaded may be set aside ([`aside`]).

mod aside;
mod temporary;

use crate::engine::service_state::ServiceState;
use crate::envoy::OVERRIDE_NAME;
use anyhow::Context;
use sluice_core::{Limit, MemoryStore};
use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Loads `path` into `store`, keeping the states of `limits` and of Envoy's
/// per-descriptor overrides (limits made per request, which no configuration lists: they
/// are read back from the snapshot's definitions).
///
/// A missing file means a first start. A file that cannot be loaded stops the start,
/// unless `discard_bad` is set: then it is renamed aside (`<path>.bad-<unix seconds>`, see
/// [`aside`]) and the store starts empty. Temporary files that interrupted saves left
/// are removed first ([`temporary`]).
pub(crate) fn load(path: &Path, store: &MemoryStore, limits: &[Limit], discard_bad: bool) -> anyhow::Result<()> {
    temporary::remove_stale(path);
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %absolute(path).display(), "no snapshot yet: starting empty");
            return Ok(());
        }
        Err(error) => return refuse(path, discard_bad, anyhow::Error::new(error).context("cannot read it")),
    };
    match store.restore_adopting(&bytes, limits, |limit| limit.name() == OVERRIDE_NAME) {
        Ok(report) => {
            tracing::info!(
                path = %absolute(path).display(),
                restored = report.restored,
                fresh = report.fresh,
                skipped_states = report.skipped_states,
                "{}",
                describe(&report)
            );
            Ok(())
        }
        Err(error) => refuse(path, discard_bad, anyhow::Error::new(error)),
    }
}

/// What a restore did, in a sentence.
fn describe(report: &sluice_core::RestoreReport) -> String {
    let now = sluice_core::Clock::now(&sluice_core::SystemClock::new());
    let age = now.as_micros().saturating_sub(report.taken_at.as_micros()) / 1_000_000;
    let mut text = format!("snapshot loaded, taken {age} s ago: {} states restored", report.restored);
    if report.fresh > 0 {
        text += &format!(", {} already back to fresh (dropped)", report.fresh);
    }
    if report.present > 0 {
        text += &format!(", {} already held (kept the live ones)", report.present);
    }
    if report.evicted > 0 {
        text += &format!(", {} dropped to stay within max_keys", report.evicted);
    }
    if report.skipped_limits > 0 {
        text += &format!(
            ", {} states of {} removed or changed policies (those start fresh)",
            report.skipped_states, report.skipped_limits
        );
    }
    text
}

/// `path` made absolute against the working directory (as it is when it cannot be), so
/// the logs and the start-up lines say where the file really is.
pub(crate) fn absolute(path: &Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

fn refuse(path: &Path, discard_bad: bool, error: anyhow::Error) -> anyhow::Result<()> {
    if !discard_bad {
        return Err(error.context(format!(
            "the snapshot {} cannot be loaded (move it away, or start with --discard-bad-snapshot to start empty)",
            path.display()
        )));
    }
    match aside::set_aside(path, SystemTime::now()) {
        Ok(aside) => {
            tracing::warn!(path = %path.display(), aside = %aside.display(), "snapshot refused and set aside, starting empty: {error:#}");
        }
        Err(moving) => {
            tracing::warn!(path = %path.display(), "snapshot refused, starting empty; it cannot be set aside ({moving}): {error:#}");
        }
    }
    Ok(())
}

/// One save at a time: the periodic snapshot and the last one at shutdown share the
/// temporary file, and the later one must be renamed last.
static SAVING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Writes `store`'s snapshot to `path` atomically (after any save in progress).
pub(crate) fn save(path: &Path, store: &MemoryStore) -> anyhow::Result<()> {
    let _one_at_a_time = SAVING.lock();
    let temporary = temporary::path_for(path, std::process::id());
    let written = write_synced(&temporary, store).and_then(|()| {
        std::fs::rename(&temporary, path).with_context(|| format!("cannot rename it to {}", path.display()))
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.with_context(|| format!("cannot write the snapshot {}", path.display()))?;
    sync_folder(path);
    Ok(())
}

/// Writes `store`'s snapshot to a new file at `path` shard by shard, and syncs it. Only one
/// shard's encoding is in memory at a time: a whole snapshot in one buffer (25 bytes a
/// fixed-window state) was freed after each save but stayed resident, in mimalloc's huge
/// pages, for the next one (docs/benchmarks.md, "Memory soak").
fn write_synced(path: &Path, store: &MemoryStore) -> anyhow::Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
    store.write_snapshot(&mut out)?;
    let file = out.into_inner().map_err(std::io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok(())
}

/// Makes the rename durable. Best effort: some file systems refuse to sync a folder.
fn sync_folder(path: &Path) {
    if let Ok(folder) = std::fs::File::open(folder_of(path)) {
        let _ = folder.sync_all();
    }
}

/// The folder `path` is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Writes a snapshot now, on a blocking thread, recording the result.
pub(crate) async fn save_now(service: &Arc<ServiceState>) -> bool {
    let (Some(path), Some(store)) = (service.settings.snapshot.clone(), service.engine.backend().memory().cloned())
    else {
        return true;
    };
    let saved = tokio::task::spawn_blocking(move || save(&path, &store)).await;
    let ok = match saved {
        Ok(Ok(())) => true,
        Ok(Err(error)) => {
            tracing::error!("snapshot failed: {error:#}");
            false
        }
        Err(error) => {
            tracing::error!("snapshot task failed: {error}");
            false
        }
    };
    service.engine.metrics().count_snapshot(ok);
    if ok {
        *service.last_snapshot.lock() = Some(Instant::now());
    }
    ok
}

/// Writes a snapshot every interval, until the task is aborted (a save in progress then
/// still completes before the next one starts).
pub(crate) async fn run_periodically(service: Arc<ServiceState>) {
    let mut ticks = tokio::time::interval(service.settings.snapshot_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        save_now(&service).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Key, SlidingLog, SlidingLogVariant, Timestamp};
    use std::time::Duration;

    /// Saves racing each other (a periodic one and the last one at shutdown) each leave
    /// a whole snapshot behind, never one mixed from both.
    #[test]
    fn concurrent_saves_leave_a_whole_snapshot() {
        let dir = std::env::temp_dir().join(format!("sluice-snapshot-race-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sluice.snapshot");
        let limit =
            Limit::new("log", SlidingLog::new(50, Duration::from_secs(3600), SlidingLogVariant::Accepted).unwrap());
        let now = Timestamp::from_system_time(std::time::SystemTime::now());
        let stores: Vec<MemoryStore> = (0..4)
            .map(|store| {
                let memory = MemoryStore::new();
                for key in 0..2_000 {
                    let key = format!("store-{store}-key-{key}");
                    memory
                        .check_now(Key::new(key.as_bytes()).unwrap(), std::slice::from_ref(&limit), now, store + 1)
                        .unwrap();
                }
                memory
            })
            .collect();
        for _ in 0..5 {
            std::thread::scope(|scope| {
                for store in &stores {
                    scope.spawn(|| save(&path, store).unwrap());
                }
            });
            let restored = MemoryStore::new().restore(&std::fs::read(&path).unwrap(), std::slice::from_ref(&limit));
            assert_eq!(restored.unwrap().restored, 2_000);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
