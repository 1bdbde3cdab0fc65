//! User and kernel stacks of samples, unwound and symbolized.
//!
//! The kernel provider samples a thread with an eBPF program that records its kernel stack (the
//! return addresses `bpf_get_stack` gives), its user registers (instruction, stack and frame
//! pointers) and a copy of its user stack from the stack pointer up (8 KiB, up to 16), as
//! `perf record --call-graph dwarf` does. [`StackResolver`] turns that into frames with names:
//!
//! 1. **Mappings** ([`StackResolver::observe`]): the first time a process is seen, its
//!    executable mappings are read from `/proc/PID/maps` and each mapped file is opened (through
//!    `/proc/PID/map_files/`, so deleted files too) and kept open, once per device and inode for
//!    all processes. What is kept of a process outlives it: samples resolve after it exited.
//! 2. **Unwinding** ([`StackResolver::unwind_user`]): [framehop] walks the copied stack with the
//!    `.eh_frame` unwind tables of each file (found through `.eh_frame_hdr`), falling back to
//!    frame pointers where there are none (JIT code). Debian's binaries and libraries are built
//!    without frame pointers, so the tables are what make their stacks whole.
//! 3. **Symbolization** ([`StackResolver::symbolize_user`], [`StackResolver::symbolize_kernel`]):
//!    [blazesym] names each address from the file's ELF symbol table, or, for a file stripped
//!    of it, from its debug information (a detached debug file found by build id or debug link,
//!    MiniDebugInfo's `.gnu_debugdata`) and dynamic symbols, demangling Rust and C++ names;
//!    kernel addresses from `/proc/kallsyms`. Names are cached per (file, offset) and per
//!    kernel address. A program's own DWARF is not read when it has a symbol table: the names
//!    are the same (inlined functions are not reported), and DWARF can be hundreds of MB.
//!
//! # Why framehop and blazesym
//!
//! Unwinders and symbol tables are easy to get almost right. framehop is the unwinder of the
//! samply profiler (DWARF CFI through gimli, with a rule cache that makes a frame seen before
//! cost a lookup); blazesym is the symbolizer of the libbpf project, made for exactly this:
//! addresses sampled by BPF programs, user and kernel. Both are maintained and used in
//! production profilers. `object` reads the few ELF sections framehop needs.
//!
//! # What it costs
//!
//! Measured with `cargo run --release -p trace-stacks --example costs` on the development VM (2
//! cores; timings there vary, so the ranges are of four runs): the example samples its own
//! stack under 30 distinct functions called from libc's `qsort`, copies 8 KiB from the stack
//! pointer, and times each step with `Instant` (warm figures averaged over 10,000 calls). The
//! 8 KiB hold the whole stack: 43 frames, down to `_start`.
//!
//! | step | cost |
//! |---|---|
//! | first `observe` of a process: maps read, files opened, unwind sections read | 0.9–1.0 ms (the example: 6 executable mappings), 1.4–1.8 ms (`python3`: 8) |
//! | `observe` of a known process | under 10 ns (a hash lookup) |
//! | `unwind_user`, 8 KiB, 43 frames, unwind rules cached | 0.7–2.9 µs (16–70 ns a frame) |
//! | `unwind_user`, the same, rule cache cold (first stack of a resolver) | 30–35 µs |
//! | `symbolize_user`, 43 frames, names cached | 2.3–7.8 µs (55–180 ns a frame) |
//! | `symbolize_user`, first names of a file (blazesym reads its symbols, DWARF, debug link) | 35–115 ms for the example (its own DWARF and libc's detached debug information); 40–110 ms for one address in each of `python3`'s 8 files (ELF symbols only) |
//! | `symbolize_kernel`, first address (kallsyms read) / cached | 65–105 ms / under 0.1 µs |
//!
//! So per sample, once warm, unwinding and naming a deep stack takes a few microseconds; the
//! first look at each file costs tens of milliseconds, once per recording.
//!
//! # Caveats
//!
//! - x86-64 only (the registers are x86-64's).
//! - A process that exits before its first sample is read has no mappings known: its stacks
//!   have the instruction pointer only, named `[unknown]`. Observe early.
//! - Code in anonymous memory (JIT compilers) is in a mapping `[anon]`, named from the
//!   process's perf map (`/tmp/perf-PID.map`, as Node's `--perf-basic-prof`, Java's perf map
//!   agents and Python's `-X perf` write it), read while the process lives, when a stack
//!   holds such code; `[unknown]` without one. jitdump files are not read.
//! - The vDSO is named from this process's copy, the same image for every 64-bit process.
//! - Inlined functions are not reported: a frame is named by the function its address is in.
//! - The first names of a file take tens of milliseconds (see above): a caller on an event loop
//!   may want to symbolize on a thread of its own, or after the recording. Unwinding must
//!   happen while samples arrive; it is cheap.
//! - Names come from whatever the file (or its detached debug file, found by build id under
//!   `/usr/lib/debug`) has: a stripped Debian binary without its `-dbgsym` package names only
//!   its exported functions, and an address in a static function is `[unknown]`.
//! - Memory is bounded ([`StackResolver::with_memory_limit`], 64 MiB by default): what was read
//!   of the files least recently named is dropped (not of those named within the last 10 s),
//!   the names cached are dropped, and [`StackResolver::trim`] lets go of the files of exited
//!   processes, each when past its share. The unwind tables of the files of processes still
//!   running are kept whatever they take; one open descriptor per distinct file they map.
//!
//! [framehop]: https://docs.rs/framehop
//! [blazesym]: https://docs.rs/blazesym

#![deny(missing_docs)]

mod elf;
mod error;
mod files;
mod maps;
mod perfmap;
mod process;
pub mod python;
mod resolver;
mod symbolize;
mod unwind;

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;

use std::sync::Arc;

pub use resolver::StackResolver;

/// User registers at the sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserRegs {
    /// Instruction pointer (`rip`).
    pub ip: u64,
    /// Stack pointer (`rsp`): the address of the first byte of the copied stack.
    pub sp: u64,
    /// Frame pointer (`rbp`).
    pub bp: u64,
}

/// Where a frame's code lives: one executable line of `/proc/PID/maps` that maps a file, or a
/// pseudo mapping (`[vdso]`, `[anon]`, [`StackResolver::KERNEL_PATH`],
/// [`StackResolver::UNMAPPED_PATH`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MappingInfo {
    /// The mapped file's path as the process maps it (ending in ` (deleted)` if it was deleted
    /// since), or the pseudo mapping's name.
    pub path: String,
    /// The file's GNU build id, if it has one.
    pub build_id: Option<Vec<u8>>,
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub file_offset: u64,
}

/// One symbolized frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedFrame {
    /// Demangled function name; `[unknown]` when none is found (never empty).
    pub function: String,
    /// The mapping the address is in.
    pub mapping: Arc<MappingInfo>,
    /// Address relative to the mapping's file (file offset of the address).
    pub rel_pc: u64,
    /// The address looked up.
    pub addr: u64,
}
