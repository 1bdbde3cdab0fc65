//! What can go wrong while reading a process's mappings and the files they map.
//!
//! None of it reaches the public API: a stack whose process or file cannot be read still resolves,
//! to `[unknown]` frames, and the error is logged (`log::debug!`) where it happened.

use std::io;

/// An error reading a process's mappings or a mapped file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A file under `/proc`, or a mapped file, could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A mapped file is not an ELF file `object` can read.
    #[error("{path}: not a readable ELF file: {source}")]
    Elf {
        /// The file.
        path: String,
        /// What `object` said.
        #[source]
        source: object::Error,
    },
    /// A mapped file is not an ELF file at all.
    #[error("{path}: not an ELF file")]
    NotElf {
        /// The file.
        path: String,
    },
    /// The file found at a mapping's path is not the file the mapping maps (it was replaced).
    #[error("{path}: inode {found} is not the mapped file's inode {expected}")]
    Replaced {
        /// The path in `/proc/PID/maps`.
        path: String,
        /// The inode of the file found at that path.
        found: u64,
        /// The inode the mapping names.
        expected: u64,
    },
    /// This process has no vDSO mapping to copy.
    #[error("no [vdso] mapping in /proc/self/maps")]
    NoVdso,
    /// The vDSO of the sampled process differs in size from this process's.
    #[error("the sampled process's vDSO ({theirs} bytes) is not this process's ({ours} bytes)")]
    OtherVdso {
        /// The size of the sampled process's `[vdso]` mapping.
        theirs: u64,
        /// The size of this process's.
        ours: u64,
    },
    /// The memory file holding the vDSO's copy could not be made.
    #[error("memfd_create: {0}")]
    Memfd(#[source] nix::Error),
}

impl Error {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
