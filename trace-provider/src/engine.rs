//! The trace engine: writes FXT records straight into the shared buffer.
//!
//! One engine per process. Writers take regions of the current rolling
//! buffer with one `fetch_add` on [`ALLOC`] (a lock only when the buffer is
//! full and must be switched or marked full). A thread's regions start at
//! one [`CHUNK_BYTES`] chunk and double up to [`REGION_MAX`]; records never
//! cross a chunk boundary unless they are larger than a chunk. A record
//! costs a timestamp, a few relaxed loads and plain stores: its body, a zero
//! word after it inside its chunk (so a reader stops there instead of
//! reading what an earlier pass of a circular buffer left), and its header
//! word last, with release ordering.
//!
//! Every writer marks itself busy in its own [`ThreadSlot`] while it writes.
//! Whoever changes what writers may touch (a switch of rolling buffers, stop,
//! terminate) publishes a new write epoch, runs `membarrier` (an asymmetric
//! fence: writers need only a compiler fence), and waits until no writer that
//! could still use the old epoch is busy. After that the old buffer is
//! quiescent and can be saved, reused or unmapped.
//!
//! String and thread records go to the durable buffer once per trace and are
//! then referenced by index; when the tables or the durable buffer are full,
//! strings and threads are written inline instead. [`write_event`] inlines
//! only the case where everything has an index; the rest is out of line.

use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, compiler_fence,
};
use std::sync::{Mutex, MutexGuard};

use trace_common::fxt::wire::{self, MAX_STRING_INDEX, MAX_THREAD_INDEX};
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue as FxtArgValue, Record, StringRef, obj_type};
use trace_common::provider::buffer::{CHUNK_BYTES, HEADER_BYTES, Layout, offset};
use trace_common::provider::{BufferDisposition, BufferingMode};

use crate::args::Value;
use crate::callsite::{self, Callsite, StaticName};
use crate::clock;

/// Writes consecutive words from a pointer into reserved buffer space.
pub struct Words {
    p: *mut u64,
}

impl Words {
    /// Appends one word.
    #[inline(always)]
    pub fn push(&mut self, w: u64) {
        // SAFETY: the engine reserved room for every word the record's size
        // counts before handing out this writer.
        unsafe {
            self.p.write(w);
            self.p = self.p.add(1);
        }
    }

    /// Appends bytes, zero-padded to whole words.
    #[inline]
    pub fn push_bytes(&mut self, b: &[u8]) {
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.push(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.push(u64::from_le_bytes(w));
        }
    }
}

/// A string reference as it goes into a record: an index, or inline bytes.
#[derive(Clone, Copy)]
pub struct Name {
    pub(crate) reference: u16,
    inline: &'static str,
}

impl Name {
    /// Words of inline bytes after the fixed part.
    #[inline(always)]
    pub fn inline_words(&self) -> usize {
        if self.reference & wire::STRING_REF_INLINE != 0 {
            wire::words(self.inline.len())
        } else {
            0
        }
    }

    #[inline(always)]
    pub(crate) fn write_inline(&self, w: &mut Words) {
        if self.reference & wire::STRING_REF_INLINE != 0 {
            w.push_bytes(self.inline.as_bytes());
        }
    }

    #[inline(always)]
    fn of(s: &'static str, index: Option<u16>) -> Name {
        match index {
            Some(i) => Name {
                reference: i,
                inline: "",
            },
            None => Name::inline(s),
        }
    }

    #[cold]
    #[inline(never)]
    fn inline(s: &'static str) -> Name {
        let s = clip_name(s);
        Name {
            reference: wire::inline_string_ref(s.len()),
            inline: s,
        }
    }
}

fn clip_name(s: &'static str) -> &'static str {
    let mut end = s.len().min(wire::PRACTICAL_MAX_STRING_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// One writing thread's state, shared with whoever quiesces writers. The
/// fields a record touches share one cache line.
#[repr(C, align(64))]
pub(crate) struct ThreadSlot {
    busy: AtomicU32,
    /// [`GENERATION`] if this thread has a thread table index in it, else
    /// [`NOT_READY`]. Set when a region is taken and when the thread is
    /// registered, so it is current whenever `chunk_epoch` is (the
    /// generation only changes between epochs).
    generation: AtomicU32,
    owned: AtomicBool,
    /// The write epoch the current region belongs to.
    chunk_epoch: AtomicU64,
    /// Address of the next record in the current chunk.
    chunk_pos: AtomicUsize,
    /// Address just past the current chunk (records never cross it).
    chunk_end: AtomicUsize,
    /// `generation << 8 | thread index` (index 0: inline).
    thread_ref: AtomicU64,
    /// Address just past the current region.
    region_end: AtomicUsize,
    /// Size of the current region, which the next one doubles.
    region: AtomicUsize,
    pid: AtomicU64,
    tid: AtomicU64,
    next: AtomicPtr<ThreadSlot>,
}

static SLOTS: AtomicPtr<ThreadSlot> = AtomicPtr::new(ptr::null_mut());

/// A slot generation no call site's `ready` ever holds.
const NOT_READY: u32 = u32::MAX;

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
fn slot() -> &'static ThreadSlot {
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
static WRITE_EPOCH: AtomicU64 = AtomicU64::new(0);
/// Bumped whenever durable records are discarded; guards cached indexes.
/// Never 0 (a call site not ready) nor [`NOT_READY`].
static GENERATION: AtomicU32 = AtomicU32::new(1);

fn bump_generation() {
    let mut g = GENERATION.load(Ordering::Relaxed).wrapping_add(1);
    if g == 0 || g == NOT_READY {
        g = 1;
    }
    GENERATION.store(g, Ordering::Relaxed);
}
/// Start of the shared mapping.
static BASE: AtomicPtr<u8> = AtomicPtr::new(ptr::null_mut());
static DURABLE_NEXT: AtomicU64 = AtomicU64::new(0);
static DURABLE_SIZE: AtomicU64 = AtomicU64::new(0);
static THREAD_NEXT: AtomicU32 = AtomicU32::new(1);
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Where writers take regions: `wrapped << ALLOC_SHIFT | offset`, the
/// rolling buffer `wrapped & 1` and the next free offset in it. Offsets only
/// grow until the buffers are switched, so once an allocation runs past the
/// end every later one does too.
static ALLOC: AtomicU64 = AtomicU64::new(0);
const ALLOC_SHIFT: u32 = 40;
const ALLOC_OFFSET_MASK: u64 = (1 << ALLOC_SHIFT) - 1;
const ALLOC_WRAPPED_MASK: u64 = (1 << (64 - ALLOC_SHIFT)) - 1;
/// Addresses and sizes of the rolling buffers (size 0: none).
static ROLLING_AT: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];
static ROLLING_SIZE: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// The largest region one thread takes at once.
static REGION_MAX: AtomicUsize = AtomicUsize::new(CHUNK_BYTES);
/// Upper bound of [`REGION_MAX`].
const MAX_REGION_BYTES: usize = 32 << 10;
/// Set while the rolling buffers take no records: oneshot full, or
/// streaming with both buffers waiting for the manager.
static BLOCKED: AtomicBool = AtomicBool::new(false);

/// Sends SAVE_BUFFER (wrapped count, durable end) in streaming mode.
pub type SaveRequest = Box<dyn Fn(u32, u64) + Send>;

struct State {
    layout: Option<Layout>,
    len: usize,
    categories: Vec<String>,
    extra_categories: Vec<String>,
    started: bool,
    next_epoch: u64,
    wrapped: u32,
    full: bool,
    save_pending: bool,
    on_save: Option<SaveRequest>,
}

static STATE: Mutex<State> = Mutex::new(State {
    layout: None,
    len: 0,
    categories: Vec::new(),
    extra_categories: Vec::new(),
    started: false,
    next_epoch: 1,
    wrapped: 0,
    full: false,
    save_pending: false,
    on_save: None,
});

static STRINGS: Mutex<Option<HashMap<&'static str, u16>>> = Mutex::new(None);
static ENABLED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `category` is enabled by the running trace.
pub(crate) fn category_enabled(category: &str) -> bool {
    if WRITE_EPOCH.load(Ordering::Acquire) == 0 {
        return false;
    }
    let enabled = ENABLED.lock().unwrap_or_else(|e| e.into_inner());
    trace_common::category::is_enabled(&enabled, category)
}

fn refresh_callsites(categories: Vec<String>) {
    let _g = callsite::REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    *ENABLED.lock().unwrap_or_else(|e| e.into_inner()) = categories;
    callsite::refresh_all();
}

fn header_field(off: usize) -> Option<&'static AtomicU64> {
    let base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        return None;
    }
    // SAFETY: the mapping is at least HEADER_BYTES long and 8-aligned while
    // BASE is set; the header's u64 fields are 8-aligned.
    Some(unsafe { &*(base.add(off) as *const AtomicU64) })
}

fn set_header(off: usize, v: u64) {
    if let Some(f) = header_field(off) {
        f.store(v, Ordering::Release);
    }
}

fn set_wrapped(v: u32) {
    let base = BASE.load(Ordering::Acquire);
    if !base.is_null() {
        // SAFETY: as in header_field; the u32 field is 4-aligned.
        unsafe { &*(base.add(offset::WRAPPED_COUNT) as *const AtomicU32) }
            .store(v, Ordering::Release);
    }
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
fn quiesce(epoch: u64) {
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

/// Errors from the engine's control operations.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The buffer's size does not fit the layout rules.
    #[error("unusable trace buffer: {0}")]
    Layout(#[from] trace_common::provider::buffer::LayoutError),
    /// Mapping the buffer failed.
    #[error("mapping the trace buffer failed: {0}")]
    Map(#[source] std::io::Error),
}

/// Attaches the engine to a buffer of `len` bytes mapped at `base`.
///
/// # Safety
/// `base` must point to `len` writable bytes, 8-aligned, shared with the
/// manager, that stay mapped until [`terminate`] returns.
pub unsafe fn initialize(
    base: *mut u8,
    len: usize,
    mode: BufferingMode,
    categories: Vec<String>,
    on_save: Option<SaveRequest>,
) -> Result<(), EngineError> {
    let layout = Layout::new(mode, len as u64)?;
    let mut st = state();
    if st.layout.is_some() {
        // At most one trace at a time: a repeated Initialize is ignored.
        return Ok(());
    }
    BASE.store(base, Ordering::Release);
    for (i, (at, size)) in ROLLING_AT.iter().zip(&ROLLING_SIZE).enumerate() {
        let present = i < layout.rolling_count();
        // Rolling offsets lie inside the `len`-byte mapping (Layout::new).
        at.store(
            base as usize + layout.rolling_offset(i) as usize,
            Ordering::Relaxed,
        );
        size.store(
            if present { layout.rolling[i] } else { 0 },
            Ordering::Relaxed,
        );
    }
    REGION_MAX.store(region_max(&layout), Ordering::Relaxed);
    st.layout = Some(layout);
    st.len = len;
    st.categories = categories;
    st.extra_categories.clear();
    st.on_save = on_save;
    clear(&mut st, &layout, BufferDisposition::ClearEntire);
    Ok(())
}

/// The largest region for `layout`: 1/64 of the smaller rolling buffer,
/// between one chunk and [`MAX_REGION_BYTES`].
fn region_max(layout: &Layout) -> usize {
    let smallest = layout.rolling[..layout.rolling_count()]
        .iter()
        .copied()
        .min()
        .unwrap_or(0) as usize;
    (smallest / 64 / CHUNK_BYTES * CHUNK_BYTES).clamp(CHUNK_BYTES, MAX_REGION_BYTES)
}

fn clear(st: &mut State, layout: &Layout, disposition: BufferDisposition) {
    // Retain: go on where the last run stopped, rolling data included.
    if disposition == BufferDisposition::Retain {
        return;
    }
    st.wrapped = 0;
    st.full = false;
    st.save_pending = false;
    ALLOC.store(0, Ordering::Relaxed);
    BLOCKED.store(false, Ordering::Relaxed);
    DROPPED.store(0, Ordering::Relaxed);
    if disposition == BufferDisposition::ClearEntire {
        let base = BASE.load(Ordering::Acquire);
        let h = layout.initial_header().to_bytes();
        // SAFETY: the mapping holds at least HEADER_BYTES; no writer runs.
        unsafe { ptr::copy_nonoverlapping(h.as_ptr(), base, HEADER_BYTES) };
        DURABLE_SIZE.store(layout.durable, Ordering::Relaxed);
        DURABLE_NEXT.store(0, Ordering::Relaxed);
        THREAD_NEXT.store(1, Ordering::Relaxed);
        bump_generation();
        *STRINGS.lock().unwrap_or_else(|e| e.into_inner()) = Some(HashMap::new());
        let mut init = Vec::with_capacity(16);
        if encode(
            &Record::Initialization {
                ticks_per_second: clock::ticks_per_second(),
            },
            &mut init,
        )
        .is_ok()
        {
            durable_write(&init);
        }
    }
    set_wrapped(0);
    set_header(offset::ROLLING_DATA_END, 0);
    set_header(offset::ROLLING_DATA_END + 8, 0);
    set_header(offset::NUM_RECORDS_DROPPED, 0);
}

/// Begins writing. Ignored while started.
pub fn start(disposition: BufferDisposition, additional: Vec<String>) {
    let mut st = state();
    let Some(layout) = st.layout else { return };
    if st.started {
        return;
    }
    clear(&mut st, &layout, disposition);
    st.extra_categories = additional;
    st.started = true;
    let epoch = st.next_epoch;
    st.next_epoch += 1;
    WRITE_EPOCH.store(epoch, Ordering::SeqCst);
    let mut cats = st.categories.clone();
    if !cats.is_empty() {
        cats.extend(st.extra_categories.iter().cloned());
    }
    drop(st);
    refresh_callsites(cats);
}

/// What the header says after [`stop`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StopStats {
    /// Records dropped because the buffer was full.
    pub dropped: u64,
    /// Switches between rolling buffers.
    pub wrapped: u32,
}

/// Stops writing; once this returns every record is complete in the buffer
/// and the header holds the final ends. Ignored while stopped.
pub fn stop() -> StopStats {
    let mut st = state();
    if !st.started {
        return StopStats::default();
    }
    st.started = false;
    quiesce(0);
    finish_header(&st);
    drop(st);
    refresh_callsites(Vec::new());
    StopStats {
        dropped: DROPPED.load(Ordering::Relaxed),
        wrapped: state().wrapped,
    }
}

fn finish_header(st: &State) {
    let Some(layout) = st.layout else { return };
    let durable = DURABLE_NEXT.load(Ordering::Relaxed).min(layout.durable) & !7;
    set_header(offset::DURABLE_DATA_END, durable);
    // The rolling data ends are kept by the writers (`refill`).
    set_wrapped(st.wrapped);
    set_header(offset::NUM_RECORDS_DROPPED, DROPPED.load(Ordering::Relaxed));
}

/// Stops if needed and lets go of the buffer; the caller may unmap it after.
pub fn terminate() {
    stop();
    let mut st = state();
    quiesce(0);
    BASE.store(ptr::null_mut(), Ordering::Release);
    st.layout = None;
    st.on_save = None;
    bump_generation();
}

/// The manager saved rolling buffer `wrapped & 1` (streaming).
pub fn buffer_saved(wrapped: u32) {
    let mut st = state();
    if st.save_pending && wrapped.wrapping_add(1) == st.wrapped {
        st.save_pending = false;
        BLOCKED.store(false, Ordering::Relaxed);
    }
}

/// Records dropped so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Appends a whole record to the durable buffer. Returns false when full.
fn durable_write(record: &[u8]) -> bool {
    let len = record.len() as u64;
    let size = DURABLE_SIZE.load(Ordering::Relaxed);
    let off = DURABLE_NEXT.fetch_add(len, Ordering::AcqRel);
    if off + len > size {
        return false;
    }
    let base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        return false;
    }
    // SAFETY: [off, off+len) lies in the durable buffer, reserved by the
    // fetch_add above for this writer alone.
    unsafe {
        let dst = base.add(HEADER_BYTES + off as usize);
        ptr::copy_nonoverlapping(record.as_ptr().add(8), dst.add(8), record.len() - 8);
        let mut h = [0u8; 8];
        h.copy_from_slice(&record[..8]);
        (*(dst as *const AtomicU64)).store(u64::from_le_bytes(h), Ordering::Release);
    }
    if let Some(f) = header_field(offset::DURABLE_DATA_END) {
        f.fetch_max(off + len, Ordering::AcqRel);
    }
    true
}

/// The table index of `s`, writing its string record the first time.
#[cold]
fn intern(s: &'static str) -> Option<u16> {
    if s.is_empty() || s.len() > wire::PRACTICAL_MAX_STRING_LEN {
        return None;
    }
    let mut guard = STRINGS.lock().unwrap_or_else(|e| e.into_inner());
    let table = guard.as_mut()?;
    if let Some(&i) = table.get(s) {
        return Some(i);
    }
    let index = u16::try_from(table.len() + 1)
        .ok()
        .filter(|&i| i <= MAX_STRING_INDEX)?;
    let mut rec = Vec::with_capacity(16 + s.len());
    encode(
        &Record::String {
            index,
            value: s.into(),
        },
        &mut rec,
    )
    .ok()?;
    if !durable_write(&rec) {
        return None;
    }
    table.insert(s, index);
    Some(index)
}

#[inline(always)]
fn cached_name(cache: &AtomicU64, s: &'static str, generation: u32) -> Name {
    let c = cache.load(Ordering::Relaxed);
    if (c >> 32) as u32 == generation {
        return Name::of(s, Some(c as u16).filter(|&i| i != 0));
    }
    name_slow(cache, s, generation)
}

#[cold]
fn name_slow(cache: &AtomicU64, s: &'static str, generation: u32) -> Name {
    let i = intern(s);
    cache.store(
        (u64::from(generation) << 32) | u64::from(i.unwrap_or(0)),
        Ordering::Relaxed,
    );
    Name::of(s, i)
}

#[cold]
fn thread_slow(slot: &ThreadSlot, generation: u32) -> u8 {
    let pid = slot.pid.load(Ordering::Relaxed);
    let tid = slot.tid.load(Ordering::Relaxed);
    let mut index = 0u8;
    let i = THREAD_NEXT.fetch_add(1, Ordering::Relaxed);
    if i <= u32::from(MAX_THREAD_INDEX) {
        let mut rec = Vec::with_capacity(24);
        if encode(
            &Record::Thread {
                index: i as u8,
                process: pid,
                thread: tid,
            },
            &mut rec,
        )
        .is_ok()
            && durable_write(&rec)
        {
            index = i as u8;
        }
    }
    write_thread_names(pid, tid);
    slot.thread_ref.store(
        (u64::from(generation) << 8) | u64::from(index),
        Ordering::Relaxed,
    );
    slot.generation.store(
        if index != 0 { generation } else { NOT_READY },
        Ordering::Relaxed,
    );
    index
}

/// Names this thread (and, once per trace, this process) with kernel object
/// records, so a trace without kernel categories still has names.
fn write_thread_names(pid: u64, tid: u64) {
    static PROCESS_NAMED: AtomicU32 = AtomicU32::new(0);
    let generation = GENERATION.load(Ordering::Relaxed);
    let comm = |path: String| {
        std::fs::read_to_string(path)
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default()
    };
    let mut rec = Vec::with_capacity(64);
    if PROCESS_NAMED.swap(generation, Ordering::Relaxed) != generation {
        let name = comm(format!("/proc/{pid}/comm"));
        if encode(
            &Record::KernelObject {
                koid: pid,
                obj_type: obj_type::PROCESS,
                name: StringRef::inline(&name),
                args: Vec::new().into(),
            },
            &mut rec,
        )
        .is_ok()
        {
            durable_write(&rec);
        }
        rec.clear();
    }
    let name = comm(format!("/proc/{pid}/task/{tid}/comm"));
    let args = [Arg {
        name: StringRef::inline("process"),
        value: FxtArgValue::Koid(pid),
    }];
    if encode(
        &Record::KernelObject {
            koid: tid,
            obj_type: obj_type::THREAD,
            name: StringRef::inline(&name),
            args: args[..].into(),
        },
        &mut rec,
    )
    .is_ok()
    {
        durable_write(&rec);
    }
}

/// Takes a fresh region for a `bytes`-byte record. Called with `busy` set
/// and `epoch` read after setting it; returns with `busy` set and the region
/// valid for the returned epoch, or `None` (with `busy` clear) when the
/// record must be dropped.
///
/// Regions come from [`ALLOC`] with one `fetch_add`: no lock unless the
/// rolling buffer is full. A thread's regions double from one chunk up to
/// [`REGION_MAX`], so threads that write little waste little.
#[cold]
#[inline(never)]
fn refill(slot: &ThreadSlot, mut epoch: u64, bytes: usize) -> Option<u64> {
    // Room for the record and the zero word after it.
    let min = (bytes + 8).div_ceil(CHUNK_BYTES) * CHUNK_BYTES;
    for _ in 0..4 {
        if BLOCKED.load(Ordering::Relaxed) {
            slot.busy.store(0, Ordering::Release);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let want = if slot.chunk_epoch.load(Ordering::Relaxed) == epoch {
            (slot.region.load(Ordering::Relaxed) * 2).min(REGION_MAX.load(Ordering::Relaxed))
        } else {
            CHUNK_BYTES
        };
        let need = want.max(min);
        let v = ALLOC.fetch_add(need as u64, Ordering::Relaxed);
        let wrapped = v >> ALLOC_SHIFT;
        let off = v & ALLOC_OFFSET_MASK;
        let cur = (wrapped & 1) as usize;
        let end = off + need as u64;
        if end <= ROLLING_SIZE[cur].load(Ordering::Relaxed) {
            let start = ROLLING_AT[cur].load(Ordering::Relaxed) + off as usize;
            // Older data in the region (circular mode) must not be read as
            // records: each chunk starts with a zero word until a record
            // replaces it, and every record is followed by a zero word
            // within its chunk (`commit`).
            for chunk in (start..start + need).step_by(CHUNK_BYTES) {
                // SAFETY: [start, start + need) lies in rolling buffer
                // `cur`, which stays mapped while a writer is busy, and the
                // fetch_add above gave it to this thread alone.
                unsafe { (chunk as *mut u64).write(0) };
            }
            if let Some(f) = header_field(offset::ROLLING_DATA_END + 8 * cur) {
                f.fetch_max(end, Ordering::AcqRel);
            }
            let chunk_end = if bytes + 8 > CHUNK_BYTES {
                start + need
            } else {
                start + CHUNK_BYTES
            };
            slot.chunk_pos.store(start, Ordering::Relaxed);
            slot.chunk_end.store(chunk_end, Ordering::Relaxed);
            slot.region_end.store(start + need, Ordering::Relaxed);
            slot.region.store(need, Ordering::Relaxed);
            let generation = GENERATION.load(Ordering::Relaxed);
            let t = slot.thread_ref.load(Ordering::Relaxed);
            slot.generation.store(
                if (t >> 8) as u32 == generation && t as u8 != 0 {
                    generation
                } else {
                    NOT_READY
                },
                Ordering::Relaxed,
            );
            slot.chunk_epoch.store(epoch, Ordering::Relaxed);
            return Some(epoch);
        }
        // The buffer is full. Not busy while waiting for the lock: whoever
        // holds it may be waiting for this thread to leave its record.
        slot.busy.store(0, Ordering::Release);
        match buffer_full(wrapped, need) {
            Full::Retry => {}
            Full::Drop => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Full::Stopped => return None,
        }
        slot.busy.store(1, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        epoch = WRITE_EPOCH.load(Ordering::Acquire);
        if epoch == 0 {
            slot.busy.store(0, Ordering::Release);
            return None;
        }
    }
    slot.busy.store(0, Ordering::Release);
    DROPPED.fetch_add(1, Ordering::Relaxed);
    None
}

/// What a writer that found the rolling buffer full does next.
enum Full {
    /// Take a region again (the buffers were switched).
    Retry,
    /// Drop the record (oneshot full, streaming waiting for the manager).
    Drop,
    /// Drop the record silently: the trace is stopping.
    Stopped,
}

/// Handles a full rolling buffer `wrapped & 1` for a writer that needs
/// `need` bytes: switches rolling buffers (circular, streaming) or marks the
/// buffer full (oneshot). Called with `busy` clear.
#[cold]
fn buffer_full(wrapped: u64, need: usize) -> Full {
    let mut st = state();
    if ALLOC.load(Ordering::Acquire) >> ALLOC_SHIFT != wrapped {
        // Another writer switched buffers already.
        return Full::Retry;
    }
    let Some(layout) = st.layout else {
        return Full::Stopped;
    };
    if !st.started || WRITE_EPOCH.load(Ordering::Acquire) == 0 {
        return Full::Stopped;
    }
    match layout.mode {
        BufferingMode::Oneshot => {
            if !st.full {
                st.full = true;
                BLOCKED.store(true, Ordering::Relaxed);
                finish_header(&st);
            }
            Full::Drop
        }
        BufferingMode::Circular | BufferingMode::Streaming => {
            let next = st.wrapped.wrapping_add(1);
            let next_cur = (next & 1) as usize;
            if need as u64 > layout.rolling[next_cur] {
                return Full::Drop;
            }
            if st.save_pending {
                BLOCKED.store(true, Ordering::Relaxed);
                return Full::Drop;
            }
            let e = st.next_epoch;
            st.next_epoch += 1;
            quiesce(e);
            // Buffer `wrapped` is quiescent: finish it, open the other.
            finish_header(&st);
            let before = st.wrapped;
            st.wrapped = next;
            set_header(offset::ROLLING_DATA_END + 8 * next_cur, 0);
            set_wrapped(next);
            ALLOC.store(
                (u64::from(next) & ALLOC_WRAPPED_MASK) << ALLOC_SHIFT,
                Ordering::Release,
            );
            if layout.mode == BufferingMode::Streaming {
                st.save_pending = true;
                let durable = DURABLE_NEXT.load(Ordering::Relaxed).min(layout.durable);
                if let Some(f) = &st.on_save {
                    f(before, durable);
                }
            }
            Full::Retry
        }
    }
}

/// The most arguments one event carries.
pub const MAX_ARGS: usize = wire::MAX_ARGS;

/// Writes one event record of `site` that happened at `ts`: the hot path
/// of every macro.
///
/// `trailer` holds the words after the arguments (end time, id, scope).
/// Arguments past [`MAX_ARGS`] are left out. Taking the arguments by value
/// lets the compiler keep them in registers: they reach memory only on the
/// out-of-line path.
#[inline(always)]
pub fn write_event<const N: usize>(
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: [(&'static StaticName, Value<'_>); N],
    trailer: &[u64],
) {
    let Some((slot, epoch)) = enter() else {
        return;
    };
    if !write_indexed(slot, epoch, site, event_type, ts, &args, trailer) {
        write_event_general_owned(slot, epoch, site, event_type, ts, args, trailer);
    }
}

/// [`write_event`] for arguments only known at run time (the C ABI, the
/// `tracing` layer).
pub fn write_event_dyn(
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: &[(&'static StaticName, Value<'_>)],
    trailer: &[u64],
) {
    let Some((slot, epoch)) = enter() else {
        return;
    };
    if !write_indexed(slot, epoch, site, event_type, ts, args, trailer) {
        write_event_general(slot, epoch, site, event_type, ts, args, trailer);
    }
}

/// Marks this thread busy and returns its slot and the write epoch, or
/// `None` (not busy) when no trace is being written.
#[inline(always)]
fn enter() -> Option<(&'static ThreadSlot, u64)> {
    let slot = slot();
    slot.busy.store(1, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    let epoch = WRITE_EPOCH.load(Ordering::Acquire);
    if epoch == 0 {
        slot.busy.store(0, Ordering::Release);
        return None;
    }
    Some((slot, epoch))
}

/// Writes the record if it is the common case: this thread has a region of
/// this epoch, and the category, name, thread and argument names all have
/// table indexes of this trace, so the record has no inline strings.
/// Returns false, having written nothing, otherwise.
#[inline(always)]
fn write_indexed(
    slot: &'static ThreadSlot,
    epoch: u64,
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: &[(&'static StaticName, Value<'_>)],
    trailer: &[u64],
) -> bool {
    let generation = slot.generation.load(Ordering::Relaxed);
    let mut indexed = (slot.chunk_epoch.load(Ordering::Relaxed) == epoch)
        & (site.ready.load(Ordering::Relaxed) == generation)
        & (args.len() <= MAX_ARGS);
    let mut words = 2 + trailer.len();
    // An argument name is ready if its cache holds this generation and a
    // non-zero index: one subtraction and one compare.
    let ready_base = (u64::from(generation) << 32) | 1;
    for (n, v) in args {
        let c = n.cache.load(Ordering::Relaxed);
        indexed &= c.wrapping_sub(ready_base) < u64::from(MAX_STRING_INDEX);
        words += 1 + v.value_words();
    }
    if !indexed || words > wire::MAX_RECORD_WORDS {
        return false;
    }
    let Some((rec, mut w)) = reserve_checked::<false>(slot, epoch, words) else {
        return true;
    };
    let s = site.strings.load(Ordering::Relaxed);
    let (cat, name) = (((s >> 16) & 0xFFFF) as u16, s as u16);
    let thread = slot.thread_ref.load(Ordering::Relaxed) as u8;
    w.push(ts);
    for (n, v) in args {
        v.write_indexed(n.cache.load(Ordering::Relaxed) as u16, &mut w);
    }
    for &t in trailer {
        w.push(t);
    }
    let header = wire::event_header(words, event_type, args.len(), thread, cat, name);
    commit(slot, rec, header, words);
    true
}

/// [`write_event_general`] taking the arguments by value, so that only this
/// path stores them.
#[cold]
#[inline(never)]
fn write_event_general_owned<const N: usize>(
    slot: &ThreadSlot,
    epoch: u64,
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: [(&'static StaticName, Value<'_>); N],
    trailer: &[u64],
) {
    write_event_general(slot, epoch, site, event_type, ts, &args, trailer);
}

/// [`write_event`] for records with inline strings or threads, or names not
/// yet in the tables. Called with `busy` set and `epoch` current.
#[cold]
#[inline(never)]
fn write_event_general(
    slot: &ThreadSlot,
    epoch: u64,
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: &[(&'static StaticName, Value<'_>)],
    trailer: &[u64],
) {
    let generation = GENERATION.load(Ordering::Relaxed);
    let s = site.strings.load(Ordering::Relaxed);
    let (cat, name) = if (s >> 32) as u32 == generation {
        (
            Name::of(site.category, Some((s >> 16) as u16).filter(|&i| i != 0)),
            Name::of(site.name, Some(s as u16).filter(|&i| i != 0)),
        )
    } else {
        site_names_slow(site, generation)
    };
    let t = slot.thread_ref.load(Ordering::Relaxed);
    let thread = if (t >> 8) as u32 == generation {
        t as u8
    } else {
        thread_slow(slot, generation)
    };
    let args = &args[..args.len().min(MAX_ARGS)];
    // Names are looked up twice (here and when writing) rather than kept in
    // an array: a cached lookup is one load.
    let mut arg_words = 0;
    for (n, v) in args {
        arg_words += v.words(&cached_name(&n.cache, n.name, generation));
    }
    let words = 2
        + if thread == 0 { 2 } else { 0 }
        + cat.inline_words()
        + name.inline_words()
        + arg_words
        + trailer.len();
    if words > wire::MAX_RECORD_WORDS {
        slot.busy.store(0, Ordering::Release);
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Some((rec, mut w)) = reserve(slot, epoch, words) else {
        return;
    };
    w.push(ts);
    if thread == 0 {
        w.push(slot.pid.load(Ordering::Relaxed));
        w.push(slot.tid.load(Ordering::Relaxed));
    }
    cat.write_inline(&mut w);
    name.write_inline(&mut w);
    for (n, v) in args {
        v.write(&cached_name(&n.cache, n.name, generation), &mut w);
    }
    for &t in trailer {
        w.push(t);
    }
    let header = wire::event_header(
        words,
        event_type,
        args.len(),
        thread,
        cat.reference,
        name.reference,
    );
    commit(slot, rec, header, words);
}

/// Reserves `words` words in this thread's chunk (taking a new chunk if
/// needed); returns the record's first word and a writer for its body, or
/// `None` (with `busy` clear) when the record is dropped.
///
/// Every chunk keeps room for the zero word after its last record, so a
/// record fits only if it ends before the chunk does.
#[inline(always)]
fn reserve(slot: &ThreadSlot, epoch: u64, words: usize) -> Option<(*mut u64, Words)> {
    reserve_checked::<true>(slot, epoch, words)
}

/// [`reserve`], skipping the epoch check unless `CHECK_EPOCH` (the caller
/// has checked that this thread's region belongs to `epoch`).
#[inline(always)]
fn reserve_checked<const CHECK_EPOCH: bool>(
    slot: &ThreadSlot,
    epoch: u64,
    words: usize,
) -> Option<(*mut u64, Words)> {
    let bytes = words * 8;
    let mut pos = slot.chunk_pos.load(Ordering::Relaxed);
    if (CHECK_EPOCH && slot.chunk_epoch.load(Ordering::Relaxed) != epoch)
        || pos + bytes >= slot.chunk_end.load(Ordering::Relaxed)
    {
        next_chunk(slot, epoch, bytes)?;
        pos = slot.chunk_pos.load(Ordering::Relaxed);
    }
    // [pos, pos + bytes) lies in this thread's region of the current epoch,
    // which no one else writes and no one reads before `busy` clears.
    let rec = pos as *mut u64;
    // SAFETY: as above; the record's body starts one word in.
    let w = Words {
        p: unsafe { rec.add(1) },
    };
    Some((rec, w))
}

/// Moves to the next chunk of this thread's region, or takes a new region
/// (`refill`). Same contract as `refill`.
#[cold]
#[inline(never)]
fn next_chunk(slot: &ThreadSlot, epoch: u64, bytes: usize) -> Option<u64> {
    let end = slot.chunk_end.load(Ordering::Relaxed);
    if slot.chunk_epoch.load(Ordering::Relaxed) == epoch
        && bytes < CHUNK_BYTES
        && end + CHUNK_BYTES <= slot.region_end.load(Ordering::Relaxed)
    {
        // The chunk left behind ends in a zero word (`commit`).
        slot.chunk_pos.store(end, Ordering::Relaxed);
        slot.chunk_end.store(end + CHUNK_BYTES, Ordering::Relaxed);
        return Some(epoch);
    }
    refill(slot, epoch, bytes)
}

/// Publishes a record whose body is written: the zero word after it (so a
/// reader stops there), the header last, then not busy.
#[inline(always)]
fn commit(slot: &ThreadSlot, rec: *mut u64, header: u64, words: usize) {
    let next = rec as usize + words * 8;
    // SAFETY: `next` is 8-aligned and inside this thread's chunk, which
    // `reserve` keeps room in for this word.
    unsafe { (next as *mut u64).write(0) };
    // SAFETY: `rec` is the first word of the reserved space, 8-aligned.
    unsafe { (*(rec as *const AtomicU64)).store(header, Ordering::Release) };
    slot.chunk_pos.store(next, Ordering::Relaxed);
    slot.busy.store(0, Ordering::Release);
}

/// Writes a blob record (type 5) named by `site`'s name: `payload` is cut
/// to what one record holds (32 000 bytes). Blob types: 1 data, 2
/// last-branch, 3 Perfetto.
pub fn write_blob(site: &'static Callsite, blob_type: u8, payload: &[u8]) {
    let slot = slot();
    slot.busy.store(1, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    let epoch = WRITE_EPOCH.load(Ordering::Acquire);
    if epoch == 0 {
        slot.busy.store(0, Ordering::Release);
        return;
    }
    let generation = GENERATION.load(Ordering::Relaxed);
    let s = site.strings.load(Ordering::Relaxed);
    let name = if (s >> 32) as u32 == generation {
        Name::of(site.name, Some(s as u16).filter(|&i| i != 0))
    } else {
        site_names_slow(site, generation).1
    };
    let payload = &payload[..payload.len().min(wire::PRACTICAL_MAX_STRING_LEN)];
    let words = 1 + name.inline_words() + wire::words(payload.len());
    let Some((rec, mut w)) = reserve(slot, epoch, words) else {
        return;
    };
    name.write_inline(&mut w);
    w.push_bytes(payload);
    let header = wire::record_header(wire::record_type::BLOB, words)
        | wire::field(u64::from(name.reference), 16, 31)
        | wire::field(payload.len() as u64, 32, 46)
        | wire::field(u64::from(blob_type), 48, 55);
    commit(slot, rec, header, words);
}

#[cold]
fn site_names_slow(site: &'static Callsite, generation: u32) -> (Name, Name) {
    let c = intern(site.category);
    let n = intern(site.name);
    site.strings.store(
        (u64::from(generation) << 32)
            | (u64::from(c.unwrap_or(0)) << 16)
            | u64::from(n.unwrap_or(0)),
        Ordering::Relaxed,
    );
    site.ready.store(
        if c.is_some() && n.is_some() {
            generation
        } else {
            0
        },
        Ordering::Relaxed,
    );
    (Name::of(site.category, c), Name::of(site.name, n))
}

/// Whether a trace is being written now.
pub fn is_started() -> bool {
    WRITE_EPOCH.load(Ordering::Relaxed) != 0
}

/// Size of the attached buffer, 0 when none.
pub fn buffer_len() -> usize {
    state().len
}
