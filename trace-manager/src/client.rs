//! The client side of the controller protocol: connect to a manager, send
//! requests, match replies, keep state changes and alerts for later.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr, connect, recv, sendmsg,
    socket,
};
use thiserror::Error;
use tokio::io::unix::AsyncFd;
use trace_common::controller::{
    Envelope, MAX_MESSAGE_BYTES, Reply, Request, SessionState, StopResult,
};
use trace_common::provider::control::ControlError;

/// Why talking to the manager failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// No manager listens on the socket.
    #[error("no trace manager listens on {}", path.display())]
    NoManager {
        /// The socket path.
        path: PathBuf,
        /// What connecting said.
        source: std::io::Error,
    },
    /// A manager's socket is there, but this process may not connect to
    /// it (`EACCES`): the daemon lets root and the `tracing` group in.
    #[error(
        "the trace manager's socket {} refused the connection ({error}): the trace-manager \
         daemon lets in root and the members of the `tracing` group; ask to be added (`sudo \
         usermod -aG tracing $USER`, then log in again; without a `tracing` group an \
         administrator creates one with `sudo groupadd --system tracing` and restarts the \
         daemon), or run this as root",
        path.display()
    )]
    Refused {
        /// The socket path.
        path: PathBuf,
        /// What connecting said (part of the message, not a cause of
        /// its own: said once).
        error: std::io::Error,
    },
    /// The manager speaks another version of the controller protocol.
    #[error(
        "the trace manager speaks controller protocol version {manager}, this client version \
         {ours}: use the trace-cli built with the trace-manager that runs (after an upgrade, \
         restart the daemon)",
        ours = trace_common::controller::VERSION
    )]
    Version {
        /// The manager's version.
        manager: u16,
    },
    /// The manager turned the connection away (a limit on connections
    /// reached); the manager's message says which.
    #[error("{0}")]
    Turned(String),
    /// The connection failed (the cause is part of the message, not a
    /// source of its own: said once).
    #[error("talking to the trace manager: {0}")]
    Io(std::io::Error),
    /// The manager closed the connection.
    #[error("the trace manager closed the connection")]
    Closed,
    /// The manager sent something this client cannot read.
    #[error("the trace manager sent a bad message: {0}")]
    Protocol(#[from] ControlError),
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// A connection to a trace manager.
pub struct Controller {
    fd: AsyncFd<OwnedFd>,
    next_txid: u32,
    states: VecDeque<SessionState>,
    /// Replies that came while another was awaited.
    early: VecDeque<Envelope<Reply>>,
}

impl Controller {
    /// Connects to the manager listening on `path`.
    pub fn connect(path: &Path) -> Result<Controller, ClientError> {
        let no_manager = |source: std::io::Error| ClientError::NoManager {
            path: path.to_owned(),
            source,
        };
        let addr = UnixAddr::new(path).map_err(|e| no_manager(e.into()))?;
        let fd = socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|e| no_manager(e.into()))?;
        connect(fd.as_raw_fd(), &addr).map_err(|e| match e {
            // The socket, or the folder it is in, is not ours to use.
            nix::Error::EACCES | nix::Error::EPERM => ClientError::Refused {
                path: path.to_owned(),
                error: e.into(),
            },
            _ => no_manager(e.into()),
        })?;
        nix::fcntl::fcntl(
            fd.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(|e| ClientError::Io(e.into()))?;
        Controller::from_fd(fd)
    }

    /// A client on a connected `SOCK_SEQPACKET` socket (non-blocking).
    pub fn from_fd(fd: OwnedFd) -> Result<Controller, ClientError> {
        Ok(Controller {
            fd: crate::userspace::async_fd(fd)?,
            next_txid: 1,
            states: VecDeque::new(),
            early: VecDeque::new(),
        })
    }

    /// Sends `req` (with `fd` beside it, for InitializeTracing); returns
    /// its txid.
    pub fn send(&mut self, req: Request, fd: Option<BorrowedFd<'_>>) -> Result<u32, ClientError> {
        let txid = self.next_txid;
        self.next_txid = self.next_txid.wrapping_add(1).max(1);
        let bytes = Envelope { txid, body: req }.encode()?;
        self.send_raw(&bytes, fd)?;
        Ok(txid)
    }

    /// Sends bytes as one message, whatever they hold (for tests of the
    /// manager's decoder).
    pub fn send_raw(
        &mut self,
        bytes: &[u8],
        fd: Option<BorrowedFd<'_>>,
    ) -> Result<(), ClientError> {
        let raw = fd.map(|f| [f.as_raw_fd()]);
        let cmsgs: Vec<ControlMessage<'_>> = raw
            .as_ref()
            .map(|r| vec![ControlMessage::ScmRights(r)])
            .unwrap_or_default();
        sendmsg::<()>(
            self.fd.get_ref().as_raw_fd(),
            &[IoSlice::new(bytes)],
            &cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(|e| match e {
            // Closed by the manager: it may have said why first.
            nix::Error::EPIPE | nix::Error::ECONNRESET => self
                .said_on_closing()
                .unwrap_or_else(|| ClientError::Io(e.into())),
            _ => ClientError::Io(e.into()),
        })?;
        Ok(())
    }

    /// What the manager said before it closed the connection, if it said
    /// why it refused it (`fail::REFUSED` and the like: a fatal
    /// failure).
    fn said_on_closing(&self) -> Option<ClientError> {
        let mut buf = vec![0u8; MAX_MESSAGE_BYTES];
        let fd = self.fd.get_ref().as_raw_fd();
        // The reset the manager's close left is reported first (and so
        // cleared), then what it said before.
        let n = match recv(fd, &mut buf, MsgFlags::MSG_DONTWAIT) {
            Err(nix::Error::ECONNRESET) => recv(fd, &mut buf, MsgFlags::MSG_DONTWAIT),
            other => other,
        }
        .ok()?;
        match Envelope::<Reply>::decode(&buf[..n]).ok()?.body {
            Reply::Failed {
                fatal: true,
                message,
                ..
            } => Some(ClientError::Turned(message)),
            _ => None,
        }
    }

    /// The next message from the manager, state changes included.
    pub async fn recv(&mut self) -> Result<Envelope<Reply>, ClientError> {
        if let Some(m) = self.early.pop_front() {
            return Ok(m);
        }
        let mut buf = vec![0u8; MAX_MESSAGE_BYTES];
        loop {
            let mut g = self.fd.readable().await?;
            match g.try_io(|a| {
                recv(a.get_ref().as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT)
                    .map_err(std::io::Error::from)
            }) {
                Ok(Ok(0)) => return Err(ClientError::Closed),
                Ok(Ok(n)) => {
                    return match Envelope::<Reply>::decode(&buf[..n]) {
                        Ok(m) => Ok(m),
                        Err(ControlError::UnsupportedVersion(manager)) => {
                            Err(ClientError::Version { manager })
                        }
                        Err(e) => Err(e.into()),
                    };
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    // Closed with our request unread: what the manager
                    // said first may still be queued.
                    return Err(self.said_on_closing().unwrap_or(ClientError::Closed));
                }
                Ok(Err(e)) => return Err(e.into()),
                Err(_would_block) => continue,
            }
        }
    }

    /// Sends `req` and waits for its reply; state changes and other
    /// replies that come first are kept.
    pub async fn call(
        &mut self,
        req: Request,
        fd: Option<BorrowedFd<'_>>,
    ) -> Result<Reply, ClientError> {
        let txid = self.send(req, fd)?;
        self.wait(txid).await
    }

    /// Waits for the reply to `txid`. A stop result (StopTracing's or
    /// TerminateTracing's) comes back with every provider's stats: those
    /// one message did not hold are asked for ([`Request::GetProviderStats`]).
    pub async fn wait(&mut self, txid: u32) -> Result<Reply, ClientError> {
        let mut reply = self.wait_one(txid).await?;
        if let Reply::StopResult(Ok(result)) | Reply::Terminated(result) = &mut reply {
            self.fetch_provider_stats(result).await?;
        }
        Ok(reply)
    }

    /// Completes `result`'s provider stats, a page at a time.
    async fn fetch_provider_stats(&mut self, result: &mut StopResult) -> Result<(), ClientError> {
        let total = result.providers_total;
        while result.provider_stats.len() < total as usize {
            let have = result.provider_stats.len() as u32;
            let txid = self.send(Request::GetProviderStats { offset: have }, None)?;
            match self.wait_one(txid).await? {
                Reply::ProviderStats {
                    offset,
                    total: t,
                    stats,
                } if offset == have && t == total && !stats.is_empty() => {
                    result.provider_stats.extend(stats);
                }
                Reply::Failed { message, .. } => {
                    return Err(ClientError::Io(std::io::Error::other(format!(
                        "fetching the stats of providers {have} to {total}: {message}"
                    ))));
                }
                _ => return Err(ControlError::BadValue("provider stats page").into()),
            }
        }
        Ok(())
    }

    /// Waits for the reply to `txid`, as it came.
    async fn wait_one(&mut self, txid: u32) -> Result<Reply, ClientError> {
        let mut kept = VecDeque::new();
        let result = loop {
            let m = match self.recv().await {
                Ok(m) => m,
                Err(e) => break Err(e),
            };
            match m.body {
                Reply::StateChanged(s) => self.states.push_back(s),
                // A fatal failure answers whatever was asked.
                Reply::Failed { fatal: true, .. } => break Ok(m.body),
                _ if m.txid == txid => break Ok(m.body),
                _ => kept.push_back(m),
            }
        };
        kept.extend(self.early.drain(..));
        self.early = kept;
        result
    }

    /// The replies that came while others were awaited (e.g. alerts),
    /// oldest first.
    pub fn take_early(&mut self) -> Vec<Envelope<Reply>> {
        self.early.drain(..).collect()
    }

    /// The state changes seen so far, oldest first.
    pub fn take_states(&mut self) -> Vec<SessionState> {
        self.states.drain(..).collect()
    }
}
