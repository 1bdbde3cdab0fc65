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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::{Endianness, Object, ObjectSection};
use trace_common::category::glob_matches;
use trace_common::kernel::{
    USDT_ARG_ABSENT, USDT_ARG_CONST, USDT_ARG_DEREF, USDT_ARG_REG, USDT_FORMAT_POINTER,
    USDT_FORMAT_STRING, USDT_MAX_ARGS, USDT_MAX_STRS, USDT_STR_LEN, UsdtArg, UsdtSpec,
};

use crate::procfs;

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

/// Register files the eBPF program reads arguments from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// x86-64 `struct pt_regs`.
    X86_64,
    /// arm64 `struct pt_regs` (`regs[31]`, `sp`).
    Aarch64,
}

impl Arch {
    /// The architecture this program runs on, if USDT arguments can be read
    /// on it.
    pub const fn host() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::Aarch64)
        } else {
            None
        }
    }

    /// Bytes of the register file the program copies.
    const fn regs_size(self) -> u32 {
        match self {
            Arch::X86_64 => 168,
            Arch::Aarch64 => 256,
        }
    }

    /// Offset of register `name` in the register file.
    fn register(self, name: &str) -> Option<u32> {
        match self {
            Arch::X86_64 => x86_register(name),
            Arch::Aarch64 => {
                if name == "sp" {
                    return Some(31 * 8);
                }
                let n: u32 = name
                    .strip_prefix('x')
                    .or_else(|| name.strip_prefix('w'))?
                    .parse()
                    .ok()?;
                (n <= 30).then_some(n * 8)
            }
        }
    }
}

/// Offset in x86-64 `struct pt_regs` of register `name` (without `%`), any
/// width (`rax`, `eax`, `ax`, `al`; `r8`, `r8d`, `r8w`, `r8b`). The high
/// byte registers (`ah`, ...) are not supported.
fn x86_register(name: &str) -> Option<u32> {
    const REGS: [(&str, [&str; 4], u32); 8] = [
        ("ax", ["rax", "eax", "ax", "al"], 80),
        ("bx", ["rbx", "ebx", "bx", "bl"], 40),
        ("cx", ["rcx", "ecx", "cx", "cl"], 88),
        ("dx", ["rdx", "edx", "dx", "dl"], 96),
        ("si", ["rsi", "esi", "si", "sil"], 104),
        ("di", ["rdi", "edi", "di", "dil"], 112),
        ("bp", ["rbp", "ebp", "bp", "bpl"], 32),
        ("sp", ["rsp", "esp", "sp", "spl"], 152),
    ];
    if let Some((_, _, off)) = REGS.iter().find(|(_, names, _)| names.contains(&name)) {
        return Some(*off);
    }
    if name == "rip" {
        return Some(128);
    }
    let rest = name.strip_prefix('r')?;
    let digits = rest.trim_end_matches(['d', 'w', 'b']);
    if rest.len() - digits.len() > 1 {
        return None;
    }
    // r8..r15 in pt_regs order: r15 r14 r13 r12 bp bx r11 r10 r9 r8.
    match digits.parse::<u32>().ok()? {
        n @ 12..=15 => Some((15 - n) * 8),
        n @ 8..=11 => Some(48 + (11 - n) * 8),
        _ => None,
    }
}

/// Parses a note's argument string for `arch`. Returns the spec for the
/// eBPF program and one message per argument it could not place (that
/// argument is then recorded as unreadable).
pub fn parse_args(text: &str, arch: Arch) -> (UsdtSpec, Vec<String>) {
    let mut spec = UsdtSpec::default();
    let mut problems = Vec::new();
    let mut uses_regs = false;
    for (i, token) in split_args(text).into_iter().enumerate() {
        if i >= USDT_MAX_ARGS {
            problems.push(format!(
                "more than {USDT_MAX_ARGS} arguments; the rest are left out"
            ));
            break;
        }
        spec.nargs = i as u32 + 1;
        match parse_arg(token, arch) {
            Ok(arg) => {
                uses_regs |= arg.kind == USDT_ARG_REG || arg.kind == USDT_ARG_DEREF;
                spec.args[i] = arg;
            }
            Err(why) => {
                let size = token
                    .split_once('@')
                    .and_then(|(s, _)| s.parse::<i8>().ok())
                    .unwrap_or(8);
                spec.args[i] = UsdtArg {
                    kind: USDT_ARG_ABSENT,
                    size: size.unsigned_abs().clamp(1, 8),
                    signed: u8::from(size < 0),
                    ..UsdtArg::default()
                };
                problems.push(format!("argument {i} `{token}`: {why}"));
            }
        }
    }
    if uses_regs {
        spec.regs_size = arch.regs_size();
    }
    (spec, problems)
}

/// Splits an argument string at white space outside brackets (arm64 memory
/// operands read `8@[sp, 16]`).
fn split_args(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, None);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            c if c.is_whitespace() && depth == 0 => {
                if let Some(s) = start.take() {
                    out.push(&text[s..i]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out
}

/// Parses one `SIZE@OPERAND` argument.
fn parse_arg(token: &str, arch: Arch) -> Result<UsdtArg, String> {
    let (size, operand) = token
        .split_once('@')
        .ok_or_else(|| "no `SIZE@` before the operand".to_owned())?;
    let size: i8 = size.parse().map_err(|_| format!("bad size `{size}`"))?;
    if ![1, 2, 4, 8].contains(&size.unsigned_abs()) {
        return Err(format!("size {size} is not 1, 2, 4 or 8 bytes"));
    }
    let mut arg = UsdtArg {
        size: size.unsigned_abs(),
        signed: u8::from(size < 0),
        ..UsdtArg::default()
    };
    let register = |name: &str| {
        arch.register(name)
            .ok_or_else(|| format!("unknown register `{name}`"))
    };
    match arch {
        Arch::X86_64 => {
            if let Some(imm) = operand.strip_prefix('$') {
                arg.kind = USDT_ARG_CONST;
                arg.value = parse_int(imm).ok_or_else(|| format!("bad constant `{imm}`"))?;
            } else if let Some(reg) = operand.strip_prefix('%') {
                arg.kind = USDT_ARG_REG;
                arg.reg_offset = register(reg)?;
            } else if let Some((disp, rest)) = operand.split_once('(') {
                let inner = rest
                    .strip_suffix(')')
                    .ok_or_else(|| "unbalanced parentheses".to_owned())?;
                if inner.contains(',') {
                    return Err("indexed memory operands are not supported".to_owned());
                }
                let reg = inner
                    .strip_prefix('%')
                    .ok_or_else(|| "no register in the memory operand".to_owned())?;
                if reg == "rip" {
                    return Err("%rip-relative operands are not supported".to_owned());
                }
                arg.kind = USDT_ARG_DEREF;
                arg.reg_offset = register(reg)?;
                arg.value = if disp.is_empty() {
                    0
                } else {
                    parse_int(disp).ok_or_else(|| format!("bad displacement `{disp}`"))?
                };
            } else {
                return Err("not a constant, register or memory operand".to_owned());
            }
        }
        Arch::Aarch64 => {
            if let Some(inner) = operand.strip_prefix('[') {
                let inner = inner
                    .strip_suffix(']')
                    .ok_or_else(|| "unbalanced brackets".to_owned())?;
                let (reg, disp) = match inner.split_once(',') {
                    Some((r, d)) => (r.trim(), d.trim().trim_start_matches('#')),
                    None => (inner.trim(), "0"),
                };
                arg.kind = USDT_ARG_DEREF;
                arg.reg_offset = register(reg)?;
                arg.value = parse_int(disp).ok_or_else(|| format!("bad displacement `{disp}`"))?;
            } else if let Some(v) = parse_int(operand.trim_start_matches('#')) {
                arg.kind = USDT_ARG_CONST;
                arg.value = v;
            } else {
                arg.kind = USDT_ARG_REG;
                arg.reg_offset = register(operand)?;
            }
        }
    }
    Ok(arg)
}

/// A decimal or `0x` hexadecimal integer, optionally negative.
fn parse_int(text: &str) -> Option<i64> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => digits.parse::<u64>().ok()? as i64,
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// One note of `.note.stapsdt`, with addresses already turned into file
/// offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteProbe {
    /// Provider name.
    pub provider: String,
    /// Probe name.
    pub name: String,
    /// File offset of the probe's instruction.
    pub offset: u64,
    /// File offset of the semaphore, 0 when none.
    pub semaphore: u64,
    /// The argument string.
    pub args: String,
}

/// The USDT probe sites of the ELF file `data` (none when it has no
/// `.note.stapsdt` section).
pub fn read_notes(data: &[u8]) -> Result<Vec<NoteProbe>, String> {
    let elf = ElfFile64::<Endianness>::parse(data).map_err(|e| e.to_string())?;
    let endian = elf.endian();
    let header = elf.elf_header();
    let sections = header.sections(endian, data).map_err(|e| e.to_string())?;
    // Where `_.stapsdt.base` really is; a prelinked file moved it, and every
    // note address moved with it.
    let base = elf.section_by_name(".stapsdt.base").map(|s| s.address());
    let segments = header
        .program_headers(endian, data)
        .map_err(|e| e.to_string())?;
    let file_offset = |addr: u64| {
        segments.iter().find_map(|p| {
            let start = p.p_vaddr(endian);
            let filesz = p.p_filesz(endian);
            let within = addr.checked_sub(start).filter(|&d| d < filesz)?;
            (p.p_type(endian) == object::elf::PT_LOAD)
                .then(|| within.checked_add(p.p_offset(endian)))
                .flatten()
        })
    };
    let mut probes = Vec::new();
    for section in sections.iter() {
        let name = sections.section_name(endian, section).unwrap_or_default();
        if name != b".note.stapsdt" {
            continue;
        }
        let Some(mut notes) = section.notes(endian, data).map_err(|e| e.to_string())? else {
            continue;
        };
        while let Some(note) = notes.next().map_err(|e| e.to_string())? {
            if note.name() != b"stapsdt" || note.n_type(endian) != 3 {
                continue;
            }
            let desc = note.desc();
            if desc.len() < 24 {
                return Err("a .note.stapsdt note is too short".to_owned());
            }
            let word = |i: usize| {
                let b: [u8; 8] = desc[i * 8..i * 8 + 8].try_into().unwrap_or_default();
                match endian {
                    Endianness::Little => u64::from_le_bytes(b),
                    Endianness::Big => u64::from_be_bytes(b),
                }
            };
            let (mut pc, note_base, mut sema) = (word(0), word(1), word(2));
            if let Some(base) = base
                && note_base != 0
            {
                pc = pc.wrapping_add(base).wrapping_sub(note_base);
                if sema != 0 {
                    sema = sema.wrapping_add(base).wrapping_sub(note_base);
                }
            }
            let mut strings = desc[24..].split(|&b| b == 0);
            let mut next = || {
                strings
                    .next()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .unwrap_or_default()
            };
            let (provider, probe, args) = (next(), next(), next());
            let offset = file_offset(pc).ok_or_else(|| {
                format!("probe {provider}:{probe} lies outside every loaded segment")
            })?;
            let semaphore = if sema == 0 {
                0
            } else {
                file_offset(sema).ok_or_else(|| {
                    format!("the semaphore of {provider}:{probe} lies outside the file")
                })?
            };
            probes.push(NoteProbe {
                provider,
                name: probe,
                offset,
                semaphore,
                args,
            });
        }
    }
    Ok(probes)
}

/// Resolves `spec` into its probe sites; `pid` is the process given with
/// `-p`, if any. Messages about arguments that cannot be read go to the log.
pub fn resolve(spec: &str, pid: Option<u32>) -> Result<Vec<UsdtSite>, UsdtError> {
    let syntax = |why: &str| UsdtError::Syntax {
        spec: spec.to_owned(),
        why: why.to_owned(),
    };
    let arch = Arch::host().ok_or_else(|| syntax("USDT arguments cannot be read on this CPU"))?;
    let (probe, types) = split_types(spec).map_err(|why| syntax(&why))?;
    let parts: Vec<&str> = probe.rsplitn(3, ':').collect();
    let (binary, provider, name) = match parts[..] {
        [name, provider, binary] => (Some(binary), provider, name),
        [name, provider] => (None, provider, name),
        _ => {
            return Err(syntax(
                "write BINARY:PROVIDER:NAME, or PROVIDER:NAME with -p",
            ));
        }
    };
    if provider.is_empty() || name.is_empty() {
        return Err(syntax("the provider and the probe name must not be empty"));
    }
    let candidates: Vec<PathBuf> = match binary {
        Some(b) => {
            vec![
                crate::kernel::uprobes::find_binary(b, pid).map_err(|source| {
                    UsdtError::Binary {
                        spec: spec.to_owned(),
                        path: PathBuf::from(b),
                        source,
                    }
                })?,
            ]
        }
        None => {
            let pid = pid.ok_or_else(|| {
                syntax("PROVIDER:NAME needs -p PID (or write BINARY:PROVIDER:NAME)")
            })?;
            mapped_files(pid).map_err(|source| UsdtError::Binary {
                spec: spec.to_owned(),
                path: procfs::maps_file(pid),
                source,
            })?
        }
    };
    let mut sites = Vec::new();
    let mut known = BTreeSet::new();
    for path in &candidates {
        let (file, data) = match crate::kernel::uprobes::read_program(path) {
            Ok(d) => d,
            Err(source) if binary.is_some() => {
                return Err(UsdtError::Binary {
                    spec: spec.to_owned(),
                    path: path.clone(),
                    source,
                });
            }
            Err(_) => continue,
        };
        let notes = match read_notes(&data) {
            Ok(n) => n,
            Err(why) if binary.is_some() => {
                return Err(UsdtError::NotElf {
                    spec: spec.to_owned(),
                    path: path.clone(),
                    why,
                });
            }
            Err(_) => continue,
        };
        for note in notes {
            known.insert(format!("{}:{}", note.provider, note.name));
            if !glob_matches(provider, &note.provider) || !glob_matches(name, &note.name) {
                continue;
            }
            let (mut spec_value, problems) = parse_args(&note.args, arch);
            apply_types(&mut spec_value, &types).map_err(|why| {
                syntax(&format!(
                    "{why} for {}:{} (its arguments: `{}`)",
                    note.provider, note.name, note.args
                ))
            })?;
            for p in problems {
                log::warn!(
                    "--usdt {spec}: {}:{} at {:#x} in {}: {p}; recorded as unreadable",
                    note.provider,
                    note.name,
                    note.offset,
                    path.display()
                );
            }
            sites.push(UsdtSite {
                spec: spec.to_owned(),
                binary: path.clone(),
                file: file.clone(),
                provider: note.provider,
                name: note.name,
                offset: note.offset,
                semaphore: note.semaphore,
                arg_text: note.args,
                spec_value,
                pids: Vec::new(),
            });
        }
    }
    if sites.is_empty() {
        let where_ = match binary {
            Some(_) => candidates[0].display().to_string(),
            None => format!(
                "the program of process {} or its libraries",
                pid.unwrap_or(0)
            ),
        };
        let known = if known.is_empty() {
            " (it has no USDT probes: no .note.stapsdt notes)".to_owned()
        } else {
            let list: Vec<String> = known.into_iter().collect();
            let shown = list.len().min(20);
            format!(
                " (it has {}{})",
                list[..shown].join(", "),
                if list.len() > shown { ", ..." } else { "" }
            )
        };
        return Err(UsdtError::NoProbe {
            spec: spec.to_owned(),
            provider: provider.to_owned(),
            name: name.to_owned(),
            where_,
            known,
        });
    }
    Ok(sites)
}

/// An argument type of the optional list after the probe name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArgType {
    /// As the note declares it.
    Declared,
    /// A signed number.
    Int,
    /// An unsigned number.
    Uint,
    /// A pointer.
    Pointer,
    /// A pointer to a NUL-terminated string, recorded as the string.
    Str,
}

/// Splits `PROBE(TYPE,...)` into the probe and its argument types (none
/// when there is no list).
fn split_types(spec: &str) -> Result<(&str, Vec<ArgType>), String> {
    // After the last `:`: the binary's path may hold parentheses.
    let name_at = spec.rfind(':').map_or(0, |i| i + 1);
    let Some(open) = spec[name_at..].find('(').map(|i| name_at + i) else {
        return Ok((spec, Vec::new()));
    };
    let list = spec[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| "the argument types must end with `)`".to_owned())?;
    let types = list
        .split(',')
        .map(|t| match t.trim() {
            "_" | "" => Ok(ArgType::Declared),
            "int" => Ok(ArgType::Int),
            "uint" => Ok(ArgType::Uint),
            "ptr" => Ok(ArgType::Pointer),
            "str" => Ok(ArgType::Str),
            other => Err(format!(
                "unknown argument type `{other}` (known: str, ptr, int, uint, _)"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if types.iter().filter(|t| **t == ArgType::Str).count() > USDT_MAX_STRS {
        return Err(format!("at most {USDT_MAX_STRS} `str` arguments per probe"));
    }
    Ok((&spec[..open], types))
}

/// Applies the argument types to a site's spec.
fn apply_types(spec: &mut UsdtSpec, types: &[ArgType]) -> Result<(), String> {
    if types.len() > spec.nargs as usize {
        return Err(format!(
            "{} argument types given, but the probe has {} arguments",
            types.len(),
            spec.nargs
        ));
    }
    let mut slots = 0;
    for (i, (arg, ty)) in spec.args.iter_mut().zip(types).enumerate() {
        match ty {
            ArgType::Declared => {}
            ArgType::Int => arg.signed = 1,
            ArgType::Uint => arg.signed = 0,
            ArgType::Pointer | ArgType::Str => {
                if arg.size != 8 && arg.size != 4 {
                    return Err(format!("a {}-byte argument cannot be a pointer", arg.size));
                }
                // A pointer is never sign-extended.
                arg.signed = 0;
                arg.format = if *ty == ArgType::Str {
                    spec.strings[slots] = i as u8;
                    slots += 1;
                    USDT_FORMAT_STRING
                } else {
                    USDT_FORMAT_POINTER
                };
            }
        }
    }
    Ok(())
}

/// The text of a string slot: up to the NUL, invalid UTF-8 replaced.
pub fn slot_text(slot: &[u8; USDT_STR_LEN]) -> String {
    let end = slot.iter().position(|&b| b == 0).unwrap_or(slot.len());
    String::from_utf8_lossy(&slot[..end]).into_owned()
}

/// Resolves `spec` in each process of `pids` (in every process when
/// empty): a site found in several (the same file and offset) is placed in
/// each of them, and a process whose programs lack it is passed over, as
/// long as one has it.
pub fn resolve_in(spec: &str, pids: &[u32]) -> Result<Vec<UsdtSite>, UsdtError> {
    if pids.is_empty() {
        return resolve(spec, None);
    }
    crate::kernel::uprobes::per_process(
        pids,
        |pid| resolve(spec, Some(pid)),
        |s| (s.file.id(), s.offset),
        |s| &mut s.pids,
    )
}

/// The program of `pid` and every other file it maps, through its root.
fn mapped_files(pid: u32) -> std::io::Result<Vec<PathBuf>> {
    let exe = procfs::exe(pid)?;
    let maps = procfs::maps(pid)?;
    let mut files = vec![exe.clone()];
    for path in maps
        .lines()
        .filter_map(crate::kernel::uprobes::maps_path)
        .filter(|p| p.starts_with('/'))
        .map(Path::new)
    {
        if path != exe && !files.iter().any(|f| f == path) {
            files.push(path.to_path_buf());
        }
    }
    Ok(files
        .into_iter()
        .map(|p| procfs::via_root(pid, &p))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(token: &str, arch: Arch) -> UsdtArg {
        let (spec, problems) = parse_args(token, arch);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(spec.nargs, 1);
        spec.args[0]
    }

    #[test]
    fn x86_operands() {
        let a = one("-4@%edi", Arch::X86_64);
        assert_eq!(
            (a.kind, a.size, a.signed, a.reg_offset),
            (USDT_ARG_REG, 4, 1, 112)
        );
        let a = one("8@%r12", Arch::X86_64);
        assert_eq!(
            (a.kind, a.size, a.signed, a.reg_offset),
            (USDT_ARG_REG, 8, 0, 24)
        );
        let a = one("2@%r9w", Arch::X86_64);
        assert_eq!(a.reg_offset, 64);
        let a = one("-8@-24(%rbp)", Arch::X86_64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 32, -24));
        let a = one("4@(%rsp)", Arch::X86_64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 152, 0));
        let a = one("1@0x10(%rax)", Arch::X86_64);
        assert_eq!((a.kind, a.size, a.value), (USDT_ARG_DEREF, 1, 16));
        let a = one("-4@$-5", Arch::X86_64);
        assert_eq!((a.kind, a.value, a.signed), (USDT_ARG_CONST, -5, 1));
    }

    #[test]
    fn aarch64_operands() {
        let a = one("-4@x0", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset), (USDT_ARG_REG, 0));
        let a = one("8@[sp, 16]", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 248, 16));
        let a = one("-4@[x29, -12]", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 232, -12));
        let a = one("8@[x1]", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 8, 0));
        let a = one("4@5", Arch::Aarch64);
        assert_eq!((a.kind, a.value), (USDT_ARG_CONST, 5));
    }

    #[test]
    fn argument_types_follow_the_name() {
        let (probe, types) = split_types("python:function__entry(str, str,int)").unwrap();
        assert_eq!(probe, "python:function__entry");
        assert_eq!(types, [ArgType::Str, ArgType::Str, ArgType::Int]);
        assert_eq!(split_types("a:b").unwrap(), ("a:b", vec![]));
        assert_eq!(
            split_types("/opt/x (1)/app:p:n").unwrap(),
            ("/opt/x (1)/app:p:n", vec![])
        );
        assert_eq!(
            split_types("/opt/x (1)/app:p:n(str)").unwrap(),
            ("/opt/x (1)/app:p:n", vec![ArgType::Str])
        );
        assert!(split_types("a:b(str").is_err());
        assert!(
            split_types("a:b(float)")
                .unwrap_err()
                .contains("unknown argument type")
        );
        assert!(
            split_types("a:b(str,str,str)")
                .unwrap_err()
                .contains("at most")
        );

        let (mut spec, _) = parse_args("8@%rdi -8@%rsi -4@%edx 2@%cx", Arch::X86_64);
        apply_types(
            &mut spec,
            &[
                ArgType::Str,
                ArgType::Pointer,
                ArgType::Uint,
                ArgType::Declared,
            ],
        )
        .unwrap();
        assert_eq!(spec.args[0].format, USDT_FORMAT_STRING);
        assert_eq!(spec.strings, [0, trace_common::kernel::USDT_NO_STRING]);
        assert_eq!(
            (spec.args[1].format, spec.args[1].signed),
            (USDT_FORMAT_POINTER, 0)
        );
        assert_eq!(spec.args[2].signed, 0);
        assert_eq!(spec.args[3].format, 0);
        assert!(apply_types(&mut spec, &[ArgType::Declared; 5]).is_err());
        let two_byte_pointer = [
            ArgType::Declared,
            ArgType::Declared,
            ArgType::Declared,
            ArgType::Str,
        ];
        assert!(apply_types(&mut spec, &two_byte_pointer).is_err());
        let mut slot = [0u8; USDT_STR_LEN];
        slot[..5].copy_from_slice(b"hello");
        assert_eq!(slot_text(&slot), "hello");
    }

    #[test]
    fn arguments_split_outside_brackets() {
        assert_eq!(
            split_args(" -4@x0  8@[sp, 16] 8@[x1]\t-4@5 "),
            ["-4@x0", "8@[sp, 16]", "8@[x1]", "-4@5"]
        );
        let (spec, problems) = parse_args("-4@x0 8@[sp, 16] 8@[x1]", Arch::Aarch64);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(spec.nargs, 3);
        assert_eq!(spec.regs_size, 256);
    }

    #[test]
    fn unreadable_operands_are_kept_in_place() {
        let (spec, problems) =
            parse_args("8@%rdi -4@8(%rax,%rbx,4) 8@foo(%rip) 4@%ah", Arch::X86_64);
        assert_eq!(spec.nargs, 4);
        assert_eq!(spec.args[0].kind, USDT_ARG_REG);
        assert_eq!(spec.args[1].kind, USDT_ARG_ABSENT);
        assert_eq!((spec.args[1].size, spec.args[1].signed), (4, 1));
        assert_eq!(spec.args[2].kind, USDT_ARG_ABSENT);
        assert_eq!(spec.args[3].kind, USDT_ARG_ABSENT);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert_eq!(spec.regs_size, 168);
    }

    #[test]
    fn constants_alone_need_no_registers() {
        let (spec, _) = parse_args("-4@$1 8@$0x20", Arch::X86_64);
        assert_eq!(spec.regs_size, 0);
        assert_eq!(spec.args[1].value, 32);
        let (spec, _) = parse_args("", Arch::X86_64);
        assert_eq!(spec.nargs, 0);
    }

    #[test]
    fn every_x86_register_has_its_pt_regs_slot() {
        let table = [
            ("r15", 0),
            ("r14d", 8),
            ("r13", 16),
            ("r12b", 24),
            ("rbp", 32),
            ("ebx", 40),
            ("r11", 48),
            ("r10", 56),
            ("r9", 64),
            ("r8d", 72),
            ("rax", 80),
            ("cl", 88),
            ("dx", 96),
            ("sil", 104),
            ("rdi", 112),
            ("rsp", 152),
        ];
        for (name, off) in table {
            assert_eq!(x86_register(name), Some(off), "{name}");
        }
        assert_eq!(x86_register("r16"), None);
        assert_eq!(x86_register("ah"), None);
        assert_eq!(x86_register("r8dd"), None);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = resolve("app:tick", None).unwrap_err();
        assert!(e.to_string().contains("needs -p"), "{e}");
        let e = resolve("tick", None).unwrap_err();
        assert!(e.to_string().contains("BINARY:PROVIDER:NAME"), "{e}");
        let e = resolve("/no/such/binary:app:tick", None).unwrap_err();
        assert!(matches!(e, UsdtError::Binary { .. }), "{e}");
        let me = std::env::current_exe().unwrap();
        let e = resolve(&format!("{}:app:tick", me.display()), None).unwrap_err();
        assert!(e.to_string().contains("no .note.stapsdt"), "{e}");
    }
}
