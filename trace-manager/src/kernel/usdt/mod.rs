//! Static probes (`--usdt`): USDT probe sites from a program's
//! `.note.stapsdt` ELF notes, resolved before the recording starts so that a
//! mistake is one clear error, not an empty trace.
//!
//! A probe is written `BINARY:PROVIDER:NAME`, or `PROVIDER:NAME` with a
//! process to attach to (then its program and every library it has mapped
//! are searched). `BINARY` is found as for `--uprobe`: a path, a library the
//! process maps named by the start of its file name (`libpython3`), or a
//! program on `PATH`. `PROVIDER` and `NAME` may hold `*` wildcards, so
//! `app:*` is every probe of provider `app`. A list of types may follow the
//! name, one per argument: `python:function__entry(str,str,int)`. `str`
//! records the NUL-terminated string the argument points at (at most
//! [`USDT_MAX_STRS`] per probe, [`USDT_STR_LEN`] bytes with the NUL), `ptr`
//! a pointer, `int` / `uint` a signed / unsigned number, `_` the argument as
//! its note declares it (a number, signed or not).
//!
//! Each note names one site: the address of the `nop` the probe compiles to,
//! the address of its semaphore (a `u16` the program tests before computing
//! the probe's arguments; 0 if none) and an argument string in the
//! assembler's syntax, such as `-4@%edi 8@-24(%rbp) -4@$5`: size (negative
//! when signed) `@` operand. [`parse_args`] turns that into the
//! [`UsdtArg`]s the eBPF program reads: a constant, a register, or user
//! memory at a register plus a displacement. An operand it cannot place
//! (a scaled index, a `%rip`-relative symbol) is recorded as unreadable,
//! with a warning, rather than refusing the probe.
//!
//! By role: `notes` reads the notes of an ELF file, `args` parses their
//! argument strings, `types` applies the type list after a probe's name,
//! and `resolve` turns a `--usdt` text into sites.
//!
//! [`USDT_MAX_STRS`]: trace_common::kernel::USDT_MAX_STRS
//! [`USDT_STR_LEN`]: trace_common::kernel::USDT_STR_LEN
//! [`UsdtArg`]: trace_common::kernel::UsdtArg

mod args;
mod notes;
mod resolve;
mod types;

use std::path::PathBuf;

use trace_common::kernel::UsdtSpec;

pub use args::{Arch, parse_args};
pub use notes::{NoteProbe, read_notes};
pub use resolve::{resolve, resolve_in};
pub use types::slot_text;

/// One place a USDT probe fires: a `STAP_PROBE` / `DTRACE_PROBE` point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtSite {
    /// The `--usdt` text it was found for.
    pub spec: String,
    /// The ELF file holding it, as named.
    pub binary: PathBuf,
    /// That file, open: what the probe is attached to.
    pub file: crate::kernel::uprobes::ProgramFile,
    /// Provider name from the note.
    pub provider: String,
    /// Probe name from the note.
    pub name: String,
    /// File offset of the probe's instruction (where the uprobe goes).
    pub offset: u64,
    /// File offset of the probe's semaphore, 0 when it has none.
    pub semaphore: u64,
    /// The argument string as the note has it.
    pub arg_text: String,
    /// Where each argument is, for the eBPF program.
    pub spec_value: UsdtSpec,
    /// The processes to place it in; empty: every process that maps the
    /// file.
    pub pids: Vec<u32>,
}

impl UsdtSite {
    /// The name its events get: `PROVIDER:NAME`.
    pub fn event_name(&self) -> String {
        format!("{}:{}", self.provider, self.name)
    }
}

/// Why a USDT probe cannot be placed.
#[derive(Debug, thiserror::Error)]
pub enum UsdtError {
    /// The text is not a probe.
    #[error("--usdt {spec:?}: {why}")]
    Syntax {
        /// The probe as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// The binary cannot be found or read.
    #[error("--usdt {spec:?}: cannot read {path}: {source}")]
    Binary {
        /// The probe as given.
        spec: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The binary is not a 64-bit ELF file this can read.
    #[error("--usdt {spec:?}: {path} is not a readable 64-bit ELF file: {why}")]
    NotElf {
        /// The probe as given.
        spec: String,
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        why: String,
    },
    /// No probe of that provider and name.
    #[error("--usdt {spec:?}: no probe {provider}:{name} in {where_}{known}")]
    NoProbe {
        /// The probe as given.
        spec: String,
        /// Provider asked for.
        provider: String,
        /// Name asked for.
        name: String,
        /// What was searched.
        where_: String,
        /// The probes there are, or why there are none.
        known: String,
    },
}
