//! The eBPF object fitted to the running kernel before it is loaded: calls
//! of a helper the kernel lacks taken out ([`remove_helper_calls`]), and
//! field offsets written in: the BTF tracepoint programs read task and register fields
//! with direct loads at *marker* offsets (`trace_common::kernel::MARK_*`),
//! and each load's offset is replaced here by the field's real offset, found
//! in the kernel's BTF. (C programs get this from CO-RE relocations, which
//! Rust cannot emit.) The verifier checks every such load against the
//! kernel's BTF, so a wrong offset fails loudly at load time.

use object::{Object, ObjectSection, SectionFlags};

/// `BPF_LDX | BPF_MEM`, any size: a load from memory.
const LDX_MEM: u8 = 0x61;
/// `BPF_LDX | BPF_MEMSX`, any size: a sign-extending load.
const LDX_MEMSX: u8 = 0x81;
/// The bits of an opcode that say class and mode (not size).
const CLASS_MODE: u8 = 0x07 | 0xe0;

/// Why the object could not be patched.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The object is not an ELF file.
    #[error("the eBPF object is not readable: {0}")]
    Object(String),
    /// A real offset does not fit an instruction.
    #[error("field offset {0} does not fit a BPF load")]
    TooFar(u32),
    /// A marker was wanted but no program uses it (a build mix-up).
    #[error("no load at marker offset {0:#x} in the eBPF object")]
    Unused(i16),
}

/// Replaces, in every executable section of the ELF object `elf`, the
/// offset of each load whose offset is a marker in `map` (marker → real
/// offset). Returns how many loads each marker had (in `map`'s order); a
/// marker no load uses is an error.
pub fn patch_offsets(elf: &mut [u8], map: &[(i16, u32)]) -> Result<Vec<usize>, PatchError> {
    let mut real = Vec::with_capacity(map.len());
    for &(_, to) in map {
        real.push(i16::try_from(to).map_err(|_| PatchError::TooFar(to))?);
    }
    let mut counts = vec![0usize; map.len()];
    each_section(elf, |_, code| patch_code(code, map, &real, &mut counts))?;
    if let Some(i) = counts.iter().position(|&n| n == 0) {
        return Err(PatchError::Unused(map[i].0));
    }
    Ok(counts)
}

/// [`patch_offsets`] on one section's instructions.
fn patch_code(code: &mut [u8], map: &[(i16, u32)], real: &[i16], counts: &mut [usize]) {
    for at in instructions(code) {
        let opcode = code[at];
        if matches!(opcode & CLASS_MODE, LDX_MEM | LDX_MEMSX) {
            let off = i16::from_le_bytes([code[at + 2], code[at + 3]]);
            if let Some(i) = map.iter().position(|&(m, _)| m == off) {
                code[at + 2..at + 4].copy_from_slice(&real[i].to_le_bytes());
                counts[i] += 1;
            }
        }
    }
}

/// The offsets of the instructions in `code`: every 8 bytes, but the
/// second slot of a `BPF_LD | BPF_IMM | BPF_DW` (16 bytes), which is data.
fn instructions(code: &[u8]) -> Vec<usize> {
    let mut out = Vec::with_capacity(code.len() / 8);
    let mut at = 0;
    while at + 8 <= code.len() {
        out.push(at);
        at += if code[at] == 0x18 { 16 } else { 8 };
    }
    out
}

/// Calls `f` with each executable section of `elf`: its file offset and
/// its bytes.
fn each_section(elf: &mut [u8], mut f: impl FnMut(usize, &mut [u8])) -> Result<(), PatchError> {
    for (start, len) in executable_sections(elf)? {
        let code = elf
            .get_mut(start..start + len)
            .ok_or_else(|| PatchError::Object("a section lies outside the file".into()))?;
        f(start, code);
    }
    Ok(())
}

/// `bpf_loop`'s helper number (Linux 5.17 on).
pub const BPF_FUNC_LOOP: i32 = 181;

/// `BPF_JMP | BPF_CALL`: a call (of a helper when the source register is 0).
const CALL: u8 = 0x85;
/// `BPF_ALU64 | BPF_MOV | BPF_K`: a register set to a constant.
const MOV64_IMM: u8 = 0xb7;

/// Replaces, in every executable section of the ELF object `elf`, each call
/// of helper `helper` by `r0 = 0` (the helper's "nothing done"), for a
/// kernel that lacks it, except in the functions named in `keep` (programs
/// that cannot do without it, left to be refused whole). Returns how many
/// calls were replaced.
pub fn remove_helper_calls(
    elf: &mut [u8],
    helper: i32,
    keep: &[&str],
) -> Result<usize, PatchError> {
    // The kept functions' places: (section's file offset, start, end).
    let kept: Vec<(usize, usize, usize)> = {
        use object::ObjectSymbol;
        let file = object::File::parse(&*elf).map_err(|e| PatchError::Object(e.to_string()))?;
        file.symbols()
            .filter(|sym| sym.name().is_ok_and(|n| keep.contains(&n)))
            .filter_map(|sym| {
                let section = file.section_by_index(sym.section_index()?).ok()?;
                let (start, _) = section.file_range()?;
                Some((
                    start as usize,
                    sym.address() as usize,
                    (sym.address() + sym.size()) as usize,
                ))
            })
            .collect()
    };
    let mut n = 0;
    each_section(elf, |start, code| {
        let skip: Vec<(usize, usize)> = kept
            .iter()
            .filter(|k| k.0 == start)
            .map(|k| (k.1, k.2))
            .collect();
        n += remove_calls(code, helper, &skip);
    })?;
    Ok(n)
}

/// [`remove_helper_calls`] on one section's instructions, those in the
/// byte ranges `skip` left alone.
fn remove_calls(code: &mut [u8], helper: i32, skip: &[(usize, usize)]) -> usize {
    let mut n = 0;
    for at in instructions(code) {
        let opcode = code[at];
        let src = code[at + 1] >> 4;
        let imm = i32::from_le_bytes([code[at + 4], code[at + 5], code[at + 6], code[at + 7]]);
        let kept = skip.iter().any(|&(from, to)| from <= at && at < to);
        if opcode == CALL && src == 0 && imm == helper && !kept {
            code[at..at + 8].copy_from_slice(&[MOV64_IMM, 0, 0, 0, 0, 0, 0, 0]);
            n += 1;
        }
    }
    n
}

/// The file ranges of the executable sections of `elf`.
fn executable_sections(elf: &[u8]) -> Result<Vec<(usize, usize)>, PatchError> {
    let file = object::File::parse(elf).map_err(|e| PatchError::Object(e.to_string()))?;
    Ok(file
        .sections()
        .filter(|s| match s.flags() {
            SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0,
            _ => false,
        })
        .filter_map(|s| {
            let (start, len) = s.file_range()?;
            Some((start as usize, len as usize))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(opcode: u8, regs: u8, off: i16, imm: i32) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = opcode;
        b[1] = regs;
        b[2..4].copy_from_slice(&off.to_le_bytes());
        b[4..8].copy_from_slice(&imm.to_le_bytes());
        b
    }

    #[test]
    fn only_marked_loads_change() {
        let marker = 0x7f00i16;
        let mut code: Vec<u8> = [
            insn(0x61, 0x21, marker, 0),     // ldxw r1, [r2 + marker]
            insn(0x79, 0x21, marker + 8, 0), // ldxdw r1, [r2 + marker + 8]
            insn(0x63, 0x21, marker, 0),     // stxw: a store, untouched
            insn(0x18, 0x01, 0, 0),          // lddw, first slot
            insn(0x61, 0x00, marker, 0),     // lddw second slot: data, untouched
            insn(0x71, 0x21, 16, 0),         // ldxb at another offset
        ]
        .concat();
        let map = [(marker, 0x9a0u32), (marker + 8, 0x9a8)];
        let mut counts = vec![0; 2];
        patch_code(&mut code, &map, &[0x9a0, 0x9a8], &mut counts);
        let off = |i: usize| i16::from_le_bytes([code[i * 8 + 2], code[i * 8 + 3]]);
        assert_eq!(
            [off(0), off(1), off(2), off(4), off(5)],
            [0x9a0, 0x9a8, marker, marker, 16]
        );
        assert_eq!(counts, [1, 1]);
    }

    #[test]
    fn only_calls_of_the_helper_are_removed() {
        let mut code: Vec<u8> = [
            insn(0x85, 0x00, 0, BPF_FUNC_LOOP), // call bpf_loop
            insn(0x85, 0x10, 0, BPF_FUNC_LOOP), // call a function (pseudo call)
            insn(0x85, 0x00, 0, 6),             // call another helper
            insn(0x18, 0x42, 0, 0),             // lddw r2, a function, first slot
            insn(0x85, 0x00, 0, BPF_FUNC_LOOP), // its second slot: data
        ]
        .concat();
        let mut kept = code.clone();
        assert_eq!(remove_calls(&mut code, BPF_FUNC_LOOP, &[]), 1);
        assert_eq!(&code[..8], &[0xb7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(code[8], 0x85);
        assert_eq!(code[16], 0x85);
        assert_eq!(code[32], 0x85);
        // A function kept keeps its calls.
        assert_eq!(remove_calls(&mut kept, BPF_FUNC_LOOP, &[(0, 8)]), 0);
        assert_eq!(kept[0], 0x85);
    }

    #[test]
    fn offsets_that_do_not_fit_are_refused() {
        let mut not_elf = vec![0u8; 64];
        assert!(matches!(
            patch_offsets(&mut not_elf, &[(1, 40_000)]),
            Err(PatchError::TooFar(40_000))
        ));
        assert!(matches!(
            patch_offsets(&mut not_elf, &[(1, 4)]),
            Err(PatchError::Object(_))
        ));
    }
}
