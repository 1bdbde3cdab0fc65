//! Reading a Python process's objects from its memory (`/proc/PID/mem`): code objects, their
//! strings and location tables.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::layout::Layout;

/// Longest name or file name read, in characters.
const MAX_STRING: u64 = 4096;
/// Largest location table read, in bytes.
const MAX_TABLE: u64 = 1 << 20;

/// What a code object says of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Code {
    /// `co_qualname`.
    pub qualname: String,
    /// `co_filename`.
    pub filename: Arc<str>,
    /// `co_firstlineno`.
    pub first_line: i64,
    /// `co_linetable`.
    pub linetable: Vec<u8>,
    /// The address of its first code unit.
    pub units: u64,
}

/// A process's memory, open.
pub(crate) struct Memory {
    file: File,
}

impl Memory {
    /// Process `pid`'s memory.
    pub(crate) fn open(pid: u32) -> std::io::Result<Self> {
        Ok(Memory {
            file: File::open(format!("/proc/{pid}/mem"))?,
        })
    }

    fn bytes(&self, at: u64, len: u64) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        self.file.read_exact_at(&mut buf, at).ok()?;
        Some(buf)
    }

    fn u64_at(&self, at: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, at).ok()?;
        Some(u64::from_ne_bytes(b))
    }

    /// The code object at `at`.
    pub(crate) fn code(&self, at: u64, l: &Layout) -> Option<Code> {
        let head = self.bytes(at, u64::from(l.code_units))?;
        let word = |off: u32| {
            let off = off as usize;
            Some(u64::from_ne_bytes(head.get(off..off + 8)?.try_into().ok()?))
        };
        let first_line = i64::from(word(l.code_firstlineno)? as u32 as i32);
        Some(Code {
            qualname: self.string(word(l.code_qualname)?, l)?,
            filename: self.string(word(l.code_filename)?, l)?.into(),
            first_line,
            linetable: self
                .bytes_object(word(l.code_linetable)?, l)
                .unwrap_or_default(),
            units: at + u64::from(l.code_units),
        })
    }

    /// The `str` object at `at`.
    fn string(&self, at: u64, l: &Layout) -> Option<String> {
        let head = self.bytes(at, u64::from(l.unicode_compact_data) + 8)?;
        let length = u64::from_ne_bytes(
            head.get(l.unicode_length as usize..l.unicode_length as usize + 8)?
                .try_into()
                .ok()?,
        )
        .min(MAX_STRING);
        let state = *head.get(l.unicode_state as usize)?;
        let kind = u64::from((state >> 2) & 7);
        let (compact, ascii) = (state & 0x20 != 0, state & 0x40 != 0);
        let data = match (compact, ascii) {
            (true, true) => at + u64::from(l.unicode_ascii_data),
            (true, false) => at + u64::from(l.unicode_compact_data),
            // A legacy string: its characters are elsewhere.
            (false, _) => self.u64_at(at + u64::from(l.unicode_compact_data))?,
        };
        if !matches!(kind, 1 | 2 | 4) {
            return None;
        }
        let raw = self.bytes(data, length * kind)?;
        Some(match kind {
            1 => raw.iter().map(|&b| char::from(b)).collect(),
            2 => raw
                .chunks_exact(2)
                .map(|c| char::from_u32(u32::from(u16::from_ne_bytes([c[0], c[1]]))))
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect(),
            _ => raw
                .chunks_exact(4)
                .map(|c| char::from_u32(u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect(),
        })
    }

    /// The contents of the `bytes` object at `at`.
    fn bytes_object(&self, at: u64, l: &Layout) -> Option<Vec<u8>> {
        let size = self.u64_at(at + u64::from(l.bytes_size))?.min(MAX_TABLE);
        self.bytes(at + u64::from(l.bytes_data), size)
    }
}
