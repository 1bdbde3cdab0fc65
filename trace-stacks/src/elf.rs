//! What the unwinder needs of an ELF file: its loadable segments (to place it in a process), its
//! unwind sections, and its build id; and where the symbolizer is to find its names.
//!
//! Parsed with `object` through a read cache and the unwind sections read with one read each,
//! so only the headers and the unwind sections of a file are read, never the whole file.

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use framehop::ExplicitModuleSectionInfo;
use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSegment, SegmentFlags};

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
    fn of<'data>(
        obj: &object::File<'data, &'data ReadCache<&File>>,
        build_id: Option<&[u8]>,
    ) -> Self {
        let size = |name: &str| obj.section_by_name(name).map_or(0, |s| s.size());
        let tables =
            |symtab: &str, strtab: &str| size(symtab) + size(symtab) / INDEX_DIVISOR + size(strtab);
        if obj.section_by_name(".symtab").is_some() {
            return SymbolSource {
                debug: false,
                cost: tables(".symtab", ".strtab"),
            };
        }
        let own_debug: u64 = obj
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug_")))
            .map(|s| s.size())
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

/// The bytes of section `s` of `file`, read with one read into a buffer the allocator zeroes
/// (the read cache would zero its buffer byte by byte in an unoptimised build, which takes
/// hundreds of milliseconds for a large program's `.eh_frame`, and copy the bytes twice).
fn section_data<'data>(
    file: &File,
    s: &impl ObjectSection<'data>,
) -> Result<SectionData, std::io::Error> {
    use std::os::unix::fs::FileExt;
    let invalid = |e: object::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let range = s.compressed_file_range().map_err(invalid)?;
    if range.format != object::CompressionFormat::None {
        return Ok(SectionData::from(&*s.uncompressed_data().map_err(invalid)?));
    }
    // A section that says it reaches past the end of the file is refused before anything is
    // allocated for it.
    let file_len = file.metadata()?.len();
    let len = range
        .offset
        .checked_add(range.uncompressed_size)
        .filter(|&end| end <= file_len)
        .and_then(|_| usize::try_from(range.uncompressed_size).ok())
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, range.offset)?;
    Ok(SectionData::from(bytes))
}

impl ElfInfo {
    /// Reads the segments, unwind sections and build id of `file`; `name` is for errors.
    pub(crate) fn read(file: &File, name: &str) -> Result<Self, Error> {
        let cache = ReadCache::new(file);
        let elf_error = |source| Error::Elf {
            path: name.to_owned(),
            source,
        };
        let obj = object::File::parse(&cache).map_err(elf_error)?;
        let section = |section_name: &str, with_data: bool| -> Option<Section> {
            let s = obj.section_by_name(section_name)?;
            let svma = s.address()..s.address().checked_add(s.size())?;
            let data = if with_data {
                match section_data(file, &s) {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        log::debug!("{name}: {section_name} unreadable: {e}");
                        None
                    }
                }
            } else {
                None
            };
            Some(Section { svma, data })
        };
        let eh_frame = section(".eh_frame", true);
        let debug_frame = if eh_frame.is_none() {
            obj.section_by_name(".debug_frame")
                .and_then(|s| s.uncompressed_data().ok())
                .map(|bytes| SectionData::from(&*bytes))
        } else {
            None
        };
        let loads = obj
            .segments()
            .filter_map(|seg| {
                let (offset, filesz) = seg.file_range();
                let executable = match seg.flags() {
                    SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                    _ => false,
                };
                (filesz > 0).then_some(Load {
                    offset,
                    vaddr: seg.address(),
                    filesz,
                    executable,
                })
            })
            .collect();
        let build_id = match obj.build_id() {
            Ok(id) => id.map(<[u8]>::to_vec),
            Err(e) => {
                log::debug!("{name}: build id unreadable: {e}");
                None
            }
        };
        Ok(ElfInfo {
            symbols: SymbolSource::of(&obj, build_id.as_deref()),
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

    #[test]
    fn refuses_what_is_not_elf() {
        let file = File::open("/proc/self/maps").unwrap();
        assert!(matches!(
            ElfInfo::read(&file, "maps"),
            Err(Error::Elf { .. })
        ));
    }
}
