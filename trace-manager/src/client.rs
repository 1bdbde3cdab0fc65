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
use trace_common::controller::{Envelope, MAX_MESSAGE_BYTES, Reply, Request, SessionState};
use trace_common::provider::control::ControlError;

/// Why talking to the manager failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// No manager listens on the socket.
    #[error("no trace manager listens on {path}: {source}")]
    NoManager {
        /// The socket path.
        path: PathBuf,
        /// What connecting said.
        source: std::io::Error,
    },
    /// The connection failed.
    #[error("talking to the trace manager: {0}")]
    Io(#[from] std::io::Error),
    /// The manager closed the connection.
    #[error("the trace manager closed the connection")]
    Closed,
    /// The manager sent something this client cannot read.
    #[error("the trace manager sent a bad message: {0}")]
    Protocol(#[from] ControlError),
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
        connect(fd.as_raw_fd(), &addr).map_err(|e| no_manager(e.into()))?;
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
        .map_err(|e| ClientError::Io(e.into()))?;
        Ok(())
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
                Ok(Ok(n)) => return Ok(Envelope::<Reply>::decode(&buf[..n])?),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Err(ClientError::Closed);
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

    /// Waits for the reply to `txid`.
    pub async fn wait(&mut self, txid: u32) -> Result<Reply, ClientError> {
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
