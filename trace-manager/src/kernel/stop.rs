//! Stopping at one instant: the cut every program sees, then detaching.

use aya::programs::TracePoint;
use trace_common::kernel::{
    MAP_LAYOUT, MAP_SYSCALL_STAGE, STAGED_CALLS, SysEnterEvent, SyscallEvent, SyscallStage,
};

use super::attach::fill_array;
use super::load::LayoutValue;
use super::{KernelError, KernelProvider};
use crate::clock::boottime_ns;

impl KernelProvider {
    /// Ends the recording at one instant, for every program at once: no
    /// program writes an event stamped after the returned time
    /// (CLOCK_BOOTTIME ns), however long detaching them takes. Events
    /// already written can still be drained.
    pub fn cut(&mut self) -> Result<u64, KernelError> {
        if let Some(ts) = self.stop_ts {
            return Ok(ts);
        }
        let ts = boottime_ns();
        self.layout.stop_ts = ts;
        fill_array(&mut self.ebpf, MAP_LAYOUT, [LayoutValue(self.layout)])?;
        self.stop_ts = Some(ts);
        Ok(ts)
    }

    /// When [`KernelProvider::cut`] ended the recording, if it did.
    pub fn stop_ts(&self) -> Option<u64> {
        self.stop_ts
    }

    /// Detaches and unloads every program; events already in the ring buffer
    /// can still be drained, and [`KernelProvider::dropped`] still answers.
    pub fn detach(&mut self) {
        self.detached_misses = self.recursion_misses();
        self.detached = true;
        super::perf_probe::detach_all(std::mem::take(&mut self.probe_links));
        for name in std::mem::take(&mut self.attached) {
            let Some(program) = self.ebpf.program_mut(name) else {
                continue;
            };
            let result = match program {
                aya::programs::Program::UProbe(up) => up.unload(),
                aya::programs::Program::BtfTracePoint(tp) => tp.unload(),
                aya::programs::Program::PerfEvent(pe) => pe.unload(),
                other => {
                    let tp: Result<&mut TracePoint, _> = other.try_into();
                    tp.and_then(|tp| tp.unload())
                }
            };
            if let Err(e) = result {
                log::warn!("detaching eBPF program `{name}`: {e}");
            }
        }
        for entry in self.pending_syscalls() {
            self.reorder.push(&entry);
        }
    }

    /// What the CPUs still keep of system calls (`PAIR_SYSCALLS`): whole
    /// calls not yet written, and the entries of calls running when the
    /// programs were detached, whose caller was not switched out since.
    /// Each as the bytes of one event, oldest first per CPU, for the drain
    /// to hand on with the rest; the translator ends the running calls at
    /// the stop, unfinished.
    fn pending_syscalls(&mut self) -> Vec<Vec<u8>> {
        let Some(map) = self.ebpf.map(MAP_SYSCALL_STAGE) else {
            return Vec::new();
        };
        let stages: aya::maps::PerCpuArray<_, StageValue> =
            match aya::maps::PerCpuArray::try_from(map) {
                Ok(stages) => stages,
                Err(e) => {
                    log::warn!("reading the system calls in progress: {e}");
                    return Vec::new();
                }
            };
        let values = match stages.get(&0, 0) {
            Ok(values) => values,
            Err(e) => {
                log::warn!("reading the system calls in progress: {e}");
                return Vec::new();
            }
        };
        let mut events = Vec::new();
        for StageValue(stage) in values.iter() {
            let staged = (stage.staged as usize).min(STAGED_CALLS);
            events.extend(stage.calls[..staged].iter().map(plain_bytes));
            if stage.live != 0 {
                events.push(plain_bytes(&stage.entry));
            }
        }
        events
    }

    /// Detaches everything and frees the maps.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for KernelProvider {
    /// The probes opened directly are closed together, in the background
    /// ([`super::perf_probe::detach_all`]).
    fn drop(&mut self) {
        super::perf_probe::detach_all(std::mem::take(&mut self.probe_links));
    }
}

/// The bytes of `value`.
fn plain_bytes<T: PlainEvent>(value: &T) -> Vec<u8> {
    // SAFETY: `T` is plain data without padding (`PlainEvent`: sizes
    // asserted in trace-common); its bytes are read once, as a byte slice.
    unsafe { std::slice::from_raw_parts(std::ptr::from_ref(value).cast::<u8>(), size_of::<T>()) }
        .to_vec()
}

/// Events whose bytes are all their fields (no padding).
trait PlainEvent {}
impl PlainEvent for SysEnterEvent {}
impl PlainEvent for SyscallEvent {}

/// The `Pod` wrapper through which the system call stages are read.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct StageValue(SyscallStage);

// SAFETY: `SyscallStage` is `#[repr(C)]` plain data made of integers with no
// padding (its size is asserted in trace-common), so any bytes are a valid
// value.
unsafe impl aya::Pod for StageValue {}

/// The `Pod` wrapper through which the off-CPU table's entries are read.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct OffCpuValue(trace_common::kernel::stack::OffCpuEntry);

// SAFETY: `OffCpuEntry` is `#[repr(C)]` plain data made of integers with no
// padding (its size is asserted in trace-common), so any bytes are a valid
// value.
unsafe impl aya::Pod for OffCpuValue {}

impl KernelProvider {
    /// The threads `kernel:offcpu` found blocked that it had not written
    /// when the recording was cut: still off CPU, or back on it and not yet
    /// returned to user space. Each as a stack event of its own, stamped
    /// `at` (the cut), ending there if it had not ended, with the kernel
    /// stack it blocked with and only the user instruction pointer (its
    /// user stack cannot be read from here). Empty without `kernel:offcpu`.
    pub fn offcpu_pending(&mut self, at: u64) -> Vec<Vec<u8>> {
        use trace_common::kernel::stack::{
            MAP_OFFCPU, SOURCE_OFFCPU, STACK_KIND, STACK_USER_REGS, STACK_USER_STALE, StackEvent,
        };
        if !self
            .categories
            .iter()
            .any(|c| c == trace_common::category::KERNEL_OFFCPU)
        {
            return Vec::new();
        }
        let Some(map) = self.ebpf.map(MAP_OFFCPU) else {
            return Vec::new();
        };
        let table: aya::maps::HashMap<_, u32, OffCpuValue> = match aya::maps::HashMap::try_from(map)
        {
            Ok(t) => t,
            Err(e) => {
                log::warn!("reading the off-CPU table: {e}");
                return Vec::new();
            }
        };
        let mut events = Vec::new();
        for item in table.iter() {
            let Ok((tid, OffCpuValue(e))) = item else {
                continue;
            };
            if e.start_ts > at {
                continue;
            }
            let kernel_len = (e.kernel_len as usize).min(8 * e.kernel.len()) & !7;
            // Its name as it is now (the programs take it from the task).
            let mut comm = [0u8; trace_common::kernel::COMM_LEN];
            if let Some((_, name)) = crate::procfs::thread(tid) {
                let n = name.len().min(comm.len() - 1);
                comm[..n].copy_from_slice(&name.as_bytes()[..n]);
            }
            let event = StackEvent {
                header: trace_common::kernel::EventHeader {
                    kind: STACK_KIND,
                    cpu: 0,
                    ts: at,
                    tid,
                    tgid: e.tgid,
                },
                source: SOURCE_OFFCPU,
                flags: STACK_USER_STALE | if e.ip != 0 { STACK_USER_REGS } else { 0 },
                kernel_len: kernel_len as u32,
                ip: e.ip,
                sp: e.sp,
                start_ts: e.start_ts,
                end_ts: if e.end_ts == 0 { at } else { e.end_ts.min(at) },
                other_tid: e.waker_tid,
                other_tgid: e.waker_tgid,
                comm,
                ..StackEvent::default()
            };
            // SAFETY: `StackEvent` is plain data without padding (asserted in
            // trace-common); its bytes are read once, as a byte slice.
            let head = unsafe {
                std::slice::from_raw_parts(
                    std::ptr::from_ref(&event).cast::<u8>(),
                    size_of::<StackEvent>(),
                )
            };
            let mut bytes = head.to_vec();
            for frame in &e.kernel[..kernel_len / 8] {
                bytes.extend_from_slice(&frame.to_ne_bytes());
            }
            events.push(bytes);
        }
        events
    }
}
