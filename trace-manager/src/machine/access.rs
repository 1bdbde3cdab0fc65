//! The caller's side: its rights to load eBPF programs, and the daemon's
//! socket.

use super::{Finding, Status};
use crate::client::{ClientError, Controller};
use crate::kernel::privileges;
use crate::procfs::unix_socket_listening;

pub(super) const RIGHTS: &str = "rights";
pub(super) const DAEMON: &str = "daemon";

/// The group whose members the daemon records for.
const GROUP: &str = "tracing";

pub(super) fn rights() -> Finding {
    let uid = nix::unistd::geteuid();
    match privileges::missing() {
        None if uid.is_root() => Finding {
            check: RIGHTS,
            status: Status::Ok,
            detail: "root: may load eBPF programs and record without the daemon".to_owned(),
            fix: None,
        },
        None => Finding {
            check: RIGHTS,
            status: Status::Ok,
            detail: "not root, but has the capabilities to load eBPF programs (CAP_BPF and \
                     CAP_PERFMON, or CAP_SYS_ADMIN)"
                .to_owned(),
            fix: None,
        },
        Some(what) => {
            let member = in_group(GROUP);
            Finding {
                check: RIGHTS,
                status: Status::Missing,
                detail: format!(
                    "{what} of the capabilities to load eBPF programs (uid {uid}{})",
                    if member {
                        ", a member of the `tracing` group"
                    } else {
                        ""
                    }
                ),
                fix: Some(if member {
                    "record through the daemon (`sudo systemctl start trace-manager`)".to_owned()
                } else {
                    "run as root (sudo), or join the `tracing` group (`sudo usermod -aG tracing \
                     $USER`, then log in again) and record through the daemon"
                        .to_owned()
                }),
            }
        }
    }
}

/// Whether this process is in group `name` (effective, real or
/// supplementary).
fn in_group(name: &str) -> bool {
    let Ok(Some(group)) = nix::unistd::Group::from_name(name) else {
        return false;
    };
    nix::unistd::getegid() == group.gid
        || nix::unistd::getgid() == group.gid
        || nix::unistd::getgroups().is_ok_and(|groups| groups.contains(&group.gid))
}

pub(super) fn daemon() -> Finding {
    let path = crate::socket_path();
    let shown = path.display();
    // The controller's socket is registered with a reactor.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return Finding {
                check: DAEMON,
                status: Status::Unknown,
                detail: format!("cannot start a runtime to connect to {shown}: {e}"),
                fix: None,
            };
        }
    };
    let _entered = runtime.enter();
    match Controller::connect(&path) {
        Ok(_) => Finding {
            check: DAEMON,
            status: Status::Ok,
            detail: format!("a trace manager listens on {shown}, and this user may use it"),
            fix: None,
        },
        Err(ClientError::Refused { error, .. }) if unix_socket_listening(&path) != Some(false) => {
            Finding {
                check: DAEMON,
                status: Status::Missing,
                detail: format!(
                    "a trace manager listens on {shown}, but refuses this user ({error})"
                ),
                fix: Some(
                    "join the `tracing` group (`sudo usermod -aG tracing $USER`, then log in \
                     again), or run as root"
                        .to_owned(),
                ),
            }
        }
        Err(e) => Finding {
            check: DAEMON,
            status: Status::Missing,
            detail: format!("{e}: recordings run their own manager, which needs root"),
            fix: Some(
                "`sudo systemctl start trace-manager` (the Debian package's service), or \
                 `sudo trace-manager` for a daemon in the foreground"
                    .to_owned(),
            ),
        },
    }
}
