//! A known workload for the several-machines tests: messages bounced over
//! TCP between two processes, one at a time, so that each send and its
//! receive are apart in time by the network's latency only.
//!
//! Usage: `tcp_pingpong serve ADDR COUNT` (accepts one connection, answers
//! each 8-byte message with the same 8 bytes) or `tcp_pingpong send ADDR
//! COUNT` (connects, retrying for up to 10 s while nothing listens, and
//! sends COUNT messages, each after the answer to the one before). Each
//! prints `pid=<pid> tid=<tid>` first, and `done` when it is through.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, addr, count] = args.as_slice() else {
        eprintln!("usage: tcp_pingpong serve|send ADDR COUNT");
        std::process::exit(2);
    };
    let count: u64 = count.parse().expect("COUNT is a number");
    println!(
        "pid={} tid={}",
        std::process::id(),
        tests::workload::gettid()
    );
    let mut stream = match mode.as_str() {
        "serve" => {
            let listener = TcpListener::bind(addr).expect("bind");
            listener.accept().expect("accept").0
        }
        _ => {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match TcpStream::connect(addr) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() < deadline => {
                        let _ = e;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => panic!("connect {addr}: {e}"),
                }
            }
        }
    };
    stream.set_nodelay(true).expect("nodelay");
    let mut buf = [0u8; 8];
    for i in 0..count {
        if mode == "serve" {
            stream.read_exact(&mut buf).expect("read");
            stream.write_all(&buf).expect("write");
        } else {
            stream.write_all(&i.to_le_bytes()).expect("write");
            stream.read_exact(&mut buf).expect("read");
            assert_eq!(u64::from_le_bytes(buf), i);
        }
    }
    println!("done");
}
