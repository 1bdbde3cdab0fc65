//! The manager a recording talks to: the daemon, or one run in this
//! process; and whether this process may load the kernel provider.

use std::time::Duration;

use anyhow::{Result, bail};
use trace_manager::Controller;
use trace_manager::UserspaceError;
use trace_manager::{Manager, ManagerError};

/// The manager a recording talks to: a daemon's, or one run here.
pub struct Connection {
    /// The connection.
    pub ctl: Controller,
    /// The embedded manager's task; it ends when `ctl` is dropped.
    pub embedded: Option<tokio::task::JoinHandle<()>>,
}

/// Connects to the daemon on the manager socket, else runs a manager here
/// that listens there (so providers register with it). `needs_kernel`:
/// without a daemon, the privileges to load eBPF programs are checked.
pub fn connect(needs_kernel: bool) -> Result<Connection> {
    let path = trace_manager::socket_path();
    match Controller::connect(&path) {
        Ok(ctl) => {
            log::info!("using the trace manager on {}", path.display());
            return Ok(Connection {
                ctl,
                embedded: None,
            });
        }
        // A daemon's socket this user may not use: saying that root or
        // CAP_BPF are needed would send them the wrong way (and a manager
        // run here could not take the path either). But a socket file
        // that nothing listens on (a daemon that stopped, in a folder
        // this user may not enter) is no daemon.
        Err(e @ trace_manager::ClientError::Refused { .. })
            if trace_manager::unix_socket_listening(&path) != Some(false) =>
        {
            return Err(e.into());
        }
        Err(_) => {}
    }
    if needs_kernel && let Some(what) = trace_manager::missing_privileges() {
        bail!(
            "no trace-manager daemon runs (nothing listens on {}), and recording without one \
             needs root (or the CAP_BPF and CAP_PERFMON capabilities) to run the manager here: \
             {what}. Run it with sudo, or start the daemon (`sudo systemctl start \
             trace-manager`), which records for root and the members of the `tracing` group; \
             `trace-cli doctor` says what this machine allows",
            path.display()
        );
    }
    match Manager::bind(Some(path.clone()), true) {
        Ok(manager) => embed(manager),
        // Another manager holds the socket: it may still be starting.
        Err(ManagerError::Socket(UserspaceError::Busy(_))) => {
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            loop {
                match Controller::connect(&path) {
                    Ok(ctl) => {
                        return Ok(Connection {
                            ctl,
                            embedded: None,
                        });
                    }
                    Err(e) if std::time::Instant::now() >= deadline => return Err(e.into()),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Runs `manager` in this process and connects to it.
pub fn embed(mut manager: Manager) -> Result<Connection> {
    let fd = manager.local_client()?;
    // The manager is not Send: it runs on this thread (see `run`).
    let embedded = tokio::task::spawn_local(manager.run());
    Ok(Connection {
        ctl: Controller::from_fd(fd)?,
        embedded: Some(embedded),
    })
}

/// Fails with one sentence when the process cannot load eBPF programs.
pub(super) fn check_privileges() -> Result<()> {
    match trace_manager::missing_privileges() {
        None => Ok(()),
        Some(what) => bail!(
            "recording needs root, or the CAP_BPF and CAP_PERFMON capabilities, to load the kernel \
             trace provider: {what}; run it with sudo"
        ),
    }
}
