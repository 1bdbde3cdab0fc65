//! What the unwinder needs of an ELF file: its loadable segments (to place it in a process), its
//! unwind sections, and its build id; and where the symbolizer is to find its names.
//!
//! Parsed with `object`'s ELF-level reader through a read cache, and the unwind sections read
//! with one read each, so only the headers, the notes and the unwind sections of a file are
//! read: never its symbol table, which the symbolizer reads on its own (`object::File::parse`
//! would read all of it, megabytes for an unstripped program, at each new file).

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use framehop::ExplicitModuleSectionInfo;
use object::elf::{FileHeader32, FileHeader64};
use object::read::ReadCache;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable};
use object::{Endianness, FileKind, Object, ObjectSection};

use crate::error::Error;
use crate::maps::MapsEntry;

/// Section data shared by every process that maps the file.
pub(crate) type SectionData = Arc<[u8]>;

/// The largest page size a loadable segment may be aligned to (arm64 and some distributions
/// link for 64 KiB pages).
const MAX_PAGE: u64 = 64 * 1024;

/// One `PT_LOAD` segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Load {
    /// `p_offset`.
    offset: u64,
    /// `p_vaddr`.
    vaddr: u64,
    /// `p_filesz`.
    filesz: u64,
    /// `p_flags` has `PF_X`.
    executable: bool,
}

/// A section's stated addresses and, for the ones the unwinder reads, its bytes.
#[derive(Clone, Debug)]
struct Section {
    svma: Range<u64>,
    data: Option<SectionData>,
}

/// Where the symbolizer finds a file's names, and about how much memory it holds while it knows
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SymbolSource {
    /// Whether debug information is read (DWARF, the detached debug file, `.gnu_debugdata`):
    /// only for a file without a `.symtab`. A file with one is named from it alone: its names
    /// are the same, and a program's DWARF can be many times its code (hundreds of MB).
    pub debug: bool,
    /// The bytes the symbolizer maps and parses for it: the symbol and string tables (and the
    /// index it builds of the symbols), plus what debug information it reads.
    pub cost: u64,
}

/// The symbolizer's index of a symbol table takes about a third of the table (measured: 2.6
/// MB for a 7.8 MB `.symtab`, 5.2 MB for 15.6 MB).
const INDEX_DIVISOR: u64 = 3;

/// How many times larger than its compressed section the symbol table in `.gnu_debugdata` is
/// (xz's ratio on symbol tables).
const DEBUGDATA_RATIO: u64 = 4;

/// Where debug files are installed by build id (Debian's `-dbgsym` packages).
const DEBUG_BY_BUILD_ID: &str = "/usr/lib/debug/.build-id";

impl SymbolSource {
    fn of<'data, Elf: FileHeader<Endian = Endianness>>(
        sections: &SectionTable<'data, Elf, &'data ReadCache<&File>>,
        endian: Endianness,
        build_id: Option<&[u8]>,
    ) -> Self {
        let size = |name: &str| {
            sections
                .section_by_name(endian, name.as_bytes())
                .map_or(0, |(_, s)| s.sh_size(endian).into())
        };
        let tables =
            |symtab: &str, strtab: &str| size(symtab) + size(symtab) / INDEX_DIVISOR + size(strtab);
        if sections.section_by_name(endian, b".symtab").is_some() {
            return SymbolSource {
                debug: false,
                cost: tables(".symtab", ".strtab"),
            };
        }
        let own_debug: u64 = sections
            .iter()
            .filter(|s| {
                sections
                    .section_name(endian, s)
                    .is_ok_and(|n| n.starts_with(b".debug_"))
            })
            .map(|s| s.sh_size(endian).into())
            .sum();
        let detached = build_id.and_then(detached_debug_len).unwrap_or(0);
        SymbolSource {
            debug: true,
            cost: tables(".dynsym", ".dynstr")
                + size(".gnu_debugdata") * DEBUGDATA_RATIO * (1 + INDEX_DIVISOR) / INDEX_DIVISOR
                + own_debug
                + detached,
        }
    }
}

/// The size of the debug file installed for build id `id`, if there is one.
fn detached_debug_len(id: &[u8]) -> Option<u64> {
    let (first, rest) = id.split_first()?;
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let path = format!("{DEBUG_BY_BUILD_ID}/{first:02x}/{rest}.debug");
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// An ELF file as the unwinder places it in a process.
#[derive(Debug)]
pub(crate) struct ElfInfo {
    /// The GNU build id note, if the file has one.
    pub build_id: Option<Vec<u8>>,
    /// Where its names are found.
    pub symbols: SymbolSource,
    loads: Vec<Load>,
    text: Option<Section>,
    got: Option<Section>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    /// Read only when there is no `.eh_frame`.
    debug_frame: Option<SectionData>,
}

/// The `size` bytes at `offset` of `file` (a section's), read with one read into shared memory
/// the allocator zeroes (the read cache would zero its buffer byte by byte in an unoptimised
/// build, which takes hundreds of milliseconds for a large program's `.eh_frame`, and copy the
/// bytes twice).
fn section_data(file: &File, offset: u64, size: u64) -> Result<SectionData, std::io::Error> {
    use std::os::unix::fs::FileExt;
    // A section that says it reaches past the end of the file is refused before anything is
    // allocated for it.
    let file_len = file.metadata()?.len();
    let len = offset
        .checked_add(size)
        .filter(|&end| end <= file_len)
        .and_then(|_| usize::try_from(size).ok())
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
    // Read straight into the shared allocation: a large program's unwind sections are tens of
    // megabytes, and a copy from a buffer would fault in and fill as much memory again.
    // SAFETY: zeroed memory is a valid `u8` slice.
    let mut bytes: Arc<[u8]> = unsafe { Arc::new_zeroed_slice(len).assume_init() };
    let Some(buffer) = Arc::get_mut(&mut bytes) else {
        unreachable!("a new allocation has one owner")
    };
    file.read_exact_at(buffer, offset)?;
    Ok(bytes)
}

/// The GNU build id among the notes of `sections` (else of the segments `segments`).
fn build_id<'data, Elf: FileHeader<Endian = Endianness>>(
    sections: &SectionTable<'data, Elf, &'data ReadCache<&File>>,
    segments: &[Elf::ProgramHeader],
    endian: Endianness,
    data: &'data ReadCache<&File>,
) -> object::Result<Option<Vec<u8>>> {
    let in_sections = sections.iter().map(|s| s.notes(endian, data));
    let in_segments = segments.iter().map(|s| s.notes(endian, data));
    for notes in in_sections.chain(in_segments) {
        let Some(mut notes) = notes? else {
            continue;
        };
        while let Some(note) = notes.next()? {
            if note.name() == object::elf::ELF_NOTE_GNU
                && note.n_type(endian) == object::elf::NT_GNU_BUILD_ID
            {
                return Ok(Some(note.desc().to_vec()));
            }
        }
    }
    Ok(None)
}

impl ElfInfo {
    /// Reads the segments, unwind sections and build id of `file`; `name` is for errors.
    pub(crate) fn read(file: &File, name: &str) -> Result<Self, Error> {
        let cache = ReadCache::new(file);
        let elf_error = |source| Error::Elf {
            path: name.to_owned(),
            source,
        };
        match FileKind::parse(&cache).map_err(elf_error)? {
            FileKind::Elf64 => Self::read_elf::<FileHeader64<Endianness>>(file, &cache, name),
            FileKind::Elf32 => Self::read_elf::<FileHeader32<Endianness>>(file, &cache, name),
            _ => Err(Error::NotElf {
                path: name.to_owned(),
            }),
        }
    }

    /// [`ElfInfo::read`] of an ELF file of class `Elf`, whose bytes `cache` reads.
    fn read_elf<Elf: FileHeader<Endian = Endianness>>(
        file: &File,
        cache: &ReadCache<&File>,
        name: &str,
    ) -> Result<Self, Error> {
        let elf_error = |source| Error::Elf {
            path: name.to_owned(),
            source,
        };
        let header = Elf::parse(cache).map_err(elf_error)?;
        let endian = header.endian().map_err(elf_error)?;
        let sections = header.sections(endian, cache).map_err(elf_error)?;
        let segments = header.program_headers(endian, cache).map_err(elf_error)?;
        let section = |section_name: &str, with_data: bool| -> Option<Section> {
            let (_, s) = sections.section_by_name(endian, section_name.as_bytes())?;
            let (addr, size): (u64, u64) = (s.sh_addr(endian).into(), s.sh_size(endian).into());
            let svma = addr..addr.checked_add(size)?;
            let data = match s.file_range(endian) {
                Some((offset, size)) if with_data => match section_data(file, offset, size) {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        log::debug!("{name}: {section_name} unreadable: {e}");
                        None
                    }
                },
                // Not in the file (`SHT_NOBITS`, as in a detached debug file).
                _ => None,
            };
            Some(Section { svma, data })
        };
        let eh_frame = section(".eh_frame", true);
        // Rare (`.eh_frame` is the norm) and possibly compressed: read through `object`'s
        // whole-file reader.
        let debug_frame =
            if eh_frame.is_none() && sections.section_by_name(endian, b".debug_frame").is_some() {
                object::File::parse(cache).ok().and_then(|obj| {
                    obj.section_by_name(".debug_frame")
                        .and_then(|s| s.uncompressed_data().ok())
                        .map(|bytes| SectionData::from(&*bytes))
                })
            } else {
                None
            };
        let loads = segments
            .iter()
            .filter(|seg| seg.p_type(endian) == object::elf::PT_LOAD)
            .filter_map(|seg| {
                let filesz: u64 = seg.p_filesz(endian).into();
                (filesz > 0).then_some(Load {
                    offset: seg.p_offset(endian).into(),
                    vaddr: seg.p_vaddr(endian).into(),
                    filesz,
                    executable: seg.p_flags(endian) & object::elf::PF_X != 0,
                })
            })
            .collect();
        let build_id = match build_id(&sections, segments, endian, cache) {
            Ok(id) => id,
            Err(e) => {
                log::debug!("{name}: build id unreadable: {e}");
                None
            }
        };
        Ok(ElfInfo {
            symbols: SymbolSource::of(&sections, endian, build_id.as_deref()),
            build_id,
            loads,
            text: section(".text", false),
            got: section(".got", false),
            eh_frame_hdr: section(".eh_frame_hdr", true),
            eh_frame,
            debug_frame,
        })
    }

    /// The load bias of this file in a process that maps it with `map` (an executable mapping):
    /// the address of the file's stated address 0, so that `address = bias + svma`.
    ///
    /// The segment is the one `map` maps: the loadable segment whose file range holds the
    /// mapping's offset, once rounded down to a page (executable segments first). A file without
    /// such a segment is taken to have stated addresses equal to file offsets.
    pub(crate) fn bias(&self, map: &MapsEntry) -> u64 {
        let holds = |load: &&Load| {
            let end = load.offset.saturating_add(load.filesz);
            map.offset < end && (map.offset >= load.offset || load.offset - map.offset < MAX_PAGE)
        };
        let load = self
            .loads
            .iter()
            .filter(|l| l.executable)
            .find(holds)
            .or_else(|| self.loads.iter().find(holds));
        match load {
            // The mapping starts at page_down(p_vaddr) + bias, at file offset page_down(p_offset).
            Some(load) => map
                .start
                .wrapping_add(load.offset)
                .wrapping_sub(map.offset)
                .wrapping_sub(load.vaddr),
            None => map.start.wrapping_sub(map.offset),
        }
    }

    /// The bytes of the unwind sections read of the file.
    pub(crate) fn unwind_bytes(&self) -> u64 {
        let len = |s: &Option<Section>| {
            s.as_ref()
                .and_then(|s| s.data.as_ref())
                .map_or(0, |d| d.len() as u64)
        };
        len(&self.eh_frame)
            + len(&self.eh_frame_hdr)
            + self.debug_frame.as_ref().map_or(0, |d| d.len() as u64)
    }

    /// Whether an unwinder holds its unwind sections besides this.
    pub(crate) fn shared_elsewhere(&self) -> bool {
        let shared = |d: &SectionData| Arc::strong_count(d) > 1;
        [&self.eh_frame, &self.eh_frame_hdr]
            .into_iter()
            .filter_map(|s| s.as_ref().and_then(|s| s.data.as_ref()))
            .chain(self.debug_frame.as_ref())
            .any(shared)
    }

    /// Whether the file has unwind information (`.eh_frame` or `.debug_frame`).
    pub(crate) fn has_unwind_info(&self) -> bool {
        self.eh_frame.as_ref().is_some_and(|s| s.data.is_some()) || self.debug_frame.is_some()
    }

    /// The sections for a framehop module of this file (its data shared, not copied).
    pub(crate) fn module_sections(&self) -> ExplicitModuleSectionInfo<SectionData> {
        let svma = |s: &Option<Section>| s.as_ref().map(|s| s.svma.clone());
        let data = |s: &Option<Section>| s.as_ref().and_then(|s| s.data.clone());
        ExplicitModuleSectionInfo {
            // Stated addresses of ELF files are relative to 0.
            base_svma: 0,
            text_svma: svma(&self.text),
            text: None,
            stubs_svma: None,
            stub_helper_svma: None,
            got_svma: svma(&self.got),
            unwind_info: None,
            eh_frame_svma: svma(&self.eh_frame),
            eh_frame: data(&self.eh_frame),
            eh_frame_hdr_svma: svma(&self.eh_frame_hdr),
            eh_frame_hdr: data(&self.eh_frame_hdr),
            debug_frame: self.debug_frame.clone(),
            text_segment_svma: None,
            text_segment: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(start: u64, offset: u64) -> MapsEntry {
        MapsEntry {
            start,
            end: start + 0x1000,
            offset,
            dev_major: 0,
            dev_minor: 0,
            inode: 1,
            path: "/x".into(),
        }
    }

    fn info(loads: Vec<Load>) -> ElfInfo {
        ElfInfo {
            build_id: None,
            symbols: SymbolSource::default(),
            loads,
            text: None,
            got: None,
            eh_frame: None,
            eh_frame_hdr: None,
            debug_frame: None,
        }
    }

    #[test]
    fn bias_of_a_shared_object_and_of_a_fixed_executable() {
        // libc: r-x segment at p_offset 0x28000, p_vaddr 0x28000, mapped at 0x7f00_0002_8000.
        let libc = info(vec![
            Load {
                offset: 0,
                vaddr: 0,
                filesz: 0x28000,
                executable: false,
            },
            Load {
                offset: 0x28000,
                vaddr: 0x28000,
                filesz: 0x195000,
                executable: true,
            },
        ]);
        assert_eq!(
            libc.bias(&entry(0x7f00_0002_8000, 0x28000)),
            0x7f00_0000_0000
        );
        // A segment whose stated address differs from its offset, not page aligned.
        let odd = info(vec![Load {
            offset: 0x1234,
            vaddr: 0x201234,
            filesz: 0x5000,
            executable: true,
        }]);
        assert_eq!(odd.bias(&entry(0x5555_0020_1000, 0x1000)), 0x5555_0000_0000);
        // A non-PIE executable: mapped where it says, bias 0.
        let fixed = info(vec![Load {
            offset: 0x1000,
            vaddr: 0x401000,
            filesz: 0x1000,
            executable: true,
        }]);
        assert_eq!(fixed.bias(&entry(0x401000, 0x1000)), 0);
        // No segment: offsets taken as addresses.
        assert_eq!(info(vec![]).bias(&entry(0x9000, 0x1000)), 0x8000);
    }

    #[test]
    fn reads_this_test_binary() {
        let file = File::open("/proc/self/exe").unwrap();
        let elf = ElfInfo::read(&file, "self").unwrap();
        assert!(elf.has_unwind_info());
        assert!(elf.loads.iter().any(|l| l.executable));
        let sections = elf.module_sections();
        assert!(sections.eh_frame.is_some() && sections.eh_frame_hdr.is_some());
        // Built with a symbol table: named from it alone, at about its size.
        assert!(!elf.symbols.debug);
        let data = std::fs::read("/proc/self/exe").unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let size = |name| obj.section_by_name(name).unwrap().size();
        assert_eq!(
            elf.symbols.cost,
            size(".symtab") + size(".symtab") / INDEX_DIVISOR + size(".strtab")
        );
    }

    /// What `object`'s whole-file parser says of the file at `path`: build id, loadable segments
    /// and `.eh_frame`'s stated addresses.
    fn as_object_reads(path: &str) -> (Option<Vec<u8>>, Vec<Load>, Option<Range<u64>>) {
        use object::{ObjectSegment, SegmentFlags};
        let data = std::fs::read(path).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let loads = obj
            .segments()
            .filter(|seg| seg.file_range().1 > 0)
            .map(|seg| Load {
                offset: seg.file_range().0,
                vaddr: seg.address(),
                filesz: seg.file_range().1,
                executable: matches!(seg.flags(), SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0),
            })
            .collect();
        let eh_frame = obj
            .section_by_name(".eh_frame")
            .map(|s| s.address()..s.address() + s.size());
        (obj.build_id().unwrap().map(<[u8]>::to_vec), loads, eh_frame)
    }

    #[test]
    fn reads_what_objects_whole_file_parser_reads() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libc.so"))
            .expect("libc mapped");
        for path in ["/proc/self/exe", libc] {
            let elf = ElfInfo::read(&File::open(path).unwrap(), path).unwrap();
            let (build_id, loads, eh_frame) = as_object_reads(path);
            assert!(build_id.is_some(), "{path}");
            assert_eq!(elf.build_id, build_id, "{path}");
            assert_eq!(elf.loads, loads, "{path}");
            assert_eq!(elf.eh_frame.map(|s| s.svma), eh_frame, "{path}");
        }
    }

    #[test]
    fn refuses_what_is_not_elf() {
        let file = File::open("/proc/self/maps").unwrap();
        assert!(matches!(
            ElfInfo::read(&file, "maps"),
            Err(Error::Elf { .. })
        ));
    }
}
