//! `mmap_storm`: a provider (`mmap-storm`, category `app`) whose four
//! threads (`storm-1`..`storm-4`) each map, touch and unmap 1 MiB of
//! anonymous memory 2000 times inside a `storm` span: the process's
//! `mmap_lock` is taken for writing by each map and unmap, so the threads
//! contend on it in the kernel.
//!
//! It waits (up to 10 s) for a trace to enable `app`, then prints
//! `threads=4 rounds=2000`.

use std::time::{Duration, Instant};

/// Maps per thread.
const ROUNDS: usize = 2000;
/// Bytes per map.
const BYTES: usize = 1 << 20;

fn storm() {
    trace_provider::duration!("app", "storm");
    for _ in 0..ROUNDS {
        // SAFETY: an anonymous private mapping of BYTES bytes, touched
        // inside its length and unmapped once.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED, "mmap");
            p.cast::<u8>().write_volatile(1);
            libc::munmap(p, BYTES);
        }
    }
}

fn main() {
    let _provider = trace_provider::init_with_categories("mmap-storm", &["app"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !trace_provider::category_enabled!("app") {
        assert!(Instant::now() < deadline, "no trace enabled category app");
        std::thread::sleep(Duration::from_millis(5));
    }
    let threads: Vec<_> = (1..=4)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("storm-{i}"))
                .spawn(storm)
                .expect("a storm thread")
        })
        .collect();
    for t in threads {
        t.join().expect("a storm thread");
    }
    println!("threads=4 rounds={ROUNDS}");
}
