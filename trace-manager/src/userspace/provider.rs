//! A registered provider: its control socket, its part in the session, and
//! the messages the manager sends it.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use nix::sys::socket::{MsgFlags, send};
use trace_common::provider::BufferDisposition;
use trace_common::provider::clock::ClockKind;
use trace_common::provider::control::ManagerMessage;

use super::buffer::Buffer;
use super::collect::Forwarder;
use super::{ProviderInfo, io};
use crate::limits::Slot;

/// A provider's part in the current session.
pub(super) struct Trace {
    /// Unique among every trace of the registry.
    pub(super) serial: u64,
    pub(super) fifo: OwnedFd,
    pub(super) buffer: Buffer,
    pub(super) fwd: Forwarder,
    /// Watches the FIFO; aborted when the trace ends.
    pub(super) watcher: tokio::task::AbortHandle,
    pub(super) started: bool,
    pub(super) stopped: bool,
    pub(super) last_saved: Option<u32>,
    pub(super) last_durable: u64,
    /// The buffer holds records not yet written to the output.
    pub(super) unwritten: bool,
    /// A streaming save asked for while the output was too far behind its
    /// reader (wrapped count, durable end): acknowledged once it has
    /// room, the provider meanwhile dropping (and counting) what finds no
    /// room in its other buffer.
    pub(super) deferred: Option<(u32, u64)>,
}

pub(super) struct Provider {
    pub(super) info: ProviderInfo,
    /// Its user, as the kernel saw it connect (for the registry's
    /// per-user share).
    pub(super) uid: u32,
    pub(super) clock: ClockKind,
    pub(super) ctl: OwnedFd,
    pub(super) ctl_watcher: tokio::task::AbortHandle,
    pub(super) trace: Option<Trace>,
    pub(super) aborted: bool,
    pub(super) gone: bool,
    /// Its place among the manager's connections, freed with it.
    pub(super) _slot: Option<Slot>,
}

impl Trace {
    /// Writes into `out` what the buffer holds that was not written yet,
    /// as a stop does. The mapping is the manager's: a provider that
    /// crashed or went silent is collected too.
    pub(super) fn collect_unwritten<W: std::io::Write>(
        &mut self,
        out: &mut crate::output::FxtStream<W>,
        mode: trace_common::provider::BufferingMode,
    ) -> Result<(), crate::output::OutputError> {
        self.unwritten = false;
        // A save that waited is part of this last collection.
        self.deferred = None;
        let snap = self.buffer.snapshot(mode);
        super::collect::collect(
            out,
            &mut self.fwd,
            &snap,
            mode,
            super::collect::Rolling::Final {
                last_saved: self.last_saved,
            },
        )
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.ctl_watcher.abort();
        if let Some(t) = &self.trace {
            t.watcher.abort();
        }
    }
}

/// Where the registry is in the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Idle,
    Initialized,
    Started,
    Stopped,
}

/// Sends Start to one provider in the session; clears what the manager
/// knows of its buffer when the provider clears it.
pub(super) fn start_one(p: &mut Provider, disposition: BufferDisposition, additional: &[String]) {
    let Some(t) = p.trace.as_mut() else { return };
    if p.aborted || p.gone {
        return;
    }
    // What was written at the last stop must not be written again.
    let disposition = if t.unwritten {
        disposition
    } else {
        BufferDisposition::ClearEntire
    };
    match disposition {
        BufferDisposition::ClearEntire => {
            t.fwd.durable_forwarded = 0;
            t.last_saved = None;
            t.last_durable = 0;
        }
        BufferDisposition::ClearNondurable => t.last_saved = None,
        BufferDisposition::Retain => {}
    }
    t.started = false;
    t.stopped = false;
    t.unwritten = true;
    t.fwd.started(crate::clock::boottime_ns());
    p.info.state = "starting";
    if let Err(e) = send_ctl(
        p.ctl.as_raw_fd(),
        &ManagerMessage::Start {
            disposition,
            additional_categories: additional.to_vec(),
        },
    ) {
        log::warn!("provider {}: could not start it: {e}", p.info.name);
    }
}

pub(super) fn abort(p: &mut Provider, why: &str) {
    log::warn!(
        "provider {} (pid {}) sent {why}; disconnecting it",
        p.info.name,
        p.info.pid
    );
    p.aborted = true;
    p.info.state = "aborted";
    if let Some(t) = &p.trace {
        t.watcher.abort();
    }
    let _ = nix::sys::socket::shutdown(p.ctl.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}

pub(super) fn send_ctl(fd: RawFd, m: &ManagerMessage) -> std::io::Result<()> {
    let bytes = m
        .encode()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    send(fd, &bytes, MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT).map_err(io)?;
    Ok(())
}
