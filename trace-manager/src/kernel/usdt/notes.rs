//! The `.note.stapsdt` notes of an ELF file.

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::{Endianness, Object, ObjectSection};

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
