//! Refused snapshots (`--discard-bad-snapshot`), kept aside for a post-mortem.
//!
//! Each goes to a name of its own, `<path>.bad-<unix seconds>` (`-2`, `-3`, … added when two
//! are refused within one second), so that a second refusal does not overwrite the first;
//! the name always orders after those kept, so the newest is never the one pruned.
//! Only the [`KEPT`] newest are kept: a service restarted in a loop on a bad file must not
//! fill the disk with copies of a large store.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// How many refused snapshots of one path are kept, the newest first.
pub(super) const KEPT: usize = 3;

/// Renames the refused snapshot at `path` to a fresh `<path>.bad-…` name for time `now`,
/// then removes the oldest refused snapshots beyond [`KEPT`]; where the file went.
///
/// # Errors
///
/// When the file cannot be renamed; it is then left where it is.
pub(super) fn set_aside(path: &Path, now: SystemTime) -> std::io::Result<PathBuf> {
    let aside = newest_name(path, now);
    std::fs::rename(path, &aside)?;
    for old in remove_beyond_kept(path) {
        tracing::info!(file = %old.display(), "removed an older refused snapshot (the {KEPT} newest are kept)");
    }
    Ok(aside)
}

/// A name for a refused snapshot of `path` at `now` that orders after every refused
/// snapshot kept: `(seconds, n)` past the newest's. Never a name pruning freed: a freed
/// `<seconds>` (the oldest of a second) taken again would be the first pruned.
fn newest_name(path: &Path, now: SystemTime) -> PathBuf {
    let seconds = now.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    let newest = refused(path).into_iter().map(|(order, _)| order).max();
    let (seconds, n) = match newest {
        // A clock set back still orders the new one last.
        Some((newest, n)) if newest >= seconds => (newest, n + 1),
        _ => (seconds, 1),
    };
    name_for(path, seconds, n)
}

/// `<path>.bad-<seconds>` for the first refusal in that second, `<path>.bad-<seconds>-<n>` after.
fn name_for(path: &Path, seconds: u64, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".bad-{seconds}"));
    if n > 1 {
        name.push(format!("-{n}"));
    }
    PathBuf::from(name)
}

/// Removes the refused snapshots of `path` but the [`KEPT`] newest; those removed.
fn remove_beyond_kept(path: &Path) -> Vec<PathBuf> {
    let mut refused = refused(path);
    refused.sort_unstable_by_key(|&(order, _)| std::cmp::Reverse(order));
    let removed = refused.into_iter().skip(KEPT).map(|(_, file)| file);
    removed.filter(|file| std::fs::remove_file(file).is_ok()).collect()
}

/// The refused snapshots of `path`, each with its `(seconds, n)` from its name.
fn refused(path: &Path) -> Vec<((u64, u32), PathBuf)> {
    let Some(prefix) = path.file_name().and_then(|name| name.to_str()).map(|name| format!("{name}.bad-")) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(super::folder_of(path)) else {
        return Vec::new();
    };
    let order_of = |name: &str| order(name.strip_prefix(&prefix)?);
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| Some((order_of(entry.file_name().to_str()?)?, entry.path())))
        .collect()
}

/// `(seconds, n)` of a name's suffix, `<seconds>` or `<seconds>-<n>`.
fn order(suffix: &str) -> Option<(u64, u32)> {
    let (seconds, n) = suffix.split_once('-').unwrap_or((suffix, "1"));
    let number = |text: &str| text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok()).flatten();
    Some((number(seconds)?, u32::try_from(number(n)?).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn each_refused_snapshot_gets_a_name_of_its_own_and_only_the_newest_are_kept() {
        let dir = std::env::temp_dir().join(format!("sluice-snapshot-aside-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sluice.snapshot");
        let unrelated = dir.join("sluice.snapshot.bad");
        std::fs::write(&unrelated, b"left alone").unwrap();
        let mut kept = Vec::new();
        for (content, seconds) in [("first", 100), ("second", 100), ("third", 99), ("fourth", 200)] {
            std::fs::write(&path, content).unwrap();
            let aside = set_aside(&path, at(seconds)).unwrap();
            assert_eq!(std::fs::read_to_string(&aside).unwrap(), content);
            assert!(!path.exists());
            kept.push(aside);
        }
        let names: Vec<_> = kept.iter().map(|file| file.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "sluice.snapshot.bad-100",
                "sluice.snapshot.bad-100-2",
                "sluice.snapshot.bad-100-3", // refused at 99: a clock set back orders it last still
                "sluice.snapshot.bad-200"
            ]
        );
        assert!(!kept[0].exists(), "the oldest is removed");
        assert!(kept.iter().filter(|file| file.exists()).count() == KEPT);
        assert!(unrelated.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // Regression test for issue 35.7: the fifth refusal within one second took the name the
    // first one freed when pruned, and was pruned at once as the oldest.
    #[test]
    fn many_refusals_within_one_second_keep_the_newest() {
        let dir = std::env::temp_dir().join(format!("sluice-snapshot-aside-burst-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sluice.snapshot");
        for round in 0..7 {
            std::fs::write(&path, format!("refusal {round}")).unwrap();
            let aside = set_aside(&path, at(100)).unwrap();
            assert_eq!(std::fs::read_to_string(&aside).unwrap(), format!("refusal {round}"), "the newest is kept");
        }
        let mut kept: Vec<String> =
            refused(&path).into_iter().map(|(_, file)| std::fs::read_to_string(file).unwrap()).collect();
        kept.sort();
        assert_eq!(kept, ["refusal 4", "refusal 5", "refusal 6"]);
        std::fs::write(&path, "clock set back").unwrap();
        let aside = set_aside(&path, at(50)).unwrap();
        assert!(aside.exists(), "a refusal at an earlier time is still the newest");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn orders_by_time_then_by_number() {
        assert_eq!(order("1700000000"), Some((1_700_000_000, 1)));
        assert_eq!(order("1700000000-12"), Some((1_700_000_000, 12)));
        assert!(order("9") < order("10"));
        assert_eq!(order("x"), None);
        assert_eq!(order("1-"), None);
        assert_eq!(order("+1"), None);
    }
}
