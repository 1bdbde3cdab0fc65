//! Writing threads' slots and the write epoch.
//!
//! Every writer marks itself busy in its own [`ThreadSlot`] while it writes.
//! Whoever changes what writers may touch (a switch of rolling buffers, stop,
//! terminate) publishes a new write epoch, runs `membarrier` (an asymmetric
//! fence: writers need only a compiler fence), and waits until no writer that
//! could still use the old epoch is busy. After that the old buffer is
//! quiescent and can be saved, reused or unmapped.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One writing thread's state, shared with whoever quiesces writers. The
/// fields a record touches share one cache line.
#[repr(C, align(64))]
pub(crate) struct ThreadSlot {
    pub(super) busy: AtomicU32,
    /// [`GENERATION`] if this thread has a thread table index in it, else
    /// [`NOT_READY`]. Set when a region is taken and when the thread is
    /// registered, so it is current whenever `chunk_epoch` is (the
    /// generation only changes between epochs).
    pub(super) generation: AtomicU32,
    owned: AtomicBool,
    /// The write epoch the current region belongs to.
    pub(super) chunk_epoch: AtomicU64,
    /// Address of the next record in the current chunk.
    pub(super) chunk_pos: AtomicUsize,
    /// Address just past the current chunk (records never cross it).
    pub(super) chunk_end: AtomicUsize,
    /// `generation << 8 | thread index` (index 0: inline).
    pub(super) thread_ref: AtomicU64,
    /// Address just past the current region.
    pub(super) region_end: AtomicUsize,
    /// Size of the current region, which the next one doubles.
    pub(super) region: AtomicUsize,
    pub(super) pid: AtomicU64,
    pub(super) tid: AtomicU64,
    next: AtomicPtr<ThreadSlot>,
}

static SLOTS: AtomicPtr<ThreadSlot> = AtomicPtr::new(ptr::null_mut());

/// A slot generation no call site's `ready` ever holds.
pub(super) const NOT_READY: u32 = u32::MAX;

thread_local! {
    static SLOT: std::cell::Cell<*const ThreadSlot> = const { std::cell::Cell::new(ptr::null()) };
    static RELEASE: SlotRelease = const { SlotRelease };
}

struct SlotRelease;

impl Drop for SlotRelease {
    fn drop(&mut self) {
        let p = SLOT
            .try_with(|s| s.replace(ptr::null()))
            .unwrap_or(ptr::null());
        if !p.is_null() {
            // SAFETY: slots are leaked and never freed.
            let slot = unsafe { &*p };
            slot.chunk_epoch.store(0, Ordering::Relaxed);
            slot.thread_ref.store(0, Ordering::Relaxed);
            slot.generation.store(NOT_READY, Ordering::Relaxed);
            slot.owned.store(false, Ordering::Release);
        }
    }
}

#[inline(always)]
pub(super) fn slot() -> &'static ThreadSlot {
    let p = SLOT.with(|s| s.get());
    if p.is_null() {
        return claim_slot();
    }
    // SAFETY: slots are leaked and never freed.
    unsafe { &*p }
}

#[cold]
fn claim_slot() -> &'static ThreadSlot {
    let pid = u64::from(std::process::id());
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u64;
    let mut p = SLOTS.load(Ordering::Acquire);
    let slot: &'static ThreadSlot = loop {
        if p.is_null() {
            let s: &'static ThreadSlot = Box::leak(Box::new(ThreadSlot {
                busy: AtomicU32::new(0),
                generation: AtomicU32::new(NOT_READY),
                owned: AtomicBool::new(true),
                next: AtomicPtr::new(ptr::null_mut()),
                chunk_epoch: AtomicU64::new(0),
                chunk_pos: AtomicUsize::new(0),
                chunk_end: AtomicUsize::new(0),
                thread_ref: AtomicU64::new(0),
                region_end: AtomicUsize::new(0),
                region: AtomicUsize::new(0),
                pid: AtomicU64::new(0),
                tid: AtomicU64::new(0),
            }));
            let mut head = SLOTS.load(Ordering::Acquire);
            loop {
                s.next.store(head, Ordering::Relaxed);
                match SLOTS.compare_exchange(
                    head,
                    s as *const _ as *mut _,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(h) => head = h,
                }
            }
            break s;
        }
        // SAFETY: slots are leaked and never freed.
        let s = unsafe { &*p };
        if s.owned
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            break s;
        }
        p = s.next.load(Ordering::Acquire);
    };
    slot.pid.store(pid, Ordering::Relaxed);
    slot.tid.store(tid, Ordering::Relaxed);
    slot.chunk_epoch.store(0, Ordering::Relaxed);
    slot.thread_ref.store(0, Ordering::Relaxed);
    slot.generation.store(NOT_READY, Ordering::Relaxed);
    SLOT.with(|s| s.set(slot));
    RELEASE.with(|_| {});
    slot
}

fn for_each_slot(mut f: impl FnMut(&ThreadSlot)) {
    let mut p = SLOTS.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: slots are leaked and never freed.
        let s = unsafe { &*p };
        f(s);
        p = s.next.load(Ordering::Acquire);
    }
}

/// 0 while no records may be written; otherwise the epoch chunks must carry.
pub(super) static WRITE_EPOCH: AtomicU64 = AtomicU64::new(0);
/// Bumped whenever durable records are discarded; guards cached indexes.
/// Never 0 (a call site not ready) nor [`NOT_READY`].
pub(super) static GENERATION: AtomicU32 = AtomicU32::new(1);

/// Starts a new generation: indexes cached in the last one go stale.
pub(super) fn bump_generation() {
    let mut g = GENERATION.load(Ordering::Relaxed).wrapping_add(1);
    if g == 0 || g == NOT_READY {
        g = 1;
    }
    GENERATION.store(g, Ordering::Relaxed);
}

/// Runs an asymmetric full fence across this process's threads.
fn membarrier() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    const CMD_GLOBAL: libc::c_long = 1;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
    static EXPEDITED: AtomicBool = AtomicBool::new(false);
    REGISTERED.call_once(|| {
        // SAFETY: membarrier takes plain integers.
        let r =
            unsafe { libc::syscall(libc::SYS_membarrier, CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) };
        EXPEDITED.store(r == 0, Ordering::Relaxed);
    });
    let cmd = if EXPEDITED.load(Ordering::Relaxed) {
        CMD_PRIVATE_EXPEDITED
    } else {
        CMD_GLOBAL
    };
    // SAFETY: membarrier takes plain integers.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) };
    if r != 0 {
        // Without membarrier a full fence here still orders our side; the
        // writers' window is a few instructions long.
        std::sync::atomic::fence(Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Publishes `epoch` and waits until no writer is inside a record.
pub(super) fn quiesce(epoch: u64) {
    WRITE_EPOCH.store(epoch, Ordering::SeqCst);
    membarrier();
    for_each_slot(|s| {
        let mut spins = 0u32;
        while s.busy.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    });
}
