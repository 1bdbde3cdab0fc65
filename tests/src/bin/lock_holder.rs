//! `lock_holder DIR`: a provider (`lock-holder`, category `app`) with two
//! threads sharing a `std::sync::Mutex`. `holder` takes it, then writes
//! 32 MiB to a file in DIR and `fsync`s it while holding it (a `hold`
//! span); `requester`, once the lock is held, opens a `request` span and
//! locks it, waiting for the whole write and `fsync`.
//!
//! It waits (up to 10 s) for a trace to enable `app`, then prints
//! `requester=TID holder=TID request_ns=N wait_ns=N write_ns=N
//! fsync_ns=N`: the thread ids, the span's time, the time `lock` took,
//! and the holder's write and `fsync` as it measured them.

use std::io::Write;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// Bytes written while holding the lock.
const BYTES: usize = 32 << 20;

fn main() {
    let dir = std::env::args().nth(1).expect("usage: lock_holder DIR");
    let _provider = trace_provider::init_with_categories("lock-holder", &["app"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !trace_provider::category_enabled!("app") {
        assert!(Instant::now() < deadline, "no trace enabled category app");
        std::thread::sleep(Duration::from_millis(5));
    }
    let lock = Arc::new(Mutex::new(()));
    let held = Arc::new(Barrier::new(2));
    let path = std::path::Path::new(&dir).join("lock_holder.data");
    let holder = {
        let (lock, held) = (lock.clone(), held.clone());
        std::thread::Builder::new()
            .name("holder".into())
            .spawn(move || {
                let tid = gettid();
                let guard = lock.lock().expect("the lock");
                held.wait();
                trace_provider::duration!("app", "hold");
                let data = vec![0x5au8; BYTES];
                let mut file = std::fs::File::create(&path).expect("the data file");
                let t = Instant::now();
                file.write_all(&data).expect("the write");
                let write_ns = t.elapsed().as_nanos();
                let t = Instant::now();
                file.sync_all().expect("the fsync");
                let fsync_ns = t.elapsed().as_nanos();
                drop(guard);
                std::fs::remove_file(&path).ok();
                (tid, write_ns, fsync_ns)
            })
            .expect("the holder thread")
    };
    let requester = std::thread::Builder::new()
        .name("requester".into())
        .spawn(move || {
            let tid = gettid();
            held.wait();
            // Let the holder start its write.
            std::thread::sleep(Duration::from_millis(2));
            let t = Instant::now();
            let wait_ns;
            {
                trace_provider::duration!("app", "request");
                let w = Instant::now();
                let _guard = lock.lock().expect("the lock");
                wait_ns = w.elapsed().as_nanos();
            }
            (tid, t.elapsed().as_nanos(), wait_ns)
        })
        .expect("the requester thread");
    let (r_tid, request_ns, wait_ns) = requester.join().expect("the requester");
    let (h_tid, write_ns, fsync_ns) = holder.join().expect("the holder");
    println!(
        "requester={r_tid} holder={h_tid} request_ns={request_ns} wait_ns={wait_ns} write_ns={write_ns} fsync_ns={fsync_ns}"
    );
}

/// The calling thread's id.
fn gettid() -> i64 {
    // SAFETY: gettid has no preconditions.
    i64::from(unsafe { libc::gettid() })
}
