//! The kernel trace provider's eBPF programs.
//!
//! Every program attaches to a classic tracepoint (or a uprobe) and writes
//! one fixed-layout event (defined in `trace_common::kernel`) into the ring
//! buffer of the CPU it runs on, reserving the entry and filling it in place.
//! `EVENTS` holds one ring buffer per CPU (userspace creates and sizes them),
//! so CPUs never contend for one ring's lock or share its cache lines.
//!
//! Tracepoint fields are read at the offsets userspace parsed from the running
//! kernel's tracefs format files and stored in the `LAYOUT` map before
//! attaching; nothing here knows one kernel's offsets. A program copies the
//! raw record once (one `bpf_probe_read_kernel` of `record_size` bytes) into a
//! per-CPU scratch buffer and takes the fields from there, since helper calls
//! dominate the cost. A field this kernel lacks is absent in the layout and
//! is written with all bits set (`ABSENT_ID`, `ABSENT_INT`) or as an empty
//! string.
//!
//! Lost events (ring buffer full, layout not set) are counted per CPU in
//! `COUNTERS`, never dropped silently. The reader is woken only once
//! `wakeup_bytes` wait in the ring buffer; below that it collects on a timer,
//! which spares a wake-up (an inter-processor interrupt) per event.
//!
//! Programs by category (userspace attaches only the enabled ones):
//! - `kernel:sched`: `sched_switch`, `sched_wakeup`, `sched_wakeup_new`,
//!   `cpu_idle`, `cpu_frequency` (the last two not under a pid filter);
//! - `kernel:proc`: `sched_process_fork`, `task_newtask`,
//!   `sched_process_exec`, `sched_process_exit`, `task_rename`;
//! - `kernel:syscall`: `sys_enter`, `sys_exit` (never for the recorder's own
//!   process);
//! - `kernel:irq`: `irq_handler_entry`, `irq_handler_exit`, `softirq_entry`,
//!   `softirq_exit` (not recorded under a pid filter: interrupts belong to
//!   no process);
//! - `kernel:block`: `block_rq_issue` (under a pid filter, only requests a
//!   followed task issues), `block_rq_complete`;
//! - `kernel:vm`: `page_fault_user` (x86), `rss_stat` (under a pid filter,
//!   only changes a followed task makes);
//! - `--uprobe`: `uprobe_entry` and `uprobe_return`, attached once per probed
//!   function with its index as the attach cookie.
//! - `--usdt`: `usdt`, attached at every USDT probe site with the site's
//!   index in `USDT_SPECS` (where its arguments are) as the attach cookie.
//!
//! With a pid filter (`FILTER_PIDS`), a program records only events of the
//! threads in `FOLLOWED` (a context switch or wake-up if either thread is
//! followed). `task_newtask` adds every task a followed task creates, and
//! `sched_process_exit` removes tasks that exit; both are attached for the
//! filter even when `kernel:proc` is off, and then write no events.
#![no_std]
#![no_main]

mod tracepoint;

use core::ffi::c_void;
use core::mem::MaybeUninit;
use core::ptr;

use aya_ebpf::{
    EbpfContext as _,
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_smp_processor_id,
        bpf_ktime_get_boot_ns, bpf_probe_read_kernel_str_bytes, bpf_probe_read_user,
        bpf_probe_read_user_str_bytes, generated,
    },
    btf_maps::{ArrayOfMaps, RingBuf},
    macros::{btf_map, btf_tracepoint, map, tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray, ring_buf::RingBufEntry},
    programs::{BtfTracePointContext, ProbeContext, RetProbeContext, TracePointContext},
};
use trace_common::kernel::{
    ABSENT_ID, ABSENT_INT, BlockRqEvent, BlockRqLayout, CLONE_THREAD, COMM_LEN, COUNTER_COUNT,
    COUNTER_FOLLOW_FULL, COUNTER_NO_LAYOUT, COUNTER_RINGBUF_FULL, EMIT_PROC, EventHeader,
    EventKind, FILENAME_LEN, FILTER_PIDS, FOLLOWED_MAX, FieldLoc, GROUP_DEAD_UNKNOWN,
    IrqEntryEvent, IrqExitEvent, KernelLayout, MARK_REGS_ARGS, MARK_REGS_NR, MARK_TASK_COMM,
    MARK_TASK_CPU, MARK_TASK_EXIT_STATE, MARK_TASK_PID, MARK_TASK_PRIO, MAX_RECORD_BYTES, POWER_FREQUENCY, POWER_IDLE,
    PageFaultEvent, PowerEvent, PowerLayout, ProcessExecEvent, ProcessExitEvent, ProcessForkEvent,
    RWBS_LEN, RssStatEvent, SOFTIRQ_EXIT, SYSCALL_ARGS, SchedSwitchEvent, SchedWakeupEvent,
    SchedWakeupLayout, SoftirqEvent, SoftirqLayout, SysEnterEvent, SysExitEvent, TaskNewtaskEvent,
    TaskRenameEvent, UPROBE_RETURN, USDT_ARG_CONST, USDT_ARG_DEREF, USDT_ARG_REG, USDT_MAX_ARGS,
    USDT_MAX_REGS_BYTES, USDT_MAX_STRS, USDT_STR_LEN, UprobeEvent, UsdtEvent, UsdtSpec,
    WAKEUP_CHECK_INTERVAL, WAKEUP_NEW,
};

/// A CPU's ring buffer. The size is the template's: userspace creates each
/// CPU's ring with the size it computed from `-b`.
type CpuRing = RingBuf<u8, { 64 * 1024 }>;

/// Events for userspace: the ring buffer of each CPU, by CPU id. The
/// length is a placeholder: userspace sets it to the number of possible
/// CPUs before loading and fills in the online CPUs' rings.
#[btf_map]
static EVENTS: ArrayOfMaps<CpuRing, 4096> = ArrayOfMaps::new();

/// This CPU's ring buffer, if userspace gave it one.
#[inline(always)]
fn cpu_ring() -> Option<&'static CpuRing> {
    // SAFETY: the helper takes no arguments and only reads the CPU id.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    EVENTS.get(cpu)
}

/// Bytes waiting in this CPU's ring buffer.
#[inline(always)]
fn ring_backlog() -> u64 {
    match cpu_ring() {
        // SAFETY: `ring` is a ring buffer map the kernel looked up; the
        // helper only reads its positions.
        Some(ring) => unsafe {
            generated::bpf_ringbuf_query(
                ptr::from_ref(ring).cast_mut().cast(),
                BPF_RB_AVAIL_DATA.into(),
            )
        },
        None => 0,
    }
}

/// Where the tracepoint fields are, filled in by userspace before attaching.
#[map(name = "LAYOUT")]
static LAYOUT: Array<KernelLayout> = Array::with_max_entries(1, 0);

/// Followed thread ids while a pid filter is set (the value is unused).
#[map(name = "FOLLOWED")]
static FOLLOWED: HashMap<u32, u8> = HashMap::with_max_entries(FOLLOWED_MAX, 0);

/// Lost-event counters, per CPU, indexed by `COUNTER_*`.
#[map(name = "COUNTERS")]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNTER_COUNT, 0);

/// Offsets into the scratch copy are masked with this (for the verifier;
/// userspace keeps every field within `MAX_RECORD_BYTES`).
const OFFSET_MASK: usize = MAX_RECORD_BYTES as usize - 1;

/// Size of the scratch copy: the largest masked offset plus the widest read
/// (16 bytes), rounded up.
const SCRATCH_LEN: usize = MAX_RECORD_BYTES as usize + 2 * COMM_LEN;

const _: () = assert!((MAX_RECORD_BYTES as usize).is_power_of_two());

/// Per-CPU working memory of a program run.
#[repr(C, align(8))]
struct Scratch {
    /// Events written on this CPU, to space out the ring fill-level checks.
    events: u32,
    /// Padding.
    reserved: u32,
    /// The raw tracepoint record, copied.
    record: [u8; SCRATCH_LEN],
}

// Every name field of an event is 8-aligned (see `Record::comm`).
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Scratch, record) % 8 == 0);
    assert!(offset_of!(SchedSwitchEvent, prev_comm) % 8 == 0);
    assert!(offset_of!(SchedSwitchEvent, next_comm) % 8 == 0);
    assert!(offset_of!(SchedWakeupEvent, comm) % 8 == 0);
    assert!(offset_of!(ProcessForkEvent, child_comm) % 8 == 0);
    assert!(offset_of!(TaskNewtaskEvent, comm) % 8 == 0);
    assert!(offset_of!(ProcessExitEvent, comm) % 8 == 0);
    assert!(offset_of!(TaskRenameEvent, oldcomm) % 8 == 0);
    assert!(offset_of!(TaskRenameEvent, newcomm) % 8 == 0);
};

/// Where the arguments of each USDT probe site are, indexed by the site's
/// attach cookie. Userspace sizes it (one entry per site) and fills it before
/// attaching.
#[map(name = "USDT_SPECS")]
static USDT_SPECS: Array<UsdtSpec> = Array::with_max_entries(1, 0);

/// Words of the register file a USDT program copies (registers are read by
/// an index masked with `USDT_REG_WORDS - 1`).
const USDT_REG_WORDS: usize = USDT_MAX_REGS_BYTES as usize / 8;
const _: () = assert!(USDT_REG_WORDS.is_power_of_two());
// String slots are indexed with a mask.
const _: () = assert!(USDT_MAX_STRS.is_power_of_two() && USDT_STR_LEN > 1);

/// One `Scratch` per CPU. Programs do not nest on a CPU, so a run owns it.
#[map(name = "SCRATCH")]
static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

// ---------------------------------------------------------------------------
// Helpers.

/// Counts one lost event under `counter`.
#[inline(always)]
fn count_lost(counter: u32) {
    if let Some(slot) = COUNTERS.get_ptr_mut(counter) {
        // SAFETY: `slot` points at this CPU's `u64` in the per-CPU map value.
        // Tracepoint programs do not nest on one CPU (the kernel skips a BPF
        // program that would run while another runs on the same CPU), so a
        // plain read-modify-write cannot race.
        unsafe { *slot += 1 };
    }
}

/// The layout userspace filled in, or `None` (counted) while it has not;
/// also `None` (not counted) for an event stamped `ts` after the recording
/// stopped.
#[inline(always)]
fn layout(ts: u64) -> Option<&'static KernelLayout> {
    match LAYOUT.get(0) {
        Some(layout) if layout.version == KernelLayout::VERSION => {
            (ts <= layout.stop_ts).then_some(layout)
        }
        _ => {
            count_lost(COUNTER_NO_LAYOUT);
            None
        }
    }
}

/// Whether events about thread `tid` are recorded: always without a pid
/// filter, else when `tid` is followed.
#[inline(always)]
fn wanted(layout: &KernelLayout, tid: u32) -> bool {
    layout.filter & FILTER_PIDS == 0 || FOLLOWED.get_ptr(tid).is_some()
}

/// [`wanted`] for the current task, asking the kernel for its id only
/// under a filter.
#[inline(always)]
fn current_wanted(layout: &KernelLayout) -> bool {
    layout.filter & FILTER_PIDS == 0
        || FOLLOWED
            .get_ptr(bpf_get_current_pid_tgid() as u32)
            .is_some()
}

/// Whether the `kernel:proc` programs write events.
#[inline(always)]
fn emit_proc(layout: &KernelLayout) -> bool {
    layout.filter & EMIT_PROC != 0
}

/// Follows the new task `tid` when its creator `parent` is followed.
#[inline(always)]
fn follow_child(layout: &KernelLayout, parent: u32, tid: u32) {
    if layout.filter & FILTER_PIDS != 0
        && FOLLOWED.get_ptr(parent).is_some()
        && FOLLOWED.insert(tid, 0u8, 0).is_err()
    {
        count_lost(COUNTER_FOLLOW_FULL);
    }
}

/// The current time on CLOCK_BOOTTIME, in nanoseconds: the clock Perfetto
/// takes FXT timestamps on, which keeps counting through a suspend.
/// (`bpf_ktime_get_boot_ns` costs the same as `bpf_ktime_get_ns`.)
#[inline(always)]
fn now() -> u64 {
    // SAFETY: the helper takes no arguments and only reads the clock.
    unsafe { bpf_ktime_get_boot_ns() }
}

/// The common header for an event of `kind` at time `ts`.
#[inline(always)]
fn header(kind: EventKind, ts: u64) -> EventHeader {
    header_of(kind, ts, bpf_get_current_pid_tgid())
}

/// [`header`] with the current task's `bpf_get_current_pid_tgid` value.
#[inline(always)]
fn header_of(kind: EventKind, ts: u64, pid_tgid: u64) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        // SAFETY: the helper takes no arguments and only reads the CPU id.
        cpu: unsafe { bpf_get_smp_processor_id() },
        ts,
        tid: pid_tgid as u32,
        tgid: (pid_tgid >> 32) as u32,
    }
}

/// The raw tracepoint record, copied into this CPU's scratch buffer.
struct Record<'a> {
    ctx: &'a TracePointContext,
    scratch: *mut Scratch,
}

impl<'a> Record<'a> {
    /// Copies the first `size` bytes of the record (at most
    /// `MAX_RECORD_BYTES`); `None` if the copy fails.
    #[inline(always)]
    fn copy(ctx: &'a TracePointContext, size: u16) -> Option<Record<'a>> {
        let scratch = SCRATCH.get_ptr_mut(0)?;
        let size = if size > MAX_RECORD_BYTES {
            MAX_RECORD_BYTES
        } else {
            size
        };
        // SAFETY: `scratch` points at this CPU's `Scratch` (the program owns
        // it for this run), whose `record` holds more than MAX_RECORD_BYTES
        // bytes; the helper checks the source address itself, and `size`
        // bytes lie inside the record (userspace computed it from the
        // format file).
        let ret = unsafe {
            generated::bpf_probe_read_kernel(
                ptr::addr_of_mut!((*scratch).record).cast::<c_void>(),
                u32::from(size),
                ctx.as_ptr(),
            )
        };
        (ret == 0).then_some(Record { ctx, scratch })
    }

    /// Pointer to byte `offset` of the copied record (offset masked so the
    /// verifier sees every read stays inside the scratch buffer).
    #[inline(always)]
    fn at(&self, offset: u16) -> *const u8 {
        // SAFETY: the masked offset is below MAX_RECORD_BYTES, and at least
        // 2 * COMM_LEN bytes of `record` follow it; the pointer is derived
        // without a reference, so nothing is asserted about the contents.
        unsafe {
            ptr::addr_of!((*self.scratch).record)
                .cast::<u8>()
                .add(offset as usize & OFFSET_MASK)
        }
    }

    /// The integer field `field`, sign- or zero-extended; `ABSENT_INT` when
    /// this kernel lacks it.
    #[inline(always)]
    fn int(&self, field: &FieldLoc) -> i64 {
        if !field.is_present() {
            return ABSENT_INT as i64;
        }
        let p = self.at(field.offset);
        let signed = field.flags & FieldLoc::SIGNED != 0;
        // SAFETY: `p` points into the scratch copy with at least 8 readable
        // bytes after it. It is aligned for the read: the scratch record is
        // 8-aligned and userspace accepts an integer field only at an offset
        // that is a multiple of its size (as C lays out the record).
        unsafe {
            match field.size {
                1 => {
                    let v = p.read();
                    if signed { v as i8 as i64 } else { v as i64 }
                }
                2 => {
                    let v = p.cast::<u16>().read();
                    if signed { v as i16 as i64 } else { v as i64 }
                }
                4 => {
                    let v = p.cast::<u32>().read();
                    if signed { v as i32 as i64 } else { v as i64 }
                }
                8 => p.cast::<i64>().read(),
                _ => ABSENT_INT as i64,
            }
        }
    }

    /// A signed integer field at most 32 bits wide.
    #[inline(always)]
    fn i32(&self, field: &FieldLoc) -> i32 {
        self.int(field) as i32
    }

    /// A thread or process id field (`pid_t`); `ABSENT_ID` when absent.
    #[inline(always)]
    fn id(&self, field: &FieldLoc) -> u32 {
        self.int(field) as u32
    }

    /// Writes the name field `field` to `dst`, NUL-padded: an inline
    /// `char[N]` is copied from the scratch copy, a `__data_loc` or
    /// `__rel_loc` string is read from the record.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `COMM_LEN` bytes and 8-aligned (every
    /// name field of the event structs is).
    #[inline(always)]
    unsafe fn comm(&self, field: &FieldLoc, dst: *mut [u8; COMM_LEN]) {
        let words = dst.cast::<[u64; 2]>();
        let inline = field.flags & (FieldLoc::DATA_LOC | FieldLoc::REL_LOC) == 0;
        if field.is_present() && inline && field.size as usize >= COMM_LEN {
            // The common case: a whole `char[16]` (the kernel NUL-terminates
            // a task name within it), copied with the widest aligned loads
            // the field's offset allows.
            let src = self.at(field.offset);
            // SAFETY: 16 readable bytes follow `src` in the scratch copy (an
            // 8-aligned buffer), each load is aligned as its branch checks,
            // and `dst` is writable and 8-aligned (the caller's contract).
            unsafe {
                if field.offset.is_multiple_of(8) {
                    let src = src.cast::<u64>();
                    write_words(words, src.read(), src.add(1).read());
                } else if field.offset.is_multiple_of(4) {
                    let src = src.cast::<u32>();
                    write_words(
                        words,
                        u64::from(src.read()) | u64::from(src.add(1).read()) << 32,
                        u64::from(src.add(2).read()) | u64::from(src.add(3).read()) << 32,
                    );
                } else {
                    write_words(words, 0, 0);
                    for i in 0..COMM_LEN {
                        *dst.cast::<u8>().add(i) = *src.add(i);
                    }
                }
            }
            return;
        }
        // SAFETY: `dst` is writable and 8-aligned (the caller's contract).
        unsafe { write_words(words, 0, 0) };
        if !field.is_present() {
            return;
        }
        if !inline {
            // SAFETY: `dst` was just initialised, so a reference is sound.
            let dst = unsafe { &mut *dst };
            self.dynamic_str(field, dst);
            return;
        }
        // A shorter array: copy what there is, keep the rest NUL.
        let src = self.at(field.offset);
        let len = field.size as usize;
        for i in 0..COMM_LEN - 1 {
            if i < len {
                // SAFETY: `i` < 16: inside the scratch copy after `src`, and
                // inside `dst`.
                unsafe { *dst.cast::<u8>().add(i) = *src.add(i) };
            }
        }
    }

    /// Reads the `__data_loc` / `__rel_loc` string `field` from the record
    /// into `dst` (NUL-terminated, truncated to fit); returns its length
    /// without the terminator, 0 when unreadable.
    #[inline(always)]
    fn dynamic_str(&self, field: &FieldLoc, dst: &mut [u8]) -> usize {
        if !field.is_present() {
            return 0;
        }
        // SAFETY: 4 readable bytes follow the masked offset in the scratch
        // copy, 4-aligned: userspace accepts a location word only at a
        // multiple of 4 in the 8-aligned copy.
        let loc = unsafe { self.at(field.offset).cast::<u32>().read() };
        let rel = (loc & 0xffff) as usize;
        let start = if field.flags & FieldLoc::REL_LOC != 0 {
            field.offset as usize + 4 + rel
        } else {
            rel
        };
        let src = (self.ctx.as_ptr() as *const u8).wrapping_add(start);
        // SAFETY: the source is inside the tracepoint record (the record's
        // own location word says so); the helper checks the address, copies
        // at most `dst.len()` bytes and NUL-terminates.
        match unsafe { bpf_probe_read_kernel_str_bytes(src, dst) } {
            Ok(bytes) => bytes.len(),
            Err(_) => 0,
        }
    }

    /// Whether the reader should be woken now: every
    /// `WAKEUP_CHECK_INTERVAL` events on this CPU, when at least
    /// `wakeup_bytes` wait in the ring buffer.
    #[inline(always)]
    fn submit_flags(&self, layout: &KernelLayout) -> u64 {
        // SAFETY: the program owns this CPU's scratch for this run.
        let events = unsafe {
            let count = ptr::addr_of_mut!((*self.scratch).events);
            let n = count.read().wrapping_add(1);
            count.write(n);
            n
        };
        if layout.wakeup_bytes == 0 {
            return 0;
        }
        if events & (WAKEUP_CHECK_INTERVAL - 1) == 0
            && ring_backlog() >= u64::from(layout.wakeup_bytes)
        {
            BPF_RB_FORCE_WAKEUP.into()
        } else {
            BPF_RB_NO_WAKEUP.into()
        }
    }

    /// Submits `entry`, waking the reader if [`Record::submit_flags`] says so.
    #[inline(always)]
    fn submit<T>(&self, layout: &KernelLayout, entry: RingBufEntry<T>) {
        entry.submit(self.submit_flags(layout));
    }
}

/// Stores a 16-byte name as two words. Volatile stores keep LLVM from
/// turning them into a `memset`/`memcpy` call (a BPF-to-BPF call here).
///
/// # Safety
///
/// `dst` must be valid for writes of 16 bytes and 8-aligned.
#[inline(always)]
unsafe fn write_words(dst: *mut [u64; 2], first: u64, second: u64) {
    let dst = dst.cast::<u64>();
    // SAFETY: both words are inside `dst` and aligned (the caller's contract).
    unsafe {
        ptr::write_volatile(dst, first);
        ptr::write_volatile(dst.add(1), second);
    }
}

/// Reserves a `T` in this CPU's ring buffer, or counts the event as lost
/// when it is full (or the CPU has none). (Straight-line code rather than a
/// closure: an outlined closure can leave a stack pointer in r0, which the
/// verifier rejects.)
#[inline(always)]
fn reserve<T: 'static>() -> Option<RingBufEntry<T>> {
    let entry = match cpu_ring() {
        Some(ring) => ring.reserve_untyped::<T>(0),
        None => None,
    };
    if entry.is_none() {
        count_lost(COUNTER_RINGBUF_FULL);
    }
    entry
}

// ---------------------------------------------------------------------------
// kernel:sched

/// `sched:sched_switch`.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let l = &layout.sched_switch;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    if !current_wanted(layout) && !wanted(layout, r.id(&l.next_pid)) {
        return 0;
    }
    let Some(mut entry) = reserve::<SchedSwitchEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedSwitchEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Switch, ts);
        r.comm(&l.prev_comm, ptr::addr_of_mut!((*e).prev_comm));
        r.comm(&l.next_comm, ptr::addr_of_mut!((*e).next_comm));
        (*e).prev_pid = r.id(&l.prev_pid);
        (*e).prev_prio = r.i32(&l.prev_prio);
        (*e).next_pid = r.id(&l.next_pid);
        (*e).next_prio = r.i32(&l.next_prio);
        (*e).prev_state = r.int(&l.prev_state);
    }
    r.submit(layout, entry);
    0
}

/// Shared body of the two wake-up tracepoints.
#[inline(always)]
fn wakeup(
    ctx: &TracePointContext,
    layout: &KernelLayout,
    l: &SchedWakeupLayout,
    flags: u32,
    ts: u64,
) {
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    if !wanted(layout, r.id(&l.pid)) && !current_wanted(layout) {
        return;
    }
    let Some(mut entry) = reserve::<SchedWakeupEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedWakeupEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Wakeup, ts);
        r.comm(&l.comm, ptr::addr_of_mut!((*e).comm));
        (*e).pid = r.id(&l.pid);
        (*e).prio = r.i32(&l.prio);
        (*e).target_cpu = r.i32(&l.target_cpu);
        (*e).flags = flags;
    }
    r.submit(layout, entry);
}

/// `sched:sched_wakeup`.
#[tracepoint]
pub fn sched_wakeup(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    wakeup(&ctx, layout, &layout.sched_wakeup, 0, ts);
    0
}

/// `sched:sched_wakeup_new`.
#[tracepoint]
pub fn sched_wakeup_new(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    wakeup(&ctx, layout, &layout.sched_wakeup_new, WAKEUP_NEW, ts);
    0
}

/// Shared body of the two power tracepoints.
#[inline(always)]
fn power(ctx: &TracePointContext, layout: &KernelLayout, l: &PowerLayout, what: u32, ts: u64) {
    if layout.filter & FILTER_PIDS != 0 {
        return;
    }
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    let Some(mut entry) = reserve::<PowerEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<PowerEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Power, ts);
        (*e).what = what;
        (*e).cpu_id = r.id(&l.cpu_id);
        (*e).state = r.id(&l.state);
        (*e).reserved = 0;
    }
    r.submit(layout, entry);
}

/// `power:cpu_idle`.
#[tracepoint]
pub fn cpu_idle(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    power(&ctx, layout, &layout.cpu_idle, POWER_IDLE, ts);
    0
}

/// `power:cpu_frequency`.
#[tracepoint]
pub fn cpu_frequency(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    power(&ctx, layout, &layout.cpu_frequency, POWER_FREQUENCY, ts);
    0
}

// ---------------------------------------------------------------------------
// kernel:proc

/// `sched:sched_process_fork`.
#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !emit_proc(layout) || !current_wanted(layout) {
        return 0;
    }
    let l = &layout.process_fork;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<ProcessForkEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<ProcessForkEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Fork, ts);
        (*e).parent_pid = r.id(&l.parent_pid);
        (*e).child_pid = r.id(&l.child_pid);
        r.comm(&l.child_comm, ptr::addr_of_mut!((*e).child_comm));
    }
    r.submit(layout, entry);
    0
}

/// `task:task_newtask`.
#[tracepoint]
pub fn task_newtask(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let l = &layout.task_newtask;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = r.id(&l.pid);
    follow_child(layout, pid_tgid as u32, pid);
    if !emit_proc(layout) || !wanted(layout, pid_tgid as u32) {
        return 0;
    }
    let Some(mut entry) = reserve::<TaskNewtaskEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let header = header_of(EventKind::NewTask, ts, pid_tgid);
    let clone_flags = r.int(&l.clone_flags) as u64;
    let child_tgid = if !l.clone_flags.is_present() {
        ABSENT_ID
    } else if clone_flags & CLONE_THREAD != 0 {
        header.tgid
    } else {
        pid
    };
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<TaskNewtaskEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header;
        (*e).pid = pid;
        (*e).child_tgid = child_tgid;
        (*e).clone_flags = clone_flags;
        r.comm(&l.comm, ptr::addr_of_mut!((*e).comm));
    }
    r.submit(layout, entry);
    0
}

/// `sched:sched_process_exec`.
#[tracepoint]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !emit_proc(layout) || !current_wanted(layout) {
        return 0;
    }
    let l = &layout.process_exec;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<ProcessExecEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<ProcessExecEvent>() bytes; every field is written before
    // the entry is submitted, and `filename` is zeroed before a reference
    // to it is taken.
    unsafe {
        (*e).header = header(EventKind::Exec, ts);
        (*e).pid = r.id(&l.pid);
        (*e).old_pid = r.id(&l.old_pid);
        (*e).comm = bpf_get_current_comm().unwrap_or([0; COMM_LEN]);
        (*e).reserved = 0;
        (*e).filename = [0; FILENAME_LEN];
        (*e).filename_len = r.dynamic_str(&l.filename, &mut (*e).filename) as u32;
    }
    r.submit(layout, entry);
    0
}

/// `sched:sched_process_exit`.
#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let tid = bpf_get_current_pid_tgid() as u32;
    let record = emit_proc(layout) && wanted(layout, tid);
    if layout.filter & FILTER_PIDS != 0 {
        // The task is gone: stop following it (its id may be reused). A
        // missing entry is fine.
        let _ = FOLLOWED.remove(tid);
    }
    if !record {
        return 0;
    }
    let l = &layout.process_exit;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<ProcessExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let group_dead = if l.group_dead.is_present() {
        (r.int(&l.group_dead) != 0) as u8
    } else {
        GROUP_DEAD_UNKNOWN
    };
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<ProcessExitEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Exit, ts);
        r.comm(&l.comm, ptr::addr_of_mut!((*e).comm));
        (*e).pid = r.id(&l.pid);
        (*e).prio = r.i32(&l.prio);
        (*e).group_dead = group_dead;
        (*e).reserved = [0; 7];
    }
    r.submit(layout, entry);
    0
}

/// `task:task_rename`.
#[tracepoint]
pub fn task_rename(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !emit_proc(layout) || !current_wanted(layout) {
        return 0;
    }
    let l = &layout.task_rename;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<TaskRenameEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let header = header(EventKind::Rename, ts);
    // Kernels without the field rename only the current task.
    let pid = if l.pid.is_present() {
        r.id(&l.pid)
    } else {
        header.tid
    };
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<TaskRenameEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header;
        (*e).pid = pid;
        (*e).reserved = 0;
        r.comm(&l.oldcomm, ptr::addr_of_mut!((*e).oldcomm));
        r.comm(&l.newcomm, ptr::addr_of_mut!((*e).newcomm));
    }
    r.submit(layout, entry);
    0
}

// ---------------------------------------------------------------------------
// kernel:syscall

/// Whether a system call event of the current task is recorded: never for
/// the recorder itself, else as [`wanted`] says.
#[inline(always)]
fn syscall_wanted(layout: &KernelLayout, pid_tgid: u64) -> bool {
    (pid_tgid >> 32) as u32 != layout.self_tgid && wanted(layout, pid_tgid as u32)
}

/// The time, the layout and the current task of a system call event, if
/// it is recorded.
#[inline(always)]
fn syscall_start() -> Option<(u64, &'static KernelLayout, u64)> {
    let ts = now();
    let layout = layout(ts)?;
    let pid_tgid = bpf_get_current_pid_tgid();
    syscall_wanted(layout, pid_tgid).then_some((ts, layout, pid_tgid))
}

/// `raw_syscalls:sys_enter`.
#[tracepoint]
pub fn sys_enter(ctx: TracePointContext) -> u32 {
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let l = &layout.sys_enter;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<SysEnterEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysEnterEvent>() bytes; every field is written before the
    // entry is submitted. Each argument word read lies inside the `args`
    // field (checked against its size), 8-aligned in the scratch copy
    // (userspace accepts the field only at a multiple of 8).
    unsafe {
        (*e).header = header_of(EventKind::SysEnter, ts, pid_tgid);
        (*e).id = r.int(&l.id);
        let present = l.args.is_present();
        let words = (l.args.size / 8) as usize;
        for i in 0..SYSCALL_ARGS {
            (*e).args[i] = if present && i < words {
                r.at(l.args.offset + (i as u16) * 8).cast::<u64>().read()
            } else {
                0
            };
        }
    }
    r.submit(layout, entry);
    0
}

/// `raw_syscalls:sys_exit`.
#[tracepoint]
pub fn sys_exit(ctx: TracePointContext) -> u32 {
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let l = &layout.sys_exit;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<SysExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysExitEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::SysExit, ts, pid_tgid);
        (*e).id = r.int(&l.id);
        (*e).ret = r.int(&l.ret);
    }
    r.submit(layout, entry);
    0
}

// ---------------------------------------------------------------------------
// kernel:irq

/// Whether interrupt events are recorded: not under a pid filter.
#[inline(always)]
fn irq_wanted(layout: &KernelLayout) -> bool {
    layout.filter & FILTER_PIDS == 0
}

/// `irq:irq_handler_entry`.
#[tracepoint]
pub fn irq_handler_entry(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !irq_wanted(layout) {
        return 0;
    }
    let l = &layout.irq_handler_entry;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<IrqEntryEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<IrqEntryEvent>() bytes; every field is written before the
    // entry is submitted, and `name` is zeroed before a reference to it is
    // taken.
    unsafe {
        (*e).header = header(EventKind::IrqEntry, ts);
        (*e).irq = r.i32(&l.irq);
        (*e).reserved = 0;
        (*e).name = [0; trace_common::kernel::IRQ_NAME_LEN];
        if l.name.flags & (FieldLoc::DATA_LOC | FieldLoc::REL_LOC) != 0 {
            r.dynamic_str(&l.name, &mut (*e).name);
        }
    }
    r.submit(layout, entry);
    0
}

/// `irq:irq_handler_exit`.
#[tracepoint]
pub fn irq_handler_exit(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !irq_wanted(layout) {
        return 0;
    }
    let l = &layout.irq_handler_exit;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<IrqExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<IrqExitEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header(EventKind::IrqExit, ts);
        (*e).irq = r.i32(&l.irq);
        (*e).ret = r.i32(&l.ret);
    }
    r.submit(layout, entry);
    0
}

/// Shared body of the two softirq tracepoints.
#[inline(always)]
fn softirq(ctx: &TracePointContext, layout: &KernelLayout, l: &SoftirqLayout, exit: u32, ts: u64) {
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    let Some(mut entry) = reserve::<SoftirqEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SoftirqEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Softirq, ts);
        (*e).vec = r.id(&l.vec);
        (*e).exit = exit;
    }
    r.submit(layout, entry);
}

/// `irq:softirq_entry`.
#[tracepoint]
pub fn softirq_entry(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if irq_wanted(layout) {
        softirq(&ctx, layout, &layout.softirq_entry, 0, ts);
    }
    0
}

/// `irq:softirq_exit`.
#[tracepoint]
pub fn softirq_exit(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if irq_wanted(layout) {
        softirq(&ctx, layout, &layout.softirq_exit, SOFTIRQ_EXIT, ts);
    }
    0
}

// ---------------------------------------------------------------------------
// kernel:block

/// Shared body of the two block request tracepoints.
#[inline(always)]
fn block_rq(
    ctx: &TracePointContext,
    layout: &KernelLayout,
    l: &BlockRqLayout,
    kind: EventKind,
    ts: u64,
) {
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    let Some(mut entry) = reserve::<BlockRqEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let inline_rwbs =
        l.rwbs.is_present() && l.rwbs.flags & (FieldLoc::DATA_LOC | FieldLoc::REL_LOC) == 0;
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<BlockRqEvent>() bytes; every field is written before the
    // entry is submitted. The `rwbs` bytes read lie in the scratch copy
    // (at most RWBS_LEN after a masked offset).
    unsafe {
        (*e).header = header(kind, ts);
        (*e).sector = r.int(&l.sector) as u64;
        (*e).dev = r.id(&l.dev);
        (*e).nr_sector = r.id(&l.nr_sector);
        (*e).bytes_or_error = r.i32(&l.bytes_or_error);
        (*e).reserved = 0;
        (*e).rwbs = [0; RWBS_LEN];
        if inline_rwbs {
            let src = r.at(l.rwbs.offset);
            let n = l.rwbs.size as usize;
            for i in 0..RWBS_LEN - 1 {
                if i < n {
                    (*e).rwbs[i] = *src.add(i);
                }
            }
        }
    }
    r.submit(layout, entry);
}

/// `block:block_rq_issue`.
#[tracepoint]
pub fn block_rq_issue(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if current_wanted(layout) {
        block_rq(&ctx, layout, &layout.block_rq_issue, EventKind::BlockIssue, ts);
    }
    0
}

/// `block:block_rq_complete`: kept whatever the filter (the manager drops
/// completions of requests it did not see issued).
#[tracepoint]
pub fn block_rq_complete(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    block_rq(
        &ctx,
        layout,
        &layout.block_rq_complete,
        EventKind::BlockComplete,
        ts,
    );
    0
}

// ---------------------------------------------------------------------------
// kernel:vm

/// `exceptions:page_fault_user`.
#[tracepoint]
pub fn page_fault_user(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted(layout, pid_tgid as u32) {
        return 0;
    }
    let l = &layout.page_fault_user;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<PageFaultEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<PageFaultEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::PageFault, ts, pid_tgid);
        (*e).address = r.int(&l.address) as u64;
        (*e).ip = r.int(&l.ip) as u64;
        (*e).error_code = r.int(&l.error_code) as u64;
    }
    r.submit(layout, entry);
    0
}

/// `kmem:rss_stat`.
#[tracepoint]
pub fn rss_stat(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted(layout, pid_tgid as u32) {
        return 0;
    }
    let l = &layout.rss_stat;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<RssStatEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<RssStatEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::RssStat, ts, pid_tgid);
        (*e).size = r.int(&l.size);
        (*e).mm_id = r.id(&l.mm_id);
        (*e).curr = r.id(&l.curr);
        (*e).member = r.i32(&l.member);
        (*e).reserved = 0;
    }
    r.submit(layout, entry);
    0
}

// ---------------------------------------------------------------------------
// --uprobe

/// Writes a probe event of the function with attach cookie of `ctx`.
#[inline(always)]
fn probe_event(ctx: *mut c_void, ret: u32) {
    let ts = now();
    let Some(layout) = layout(ts) else { return };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted(layout, pid_tgid as u32) {
        return;
    }
    // SAFETY: `ctx` is the context the kernel passed to this uprobe program.
    let probe = unsafe { generated::bpf_get_attach_cookie(ctx) };
    let Some(mut entry) = reserve::<UprobeEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<UprobeEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::Uprobe, ts, pid_tgid);
        (*e).probe = probe;
        (*e).ret = ret;
        (*e).reserved = 0;
    }
    entry.submit(wakeup_flags(layout));
}

/// The submit flags [`Record::submit_flags`] computes, for programs that
/// copy no tracepoint record.
#[inline(always)]
fn wakeup_flags(layout: &KernelLayout) -> u64 {
    let Some(scratch) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: the program owns this CPU's scratch for this run.
    let events = unsafe {
        let count = ptr::addr_of_mut!((*scratch).events);
        let n = count.read().wrapping_add(1);
        count.write(n);
        n
    };
    if layout.wakeup_bytes == 0 {
        return 0;
    }
    if events & (WAKEUP_CHECK_INTERVAL - 1) == 0 && ring_backlog() >= u64::from(layout.wakeup_bytes)
    {
        BPF_RB_FORCE_WAKEUP.into()
    } else {
        BPF_RB_NO_WAKEUP.into()
    }
}

/// Entry of a probed function.
#[uprobe]
pub fn uprobe_entry(ctx: ProbeContext) -> u32 {
    probe_event(ctx.as_ptr(), 0);
    0
}

/// Return of a probed function.
#[uretprobe]
pub fn uprobe_return(ctx: RetProbeContext) -> u32 {
    probe_event(ctx.as_ptr(), UPROBE_RETURN);
    0
}

// ---------------------------------------------------------------------------
// --usdt

/// A USDT probe site: one instant event with the site's arguments, read as
/// its `USDT_SPECS` entry says (registers from a copy of the register file,
/// memory operands from user memory).
#[uprobe]
pub fn usdt(ctx: ProbeContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted(layout, pid_tgid as u32) {
        return 0;
    }
    let regs = ctx.as_ptr();
    // SAFETY: `regs` is the context the kernel passed to this uprobe program.
    let site = unsafe { generated::bpf_get_attach_cookie(regs) } as u32;
    let Some(spec) = USDT_SPECS.get(site) else {
        return 0;
    };
    // The register file is copied onto this program's own stack, not into
    // the per-CPU scratch: a uprobe program may be interrupted (or, on a
    // preemptible kernel, preempted) by another program that uses it.
    let mut saved = [0u64; USDT_REG_WORDS];
    let copied = if spec.regs_size == 0 {
        false
    } else {
        let size = if spec.regs_size > u32::from(USDT_MAX_REGS_BYTES) {
            u32::from(USDT_MAX_REGS_BYTES)
        } else {
            spec.regs_size
        };
        // SAFETY: `saved` holds USDT_MAX_REGS_BYTES bytes, at least `size`;
        // the source is the register file the kernel saved (`size` is at
        // most its size, as userspace computed for this architecture), and
        // the helper checks the address itself.
        unsafe {
            generated::bpf_probe_read_kernel(
                saved.as_mut_ptr().cast::<c_void>(),
                size,
                regs.cast_const(),
            ) == 0
        }
    };
    let Some(mut entry) = reserve::<UsdtEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let nargs = spec.nargs as usize;
    let mut unreadable = 0u32;
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<UsdtEvent>() bytes; every field is written before the entry
    // is submitted.
    unsafe {
        (*e).header = header_of(EventKind::Usdt, ts, pid_tgid);
        (*e).site = site;
        (*e).nargs = spec.nargs;
        (*e).reserved = 0;
        for i in 0..USDT_MAX_ARGS {
            let arg = &spec.args[i];
            let reg = || saved[(arg.reg_offset as usize / 8) & (USDT_REG_WORDS - 1)];
            let value = if i >= nargs {
                Some(0)
            } else if arg.kind == USDT_ARG_CONST {
                Some(arg.value as u64)
            } else if arg.kind == USDT_ARG_REG && copied {
                Some(reg())
            } else if arg.kind == USDT_ARG_DEREF && copied {
                let at = reg().wrapping_add(arg.value as u64);
                match arg.size {
                    1 => bpf_probe_read_user(at as *const u8).ok().map(u64::from),
                    2 => bpf_probe_read_user(at as *const u16).ok().map(u64::from),
                    4 => bpf_probe_read_user(at as *const u32).ok().map(u64::from),
                    _ => bpf_probe_read_user(at as *const u64).ok(),
                }
            } else {
                None
            };
            (*e).args[i] = match value {
                Some(v) => extend(v, arg.size, arg.signed != 0),
                None => {
                    unreadable |= 1 << i;
                    0
                }
            };
        }
        (*e).unreadable = unreadable;
        // String arguments: copy the text each points at into its slot.
        // The pointer is read back from the event, so the verifier sees
        // one unknown value whatever path the arguments took.
        for k in 0..USDT_MAX_STRS {
            let slot = &mut (*e).strings[k];
            slot[0] = 0;
            let i = spec.strings[k] as usize;
            if i >= USDT_MAX_ARGS {
                continue;
            }
            let at = ptr::read_volatile(ptr::addr_of!((*e).args[i]));
            if bpf_probe_read_user_str_bytes(at as *const u8, slot).is_err() {
                let mask = ptr::addr_of_mut!((*e).unreadable);
                ptr::write_volatile(mask, ptr::read_volatile(mask) | 1 << i);
            }
        }
    }
    entry.submit(wakeup_flags(layout));
    0
}

/// The low `size` bytes of `v`, sign- or zero-extended to 64 bits.
#[inline(always)]
fn extend(v: u64, size: u8, signed: bool) -> u64 {
    if size == 0 || size >= 8 {
        return v;
    }
    let shift = 64 - u32::from(size) * 8;
    if signed {
        (((v << shift) as i64) >> shift) as u64
    } else {
        (v << shift) >> shift
    }
}

// ---------------------------------------------------------------------------
// BTF tracepoints: `sched_switch`, `sched_wakeup[_new]`, `sys_enter` and
// `sys_exit` where the kernel has BTF. The kernel passes the tracepoint's
// arguments (task and register pointers) without copying a record first,
// and the programs read fields with direct loads at `MARK_*` offsets that
// userspace replaced with the running kernel's (the verifier checks each
// load against the kernel's BTF). They write the same events as the
// classic programs.

/// The `T` at marker offset `mark` of the kernel object at `base`.
///
/// # Safety
///
/// `base` must be a BTF-typed pointer the kernel passed to a BTF tracepoint
/// program, and userspace must have patched `mark` to the offset of a field
/// of at least `size_of::<T>()` bytes in it (the verifier rejects the
/// program otherwise).
#[inline(always)]
unsafe fn field<T>(base: *const u8, mark: i16) -> T {
    // SAFETY: as the caller promises; volatile, so that every load stays a
    // single instruction with the marker as its offset.
    unsafe { ptr::read_volatile(base.wrapping_offset(mark as isize).cast::<T>()) }
}

/// Copies task `task`'s name to `dst`.
///
/// # Safety
///
/// As for [`field`], and `dst` must be valid for 16 bytes and 8-aligned.
#[inline(always)]
unsafe fn task_comm(task: *const u8, dst: *mut [u8; COMM_LEN]) {
    // SAFETY: `comm` is a 16-byte array (two words); `dst` as promised.
    unsafe {
        write_words(
            dst.cast::<[u64; 2]>(),
            field::<u64>(task, MARK_TASK_COMM),
            field::<u64>(task, MARK_TASK_COMM + 8),
        );
    }
}

/// The `prev_state` the classic `sched_switch` tracepoint reports
/// (`__trace_sched_switch_state`): the TASK_REPORT bit of the state, or
/// TASK_REPORT_MAX (0x100) when the task was preempted.
#[inline(always)]
fn switch_state(preempt: bool, state: u32, exit_state: u32) -> i64 {
    const TASK_REPORT: u32 = 0x7f;
    const TASK_IDLE: u32 = 0x402;
    const TASK_REPORT_IDLE: u32 = 0x80;
    const TASK_RTLOCK_WAIT_OR_FROZEN: u32 = 0x1000 | 0x8000;
    if preempt {
        return 0x100;
    }
    let mut s = (state | exit_state) & TASK_REPORT;
    if state & TASK_IDLE == TASK_IDLE {
        s = TASK_REPORT_IDLE;
    }
    if state & TASK_RTLOCK_WAIT_OR_FROZEN != 0 {
        s = 0x2;
    }
    // The highest bit, as the kernel's fls() picks it.
    let mut bit = 0x80u32;
    while bit != 0 {
        if s & bit != 0 {
            return i64::from(bit);
        }
        bit >>= 1;
    }
    0
}

/// `sched_switch(bool preempt, struct task_struct *prev, struct task_struct
/// *next, unsigned int prev_state)`.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_btf(ctx: BtfTracePointContext) -> i32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let preempt: u64 = ctx.arg(0);
    let prev: *const u8 = ctx.arg(1);
    let next: *const u8 = ctx.arg(2);
    let prev_state: u64 = ctx.arg(3);
    // SAFETY: `next` is the tracepoint's task argument; the marker is
    // patched to `task_struct.pid`.
    let next_pid: u32 = unsafe { field(next, MARK_TASK_PID) };
    if !current_wanted(layout) && !wanted(layout, next_pid) {
        return 0;
    }
    let Some(mut entry) = reserve::<SchedSwitchEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedSwitchEvent>() bytes; every field is written before
    // the entry is submitted. `prev` and `next` are the tracepoint's task
    // arguments, read at patched field offsets.
    unsafe {
        (*e).header = header(EventKind::Switch, ts);
        task_comm(prev, ptr::addr_of_mut!((*e).prev_comm));
        task_comm(next, ptr::addr_of_mut!((*e).next_comm));
        (*e).prev_pid = field(prev, MARK_TASK_PID);
        (*e).prev_prio = field(prev, MARK_TASK_PRIO);
        (*e).next_pid = next_pid;
        (*e).next_prio = field(next, MARK_TASK_PRIO);
        (*e).prev_state = switch_state(
            preempt & 0xff != 0,
            prev_state as u32,
            field(prev, MARK_TASK_EXIT_STATE),
        );
    }
    entry.submit(wakeup_flags(layout));
    0
}

/// Shared body of the two BTF wake-up tracepoints (`struct task_struct *p`).
#[inline(always)]
fn wakeup_btf(ctx: &BtfTracePointContext, flags: u32) -> i32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let p: *const u8 = ctx.arg(0);
    // SAFETY: `p` is the tracepoint's task argument; the marker is patched
    // to `task_struct.pid`.
    let pid: u32 = unsafe { field(p, MARK_TASK_PID) };
    if !wanted(layout, pid) && !current_wanted(layout) {
        return 0;
    }
    let Some(mut entry) = reserve::<SchedWakeupEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedWakeupEvent>() bytes; every field is written before
    // the entry is submitted. `p` is read at patched field offsets.
    unsafe {
        (*e).header = header(EventKind::Wakeup, ts);
        task_comm(p, ptr::addr_of_mut!((*e).comm));
        (*e).pid = pid;
        (*e).prio = field(p, MARK_TASK_PRIO);
        (*e).target_cpu = field(p, MARK_TASK_CPU);
        (*e).flags = flags;
    }
    entry.submit(wakeup_flags(layout));
    0
}

/// `sched_wakeup(struct task_struct *p)`.
#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup_btf(ctx: BtfTracePointContext) -> i32 {
    wakeup_btf(&ctx, 0)
}

/// `sched_wakeup_new(struct task_struct *p)`.
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn sched_wakeup_new_btf(ctx: BtfTracePointContext) -> i32 {
    wakeup_btf(&ctx, WAKEUP_NEW)
}

/// `sys_enter(struct pt_regs *regs, long id)`.
#[btf_tracepoint(function = "sys_enter")]
pub fn sys_enter_btf(ctx: BtfTracePointContext) -> i32 {
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let regs: *const u8 = ctx.arg(0);
    let id: i64 = ctx.arg(1);
    let Some(mut entry) = reserve::<SysEnterEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysEnterEvent>() bytes; every field is written before the
    // entry is submitted. `regs` is the tracepoint's register argument,
    // read at the patched offsets of the argument registers.
    unsafe {
        (*e).header = header_of(EventKind::SysEnter, ts, pid_tgid);
        (*e).id = id;
        (*e).args[0] = field(regs, MARK_REGS_ARGS[0]);
        (*e).args[1] = field(regs, MARK_REGS_ARGS[1]);
        (*e).args[2] = field(regs, MARK_REGS_ARGS[2]);
        (*e).args[3] = field(regs, MARK_REGS_ARGS[3]);
        (*e).args[4] = field(regs, MARK_REGS_ARGS[4]);
        (*e).args[5] = field(regs, MARK_REGS_ARGS[5]);
    }
    entry.submit(wakeup_flags(layout));
    0
}

/// `sys_exit(struct pt_regs *regs, long ret)`.
#[btf_tracepoint(function = "sys_exit")]
pub fn sys_exit_btf(ctx: BtfTracePointContext) -> i32 {
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let regs: *const u8 = ctx.arg(0);
    let ret: i64 = ctx.arg(1);
    let Some(mut entry) = reserve::<SysExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysExitEvent>() bytes; every field is written before the
    // entry is submitted. `regs` is read at the patched offset of the
    // system call number.
    unsafe {
        (*e).header = header_of(EventKind::SysExit, ts, pid_tgid);
        (*e).id = i64::from(field::<i32>(regs, MARK_REGS_NR));
        (*e).ret = ret;
    }
    entry.submit(wakeup_flags(layout));
    0
}

/// The verifier rejects a program with a reachable panic (an endless loop),
/// so a panic path fails loudly at load time rather than misbehaving.
#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

