//! What /proc says about the processes and threads that already exist.
//!
//! A recording starts with a snapshot of every process and thread so that
//! threads that never fork, exec or rename during the trace are still named,
//! and answers later questions about a single thread it has not seen yet.

use std::fs;
use std::path::Path;

/// One thread of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    /// Thread id (the thread koid).
    pub tid: u32,
    /// Thread name (`comm`).
    pub name: String,
}

/// One process and its threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Process id, the thread group id (the process koid).
    pub pid: u32,
    /// Process name: the main thread's `comm`.
    pub name: String,
    /// Every thread, the main thread included.
    pub threads: Vec<ThreadInfo>,
}

/// Every process and thread visible under `/proc` right now.
///
/// Processes or threads that exit while being read are skipped.
pub fn snapshot() -> Vec<ProcessInfo> {
    snapshot_at(Path::new("/proc"))
}

/// Like [`snapshot`], reading a procfs mounted at `root`.
pub fn snapshot_at(root: &Path) -> Vec<ProcessInfo> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        let Some(name) = read_comm(&dir) else {
            continue;
        };
        let mut threads = Vec::new();
        if let Ok(tasks) = fs::read_dir(dir.join("task")) {
            for task in tasks.flatten() {
                let Some(tid) = task
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok())
                else {
                    continue;
                };
                if let Some(name) = read_comm(&task.path()) {
                    threads.push(ThreadInfo { tid, name });
                }
            }
        }
        threads.sort_by_key(|t| t.tid);
        out.push(ProcessInfo { pid, name, threads });
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// The thread group (process id) and name of thread `tid`, if it still exists.
pub fn thread(tid: u32) -> Option<(u32, String)> {
    let dir = Path::new("/proc").join(tid.to_string());
    let status = fs::read_to_string(dir.join("status")).ok()?;
    let tgid = parse_status_field(&status, "Tgid")?;
    let name = read_comm(&dir).unwrap_or_default();
    Some((tgid, name))
}

/// The name of process `pid` (its main thread's `comm`), if it still exists.
pub fn process_name(pid: u32) -> Option<String> {
    read_comm(&Path::new("/proc").join(pid.to_string()))
}

fn read_comm(dir: &Path) -> Option<String> {
    let mut s = fs::read_to_string(dir.join("comm")).ok()?;
    if s.ends_with('\n') {
        s.pop();
    }
    Some(s)
}

fn parse_status_field(status: &str, key: &str) -> Option<u32> {
    status.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_contains_this_process_and_thread() {
        let me = std::process::id();
        let procs = snapshot();
        let p = procs.iter().find(|p| p.pid == me).expect("own pid listed");
        assert!(p.threads.iter().any(|t| t.tid == me));
        assert!(!p.name.is_empty());
    }

    #[test]
    fn thread_lookup_names_a_spawned_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::Builder::new()
            .name("procfs-probe".into())
            .spawn(move || {
                tx.send(unsafe_free_gettid()).unwrap();
                done_rx.recv().ok();
            })
            .unwrap();
        let tid = rx.recv().unwrap();
        let (tgid, name) = thread(tid).expect("thread visible in /proc");
        assert_eq!(tgid, std::process::id());
        assert_eq!(name, "procfs-probe");
        done_tx.send(()).unwrap();
        h.join().unwrap();
    }

    fn unsafe_free_gettid() -> u32 {
        nix::unistd::gettid().as_raw() as u32
    }

    #[test]
    fn status_field_parsing() {
        let s = "Name:\tx\nTgid:\t42\nPid:\t43\n";
        assert_eq!(parse_status_field(s, "Tgid"), Some(42));
        assert_eq!(parse_status_field(s, "Pid"), Some(43));
        assert_eq!(parse_status_field(s, "PPid"), None);
    }
}
