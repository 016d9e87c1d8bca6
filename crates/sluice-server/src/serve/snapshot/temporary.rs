//! The temporary files that saves write before renaming them over the snapshot, and the
//! removal of those that a process killed mid-save (`kill -9`, a power cut) left behind.
//!
//! Each process writes `<path>.tmp-<pid>`. At start-up, before this process saves, the
//! files of `<path>` whose process is no longer running are removed, and so is this
//! process's own name: it can only be a leftover of an earlier process that had the same
//! pid (a container's first process is pid 1 at every start). The file of a process that
//! is running (another Sluice saving the same path) is left alone; so is one whose pid a
//! new, unrelated process took, until that process ends. Whether a process runs is read
//! from `/proc/<pid>`; where there is no `/proc`, nothing is removed.

use std::path::{Path, PathBuf};

/// Where process `pid` writes a snapshot of `path` before renaming it over `path`.
pub(super) fn path_for(path: &Path, pid: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp-{pid}"));
    PathBuf::from(name)
}

/// Removes the temporary files of `path` left by processes no longer running, and this
/// process's own; the files removed.
pub(super) fn remove_stale(path: &Path) -> Vec<PathBuf> {
    if !Path::new("/proc/self").exists() {
        return Vec::new();
    }
    let own = std::process::id();
    let stale = leftovers(path).into_iter().filter(|&(pid, _)| pid == own || !is_running(pid));
    stale.filter_map(|(_, file)| remove(file)).collect()
}

/// The temporary files of `path`, with the pid in each name.
fn leftovers(path: &Path) -> Vec<(u32, PathBuf)> {
    let folder = super::folder_of(path);
    let Some(prefix) = path.file_name().and_then(|name| name.to_str()).map(|name| format!("{name}.tmp-")) else {
        return Vec::new();
    };
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(error) => {
            tracing::warn!(folder = %folder.display(), "cannot look for leftover temporary snapshots: {error}");
            return Vec::new();
        }
    };
    let pid_of =
        |name: &str| name.strip_prefix(&prefix).filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))?.parse().ok();
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| Some((pid_of(entry.file_name().to_str()?)?, entry.path())))
        .collect()
}

fn is_running(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes `file`, logging the result; `file` when it was removed.
fn remove(file: PathBuf) -> Option<PathBuf> {
    match std::fs::remove_file(&file) {
        Ok(()) => {
            tracing::info!(file = %file.display(), "removed a temporary snapshot left by an interrupted save");
            Some(file)
        }
        Err(error) => {
            tracing::warn!(file = %file.display(), "cannot remove a leftover temporary snapshot: {error}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pid of a process that has ended and been reaped: no process has it now (pids
    /// are reused only after the counter wraps around).
    fn ended_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn removes_the_files_of_ended_processes_and_its_own_but_not_a_running_ones() {
        let dir = std::env::temp_dir().join(format!("sluice-snapshot-tmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sluice.snapshot");
        let running = std::process::Command::new("sleep").arg("60").spawn();
        let mut running = running.unwrap();
        let ended = path_for(&path, ended_pid());
        let own = path_for(&path, std::process::id());
        let alive = path_for(&path, running.id());
        let others = [dir.join("sluice.snapshot.tmp-x1"), dir.join("other.snapshot.tmp-1"), path.clone()];
        for file in [&ended, &own, &alive].into_iter().chain(&others) {
            std::fs::write(file, b"partial").unwrap();
        }
        let mut removed = remove_stale(&path);
        removed.sort();
        let mut expected = vec![ended, own];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(alive.exists(), "a running process's file is left alone");
        assert!(others.iter().all(|file| file.exists()), "only temporary snapshots of this path are removed");
        running.kill().unwrap();
        running.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
