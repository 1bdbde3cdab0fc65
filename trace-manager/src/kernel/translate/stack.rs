//! Stacks (`kernel:profile`, `kernel:offcpu`, probes' `--stacks`) become
//! Perfetto perf samples in FXT blob records of blob type 3: the user
//! stack unwound (from the copied stack bytes and the binaries'
//! `.eh_frame`, or as the frame-pointer walk found it), kernel and user
//! frames symbolized, and written one sampling stream per source — a
//! Perfetto packet sequence with its own timebase name:
//!
//! - `cpu-clock`: the CPU profile, a sample per tick at the sample's time;
//! - `off-cpu`: where a thread blocked, at the time it blocked, weighted by
//!   the nanoseconds it stayed off CPU (`timebase_count`);
//! - `wakeup`: the waker's stack at the wake-up, weighted by how long the
//!   woken thread had been blocked;
//! - `uprobe:FUNCTION`, `usdt:PROVIDER:NAME`, `syscall:NAME`,
//!   `tracepoint:GROUP:EVENT`: a probe's calling stack at its event.
//!
//! A waker that was an interrupt (its kernel stack enters through an
//! interrupt) keeps its kernel stack only: the user stack is whatever the
//! interrupt happened to land on.
//!
//! User stacks are unwound as their events come (unwinding needs the
//! process's mappings, kept by the resolver from the first stack of a
//! process on), but symbolized in batches: a file's first names cost tens
//! of milliseconds to load, which must not hold up the draining of the
//! rings. Samples wait (their addresses only) until [`FLUSH_SAMPLES`] have
//! gathered, the oldest is [`FLUSH_AFTER_NS`] old, or the recording ends,
//! then are symbolized and written.
//!
//! An exec is not acted on where it is translated (later than its
//! process's stacks arrive): a stack whose instruction pointer lies outside
//! the mappings read has them read again as it arrives.
//!
//! The resolver holds at most about [`StackResolver::DEFAULT_MEMORY_LIMIT`]
//! besides the unwind tables of running processes: after every batch it
//! lets go of what only exited processes needed ([`StackResolver::trim`]).

use std::sync::Arc;

use trace_common::fxt::{Record, StringRef};
use trace_common::kernel::python::{PYTHON_FRAME_ENTRY, PythonProcess};
use trace_common::kernel::stack::{
    SOURCE_OFFCPU, SOURCE_PROFILE, SOURCE_SYSCALL, SOURCE_TRACEPOINT, SOURCE_UPROBE, SOURCE_USDT,
    SOURCE_WAKER, STACK_KERNEL_MODE, STACK_USER_REGS, StackRecord, USER_FRAMES_MAX,
};
use trace_perfetto::{BLOB_TYPE_PERFETTO, CpuMode, Frame, Mapping, Sample, SampleWriter};
use trace_stacks::python::{Interpreter, NamedFrame, PythonReader, RawFrame, layout::SUPPORTED};
use trace_stacks::{MappingInfo, ResolvedFrame, StackResolver, UserRegs};

use super::{KernelTranslator, Map};
use crate::kernel::python::PythonProcs;
use crate::output::{FxtStream, OutputError};
use std::io::Write;

/// The name of the blob records that carry Perfetto packets.
const BLOB_NAME: &str = "perfetto";

/// Kernel functions through which an interrupt enters: a waker stack
/// through one of them was taken in interrupt context.
const INTERRUPT_ENTRIES: &[&str] = &["asm_sysvec_", "asm_common_interrupt"];

/// The interpreter's C function that runs Python frames: each of its frames
/// on a native stack stands for the Python frames it ran, down to an entry
/// frame.
const PYTHON_EVAL: &str = "_PyEval_EvalFrameDefault";

/// Samples unwound and waiting to be symbolized and written; at most this
/// many (about 0.5 KiB each) wait.
pub(super) const FLUSH_SAMPLES: usize = 16_384;

/// Samples wait at most about this long (ns of trace time) before they are
/// symbolized and written, so that a reader of a stream sees them.
pub(super) const FLUSH_AFTER_NS: u64 = 2_000_000_000;

/// A sample unwound, waiting to be symbolized.
struct Pending {
    /// Its stream: (source, id).
    stream: (u32, u64),
    ts: u64,
    pid: u32,
    tid: u32,
    cpu: u32,
    cpu_mode: CpuMode,
    count: Option<u64>,
    /// Whether its user frames are dropped if the kernel stack shows an
    /// interrupt (a waker's).
    waker: bool,
    /// Kernel addresses, innermost first.
    kernel: Vec<u64>,
    /// User lookup addresses, innermost first.
    user: Vec<u64>,
    /// Python frames named, innermost first.
    python: Vec<NamedFrame>,
}

/// The translator's stack state: the resolver, the samples waiting, and
/// one writer per stream.
#[derive(Default)]
pub(super) struct Stacks {
    resolver: Option<StackResolver>,
    pending: Vec<Pending>,
    /// Writers by (source, id).
    streams: Map<(u32, u64), SampleWriter>,
    /// Streams in the order they were made (blob order stays stable).
    order: Vec<(u32, u64)>,
    /// Perfetto mappings made from the resolver's, by identity.
    mappings: Map<MappingInfo, Arc<Mapping>>,
    /// Names of the processes stacks came from, as they arrived.
    process_names: Map<u32, String>,
    /// The Python interpreters of the processes, and their code objects.
    python: PythonReader,
    /// When each process was examined for an interpreter: the time of the
    /// stack that made it so.
    python_examined: Map<u32, u64>,
    /// The unreadable interpreter reported of each process (its file), so
    /// that one found again (after an exec's second look) is not counted
    /// twice.
    python_unreadable: Map<u32, String>,
    /// The programs' map of processes running a readable interpreter.
    python_procs: Option<PythonProcs>,
    /// Perfetto mappings of Python source files, by path.
    python_files: Map<Arc<str>, Arc<Mapping>>,
}

impl Stacks {
    fn resolver(&mut self) -> &mut StackResolver {
        self.resolver.get_or_insert_with(StackResolver::new)
    }

    /// Remembers what the stacks of process `pid` need (its mappings and
    /// files) while it lives; with the user instruction pointer `ip` of a
    /// stack just taken, reads them again if they do not hold it (an exec).
    pub(super) fn observe(&mut self, pid: u32, ip: u64, maybe_executed: bool) {
        if pid != 0 {
            self.resolver().observe_address(pid, ip, maybe_executed);
        }
    }

    /// The Perfetto mapping of resolver mapping `info`: the kernel's with
    /// an empty range (one for every process, as Perfetto's own profiler
    /// writes it).
    fn mapping(&mut self, info: &Arc<MappingInfo>) -> Arc<Mapping> {
        if let Some(m) = self.mappings.get(info.as_ref()) {
            return Arc::clone(m);
        }
        let kernel = info.path == StackResolver::KERNEL_PATH;
        let m = Arc::new(Mapping {
            path: info.path.clone(),
            build_id: info.build_id.clone(),
            start: if kernel { 0 } else { info.start },
            end: if kernel { 0 } else { info.end },
            file_offset: info.file_offset,
            load_bias: 0,
        });
        self.mappings.insert(info.as_ref().clone(), Arc::clone(&m));
        m
    }

    fn frames(&mut self, resolved: Vec<ResolvedFrame>, out: &mut Vec<Frame>) {
        for f in resolved {
            let mapping = self.mapping(&f.mapping);
            out.push(Frame {
                function: f.function,
                mapping,
                rel_pc: f.rel_pc,
            });
        }
    }

    /// The user frames `resolved` with the Python frames `python` in place
    /// of the interpreter's evaluation loops that ran them: the innermost
    /// loop's frame by the Python frames down to the first entry frame, the
    /// next by those down to the next, and so on (as `py-spy --native`
    /// shows them). Python frames left over (their loops were not unwound)
    /// go outermost.
    fn user_frames(
        &mut self,
        resolved: Vec<ResolvedFrame>,
        python: &[NamedFrame],
        out: &mut Vec<Frame>,
    ) {
        let mut rest = python;
        for f in resolved {
            if f.function == PYTHON_EVAL && !rest.is_empty() {
                let end = rest
                    .iter()
                    .position(|p| p.entry)
                    .map_or(rest.len(), |i| i + 1);
                let (group, after) = rest.split_at(end);
                self.python_frames(group, out);
                rest = after;
                continue;
            }
            let mapping = self.mapping(&f.mapping);
            out.push(Frame {
                function: f.function,
                mapping,
                rel_pc: f.rel_pc,
            });
        }
        self.python_frames(rest, out);
    }

    /// Python frames as Perfetto frames: named `function (file.py:LINE)`,
    /// in a mapping named by the source file's path (with an empty range,
    /// as the file is no process's memory), the line as the relative pc.
    fn python_frames(&mut self, frames: &[NamedFrame], out: &mut Vec<Frame>) {
        for f in frames {
            let mapping = Arc::clone(self.python_files.entry(Arc::clone(&f.file)).or_insert_with(
                || {
                    Arc::new(Mapping {
                        path: f.file.to_string(),
                        build_id: None,
                        start: 0,
                        end: 0,
                        file_offset: 0,
                        load_bias: 0,
                    })
                },
            ));
            out.push(Frame {
                function: f.display_name(),
                mapping,
                rel_pc: f.line.and_then(|l| u64::try_from(l).ok()).unwrap_or(0),
            });
        }
    }
}

/// Whether Python frames are read: unless `TRACE_PYTHON_FRAMES=0` (for
/// the benchmark that measures what reading them costs, and for anyone who
/// wants the interpreter's C functions alone).
fn python_frames_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var_os("TRACE_PYTHON_FRAMES").is_none_or(|v| v != "0"))
}

/// The Python frames of stack `r`.
fn raw_python_frames(r: &StackRecord<'_>) -> Vec<RawFrame> {
    r.python_frames()
        .map(|f| RawFrame {
            code: f.code,
            instr: f.instr,
            stamp: f.stamp,
            entry: f.flags & PYTHON_FRAME_ENTRY != 0,
        })
        .collect()
}

impl KernelTranslator {
    /// Remembers what the stack `r` needs of its process while the process
    /// lives (called as the stack arrives, before it waits for its turn or
    /// is kept for later).
    pub fn observe_stack_process(&mut self, r: &StackRecord<'_>) {
        let ip = if r.event.flags & STACK_USER_REGS != 0 {
            r.event.ip
        } else {
            0
        };
        let (pid, tid) = (r.event.header.tgid, r.event.header.tid);
        // The interpreter first: the programs are told at once, and reading
        // the mappings' unwind tables may take long.
        if ip != 0 {
            self.observe_python(pid, r);
        }
        // A main thread whose name is not the one its last stack gave may
        // have executed another program (which names it): that is when the
        // resolver asks which program the process runs.
        let comm = super::comm_str(&r.event.comm);
        let renamed =
            tid == pid && self.stacks.process_names.get(&pid).map(String::as_str) != Some(&*comm);
        self.stacks.observe(pid, ip, renamed);
        // The process's name while it lives (a thread's stack tells only
        // the thread's).
        if tid == pid {
            if !comm.is_empty() && renamed {
                self.stacks.process_names.insert(pid, comm.into_owned());
            }
        } else if !self.stacks.process_names.contains_key(&pid)
            && let Some(name) = crate::procfs::process_name(pid)
        {
            self.stacks.process_names.insert(pid, name);
        }
    }

    /// Finds whether process `pid` runs a Python interpreter (once, or
    /// again while none was found), and reads the code objects of stack
    /// `r`'s Python frames not read yet, while the process lives.
    fn observe_python(&mut self, pid: u32, r: &StackRecord<'_>) {
        if pid != 0 {
            self.examine_python(pid, r.event.header.ts);
        }
        if r.event.python_len != 0 {
            let frames = raw_python_frames(r);
            self.stacks.python.read(pid, &frames);
        }
    }

    /// Examines process `pid` for an interpreter if it is due, as of a
    /// stack or an exec at `ts`; the programs are told what is found.
    fn examine_python(&mut self, pid: u32, ts: u64) {
        if !python_frames_wanted() {
            return;
        }
        let Some(found) = self.stacks.python.examine(pid) else {
            return;
        };
        self.stacks.python_examined.insert(pid, ts);
        match found {
            Interpreter::Readable {
                version,
                path,
                runtime,
                layout,
            } => {
                log::info!("process {pid} runs Python {version} ({path}): its frames are read");
                let process = crate::kernel::python::python_process(*runtime, layout);
                self.tell_python(pid, Some(process));
            }
            Interpreter::Unreadable { version, path } => {
                if self.stacks.python_unreadable.get(&pid) == Some(path) {
                    return;
                }
                self.stacks.python_unreadable.insert(pid, path.clone());
                log::warn!(
                    "process {pid} runs Python {version} ({path}), whose frames cannot be \
                     read (readable: {}): its stacks show the interpreter's C functions",
                    SUPPORTED.join(", ")
                );
                self.counts.python_unreadable += 1;
            }
            Interpreter::None => {}
        }
    }

    /// Gives the translator the programs' map of the processes running a
    /// readable interpreter, which it fills as it finds them.
    pub fn set_python_procs(&mut self, procs: PythonProcs) {
        self.stacks.python_procs = Some(procs);
    }

    /// Tells the programs (if they were given) whether process `pid` runs
    /// a readable interpreter.
    fn tell_python(&mut self, pid: u32, process: Option<PythonProcess>) {
        if let Some(procs) = self.stacks.python_procs.as_mut() {
            procs.set(pid, process);
        }
    }

    /// Forgets the mappings and the name read of process `pid`, which
    /// executed a new program (its next stack reads them again; the exec
    /// program has made that stack wake the reader at once). Called as its
    /// exec event arrives: read before or during the exec, they are the old
    /// program's, or a new one's not mapped yet, and its later stacks would
    /// resolve against them. `ts` is the exec's time.
    pub fn forget_stack_process(&mut self, pid: u32, ts: u64) {
        if let Some(resolver) = self.stacks.resolver.as_mut() {
            resolver.forget(pid);
        }
        // Its name too: the program's, from its next stack.
        self.stacks.process_names.remove(&pid);
        // And its interpreter, unless it was found from a stack taken after
        // the exec (the rings of the CPUs are read one after the other): the
        // new program's is found at its next stack.
        let after_exec = self
            .stacks
            .python_examined
            .get(&pid)
            .is_some_and(|&examined| examined > ts);
        // Without stacks recorded, no interpreter is looked for.
        if after_exec || self.stacks.resolver.is_none() {
            return;
        }
        if self.stacks.python.examined(pid) {
            self.stacks.python_examined.remove(&pid);
            self.stacks.python.forget(pid);
            self.tell_python(pid, None);
        }
        // Examined now, whether or not a stack came before: it runs the new
        // program already, its stacks read since may have come before this
        // exec from another CPU's ring, and its next stack may come much
        // later (off-CPU stacks are written when a block ends).
        self.examine_python(pid, ts);
    }

    /// Makes the stack resolver now, before any stack comes: made at the
    /// first one, its cost (hundreds of milliseconds in a debug build)
    /// would delay reading that process's mappings, and a short process
    /// would be gone by then, its stacks left unresolved.
    pub fn prepare_stacks(&mut self) {
        self.stacks.resolver();
    }

    /// Writes one stack event as a Perfetto sample.
    pub fn stack<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        r: &StackRecord<'_>,
    ) -> Result<(), OutputError> {
        let e = &r.event;
        let h = &e.header;
        if !self.wants(h.ts) {
            return Ok(());
        }
        self.last_ts = self.last_ts.max(h.ts);
        let (pid, tid) = (h.tgid, h.tid);
        // Named as the stack says (without `kernel:proc` nothing else tells
        // of an exec: a recorded command starts as a copy of the recorder).
        let comm = super::comm_str(&e.comm);
        if !comm.is_empty() {
            if let Some(name) = self.stacks.process_names.get(&pid).cloned() {
                self.name_process(out, pid, &name)?;
            }
            self.name_thread(out, tid, pid, &comm)?;
        } else {
            self.know_thread(out, tid, pid)?;
        }
        if e.other_tid != 0 {
            let other_tgid = if e.other_tgid != 0 {
                e.other_tgid
            } else {
                self.threads
                    .get(&e.other_tid)
                    .and_then(|t| t.tgid)
                    .unwrap_or(e.other_tid)
            };
            self.know_thread(out, e.other_tid, other_tgid)?;
        }

        let kernel: Vec<u64> = r.kernel_frames().collect();
        let mut user = Vec::new();
        if e.flags & STACK_USER_REGS != 0 {
            self.stacks.observe(pid, 0, false);
            let fp: Vec<u64> = r.user_frames().collect();
            if !fp.is_empty() {
                // A walk gives the instruction pointer, then return
                // addresses: look those up inside their call instruction.
                user.extend(
                    fp.iter()
                        .enumerate()
                        .map(|(i, &a)| if i == 0 { a } else { a.saturating_sub(1) }),
                );
            } else if !r.stack.is_empty() {
                let regs = UserRegs {
                    ip: e.ip,
                    sp: e.sp,
                    bp: e.bp,
                };
                self.stacks
                    .resolver()
                    .unwind_user(pid, regs, r.stack, USER_FRAMES_MAX, &mut user);
            } else if e.ip != 0 {
                user.push(e.ip);
            }
        }
        if kernel.is_empty() && user.is_empty() {
            return Ok(());
        }
        let python: Vec<NamedFrame> = if e.python_len != 0 && e.flags & STACK_USER_REGS != 0 {
            raw_python_frames(r)
                .iter()
                .map(|f| self.stacks.python.name(pid, f))
                .collect()
        } else {
            Vec::new()
        };
        if !python.is_empty() {
            self.counts.python_stacks += 1;
        }
        let (ts, count) = match e.source {
            SOURCE_OFFCPU => (e.start_ts, Some(e.end_ts.saturating_sub(e.start_ts))),
            SOURCE_WAKER => (h.ts, Some(e.end_ts.saturating_sub(e.start_ts))),
            _ => (h.ts, None),
        };
        let cpu_mode = if e.source != SOURCE_PROFILE {
            CpuMode::Unknown
        } else if e.flags & STACK_KERNEL_MODE != 0 {
            CpuMode::Kernel
        } else {
            CpuMode::User
        };
        let stream = (e.source, e.id);
        if !self.stacks.streams.contains_key(&stream) {
            let timebase = self.timebase(e.source, e.id);
            // Sequence ids from 1, a stream each.
            let sequence = self.stacks.order.len() as u32 + 1;
            let mut writer = SampleWriter::new(sequence, &timebase);
            if e.source == SOURCE_PROFILE && self.sample_hz > 0 {
                writer = writer.with_frequency(u64::from(self.sample_hz));
            }
            self.stacks.streams.insert(stream, writer);
            self.stacks.order.push(stream);
        }
        self.stacks.pending.push(Pending {
            stream,
            ts,
            pid,
            tid,
            cpu: h.cpu,
            cpu_mode,
            count,
            waker: e.source == SOURCE_WAKER,
            kernel,
            user,
            python,
        });
        self.counts.samples += 1;
        let oldest = self.stacks.pending.first().map_or(ts, |p| p.ts.min(ts));
        if self.stacks.pending.len() >= FLUSH_SAMPLES
            || h.ts.saturating_sub(oldest) >= FLUSH_AFTER_NS
        {
            self.flush_stacks(out)?;
        }
        Ok(())
    }

    /// Symbolizes the samples waiting and writes them, with the blobs that
    /// are full.
    fn flush_stacks<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        let pending = std::mem::take(&mut self.stacks.pending);
        // Kernel frames first, then the user stacks of the samples that keep
        // theirs, named together: each file is read once for the batch.
        let mut kernel_frames: Vec<Vec<ResolvedFrame>> = Vec::with_capacity(pending.len());
        let mut users: Vec<(u32, &[u64])> = Vec::new();
        let mut interrupted: Vec<bool> = Vec::with_capacity(pending.len());
        for p in &pending {
            let resolved = if p.kernel.is_empty() {
                Vec::new()
            } else {
                self.stacks.resolver().symbolize_kernel(&p.kernel)
            };
            let in_interrupt = p.waker
                && resolved.iter().any(|f| {
                    INTERRUPT_ENTRIES
                        .iter()
                        .any(|entry| f.function.starts_with(entry))
                });
            let user: &[u64] = if in_interrupt { &[] } else { &p.user };
            users.push((p.pid, user));
            interrupted.push(in_interrupt);
            kernel_frames.push(resolved);
        }
        let user_frames = self.stacks.resolver().symbolize_users(&users);
        drop(users);
        let mut payloads = Vec::new();
        let mut frames: Vec<Frame> = Vec::new();
        for (((p, kernel), user), in_interrupt) in pending
            .iter()
            .zip(kernel_frames)
            .zip(user_frames)
            .zip(interrupted)
        {
            frames.clear();
            self.stacks.frames(kernel, &mut frames);
            let python: &[NamedFrame] = if in_interrupt { &[] } else { &p.python };
            self.stacks.user_frames(user, python, &mut frames);
            let Some(writer) = self.stacks.streams.get_mut(&p.stream) else {
                continue;
            };
            writer.push(&Sample {
                ts: p.ts,
                pid: p.pid,
                tid: p.tid,
                cpu: p.cpu,
                cpu_mode: p.cpu_mode,
                timebase_count: p.count,
                frames: &frames,
            });
            if writer.ready() {
                payloads.extend(writer.take());
            }
        }
        // No sample waits now: what only exited processes needed may go.
        self.stacks.python.trim();
        if let Some(resolver) = self.stacks.resolver.as_mut() {
            let released = resolver.trim();
            if released > 0 {
                log::debug!(
                    "stacks: {released} bytes of unwind tables of exited processes let go of"
                );
            }
        }
        self.write_blobs(out, payloads)
    }

    /// Writes every sample not written yet (at the end of a recording).
    pub(super) fn finish_stacks<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<(), OutputError> {
        self.flush_stacks(out)?;
        let mut payloads = Vec::new();
        for key in &self.stacks.order {
            if let Some(w) = self.stacks.streams.get_mut(key) {
                payloads.extend(w.take());
            }
        }
        self.write_blobs(out, payloads)
    }

    fn write_blobs<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        payloads: Vec<Vec<u8>>,
    ) -> Result<(), OutputError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let name: StringRef<'_> = self.strings.intern(out, BLOB_NAME)?;
        for payload in payloads {
            out.write(&Record::Blob {
                name: name.clone(),
                blob_type: BLOB_TYPE_PERFETTO,
                payload: payload.into(),
            })?;
        }
        Ok(())
    }

    /// The timebase name of stream (`source`, `id`).
    fn timebase(&mut self, source: u32, id: u64) -> String {
        match source {
            SOURCE_PROFILE => "cpu-clock".to_owned(),
            SOURCE_OFFCPU => "off-cpu".to_owned(),
            SOURCE_WAKER => "wakeup".to_owned(),
            SOURCE_UPROBE => match self.uprobe.names.get(id as usize) {
                Some(name) => format!("uprobe:{name}"),
                None => format!("uprobe:{id}"),
            },
            SOURCE_USDT => match self.usdt.sites.get(id as usize) {
                Some(site) => format!("usdt:{}", site.name),
                None => format!("usdt:{id}"),
            },
            SOURCE_SYSCALL => format!("syscall:{}", self.syscall.table.get(id as i64).name),
            SOURCE_TRACEPOINT => match self.tracepoints.name_of(id as u32) {
                Some(name) => format!("tracepoint:{name}"),
                None => format!("tracepoint:{id}"),
            },
            other => format!("stacks:{other}"),
        }
    }
}
