//! Every read of `/proc`: what it says about the processes and threads that
//! exist, and about this process.
//!
//! A recording starts with a snapshot of every process and thread so that
//! threads that never fork, exec or rename during the trace are still named,
//! and answers later questions about a single thread it has not seen yet.
//! Probes are resolved through a process's program, memory maps and root
//! directory; the client's groups come from its status when the socket
//! cannot tell them; the kernel provider reads its own capabilities and its
//! programs' `fdinfo`; the memory budget starts from `MemTotal`.
//!
//! Not here: `/proc/self/fd/N` paths handed to the kernel to attach a probe
//! through a descriptor already open (`ProgramFile::attach_path`), which
//! name a file rather than read anything.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd};
use std::path::{Path, PathBuf};

/// Where procfs is.
const PROC: &str = "/proc";

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
    snapshot_at(Path::new(PROC))
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
    let dir = Path::new(PROC).join(tid.to_string());
    let status = fs::read_to_string(dir.join("status")).ok()?;
    let tgid = parse_status_field(&status, "Tgid")?;
    let name = read_comm(&dir).unwrap_or_default();
    Some((tgid, name))
}

/// The name of process `pid` (its main thread's `comm`), if it still exists.
pub fn process_name(pid: u32) -> Option<String> {
    read_comm(&Path::new(PROC).join(pid.to_string()))
}

/// Whether process `pid` exists now.
pub fn process_exists(pid: u32) -> bool {
    pid != 0 && Path::new(&format!("{PROC}/{pid}/task")).is_dir()
}

/// The thread ids of process `pid`, `None` if it does not exist.
pub fn thread_ids(pid: u32) -> Option<Vec<u32>> {
    if pid == 0 {
        return None;
    }
    let dir = fs::read_dir(format!("{PROC}/{pid}/task")).ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

/// The text of `/proc/PID/status`.
pub fn status(pid: u32) -> io::Result<String> {
    fs::read_to_string(format!("{PROC}/{pid}/status"))
}

/// `/proc/PID/exe`, the link to the program process `pid` runs (for
/// messages; [`exe`] reads it).
pub fn exe_link(pid: u32) -> PathBuf {
    PathBuf::from(format!("{PROC}/{pid}/exe"))
}

/// The program process `pid` runs, as its mount namespace names it.
pub fn exe(pid: u32) -> io::Result<PathBuf> {
    fs::read_link(exe_link(pid))
}

/// `/proc/PID/maps` (for messages; [`maps`] reads it).
pub fn maps_file(pid: u32) -> PathBuf {
    PathBuf::from(format!("{PROC}/{pid}/maps"))
}

/// The text of `/proc/PID/maps`: what process `pid` maps.
pub fn maps(pid: u32) -> io::Result<String> {
    fs::read_to_string(maps_file(pid))
}

/// `path`, as process `pid` names it, reached through its root directory
/// (`/proc/PID/root`) when that exists, else `path` itself.
pub fn via_root(pid: u32, path: &Path) -> PathBuf {
    let via = PathBuf::from(format!("{PROC}/{pid}/root{}", path.display()));
    if via.exists() {
        via
    } else {
        path.to_path_buf()
    }
}

/// The effective capability set of this process (`CapEff` of its status).
pub fn effective_capabilities() -> Option<u64> {
    let status = fs::read_to_string(format!("{PROC}/self/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

/// What the kernel says of this process's descriptor `fd`
/// (`/proc/self/fdinfo/N`).
pub fn fdinfo(fd: BorrowedFd<'_>) -> Option<String> {
    fs::read_to_string(format!("{PROC}/self/fdinfo/{}", fd.as_raw_fd())).ok()
}

/// The path of the file this process's descriptor `fd` is open on (the
/// target of `/proc/self/fd/N`: possibly not absolute, as `pipe:[N]`).
pub fn fd_target(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    fs::read_link(format!("{PROC}/self/fd/{}", fd.as_raw_fd()))
}

/// Whether a Unix socket listens on `path`, in this network namespace or
/// in init's (a line of `/proc/net/unix`, or of `/proc/1/net/unix`, with
/// the listening flag and that path); `None` when neither can be read. A
/// socket file that nothing listens on any more (its daemon killed) is in
/// no line. Each table lists its own namespace's sockets only, but a
/// socket bound to a path is reached from any namespace that sees the
/// path: a client in a network namespace of its own (a container, a
/// machine reached by ssh into one) uses the daemon that listens in the
/// host's.
pub fn unix_socket_listening(path: &Path) -> Option<bool> {
    let mut known = None;
    for table in [format!("{PROC}/net/unix"), format!("{PROC}/1/net/unix")] {
        if let Ok(text) = fs::read_to_string(table) {
            if listening_in(&text, path) {
                return Some(true);
            }
            known = Some(false);
        }
    }
    known
}

/// [`unix_socket_listening`] on the text of `/proc/net/unix`.
fn listening_in(table: &str, path: &Path) -> bool {
    /// `__SO_ACCEPTCON`: the socket listens.
    const ACCEPTING: u32 = 1 << 16;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    table.lines().skip(1).any(|line| {
        // Num RefCount Protocol Flags Type St Inode Path: numbers padded
        // with spaces, then the path, which may hold spaces (none when
        // the socket is not bound to one).
        let mut rest = line;
        let mut fields = [""; 7];
        for field in &mut fields {
            rest = rest.trim_start();
            let end = rest.find(' ').unwrap_or(rest.len());
            (*field, rest) = rest.split_at(end);
        }
        let flags = u32::from_str_radix(fields[3], 16).unwrap_or(0);
        let bound = Path::new(rest.trim_start());
        flags & ACCEPTING != 0 && (bound == path || bound == absolute)
    })
}

/// The machine's memory in bytes (`MemTotal` of `/proc/meminfo`).
pub fn mem_total() -> Option<u64> {
    let meminfo = fs::read_to_string(format!("{PROC}/meminfo")).ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
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
    fn listening_sockets_are_found_by_path() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                     0000000000000000: 00000002 00000000 00010000 0005 01   45 /run/tm/provider.sock\n\
                     0000000000000000: 00000002 00000000 00000000 0005 01 2346 /run/tm/stale.sock\n\
                     0000000000000000: 00000002 00000000 00010000 0001 01 2347 /tmp/a b.sock\n\
                     0000000000000000: 00000002 00000000 00010000 0001 01 2348\n";
        assert!(listening_in(table, Path::new("/run/tm/provider.sock")));
        assert!(!listening_in(table, Path::new("/run/tm/stale.sock")));
        assert!(listening_in(table, Path::new("/tmp/a b.sock")));
        assert!(!listening_in(table, Path::new("/run/tm/other.sock")));
    }

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
