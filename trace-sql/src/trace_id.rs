//! The stable id of a trace file, the `trace_id` column of every table.
//!
//! It is 16 hexadecimal digits: the 64-bit FNV-1a hash of the file's first
//! MiB (or all of it, if shorter) followed by its size in bytes as a
//! little-endian 64-bit number. The same file gets the same id wherever and
//! whenever it is exported, so exporting it again replaces its rows rather
//! than adding to them; two recordings differ in their first MiB (their
//! timestamps, if nothing else).

use std::io::Read;
use std::path::Path;

use crate::SqlError;

/// How much of the file is hashed.
pub const HASHED_BYTES: u64 = 1 << 20;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// The id of a trace whose first MiB is `head` and whose size is `size`.
pub fn of_bytes(head: &[u8], size: u64) -> String {
    let head = &head[..head.len().min(HASHED_BYTES as usize)];
    let hash = fnv1a(fnv1a(FNV_OFFSET, head), &size.to_le_bytes());
    format!("{hash:016x}")
}

/// The id of the trace file at `path`.
pub fn of_file(path: &Path) -> Result<String, SqlError> {
    let file = std::fs::File::open(path).map_err(|e| SqlError::io(path, e))?;
    let size = file.metadata().map_err(|e| SqlError::io(path, e))?.len();
    let mut head = Vec::new();
    file.take(HASHED_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| SqlError::io(path, e))?;
    Ok(of_bytes(&head, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_vectors() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn ids_depend_on_head_and_size_only() {
        let a = of_bytes(b"abc", 3);
        assert_eq!(a.len(), 16);
        assert_eq!(a, of_bytes(b"abc", 3));
        assert_ne!(a, of_bytes(b"abd", 3));
        assert_ne!(a, of_bytes(b"abc", 4));
        let big = vec![7u8; (HASHED_BYTES + 10) as usize];
        assert_eq!(
            of_bytes(&big, 5 << 20),
            of_bytes(&big[..HASHED_BYTES as usize], 5 << 20)
        );
    }

    #[test]
    fn a_file_hashes_as_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.fxt");
        std::fs::write(&path, b"hello trace").unwrap();
        assert_eq!(of_file(&path).unwrap(), of_bytes(b"hello trace", 11));
    }
}
