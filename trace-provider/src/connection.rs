//! The provider's side of the registration socket, served by a background
//! thread so the program needs no async runtime.
//!
//! The thread connects to the manager's socket, registers, and then serves
//! Initialize / Start / Stop / Terminate and the FIFO. When no manager
//! listens it sleeps on inotify events of the socket's folder (or of its
//! nearest existing ancestor) and tries again when something changes. A
//! manager that closes the connection before registering the provider (a
//! limit reached) is tried again after a wait that doubles each time, from
//! 100 ms to 30 s. When the manager goes away mid-trace the engine stops by
//! itself, in-flight data is dropped, and the thread waits for the next
//! manager.

use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr, connect, recvmsg,
    send, socket,
};
use trace_common::provider::control::{MAX_MESSAGE_BYTES, ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::{
    FromManager, FromProvider, PACKET_BYTES, PROTOCOL_VERSION, Packet,
};

use crate::{clock, engine};

/// What the background thread is told by the program.
pub(crate) struct Shutdown {
    pub(crate) fd: OwnedFd,
}

pub use trace_common::provider::socket_path;

/// The first wait after the manager closed a connection before it
/// registered the provider (a limit of the manager's reached).
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two such tries.
const LAST_RETRY: Duration = Duration::from_secs(30);

/// Runs until `shutdown` becomes readable.
pub(crate) fn run(name: String, categories: Vec<String>, path: PathBuf, shutdown: Shutdown) {
    let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok();
    // The wait before the next try while the manager turns this provider
    // away: it doubles with each refusal, and a registration resets it.
    let mut retry: Option<Duration> = None;
    loop {
        if let Some(sock) = try_connect(&path) {
            let mut registered = false;
            let result = serve(&name, &categories, &sock, &shutdown, &mut registered);
            // Said once per run of refusals; then only at debug level.
            let refused_before = retry.is_some();
            match result {
                Ok(Exit::Shutdown) => return,
                Ok(Exit::Disconnected) if !registered && !refused_before => {
                    log::warn!(
                        "trace provider {name}: the trace manager did not register it (a limit of the manager's?); trying again later"
                    )
                }
                Ok(Exit::Disconnected) if registered => log::info!("trace manager went away"),
                Ok(Exit::Disconnected) => log::debug!("trace provider {name}: refused again"),
                Err(e) if refused_before && !registered => {
                    log::debug!("trace provider {name}: {e}")
                }
                Err(e) => log::warn!("trace provider {name}: {e}"),
            }
            end_trace(&mut None);
            if !registered {
                let wait = retry.map_or(FIRST_RETRY, |w| (w * 2).min(LAST_RETRY));
                retry = Some(wait);
                if sleep_unless_shutdown(wait, &shutdown) {
                    return;
                }
                continue;
            }
            retry = None;
        }
        if wait_for_socket(&path, inotify.as_ref(), &shutdown) {
            return;
        }
    }
}

/// Sleeps `wait`, or less when told to shut down; true on shutdown.
fn sleep_unless_shutdown(wait: Duration, shutdown: &Shutdown) -> bool {
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(shutdown.fd.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::from(ms));
    fds[0]
        .revents()
        .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP))
}

fn try_connect(path: &Path) -> Option<OwnedFd> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .ok()?;
    let addr = UnixAddr::new(path).ok()?;
    connect(fd.as_raw_fd(), &addr).ok()?;
    Some(fd)
}

/// Sleeps until something changes near the socket path; true on shutdown.
fn wait_for_socket(path: &Path, inotify: Option<&Inotify>, shutdown: &Shutdown) -> bool {
    let mut watch = None;
    if let Some(ino) = inotify {
        let mut dir = path.parent();
        while let Some(d) = dir {
            if let Ok(w) = ino.add_watch(
                d,
                AddWatchFlags::IN_CREATE
                    | AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_ATTRIB
                    | AddWatchFlags::IN_DELETE_SELF,
            ) {
                watch = Some(w);
                break;
            }
            dir = d.parent();
        }
    }
    // Check once more now that the watch is in place.
    if path.exists() && try_connect_probe(path) {
        if let (Some(ino), Some(w)) = (inotify, watch) {
            let _ = ino.rm_watch(w);
        }
        return false;
    }
    let mut fds = vec![PollFd::new(shutdown.fd.as_fd(), PollFlags::POLLIN)];
    if let Some(ino) = inotify {
        fds.push(PollFd::new(ino.as_fd(), PollFlags::POLLIN));
    }
    // Without inotify, look again every second.
    let timeout = if watch.is_some() {
        PollTimeout::NONE
    } else {
        PollTimeout::from(1000u16)
    };
    let _ = poll(&mut fds, timeout);
    let stop = fds[0]
        .revents()
        .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP));
    if let Some(ino) = inotify {
        while ino.read_events().is_ok_and(|e| !e.is_empty()) {}
        if let Some(w) = watch {
            let _ = ino.rm_watch(w);
        }
    }
    if !stop {
        // Give a manager that just bound its socket time to listen.
        std::thread::sleep(Duration::from_millis(10));
    }
    stop
}

fn try_connect_probe(path: &Path) -> bool {
    try_connect(path).is_some()
}

enum Exit {
    Shutdown,
    Disconnected,
}

/// A trace the engine is attached to.
struct Trace {
    map: *mut libc::c_void,
    len: usize,
    fifo: OwnedFd,
}

/// The FIFO of the current trace, for alerts from any thread.
static ALERT_FIFO: std::sync::Mutex<Option<RawFd>> = std::sync::Mutex::new(None);

/// Sends an alert on the current trace's FIFO; false when no trace runs.
pub(crate) fn alert(name: trace_common::provider::fifo::AlertName) -> bool {
    let fifo = ALERT_FIFO.lock().unwrap_or_else(|e| e.into_inner());
    match *fifo {
        Some(fd) if engine::is_started() => {
            send_packet(fd, FromProvider::Alert(name));
            true
        }
        _ => false,
    }
}

fn end_trace(trace: &mut Option<Trace>) {
    // The FIFO closes below: no alert may use it from now on.
    *ALERT_FIFO.lock().unwrap_or_else(|e| e.into_inner()) = None;
    engine::terminate();
    if let Some(t) = trace.take() {
        // SAFETY: the engine let go of the mapping above; nothing else uses it.
        unsafe { libc::munmap(t.map, t.len) };
    }
}

#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error("socket: {0}")]
    Io(#[from] nix::Error),
    #[error("bad message from the manager: {0}")]
    Control(#[from] trace_common::provider::control::ControlError),
    #[error("bad FIFO packet from the manager: {0}")]
    Fifo(#[from] trace_common::provider::fifo::PacketError),
    #[error("the manager sent {0}")]
    Protocol(&'static str),
    #[error("the trace buffer: {0}")]
    Engine(#[from] engine::EngineError),
}

fn send_packet(fifo: RawFd, p: FromProvider) {
    let bytes = p.to_packet().to_bytes();
    // A full or closed FIFO means the manager is gone or stuck; the control
    // socket tells us which.
    let _ = send(
        fifo,
        &bytes,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
    );
}

fn serve(
    name: &str,
    categories: &[String],
    sock: &OwnedFd,
    shutdown: &Shutdown,
    registered: &mut bool,
) -> Result<Exit, ServeError> {
    let register = ProviderMessage::Register {
        name: name.to_owned(),
        clock: clock::kind(),
        categories: categories.to_vec(),
    }
    .encode()?;
    send(sock.as_raw_fd(), &register, MsgFlags::MSG_NOSIGNAL)?;
    let mut trace: Option<Trace> = None;
    let mut buf = vec![0u8; MAX_MESSAGE_BYTES];
    let result = loop {
        let fifo_fd = trace.as_ref().map(|t| t.fifo.as_raw_fd());
        let (ctl, fifo_ev, stop) = {
            let mut fds = vec![
                PollFd::new(sock.as_fd(), PollFlags::POLLIN),
                PollFd::new(shutdown.fd.as_fd(), PollFlags::POLLIN),
            ];
            if let Some(f) = fifo_fd {
                // SAFETY: the FIFO fd is owned by `trace`, alive for this poll.
                fds.push(PollFd::new(
                    unsafe { BorrowedFd::borrow_raw(f) },
                    PollFlags::POLLIN,
                ));
            }
            poll(&mut fds, PollTimeout::NONE)?;
            let r = |i: usize| {
                fds.get(i)
                    .and_then(|f| f.revents())
                    .unwrap_or(PollFlags::empty())
            };
            (r(0), r(2), !r(1).is_empty())
        };
        if stop {
            break Ok(Exit::Shutdown);
        }
        if !fifo_ev.is_empty() {
            let fd = fifo_fd.unwrap_or(-1);
            let mut p = [0u8; PACKET_BYTES];
            match nix::sys::socket::recv(fd, &mut p, MsgFlags::MSG_DONTWAIT) {
                Ok(PACKET_BYTES) => match FromManager::parse(&Packet::from_bytes(&p))? {
                    FromManager::BufferSaved { wrapped_count, .. } => {
                        engine::buffer_saved(wrapped_count)
                    }
                },
                Ok(0) | Err(_) => break Ok(Exit::Disconnected),
                Ok(_) => break Err(ServeError::Protocol("a short FIFO packet")),
            }
        }
        if ctl.is_empty() {
            continue;
        }
        let mut cmsg = nix::cmsg_space!([RawFd; 2]);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )?;
        let mut fds: Vec<OwnedFd> = Vec::new();
        for c in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: SCM_RIGHTS gave us these descriptors; we own them now.
                fds.extend(raw.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
            }
        }
        let n = msg.bytes;
        if n == 0 {
            break Ok(Exit::Disconnected);
        }
        match ManagerMessage::decode(&buf[..n])? {
            ManagerMessage::Registered { .. } => *registered = true,
            ManagerMessage::Initialize { mode, categories } => {
                if trace.is_some() {
                    continue; // one trace at a time: ignored
                }
                let mut fds = fds.into_iter();
                let (Some(memfd), Some(fifo)) = (fds.next(), fds.next()) else {
                    break Err(ServeError::Protocol("Initialize without its descriptors"));
                };
                let len = nix::sys::stat::fstat(memfd.as_raw_fd())?.st_size as usize;
                // SAFETY: mapping a memfd the manager sealed against shrinking;
                // the mapping is ours until `end_trace` unmaps it.
                let map = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_SHARED,
                        memfd.as_raw_fd(),
                        0,
                    )
                };
                if map == libc::MAP_FAILED {
                    break Err(ServeError::Protocol("a buffer that cannot be mapped"));
                }
                let fifo_raw = fifo.as_raw_fd();
                let notify: engine::Notify = Box::new(move |p| send_packet(fifo_raw, p));
                // SAFETY: `map` is `len` writable shared bytes, page-aligned,
                // unmapped only after engine::terminate.
                let initialized =
                    unsafe { engine::initialize(map.cast(), len, mode, categories, Some(notify)) };
                if let Err(e) = initialized {
                    // SAFETY: the engine did not take the mapping.
                    unsafe { libc::munmap(map, len) };
                    break Err(e.into());
                }
                *ALERT_FIFO.lock().unwrap_or_else(|e| e.into_inner()) = Some(fifo.as_raw_fd());
                trace = Some(Trace { map, len, fifo });
            }
            ManagerMessage::Start {
                disposition,
                additional_categories,
            } => {
                if let Some(t) = &trace {
                    engine::start(disposition, additional_categories);
                    send_packet(
                        t.fifo.as_raw_fd(),
                        FromProvider::Started {
                            version: PROTOCOL_VERSION,
                        },
                    );
                }
            }
            ManagerMessage::Stop => {
                if let Some(t) = &trace {
                    engine::stop();
                    send_packet(t.fifo.as_raw_fd(), FromProvider::Stopped);
                }
            }
            ManagerMessage::Terminate => end_trace(&mut trace),
        }
    };
    end_trace(&mut trace);
    result
}
