//! The mapped files of every process seen, each opened once and kept open.
//!
//! A file is known by the device and inode `/proc/PID/maps` gives for it, so every process that
//! maps a library shares one open file, one parse of its unwind sections and one symbol table
//! (the symbolizer reads the file through `/proc/self/fd/N`). Keeping the file open is what lets
//! a stack resolve after its process exited, or after the file was deleted or replaced on disk.
//!
//! The vDSO has no file: the kernel maps the same image into every 64-bit process, so this
//! process's own copy, written once into a memory file, stands for everyone's.

use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

use foldhash::HashMap;
use nix::sys::memfd::{MemFdCreateFlag, memfd_create};

use crate::elf::ElfInfo;
use crate::error::Error;
use crate::maps::{self, Kind, MapsEntry};

/// Index of a file in the [`FileTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct FileId(u32);

/// A mapped file, open.
#[derive(Debug)]
pub(crate) struct MappedFile {
    /// Kept open so that the file stays readable whatever happens to the process and the path.
    file: File,
    /// What was read of it as ELF.
    pub elf: ElfInfo,
    /// Its device and inode (`None` for the vDSO's copy).
    key: Option<FileKey>,
}

impl MappedFile {
    fn new(file: File, name: &str, key: Option<FileKey>) -> Result<Self, Error> {
        let elf = ElfInfo::read(&file, name)?;
        Ok(MappedFile { file, elf, key })
    }

    /// The path the symbolizer opens the file by: this process's descriptor of it.
    pub(crate) fn symbol_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// Device and inode of a mapped file.
type FileKey = (u32, u32, u64);

/// Every mapped file opened so far (and those that could not be, so as not to try again).
#[derive(Debug, Default)]
pub(crate) struct FileTable {
    by_key: HashMap<FileKey, Option<FileId>>,
    /// By id; `None` once let go of ([`FileTable::release_unused`]).
    files: Vec<Option<MappedFile>>,
    /// The vDSO's copy: not tried yet, or what came of it.
    vdso: Option<Option<FileId>>,
    /// The bytes of the unwind sections read of every file.
    unwind_bytes: u64,
}

impl FileTable {
    /// The file `entry` of process `pid` maps, opened the first time.
    pub(crate) fn open(&mut self, pid: u32, entry: &MapsEntry) -> Option<FileId> {
        match entry.kind() {
            Kind::File => {}
            Kind::Vdso => return self.vdso(entry),
            Kind::Other => return None,
        }
        let key = (entry.dev_major, entry.dev_minor, entry.inode);
        let slot = match self.by_key.entry(key) {
            Entry::Occupied(known) => return *known.get(),
            Entry::Vacant(slot) => slot,
        };
        let opened =
            open_mapped(pid, entry).and_then(|file| MappedFile::new(file, &entry.path, Some(key)));
        let id = match opened {
            Ok(mapped) => {
                let id = FileId(u32::try_from(self.files.len()).ok()?);
                self.unwind_bytes += mapped.elf.unwind_bytes();
                self.files.push(Some(mapped));
                Some(id)
            }
            Err(e) => {
                log::debug!("process {pid}: {e}");
                None
            }
        };
        *slot.insert(id)
    }

    /// The file `id`, unless let go of.
    pub(crate) fn get(&self, id: FileId) -> Option<&MappedFile> {
        self.files.get(id.0 as usize)?.as_ref()
    }

    /// How many files are open.
    pub(crate) fn len(&self) -> usize {
        self.files.iter().flatten().count()
    }

    /// Closes the files whose unwind tables no process's unwinder holds any more (only processes
    /// forgotten mapped them), and lets go of those tables; a process that maps one later opens
    /// and reads it again, under a new id. Returns the bytes let go of.
    pub(crate) fn release_unused(&mut self) -> u64 {
        let mut released = 0;
        for slot in &mut self.files {
            let Some(mapped) = slot else {
                continue;
            };
            let Some(key) = mapped.key else {
                continue;
            };
            if mapped.elf.unwind_bytes() == 0 || mapped.elf.shared_elsewhere() {
                continue;
            }
            released += mapped.elf.unwind_bytes();
            self.by_key.remove(&key);
            *slot = None;
        }
        self.unwind_bytes -= released;
        released
    }

    /// The bytes of the unwind sections read of every file open.
    pub(crate) fn unwind_bytes(&self) -> u64 {
        self.unwind_bytes
    }

    fn vdso(&mut self, theirs: &MapsEntry) -> Option<FileId> {
        let id = match self.vdso {
            Some(id) => id,
            None => {
                let id = match copy_vdso().and_then(|file| MappedFile::new(file, "[vdso]", None)) {
                    Ok(mapped) => {
                        let id = FileId(u32::try_from(self.files.len()).ok()?);
                        self.unwind_bytes += mapped.elf.unwind_bytes();
                        self.files.push(Some(mapped));
                        Some(id)
                    }
                    Err(e) => {
                        log::debug!("{e}");
                        None
                    }
                };
                self.vdso = Some(id);
                id
            }
        }?;
        // A process of another ABI (x32, i386) has another vDSO.
        let ours = self.get(id)?.file.metadata().ok()?.len();
        let theirs_len = theirs.end - theirs.start;
        if ours != theirs_len {
            log::debug!(
                "{}",
                Error::OtherVdso {
                    theirs: theirs_len,
                    ours
                }
            );
            return None;
        }
        Some(id)
    }
}

/// Opens the file `entry` maps: through `/proc/PID/map_files/`, which reaches it even when
/// deleted (it needs `CAP_SYS_ADMIN`), else by its path if that still names the same inode.
fn open_mapped(pid: u32, entry: &MapsEntry) -> Result<File, Error> {
    let map_file = format!("/proc/{pid}/map_files/{:x}-{:x}", entry.start, entry.end);
    let error = match File::open(&map_file) {
        Ok(file) => return Ok(file),
        Err(e) => Error::io(map_file, e),
    };
    let Some(path) = entry.live_path() else {
        return Err(error);
    };
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if meta.ino() != entry.inode {
        return Err(Error::Replaced {
            path: path.to_owned(),
            found: meta.ino(),
            expected: entry.inode,
        });
    }
    Ok(file)
}

/// This process's vDSO, copied into a memory file.
fn copy_vdso() -> Result<File, Error> {
    let ours = maps::read(std::process::id())?
        .into_iter()
        .find(|e| e.kind() == Kind::Vdso)
        .ok_or(Error::NoVdso)?;
    let len = usize::try_from(ours.end - ours.start).map_err(|_| Error::NoVdso)?;
    let mut image = vec![0; len];
    let mem = File::open("/proc/self/mem").map_err(|e| Error::io("/proc/self/mem", e))?;
    mem.read_exact_at(&mut image, ours.start)
        .map_err(|e| Error::io("/proc/self/mem", e))?;
    let fd =
        memfd_create(c"trace-stacks-vdso", MemFdCreateFlag::MFD_CLOEXEC).map_err(Error::Memfd)?;
    let mut file = File::from(fd);
    file.write_all(&image)
        .map_err(|e| Error::io("vDSO memory file", e))?;
    Ok(file)
}
