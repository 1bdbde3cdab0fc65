//! The manager's connections: accepting them within the limits (each
//! user's and the total, by the peer's SO_PEERCRED), telling a provider
//! from a client by its first message, reading clients, and answering
//! them. A connection that says nothing in time is closed.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, send};
use tokio::sync::mpsc;
use trace_common::controller::{
    Envelope, MAX_MESSAGE_BYTES, Reply, SessionState, fail, is_controller_message,
};
use trace_common::provider::control::ProviderMessage;

use super::event::Event;
use super::{Manager, throttle};
use crate::limits::Slot;
use crate::userspace::async_fd;

/// How long a connection may take to say what it is.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// A client's connection.
pub(super) struct Client {
    pub(super) fd: OwnedFd,
    pub(super) pid: i32,
    /// Who it is, as the kernel saw it connect: the files of its probes
    /// are opened with its rights (see [`crate::creds`]).
    pub(super) creds: Option<crate::creds::ClientCreds>,
    /// Every provider's stats of the last stop result sent to it, for
    /// GetProviderStats (the result holds those that fit in a message).
    pub(super) results: Vec<trace_common::controller::ProviderStats>,
}

impl Manager {
    /// Admits a connection the socket accepted, within the limits, and
    /// reads its first message on a task of its own.
    pub(super) async fn on_connection(&mut self, conn: std::io::Result<(OwnedFd, i32)>) {
        match conn {
            Ok((fd, pid)) => {
                let uid =
                    nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::PeerCredentials)
                        .map_or(u32::MAX, |c| c.uid());
                match self.connections.admit(uid, &self.limits) {
                    Ok(slot) => {
                        let id = self.next_client;
                        self.next_client += 1;
                        tokio::spawn(hello(id, fd, pid, slot, self.events_tx.clone()));
                    }
                    Err(why) => {
                        // Told why (a client reads it; to a provider it
                        // is a hang-up before it was registered) and
                        // closed at once; logged once a tick at most.
                        let said = Envelope {
                            txid: 0,
                            body: Reply::Failed {
                                fatal: true,
                                code: fail::REFUSED,
                                message: format!("the trace manager refused the connection: {why}"),
                            },
                        }
                        .encode();
                        if let Ok(bytes) = said {
                            let _ = send(
                                fd.as_raw_fd(),
                                &bytes,
                                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
                            );
                        }
                        if self.refused == 0 {
                            log::warn!("connection from pid {pid} (uid {uid}) refused: {why}");
                        }
                        self.refused += 1;
                    }
                }
            }
            Err(e) => {
                // Out of descriptors, say: do not spin on it.
                log::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// Says how many connections were refused since the last tick, beyond
    /// the one logged.
    pub(super) fn log_refused(&mut self) {
        if self.refused > 1 {
            log::warn!(
                "{} more connections refused (limits: {} in all, {} per user)",
                self.refused - 1,
                self.limits.max_connections,
                self.limits.max_connections_per_uid
            );
        }
        self.refused = 0;
    }

    /// Takes on a new client; an embedded manager refuses all but its own.
    pub(super) fn add_client(&mut self, id: u64, fd: OwnedFd, pid: i32) {
        log::debug!("client {id} (pid {pid}) connected");
        let creds = crate::creds::ClientCreds::of_peer(&fd)
            .inspect_err(|e| log::warn!("client {id}: who it is is unknown: {e}"))
            .ok();
        self.clients.insert(
            id,
            Client {
                fd,
                pid,
                creds,
                results: Vec::new(),
            },
        );
        if self.embedded && Some(id) != self.local {
            self.fail(
                id,
                0,
                true,
                fail::EMBEDDED,
                format!(
                    "this manager runs inside `trace-cli record` (pid {}) and serves no \
                     other client",
                    std::process::id()
                ),
            );
        }
    }

    /// Forgets a client; the session it owned is aborted and ended.
    pub(super) fn drop_client(&mut self, id: u64) {
        if let Some(c) = self.clients.remove(&id) {
            log::debug!("client {id} went away");
            // Its reader task ends, and the client sees the connection end.
            let _ = nix::sys::socket::shutdown(c.fd.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        }
        if self.active.as_ref().is_some_and(|a| a.owner == id) {
            log::info!("the session's client went away; aborting the session");
            self.set_state(SessionState::Terminating);
            if !self.flight_holds_providers() {
                self.registry.end();
            }
            // Dropping the output abandons what it has not written.
            self.active = None;
            log::info!("session state READY");
        }
        if self.terminating.as_ref().is_some_and(|t| t.owner == id) {
            self.terminating = None;
            log::info!("session state READY");
        }
        if self.preparing == Some(id) {
            // What its thread resolves is dropped when it comes.
            self.preparing = None;
        }
    }

    pub(super) fn send(&mut self, id: u64, txid: u32, body: Reply) -> bool {
        let Some(c) = self.clients.get_mut(&id) else {
            return false;
        };
        // A stop result holds the providers' stats that fit in a message;
        // the client asks for the rest (GetProviderStats).
        let body = match body {
            Reply::StopResult(Ok(r)) => {
                let (first, all) = r.paged();
                c.results = all;
                Reply::StopResult(Ok(first))
            }
            Reply::Terminated(r) => {
                let (first, all) = r.paged();
                c.results = all;
                Reply::Terminated(first)
            }
            other => other,
        };
        let c = &*c;
        let bytes = match (Envelope { txid, body }).encode() {
            Ok(b) => b,
            Err(e) => {
                log::warn!("encoding a reply to client {id}: {e}");
                let failed = Envelope {
                    txid,
                    body: Reply::Failed {
                        fatal: false,
                        code: fail::OTHER,
                        message: format!("the answer does not fit in a message ({e})"),
                    },
                };
                match failed.encode() {
                    Ok(b) => b,
                    Err(_) => return false,
                }
            }
        };
        match send(
            c.fd.as_raw_fd(),
            &bytes,
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(_) => true,
            Err(e) => {
                log::warn!(
                    "client {id} (pid {}) is not reading ({e}); dropping it",
                    c.pid
                );
                false
            }
        }
    }

    /// Answers a client; one that cannot be answered is dropped.
    pub(super) fn reply(&mut self, id: u64, txid: u32, body: Reply) {
        if !self.send(id, txid, body) {
            self.drop_client(id);
        }
    }

    /// Tells client `id`, which speaks controller protocol `version`, that
    /// this manager does not, and closes its connection. A client of an
    /// older version is told in a message it can read.
    pub(super) fn refuse_version(&mut self, id: u64, version: u16) {
        let pid = self.clients.get(&id).map_or(0, |c| c.pid);
        throttle::BAD_REQUEST.warn(format_args!(
            "client {id} (pid {pid}) speaks controller protocol version {version}, not {}; \
             disconnecting it",
            trace_common::controller::VERSION
        ));
        let message = format!(
            "bad request: this trace manager speaks controller protocol version {}, the client \
             version {version}: use the trace-cli built with the trace-manager that runs (after \
             an upgrade, restart the daemon)",
            trace_common::controller::VERSION
        );
        let failed = Envelope {
            txid: 0,
            body: Reply::Failed {
                fatal: true,
                code: fail::MALFORMED,
                message,
            },
        };
        match (failed.encode_failed_as(version), self.clients.get(&id)) {
            (Some(bytes), Some(c)) => {
                let _ = send(
                    c.fd.as_raw_fd(),
                    &bytes,
                    MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                );
                self.drop_client(id);
            }
            _ => {
                let Reply::Failed { message, .. } = failed.body else {
                    return;
                };
                self.fail(id, 0, true, fail::MALFORMED, message);
            }
        }
    }

    pub(super) fn fail(&mut self, id: u64, txid: u32, fatal: bool, code: u32, mut message: String) {
        if message.len() > trace_common::controller::MAX_STRING_LEN {
            let mut end = trace_common::controller::MAX_STRING_LEN - 3;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str("...");
        }
        let sent = self.send(
            id,
            txid,
            Reply::Failed {
                fatal,
                code,
                message,
            },
        );
        if fatal || !sent {
            if let Some(c) = self.clients.get(&id) {
                let _ =
                    nix::sys::socket::shutdown(c.fd.as_raw_fd(), nix::sys::socket::Shutdown::Both);
            }
            self.drop_client(id);
        }
    }
}

/// One datagram and the descriptors that came with it; `None` at the end.
pub(super) fn receive(fd: &OwnedFd, buf: &mut [u8]) -> nix::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 4]);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        fd.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = c {
            // SAFETY: SCM_RIGHTS gave us these descriptors; we own them now.
            fds.extend(
                raw.into_iter()
                    .map(|f| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(f) }),
            );
        }
    }
    let truncated = msg.flags.contains(MsgFlags::MSG_TRUNC);
    match msg.bytes {
        0 => Ok(None),
        // Too long for the protocol: handed on truncated, refused there.
        n if truncated => Ok(Some((n.min(buf.len()), fds))),
        n => Ok(Some((n, fds))),
    }
}

/// Reads a new connection's first message and hands the connection on as
/// a provider or a client.
///
/// `slot` holds the connection's place among the manager's connections
/// until it closes. Nothing is allocated for the message until the
/// connection is readable, so a connection that says nothing costs only
/// its task and descriptor.
pub(super) async fn hello(
    id: u64,
    fd: OwnedFd,
    pid: i32,
    slot: Slot,
    tx: mpsc::UnboundedSender<Event>,
) {
    let Ok(afd) = async_fd(fd) else { return };
    let mut buf = Vec::new();
    let first = tokio::time::timeout(HELLO_TIMEOUT, async {
        loop {
            let mut g = afd.readable().await?;
            if buf.is_empty() {
                buf.resize(MAX_MESSAGE_BYTES, 0);
            }
            match g.try_io(|a| receive(a.get_ref(), &mut buf).map_err(std::io::Error::from)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    })
    .await;
    let fd = afd.into_inner();
    let (n, fds) = match first {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => return,
        _ => {
            throttle::IDLE.warn(format_args!(
                "connection from pid {pid} said nothing in time; closing it"
            ));
            return;
        }
    };
    if is_controller_message(&buf[..n]) {
        let Ok(reply_fd) = fd.try_clone() else { return };
        let _ = tx.send(Event::Client {
            id,
            fd: reply_fd,
            pid,
        });
        let _ = tx.send(Event::Request {
            id,
            bytes: buf[..n].to_vec(),
            fds,
        });
        drop(buf);
        read_client_loop(id, fd, tx).await;
        drop(slot);
        return;
    }
    match ProviderMessage::decode(&buf[..n]) {
        Ok(register) => {
            let _ = tx.send(Event::Provider {
                fd,
                pid,
                register,
                slot,
            });
        }
        Err(e) => {
            throttle::BAD_HELLO.warn(format_args!("connection from pid {pid}: {e}; closing it"))
        }
    }
}

/// Announces a client connected through a socket pair, then reads it.
pub(super) async fn read_client(id: u64, fd: OwnedFd, pid: i32, tx: mpsc::UnboundedSender<Event>) {
    let Ok(reply_fd) = fd.try_clone() else {
        let _ = tx.send(Event::Closed { id });
        return;
    };
    let _ = tx.send(Event::Client {
        id,
        fd: reply_fd,
        pid,
    });
    read_client_loop(id, fd, tx).await;
}

/// Hands every message of client `id` to the loop, then its closing.
pub(super) async fn read_client_loop(id: u64, fd: OwnedFd, tx: mpsc::UnboundedSender<Event>) {
    if let Ok(afd) = async_fd(fd) {
        // Taken only while a message is read: an idle client holds none.
        let mut buf = Vec::new();
        loop {
            let Ok(mut g) = afd.readable().await else {
                break;
            };
            if buf.is_empty() {
                buf.resize(MAX_MESSAGE_BYTES, 0);
            }
            match g.try_io(|a| receive(a.get_ref(), &mut buf).map_err(std::io::Error::from)) {
                Ok(Ok(Some((n, fds)))) => {
                    let event = Event::Request {
                        id,
                        bytes: buf[..n].to_vec(),
                        fds,
                    };
                    buf = Vec::new();
                    if tx.send(event).is_err() {
                        return;
                    }
                }
                Ok(Ok(None)) | Ok(Err(_)) => break,
                Err(_would_block) => continue,
            }
        }
    }
    let _ = tx.send(Event::Closed { id });
}
