//! A hostile trace provider for the end-to-end tests, speaking the protocol
//! by hand: `garbage_provider buffer` registers and then fills its buffer
//! with garbage (random words and well-framed records that would hijack a
//! reader: provider info, provider section, initialization);
//! `garbage_provider packets` sends nonsense FIFO packets instead;
//! `garbage_provider silent` never answers Start or Stop;
//! `garbage_provider alerts` starts, then raises the alerts `first` and
//! `second`. It runs until killed.

use std::os::fd::RawFd;

use trace_common::fxt::Record;
use trace_common::fxt::write::encode;
use trace_common::provider::clock::ClockKind;
use trace_common::provider::control::{ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::Packet;

fn socket_path() -> String {
    std::env::var("TRACE_MANAGER_SOCKET").expect("TRACE_MANAGER_SOCKET is set by the test")
}

fn connect(path: &str) -> RawFd {
    // SAFETY: plain socket calls on a sockaddr_un we fill in.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, b) in path.bytes().enumerate() {
            addr.sun_path[i] = b as libc::c_char;
        }
        loop {
            let r = libc::connect(
                fd,
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as u32,
            );
            if r == 0 {
                return fd;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Receives one message and up to two descriptors.
fn recv(fd: RawFd) -> (Vec<u8>, Vec<RawFd>) {
    let mut buf = vec![0u8; 16384];
    let mut cmsg = [0u64; 8];
    // SAFETY: recvmsg into buffers we own; control data parsed with the
    // CMSG macros within its length.
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
        let n = libc::recvmsg(fd, &mut msg, 0);
        if n <= 0 {
            std::process::exit(0);
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
        (buf, fds)
    }
}

fn send(fd: RawFd, b: &[u8]) {
    // SAFETY: sending bytes we own.
    unsafe { libc::send(fd, b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL) };
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "buffer".into());
    let sock = connect(&socket_path());
    let register = ProviderMessage::Register {
        name: format!("garbage-{mode}"),
        clock: ClockKind::Boottime,
        categories: vec![],
    };
    send(sock, &register.encode().unwrap());
    let mut fifo = -1;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    loop {
        let (msg, fds) = recv(sock);
        match ManagerMessage::decode(&msg) {
            Ok(ManagerMessage::Initialize { .. }) if fds.len() == 2 => {
                fifo = fds[1];
                // SAFETY: fstat and mmap of the memfd we were given.
                let (map, len) = unsafe {
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstat(fds[0], &mut st);
                    let len = st.st_size as usize;
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_SHARED,
                        fds[0],
                        0,
                    );
                    assert_ne!(p, libc::MAP_FAILED);
                    (p as *mut u8, len)
                };
                if mode == "buffer" {
                    // SAFETY: `map` is `len` writable bytes we mapped.
                    let bytes = unsafe { std::slice::from_raw_parts_mut(map, len) };
                    let mut hijack = Vec::new();
                    for r in [
                        Record::ProviderInfo {
                            id: 1,
                            name: "kernel".into(),
                        },
                        Record::ProviderSection { id: 1 },
                        Record::Initialization {
                            ticks_per_second: 7,
                        },
                    ] {
                        encode(&r, &mut hijack).unwrap();
                    }
                    for chunk in bytes.chunks_mut(8) {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        chunk.copy_from_slice(&seed.to_le_bytes()[..chunk.len()]);
                    }
                    // A plausible header so the manager walks the garbage.
                    let layout = trace_common::provider::buffer::Layout::new(
                        trace_common::provider::BufferingMode::Oneshot,
                        len as u64,
                    )
                    .unwrap();
                    let mut h = layout.initial_header();
                    h.durable_data_end = layout.durable & !7;
                    h.rolling_data_end[0] = layout.rolling[0] & !7;
                    bytes[..128].copy_from_slice(&h.to_bytes());
                    let r0 = layout.rolling_offset(0) as usize;
                    bytes[r0..r0 + hijack.len()].copy_from_slice(&hijack);
                    let d0 = layout.durable_offset() as usize;
                    bytes[d0..d0 + hijack.len()].copy_from_slice(&hijack);
                }
            }
            Ok(ManagerMessage::Start { .. }) if fifo >= 0 && mode == "silent" => {}
            Ok(ManagerMessage::Start { .. }) if fifo >= 0 && mode == "alerts" => {
                use trace_common::provider::fifo::{AlertName, FromProvider};
                let mut packets = vec![FromProvider::Started { version: 1 }];
                for name in ["first", "second"] {
                    packets.push(FromProvider::Alert(AlertName::new(name).unwrap()));
                }
                for p in packets {
                    send(fifo, &p.to_packet().to_bytes());
                }
            }
            Ok(ManagerMessage::Start { .. }) if fifo >= 0 => {
                if mode == "packets" {
                    for request in [0u16, 0x77, 0x0100, 0x0001] {
                        let p = Packet {
                            request,
                            data16: 3,
                            data32: 99,
                            data64: u64::MAX,
                        };
                        send(fifo, &p.to_bytes());
                    }
                } else {
                    let started = Packet {
                        request: 1,
                        data16: 0,
                        data32: 1,
                        data64: 0,
                    };
                    send(fifo, &started.to_bytes());
                }
            }
            _ => {}
        }
    }
}
