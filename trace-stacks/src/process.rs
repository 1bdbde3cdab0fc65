//! What is kept of one process: its executable mappings and an unwinder that knows their files.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framehop::x86_64::UnwinderX86_64;
use framehop::{Module, Unwinder};

use crate::MappingInfo;
use crate::elf::SectionData;
use crate::files::{FileId, FileTable};
use crate::maps::{self, Kind, MapsEntry};

/// The shortest time between two readings of one process's mappings caused by addresses found
/// in none of them, while readings find new mappings (a process starting, loading libraries).
pub(crate) const REREAD_MIN: Duration = Duration::from_millis(10);
/// The longest: the wait doubles after every reading that finds nothing new (the addresses
/// were garbage), up to this.
pub(crate) const REREAD_MAX: Duration = Duration::from_secs(1);

/// The unwinder of one process; its modules share the files' section data.
pub(crate) type ProcessUnwinder = UnwinderX86_64<SectionData>;

/// One executable mapping.
#[derive(Clone, Debug)]
pub(crate) struct Mapping {
    /// What frames in it report.
    pub info: Arc<MappingInfo>,
    /// The file it maps, if that is an ELF file that could be opened.
    pub file: Option<FileId>,
    /// The line it came from.
    entry: MapsEntry,
}

/// A process as first seen, plus what later readings of its mappings added.
pub(crate) struct Process {
    /// Sorted by address, not overlapping.
    mappings: Vec<Mapping>,
    pub unwinder: ProcessUnwinder,
    /// When its mappings were last read.
    read_at: Instant,
    /// How long after `read_at` a miss may read them again.
    reread_after: Duration,
    /// Its mappings could not be read (it exited): they are not read again.
    gone: bool,
    /// The program it ran when its mappings were first read (`/proc/PID/exe`).
    exe: Option<PathBuf>,
}

impl Process {
    /// Reads process `pid`'s mappings and opens their files. A process that cannot be read is
    /// kept with no mappings.
    pub(crate) fn read(pid: u32, files: &mut FileTable) -> Self {
        let mut process = Process {
            mappings: Vec::new(),
            unwinder: ProcessUnwinder::new(),
            read_at: Instant::now(),
            reread_after: REREAD_MIN,
            gone: false,
            exe: exe(pid),
        };
        process.reread(pid, files);
        process
    }

    /// Whether process `pid` runs another program than when its mappings were last read: it
    /// executed one since (without `kernel:proc`, nothing else says so; a recorded command
    /// starts as a copy of the recorder). The new program's code may lie where the old one's
    /// was, so an address found in a mapping proves nothing.
    pub(crate) fn executed_since(&self, pid: u32) -> bool {
        !self.gone && self.exe.is_some() && exe(pid).is_some_and(|now| Some(now) != self.exe)
    }

    /// Reads the mappings again after an exec, however recently they were read: the new
    /// program's replace the old ones they overlap; the rest stay for the samples taken before.
    pub(crate) fn reread_after_exec(&mut self, pid: u32, files: &mut FileTable) {
        self.exe = exe(pid);
        self.reread(pid, files);
        self.reread_after = REREAD_MIN;
    }

    /// The mapping that holds `addr`.
    pub(crate) fn find(&self, addr: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.info.start <= addr);
        let mapping = self.mappings.get(i.checked_sub(1)?)?;
        (addr < mapping.info.end).then_some(mapping)
    }

    /// The mappings, sorted by address.
    pub(crate) fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// Reads the mappings again because an address was found in none of them, unless the
    /// process is gone or they were read too recently: [`REREAD_MIN`] after a reading that found
    /// new mappings, twice as long after each that found none, up to [`REREAD_MAX`]. Whether
    /// anything changed.
    pub(crate) fn reread_for_miss(&mut self, pid: u32, files: &mut FileTable) -> bool {
        if self.gone || self.read_at.elapsed() < self.reread_after {
            return false;
        }
        let changed = self.reread(pid, files);
        self.reread_after = if changed {
            REREAD_MIN
        } else {
            (self.reread_after * 2).min(REREAD_MAX)
        };
        changed
    }

    /// Reads the mappings: new ones are added, and ones they overlap are dropped; mappings gone
    /// since are kept, as samples taken before may still fall in them. Whether anything changed.
    fn reread(&mut self, pid: u32, files: &mut FileTable) -> bool {
        self.read_at = Instant::now();
        let entries = match maps::read(pid) {
            Ok(entries) => entries,
            Err(e) => {
                log::debug!("process {pid}: {e}");
                // Gone only when it has exited: reading a process in the middle of an exec can
                // fail too, and its later misses must read it again.
                self.gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
                return false;
            }
        };
        let fresh: Vec<MapsEntry> = entries
            .into_iter()
            .filter(|e| !self.mappings.iter().any(|m| m.entry == *e))
            .collect();
        if fresh.is_empty() {
            return false;
        }
        self.mappings.retain(|m| {
            !fresh
                .iter()
                .any(|e| e.start < m.info.end && m.info.start < e.end)
        });
        for entry in fresh {
            let file = files.open(pid, &entry);
            let info = mapping_info(&entry, file.and_then(|id| files.get(id)).map(|f| &f.elf));
            self.mappings.push(Mapping {
                info: Arc::new(info),
                file,
                entry,
            });
        }
        self.mappings.sort_unstable_by_key(|m| m.info.start);
        self.rebuild_unwinder(files);
        true
    }

    /// A new unwinder with a module for every mapping of a file with unwind information (the
    /// others are walked with frame pointers).
    fn rebuild_unwinder(&mut self, files: &FileTable) {
        let mut unwinder = ProcessUnwinder::new();
        for mapping in &self.mappings {
            let Some(mapped) = mapping.file.and_then(|id| files.get(id)) else {
                continue;
            };
            if !mapped.elf.has_unwind_info() {
                continue;
            }
            unwinder.add_module(Module::new(
                mapping.info.path.clone(),
                mapping.info.start..mapping.info.end,
                mapped.elf.bias(&mapping.entry),
                mapped.elf.module_sections(),
            ));
        }
        self.unwinder = unwinder;
    }
}

/// What frames in the mapping `entry` report.
fn mapping_info(entry: &MapsEntry, elf: Option<&crate::elf::ElfInfo>) -> MappingInfo {
    let path = match entry.kind() {
        Kind::File | Kind::Vdso => entry.path.clone(),
        Kind::Other if entry.path.is_empty() => "[anon]".to_owned(),
        Kind::Other => entry.path.clone(),
    };
    MappingInfo {
        path,
        build_id: elf.and_then(|e| e.build_id.clone()),
        start: entry.start,
        end: entry.end,
        file_offset: entry.offset,
    }
}

/// The program process `pid` runs, if it can be told.
fn exe(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}
