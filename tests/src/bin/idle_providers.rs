//! Many idle trace providers in one process, for the end-to-end tests of
//! the manager's limits: `idle_providers N` connects N times to
//! `$TRACE_MANAGER_SOCKET`, registers `idle-0` .. `idle-{N-1}`, and then
//! answers as a provider that writes nothing: STARTED on Start, STOPPED on
//! Stop. It prints `registered N` once every provider got its answer,
//! `answered R K` once each was registered (R) or closed unanswered (K,
//! refused by the manager's limits), `initialized NAME BYTES` with the size
//! of each buffer it is given, and runs until killed.

use std::collections::HashMap;
use std::os::fd::RawFd;

use trace_common::provider::clock::ClockKind;
use trace_common::provider::control::{ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::FromProvider;

fn connect(path: &str) -> RawFd {
    // SAFETY: plain socket calls on a sockaddr_un we fill in.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, b) in path.bytes().enumerate() {
            addr.sun_path[i] = b as libc::c_char;
        }
        let r = libc::connect(
            fd,
            &addr as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_un>() as u32,
        );
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        fd
    }
}

/// One message and the descriptors that came with it; `None` at the end.
fn recv(fd: RawFd) -> Option<(Vec<u8>, Vec<RawFd>)> {
    let mut buf = vec![0u8; 16384];
    let mut cmsg = [0u64; 8];
    // SAFETY: recvmsg into buffers we own; control data read with the CMSG
    // macros within its length.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg);
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n <= 0 {
            return None;
        }
        let mut fds = Vec::new();
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..count {
                    fds.push(*data.add(i));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        buf.truncate(n as usize);
        Some((buf, fds))
    }
}

fn send(fd: RawFd, b: &[u8]) {
    // SAFETY: sending bytes we own.
    unsafe { libc::send(fd, b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL) };
}

fn close(fd: RawFd) {
    // SAFETY: closing a descriptor this program owns and no longer uses.
    unsafe { libc::close(fd) };
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let path = std::env::var("TRACE_MANAGER_SOCKET").expect("TRACE_MANAGER_SOCKET");
    // Every provider holds a socket, and a buffer and a FIFO while traced.
    // SAFETY: getrlimit/setrlimit with a struct we own.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let mut socks = Vec::with_capacity(n);
    for i in 0..n {
        let fd = connect(&path);
        let register = ProviderMessage::Register {
            name: format!("idle-{i}"),
            clock: ClockKind::Boottime,
            categories: vec![],
        };
        send(fd, &register.encode().unwrap());
        socks.push(fd);
    }
    // fifo (and buffer) of each provider, by its socket.
    let mut traced: HashMap<RawFd, (RawFd, RawFd)> = HashMap::new();
    let mut registered = 0;
    let mut refused = 0;
    let mut answered: std::collections::HashSet<RawFd> = std::collections::HashSet::new();
    let mut pfds: Vec<libc::pollfd> = socks
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: polling descriptors we own, in a vector we own.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
        if r < 0 {
            continue;
        }
        for p in pfds.iter_mut() {
            if p.revents == 0 {
                continue;
            }
            p.revents = 0;
            let fd = p.fd;
            let Some((msg, fds)) = recv(fd) else {
                // The manager went away (or refused it): this provider is
                // done.
                p.fd = -1;
                if answered.insert(fd) {
                    refused += 1;
                    if registered + refused == n {
                        println!("answered {registered} {refused}");
                    }
                }
                continue;
            };
            match ManagerMessage::decode(&msg) {
                Ok(ManagerMessage::Registered { .. }) => {
                    registered += 1;
                    answered.insert(fd);
                    if registered == n {
                        println!("registered {n}");
                    }
                    if registered + refused == n {
                        println!("answered {registered} {refused}");
                    }
                }
                Ok(ManagerMessage::Initialize { .. }) if fds.len() == 2 => {
                    // SAFETY: fstat of the memfd we were given, into a
                    // struct we own.
                    let size = unsafe {
                        let mut st: libc::stat = std::mem::zeroed();
                        libc::fstat(fds[0], &mut st);
                        st.st_size
                    };
                    let i = socks.iter().position(|&s| s == fd).unwrap_or(usize::MAX);
                    println!("initialized idle-{i} {size}");
                    if let Some((buffer, fifo)) = traced.insert(fd, (fds[0], fds[1])) {
                        close(buffer);
                        close(fifo);
                    }
                }
                Ok(ManagerMessage::Start { .. }) => {
                    if let Some(&(_, fifo)) = traced.get(&fd) {
                        let started = FromProvider::Started { version: 1 };
                        send(fifo, &started.to_packet().to_bytes());
                    }
                }
                Ok(ManagerMessage::Stop) => {
                    if let Some(&(_, fifo)) = traced.get(&fd) {
                        send(fifo, &FromProvider::Stopped.to_packet().to_bytes());
                    }
                }
                Ok(ManagerMessage::Terminate) => {
                    if let Some((buffer, fifo)) = traced.remove(&fd) {
                        close(buffer);
                        close(fifo);
                    }
                }
                _ => {
                    for f in fds {
                        close(f);
                    }
                }
            }
        }
    }
}
