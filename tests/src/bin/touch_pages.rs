//! `touch_pages MEGABYTES`: maps MEGABYTES of anonymous memory, writes one
//! byte in every page, prints `pid=P start=0x.. len=N`, and exits. For the
//! `kernel:vm` end-to-end test.

fn main() {
    let mb: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(64);
    let len = mb << 20;
    // SAFETY: an anonymous private mapping the program owns; checked below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED, "mmap failed");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let p = base.cast::<u8>();
    for off in (0..len).step_by(page) {
        // SAFETY: `off` is inside the mapping; volatile so every page is
        // really written.
        unsafe { p.add(off).write_volatile(1) };
    }
    println!(
        "pid={} start={:#x} len={len}",
        std::process::id(),
        base as usize
    );
}
