//! [`StackResolver`]: the processes of one recording, their files, and the caches.

use std::fmt;
use std::sync::Arc;

use std::time::{Duration, Instant};

use foldhash::HashMap;
use framehop::x86_64::CacheX86_64;
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::files::{FileId, FileTable};
use crate::perfmap::PerfMap;
use crate::process::Process;
use crate::symbolize::{Symbols, UNKNOWN};
use crate::unwind::{self, Stop};
use crate::{MappingInfo, ResolvedFrame, UserRegs};

/// Unwinds and symbolizes stacks of the processes of one recording, keeping what it needs of a
/// process (its mappings, and the mapped files opened) from the first time it sees it, so that
/// stacks of processes that exit during the recording still resolve.
///
/// A process is known by the pid given: pass the process (thread group) id. Call
/// [`forget`](Self::forget) when a pid starts another program (exec), and when a pid number is
/// reused by a new process.
///
/// Mapped files are opened once per device and inode and stay open as long as the resolver
/// (one recording): a process that executed another program, or exited, may still have samples
/// waiting to be resolved, and its files are what resolves them. A recording that runs very many
/// distinct programs holds as many descriptors.
///
/// It is `Send`: names are looked up by a symbolizer thread of its own (started at the first name
/// not yet cached, ended when the resolver is dropped).
///
/// What it holds is kept within a memory limit ([`with_memory_limit`](Self::with_memory_limit)):
/// half of it for what the symbolizer reads (past it, what was read of the files least recently
/// named is dropped, and read again if they are sampled again: it costs time, tens of
/// milliseconds a file, never names; files named within the last 10 s stay, whatever they
/// take), an
/// eighth for the names found, and three eighths for the unwind tables of files, past which
/// [`trim`](Self::trim) lets go of those only exited processes mapped. The tables of the files
/// of processes still running are always kept.
pub struct StackResolver {
    pub(crate) processes: HashMap<u32, Process>,
    /// Processes found exited by [`trim`](Self::trim), and when.
    exited: HashMap<u32, Instant>,
    limit: u64,
    files: FileTable,
    /// framehop's rule cache, shared by every process (each unwinder has its own generation).
    unwind_cache: Box<CacheX86_64>,
    symbols: Symbols,
    /// The mapping reported for an address in no known mapping.
    unmapped: Arc<MappingInfo>,
    /// The mapping reported for kernel addresses.
    kernel: Arc<MappingInfo>,
    /// Perf maps of processes with code in anonymous memory (`None`: none found yet, and
    /// when it was looked for).
    perf_maps: HashMap<u32, (Option<PerfMap>, Instant)>,
}

impl fmt::Debug for StackResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackResolver")
            .field("processes", &self.processes.len())
            .field("files", &self.files.len())
            .finish_non_exhaustive()
    }
}

impl Default for StackResolver {
    fn default() -> Self {
        Self::new()
    }
}

impl StackResolver {
    /// Path of the mapping frames report for kernel addresses (start 0, end `u64::MAX`, file
    /// offset 0: `rel_pc` is the address itself).
    pub const KERNEL_PATH: &str = "[kernel.kallsyms]";
    /// Path of the mapping frames report for a user address in no mapping known of its process
    /// (start and end 0: `rel_pc` is the address itself).
    pub const UNMAPPED_PATH: &str = "[unknown]";

    /// The memory limit of [`new`](Self::new): what the symbolizer and the names cached may
    /// hold together.
    pub const DEFAULT_MEMORY_LIMIT: u64 = 64 << 20;

    /// A resolver that knows no process yet, within [`DEFAULT_MEMORY_LIMIT`](Self::DEFAULT_MEMORY_LIMIT).
    pub fn new() -> Self {
        Self::with_memory_limit(Self::DEFAULT_MEMORY_LIMIT)
    }

    /// A resolver whose symbolizer, names cached and unwind tables of exited processes hold
    /// at most about `bytes` together (estimated from the sizes of the symbol tables, debug
    /// information and unwind sections read; a single file larger than its share is still
    /// read, alone).
    pub fn with_memory_limit(bytes: u64) -> Self {
        let pseudo = |path: &str, end| {
            Arc::new(MappingInfo {
                path: path.to_owned(),
                build_id: None,
                start: 0,
                end,
                file_offset: 0,
            })
        };
        StackResolver {
            processes: HashMap::default(),
            exited: HashMap::default(),
            limit: bytes,
            files: FileTable::default(),
            unwind_cache: Box::new(CacheX86_64::new()),
            symbols: Symbols::new(bytes),
            unmapped: pseudo(Self::UNMAPPED_PATH, 0),
            kernel: pseudo(Self::KERNEL_PATH, u64::MAX),
            perf_maps: HashMap::default(),
        }
    }

    /// Lets the files named within `keep` be dropped past the memory limit too (by default,
    /// those named within the last 10 s are kept, so that the files in use are read once, not
    /// once per batch).
    pub fn keep_recent(mut self, keep: Duration) -> Self {
        self.symbols.keep_recent = keep;
        self
    }

    /// What the resolver holds now, in bytes: the symbolizer's files and the names cached (as
    /// estimated against the limit), and the unwind tables of the files opened.
    pub fn memory_held(&self) -> u64 {
        self.symbols.held() + self.files.unwind_bytes()
    }

    /// Lets go of what is held for processes that exited (found so at least
    /// [`EXITED_GRACE`](Self::EXITED_GRACE) ago, so that their samples still on their way
    /// resolve), and of the files only they mapped, once the unwind tables held pass their share
    /// of the memory limit. Call it when no sample waits to be symbolized: a process let go of
    /// resolves to `[unknown]`. Returns the bytes of unwind tables let go of.
    pub fn trim(&mut self) -> u64 {
        if self.files.unwind_bytes() <= self.limit / 8 * 3 {
            return 0;
        }
        let now = Instant::now();
        let exited = &mut self.exited;
        self.processes.retain(|&pid, _| {
            let alive = i32::try_from(pid)
                .map_or(true, |p| kill(Pid::from_raw(p), None) != Err(Errno::ESRCH));
            if alive {
                exited.remove(&pid);
                return true;
            }
            let since = *exited.entry(pid).or_insert(now);
            if now.duration_since(since) < Self::EXITED_GRACE {
                return true;
            }
            exited.remove(&pid);
            false
        });
        self.exited
            .retain(|pid, _| self.processes.contains_key(pid));
        self.files.release_unused()
    }

    /// How long a process must have been found exited before [`trim`](Self::trim) lets go of
    /// it.
    pub const EXITED_GRACE: Duration = Duration::from_secs(2);

    /// How many times what was read of a file (or of kallsyms) for naming was dropped to stay
    /// within the memory limit.
    pub fn symbols_dropped(&self) -> u64 {
        self.symbols.dropped()
    }

    /// Reads process `pid`'s mappings (and opens its mapped files) unless already known. Cheap
    /// when known. Called as soon as a sample of `pid` arrives.
    ///
    /// A pid that cannot be read (it exited already) is remembered with no mappings: its stacks
    /// resolve to `[unknown]`.
    pub fn observe(&mut self, pid: u32) {
        self.process(pid);
    }

    /// [`observe`](Self::observe), and reads the mappings again: at once when the process
    /// executed a new program since they were read (with `maybe_executed`, when something
    /// suggests it, such as its main thread's name changing: its `/proc/PID/exe` is read, one
    /// `readlink`), else when `ip`, a user address of a stack just taken, lies in none of them
    /// (a library mapped since), as often as the unwinder's misses may.
    pub fn observe_address(&mut self, pid: u32, ip: u64, maybe_executed: bool) {
        self.process(pid);
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        if ip == 0 {
            return;
        }
        // Another program: its mappings read now, however recently the old ones were (the
        // pause between readings is for a process loading libraries, not for an exec).
        if maybe_executed && process.executed_since(pid) {
            process.reread_after_exec(pid, &mut self.files);
            return;
        }
        if process
            .mappings()
            .iter()
            .any(|m| m.info.start <= ip && ip < m.info.end)
        {
            return;
        }
        process.reread_for_miss(pid, &mut self.files);
    }

    /// Forgets what is known of `pid` (it executed a new program: the next `observe` reads it
    /// again). The files it mapped stay open, and their names cached, for the resolver's life.
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
        self.perf_maps.remove(&pid);
    }

    /// The executable mappings known of `pid` (reading it first if it was never observed),
    /// sorted by address: files, `[vdso]`, `[anon]` and other pseudo mappings.
    pub fn mappings(&mut self, pid: u32) -> Vec<Arc<MappingInfo>> {
        self.process(pid)
            .mappings()
            .iter()
            .map(|m| Arc::clone(&m.info))
            .collect()
    }

    /// Unwinds one user stack: `stack` holds the bytes of the user stack from `regs.sp` upward.
    /// Appends the frames' lookup addresses to `out`, leaf first: the ip itself, then each
    /// return address minus 1 (so it falls inside the call instruction). Stops at the first
    /// frame it cannot unwind; limited to `max_frames`. Falls back to frame pointers where there
    /// is no unwind info. A pid never observed: reads it first (observe).
    ///
    /// A return address in none of the process's mappings ends the walk (it is not appended);
    /// the mappings are read again first, in case a library was loaded since: at most every
    /// 10 ms per process while that finds new mappings, backing off to once a second while it
    /// finds none.
    pub fn unwind_user(
        &mut self,
        pid: u32,
        regs: UserRegs,
        stack: &[u8],
        max_frames: usize,
        out: &mut Vec<u64>,
    ) {
        let first = out.len();
        self.process(pid);
        for attempt in 0..2 {
            let Some(process) = self.processes.get_mut(&pid) else {
                return;
            };
            let stop = unwind::unwind(
                process,
                &mut self.unwind_cache,
                regs,
                stack,
                max_frames,
                out,
            );
            if stop == Stop::End || attempt == 1 || !process.reread_for_miss(pid, &mut self.files) {
                break;
            }
            out.truncate(first);
        }
        // Code in anonymous memory: its perf map is read now, while the process lives.
        let jit = self.processes.get(&pid).is_some_and(|p| {
            out[first..]
                .iter()
                .any(|&a| p.find(a).is_some_and(|m| is_anonymous(&m.info.path)))
        });
        if jit {
            self.read_perf_map(pid);
        }
    }

    /// Opens process `pid`'s perf map (looking for it again at most every
    /// [`PERF_MAP_RETRY`]), or reads what was appended to it.
    fn read_perf_map(&mut self, pid: u32) {
        let entry = self
            .perf_maps
            .entry(pid)
            .or_insert_with(|| (None, Instant::now() - PERF_MAP_RETRY));
        match &mut entry.0 {
            Some(map) => map.refresh(),
            None if entry.1.elapsed() >= PERF_MAP_RETRY => {
                entry.0 = PerfMap::open(pid);
                entry.1 = Instant::now();
            }
            None => {}
        }
    }

    /// Symbolizes user addresses of `pid` (as [`unwind_user`](Self::unwind_user) returns
    /// them), one frame per address in order. Names are cached per (file, offset).
    ///
    /// An address in an anonymous mapping (JIT code), in a file that could not be read, or
    /// where the file has no symbol is named `[unknown]`; one in no mapping, even after reading
    /// the mappings again (as [`unwind_user`](Self::unwind_user) does), reports the mapping
    /// [`UNMAPPED_PATH`](Self::UNMAPPED_PATH).
    pub fn symbolize_user(&mut self, pid: u32, addrs: &[u64]) -> Vec<ResolvedFrame> {
        self.symbolize_users(&[(pid, addrs)])
            .pop()
            .unwrap_or_default()
    }

    /// [`symbolize_user`](Self::symbolize_user) for many stacks at once, `(pid, addresses)`
    /// each: the names not cached are looked up file by file for all of them together, so that
    /// each file is read (and, past the memory limit, dropped) at most once for the batch.
    pub fn symbolize_users(&mut self, stacks: &[(u32, &[u64])]) -> Vec<Vec<ResolvedFrame>> {
        let mut located = Vec::with_capacity(stacks.len());
        let mut missing = Vec::new();
        for &(pid, addrs) in stacks {
            if addrs.is_empty() {
                located.push(Vec::new());
                continue;
            }
            self.process(pid);
            let mut frames = Vec::with_capacity(addrs.len());
            let mut lacking = self.locate(pid, addrs, &mut frames);
            if frames
                .iter()
                .any(|(f, _)| Arc::ptr_eq(&f.mapping, &self.unmapped))
                && let Some(process) = self.processes.get_mut(&pid)
                && process.reread_for_miss(pid, &mut self.files)
            {
                frames.clear();
                lacking = self.locate(pid, addrs, &mut frames);
            }
            missing.append(&mut lacking);
            located.push(frames);
        }
        // The names not cached, looked up per file; kept here too, as the cache may drop them
        // between two files.
        missing.sort_unstable();
        missing.dedup();
        // Code in anonymous memory, named from the process's perf map.
        for (&(pid, _), frames) in stacks.iter().zip(located.iter_mut()) {
            for (frame, _) in frames.iter_mut() {
                if frame.function == UNKNOWN
                    && is_anonymous(&frame.mapping.path)
                    && let Some((Some(map), _)) = self.perf_maps.get_mut(&pid)
                {
                    let name = map.lookup(frame.addr).or_else(|| {
                        map.refresh();
                        map.lookup(frame.addr)
                    });
                    if let Some(name) = name {
                        frame.function = name.to_string();
                    }
                }
            }
        }
        let mut found: HashMap<(FileId, u64), Option<String>> = HashMap::default();
        for batch in missing.chunk_by(|a, b| a.0 == b.0) {
            let Some(&(file, _)) = batch.first() else {
                continue;
            };
            if let Some(mapped) = self.files.get(file) {
                let offsets = batch.iter().map(|&(_, offset)| offset).collect();
                let names = self.symbols.look_up_user(
                    file,
                    mapped.symbol_path(),
                    mapped.elf.symbols,
                    offsets,
                );
                found.extend(
                    names
                        .into_iter()
                        .map(|(offset, name)| ((file, offset), name)),
                );
            }
        }
        located
            .into_iter()
            .map(|frames| {
                frames
                    .into_iter()
                    .map(|(mut frame, file)| {
                        if let Some(file) = file
                            && let Some(Some(name)) = found.get(&(file, frame.rel_pc))
                        {
                            frame.function = name.clone();
                        }
                        frame
                    })
                    .collect()
            })
            .collect()
    }

    /// Symbolizes kernel addresses with `/proc/kallsyms`, one frame per address in order.
    /// Cached. The frames report the mapping [`KERNEL_PATH`](Self::KERNEL_PATH), and `rel_pc`
    /// is the address itself. The leaf frames of the tracing machinery that ran the program
    /// that took the stack (a tracepoint's dispatch, the BPF trampoline) are left out: the
    /// stack starts in the traced code, as `perf` shows it.
    pub fn symbolize_kernel(&mut self, addrs: &[u64]) -> Vec<ResolvedFrame> {
        let mut frames: Vec<ResolvedFrame> = self
            .symbols
            .kernel(addrs)
            .into_iter()
            .zip(addrs)
            .map(|(function, &addr)| ResolvedFrame {
                function,
                mapping: Arc::clone(&self.kernel),
                rel_pc: addr,
                addr,
            })
            .collect();
        let machinery = frames
            .iter()
            .take_while(|f| is_tracing_machinery(&f.function))
            .count();
        if machinery < frames.len() {
            frames.drain(..machinery);
        }
        frames
    }

    /// Process `pid`, read the first time.
    fn process(&mut self, pid: u32) -> &mut Process {
        self.processes
            .entry(pid)
            .or_insert_with(|| Process::read(pid, &mut self.files))
    }

    /// The frame of each address of `pid`, named if its name is cached, into `frames` (with the
    /// file to look the name up in when it is not); returns the (file, offset) of the names
    /// not cached.
    fn locate(
        &self,
        pid: u32,
        addrs: &[u64],
        frames: &mut Vec<(ResolvedFrame, Option<FileId>)>,
    ) -> Vec<(FileId, u64)> {
        let process = self.processes.get(&pid);
        let mut missing = Vec::new();
        for &addr in addrs {
            let (mapping, file) = match process.and_then(|p| p.find(addr)) {
                Some(m) => (Arc::clone(&m.info), m.file),
                None => (Arc::clone(&self.unmapped), None),
            };
            let rel_pc = addr
                .wrapping_sub(mapping.start)
                .wrapping_add(mapping.file_offset);
            let (function, pending) = match file.map(|f| (f, self.symbols.cached_user(f, rel_pc))) {
                Some((_, Some(Some(name)))) => (name.to_owned(), None),
                Some((f, None)) => {
                    missing.push((f, rel_pc));
                    (UNKNOWN.to_owned(), Some(f))
                }
                Some((_, Some(None))) | None => (UNKNOWN.to_owned(), None),
            };
            let frame = ResolvedFrame {
                function,
                mapping,
                rel_pc,
                addr,
            };
            frames.push((frame, pending));
        }
        missing
    }
}

/// How often a process with code in anonymous memory but no perf map is looked at again.
const PERF_MAP_RETRY: Duration = Duration::from_millis(100);

/// Whether a mapping path is anonymous memory's (`[anon]`, or `[anon:NAME]` named by the
/// process).
fn is_anonymous(path: &str) -> bool {
    path == "[anon]" || path.starts_with("[anon:")
}

/// Whether kernel function `name` belongs to the machinery that runs a tracing program
/// (tracepoint dispatch, perf's tracepoint glue, the BPF run-time) rather than to the code
/// traced.
fn is_tracing_machinery(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "__traceiter_",
        "__bpf_trace_",
        "bpf_trace_run",
        "__probestub_",
        "perf_trace_",
        "trace_call_bpf",
        "bpf_prog_",
        "__bpf_prog_run",
        "trace_event_raw_event_",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod machinery_tests {
    use super::is_tracing_machinery;

    #[test]
    fn tracepoint_and_bpf_frames_are_machinery_and_the_scheduler_is_not() {
        for name in [
            "__traceiter_sched_switch",
            "__bpf_trace_sched_switch",
            "bpf_trace_run4",
            "perf_trace_sched_switch",
            "bpf_prog_6deef7357e7b4530_sched_switch_btf",
        ] {
            assert!(is_tracing_machinery(name), "{name}");
        }
        for name in ["__schedule", "schedule", "do_nanosleep", "[unknown]"] {
            assert!(!is_tracing_machinery(name), "{name}");
        }
    }
}
