//! Whose rights the files of `--uprobe` and `--usdt` probes are opened
//! with.
//!
//! The daemon runs as root and serves clients that are not (members of the
//! `tracing` group). A probe names a file — a path, `/proc/PID/exe`, a
//! library a process maps, a program on `PATH` — and reading it as root
//! would let a client probe a program it cannot read, and learn from the
//! errors whether a file it cannot see exists, is ELF, or has a symbol.
//! So probes are resolved on a thread of their own that first takes the
//! client's filesystem credentials ([`run_as`]): its supplementary groups,
//! fsgid and fsuid (per thread in the kernel when set with the raw system
//! calls; glibc's `setgroups` would change every thread of the process),
//! then no effective capability at all (`capset` is per thread too). Every
//! `open`, `stat` and `/proc/PID` look-up made there is then checked by the
//! kernel as the client's own: no `CAP_DAC_OVERRIDE` or
//! `CAP_DAC_READ_SEARCH` past file modes, no `CAP_SYS_PTRACE` into another
//! user's `/proc/PID/maps`, `exe` or `root`. The thread ends when the
//! probes are resolved; the rest of the process keeps its rights.
//!
//! Who the client is comes from the connection: `SO_PEERCRED` (its
//! effective uid and gid) and `SO_PEERGROUPS` (its supplementary groups),
//! both captured by the kernel when it connected, so a client that exits
//! and whose pid is reused cannot lend itself another process's groups.
//! Root clients, and the manager's own process (`trace-cli`'s embedded
//! manager), resolve with the manager's rights, as before.

use std::io;
use std::os::fd::{AsFd, AsRawFd as _};

/// Who a client is, as the kernel saw it connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCreds {
    /// Its process when it connected.
    pub pid: i32,
    /// Its effective user.
    pub uid: u32,
    /// Its effective group.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
}

impl ClientCreds {
    /// The credentials of the peer of the connected Unix socket `socket`.
    pub fn of_peer(socket: impl AsFd) -> io::Result<ClientCreds> {
        let cred = nix::sys::socket::getsockopt(
            &socket.as_fd(),
            nix::sys::socket::sockopt::PeerCredentials,
        )
        .map_err(io::Error::from)?;
        let (pid, uid, gid) = (cred.pid(), cred.uid(), cred.gid());
        let groups = match peer_groups(socket.as_fd()) {
            Ok(g) => g,
            // Before Linux 4.13: from /proc, if the pid is still the
            // client's; else its primary group only (fewer rights, never
            // more).
            Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => u32::try_from(pid)
                .ok()
                .and_then(|pid| crate::procfs::status(pid).ok())
                .and_then(|s| groups_from_status(&s, uid, gid))
                .unwrap_or_default(),
            Err(e) => return Err(e),
        };
        Ok(ClientCreds {
            pid,
            uid,
            gid,
            groups,
        })
    }

    /// The credentials of this process (its effective ids).
    pub fn of_this_process() -> ClientCreds {
        ClientCreds {
            pid: std::process::id() as i32,
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            groups: nix::unistd::getgroups()
                .unwrap_or_default()
                .into_iter()
                .map(|g| g.as_raw())
                .collect(),
        }
    }

    /// Whether files are opened for this client with rights other than the
    /// manager's: not for root, nor for the manager's own process.
    pub fn needs_switch(&self) -> bool {
        self.uid != 0 && self.pid != std::process::id() as i32
    }
}

/// The supplementary groups of `socket`'s peer (`SO_PEERGROUPS`).
fn peer_groups(socket: std::os::fd::BorrowedFd<'_>) -> io::Result<Vec<u32>> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: `groups` has room for `len` bytes, which the kernel fills
        // (and says how many it needs when that is too few).
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 1 << 16 {
            groups.resize(n, 0);
            continue;
        }
        return Err(e);
    }
}

/// The `Groups:` of a `/proc/PID/status` text, when its effective uid and
/// gid are `uid` and `gid` (the process is still the client's).
fn groups_from_status(status: &str, uid: u32, gid: u32) -> Option<Vec<u32>> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|v| v.parse::<u32>().ok())
            })
    };
    // `Uid:` and `Gid:` list the real, effective, saved and fs ids.
    let euid = field("Uid:")?.nth(1)?;
    let egid = field("Gid:")?.nth(1)?;
    if euid != uid || egid != gid {
        return None;
    }
    Some(field("Groups:")?.collect())
}

/// Runs `f` with `creds`' rights over files and `/proc`: on a thread of its
/// own that takes them first (see the module's documentation) when
/// [`ClientCreds::needs_switch`], else here. Fails when they cannot be
/// taken (a manager without `CAP_SETUID` and `CAP_SETGID`); `f` does not
/// run then.
pub fn run_as<T: Send>(creds: &ClientCreds, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    if !creds.needs_switch() {
        return Ok(f());
    }
    std::thread::scope(|s| {
        let thread = std::thread::Builder::new()
            .name("probe-resolver".into())
            .spawn_scoped(s, || {
                take(creds)?;
                Ok(f())
            })?;
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two `CapData`, 64 capabilities.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Gives the calling thread, and it only, `creds`' supplementary groups,
/// fsgid and fsuid, then no effective capability. Raw system calls: the
/// kernel keeps credentials per thread, and glibc's wrappers of
/// `setgroups` (and of the set*id calls) would apply them to every thread
/// of the process. On the architectures this runs on (x86-64, arm64) these
/// calls take 32-bit ids.
fn take(creds: &ClientCreds) -> io::Result<()> {
    let groups: Vec<libc::gid_t> = creds.groups.clone();
    // SAFETY: `groups` holds `len` ids; setgroups only reads them.
    let rc = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // setfsgid and setfsuid return the previous id and fail silently: the
    // ids are read back (an invalid id, -1, changes nothing and returns the
    // current one). fsuid last: leaving 0 drops the thread's file
    // capabilities, and CAP_SETGID is still needed before it.
    // SAFETY: these calls take plain integers.
    let (fsgid, fsuid) = unsafe {
        libc::syscall(libc::SYS_setfsgid, creds.gid);
        libc::syscall(libc::SYS_setfsuid, creds.uid);
        (
            libc::syscall(libc::SYS_setfsgid, libc::gid_t::MAX),
            libc::syscall(libc::SYS_setfsuid, libc::uid_t::MAX),
        )
    };
    if fsgid != creds.gid as libc::c_long || fsuid != creds.uid as libc::c_long {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "could not take uid {} and gid {} to open files as the client \
                 (the manager needs CAP_SETUID and CAP_SETGID)",
                creds.uid, creds.gid
            ),
        ));
    }
    // No effective capability: none past file modes (CAP_DAC_*), none into
    // another user's /proc/PID (CAP_SYS_PTRACE), none at all. The permitted
    // set is left: the thread ends after resolving anyway.
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: a version 3 header and room for its two data structs.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    for d in &mut data {
        d.effective = 0;
    }
    // SAFETY: as above; pid 0 is the calling thread.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn require_root() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test changes credentials and must run as root (sudo -E cargo test)"
        );
    }

    fn nobody() -> ClientCreds {
        ClientCreds {
            pid: 1,
            uid: 65534,
            gid: 65534,
            groups: Vec::new(),
        }
    }

    #[test]
    fn groups_come_from_status_only_while_the_process_is_the_clients() {
        let status = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\n\
                      Groups:\t4 24 27 1001 \n";
        assert_eq!(
            groups_from_status(status, 1000, 100),
            Some(vec![4, 24, 27, 1001])
        );
        assert_eq!(groups_from_status(status, 0, 100), None);
        assert_eq!(groups_from_status(status, 1000, 0), None);
        let none = "Uid:\t5\t5\t5\t5\nGid:\t5\t5\t5\t5\nGroups:\t\n";
        assert_eq!(groups_from_status(none, 5, 5), Some(vec![]));
    }

    #[test]
    fn root_and_this_process_keep_the_managers_rights() {
        let mut c = nobody();
        assert!(c.needs_switch());
        c.pid = std::process::id() as i32;
        assert!(!c.needs_switch());
        c.pid = 1;
        c.uid = 0;
        assert!(!c.needs_switch());
    }

    #[test]
    fn a_socket_pair_peer_is_this_process() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let c = ClientCreds::of_peer(&a).unwrap();
        assert_eq!(c, ClientCreds::of_this_process());
        assert!(!c.needs_switch());
    }

    #[test]
    fn root_a_thread_with_a_clients_rights_opens_what_the_client_can() {
        require_root();
        let dir = std::env::temp_dir().join(format!("trace-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, b"root only").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let open = |p: &std::path::Path| std::fs::File::open(p).map(drop);

        let as_nobody = run_as(&nobody(), || open(&secret)).unwrap();
        assert_eq!(
            as_nobody.unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        // The rest of the process is still root.
        open(&secret).unwrap();
        // A readable file is read as the client.
        let public = dir.join("public");
        std::fs::write(&public, b"anyone").unwrap();
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
        run_as(&nobody(), || open(&public)).unwrap().unwrap();
        // The group it is given counts.
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).unwrap();
        nix::unistd::chown(&secret, None, Some(nix::unistd::Gid::from_raw(4242))).unwrap();
        let member = ClientCreds {
            groups: vec![4242],
            ..nobody()
        };
        run_as(&member, || open(&secret)).unwrap().unwrap();
        assert!(run_as(&nobody(), || open(&secret)).unwrap().is_err());
        // Another user's /proc/PID: as a user would see it, CAP_SYS_PTRACE
        // gone too (the child is root's).
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let as_nobody = run_as(&nobody(), || {
            (crate::procfs::exe(pid), crate::procfs::maps(pid))
        })
        .unwrap();
        let as_root = (crate::procfs::exe(pid), crate::procfs::maps(pid));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            as_nobody.0.unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        assert_eq!(
            as_nobody.1.unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        as_root.0.unwrap();
        assert!(!as_root.1.unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn root_a_client_that_is_root_runs_here() {
        require_root();
        let root = ClientCreds {
            uid: 0,
            gid: 0,
            ..nobody()
        };
        let here = std::thread::current().id();
        assert_eq!(run_as(&root, || std::thread::current().id()).unwrap(), here);
        assert_ne!(
            run_as(&nobody(), || std::thread::current().id()).unwrap(),
            here
        );
    }
}
