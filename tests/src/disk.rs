//! Where files lie on their disk, to tell which block requests wrote them.

use std::ops::Range;
use std::path::Path;

/// A run of a file's bytes that lies in one piece on its disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Where the run starts in the file, in bytes.
    pub file_offset: u64,
    /// The 512-byte sectors of the disk it covers.
    pub sectors: Range<u64>,
}

impl Extent {
    /// The bytes of the file that a request covering `sectors` writes in
    /// this extent, as a range of file offsets (empty when none).
    pub fn file_bytes(&self, sectors: &Range<u64>) -> Range<u64> {
        let from = sectors.start.max(self.sectors.start);
        let to = sectors.end.min(self.sectors.end).max(from);
        let at = |sector: u64| self.file_offset + (sector - self.sectors.start) * 512;
        at(from)..at(to)
    }
}

/// Where a file's data lies on its disk: the disk's `major:minor` (as the
/// block tracepoints name it; a partition's disk, not the partition) and
/// its extents there, in file order, from `FIEMAP`. Panics when the file
/// system cannot say (the tests that use it write to a disk-backed
/// temporary directory).
pub fn file_extents(path: &Path) -> (String, Vec<Extent>) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    /// `struct fiemap_extent` (linux/fiemap.h).
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct FiemapExtent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    /// `struct fiemap` with room for its extents.
    #[repr(C)]
    struct Fiemap {
        start: u64,
        length: u64,
        flags: u32,
        mapped_extents: u32,
        extent_count: u32,
        reserved: u32,
        extents: [FiemapExtent; 512],
    }
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    const FIEMAP_EXTENT_LAST: u32 = 1;

    let file = std::fs::File::open(path).unwrap();
    let dev = file.metadata().unwrap().dev();
    let number = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let sys = Path::new("/sys/dev/block").join(&number);
    // A partition: its sectors start this far into its disk, whose number
    // is its parent directory's.
    let (disk, offset) = match std::fs::read_to_string(sys.join("start")) {
        Ok(start) => {
            let parent = sys.canonicalize().unwrap().join("..").join("dev");
            let disk = std::fs::read_to_string(parent).unwrap();
            (disk.trim().to_owned(), start.trim().parse::<u64>().unwrap())
        }
        Err(_) => (number, 0),
    };
    let mut extents = Vec::new();
    let mut from = 0u64;
    loop {
        let mut map = Box::new(Fiemap {
            start: from,
            length: u64::MAX - from,
            flags: FIEMAP_FLAG_SYNC,
            mapped_extents: 0,
            extent_count: 512,
            reserved: 0,
            extents: [FiemapExtent::default(); 512],
        });
        // SAFETY: FS_IOC_FIEMAP reads and fills a `struct fiemap` followed
        // by `extent_count` extents, which `map` holds.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut *map as *mut Fiemap) };
        assert_eq!(
            r,
            0,
            "FIEMAP on {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        let got = &map.extents[..map.mapped_extents as usize];
        for e in got {
            let first = offset + e.physical / 512;
            extents.push(Extent {
                file_offset: e.logical,
                sectors: first..first + e.length / 512,
            });
            from = e.logical + e.length;
        }
        if got.is_empty() || got.iter().any(|e| e.flags & FIEMAP_EXTENT_LAST != 0) {
            break;
        }
    }
    (disk, extents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_writes_the_file_bytes_of_the_sectors_it_shares_with_an_extent() {
        let e = Extent {
            file_offset: 1 << 20,
            sectors: 1000..3048,
        };
        // Inside, overlapping either end, and outside.
        assert_eq!(
            e.file_bytes(&(1008..1016)),
            (1 << 20) + 4096..(1 << 20) + 8192
        );
        assert_eq!(e.file_bytes(&(990..1008)), (1 << 20)..(1 << 20) + 4096);
        assert_eq!(e.file_bytes(&(3040..3100)), (2 << 20) - 4096..(2 << 20));
        assert!(e.file_bytes(&(0..1000)).is_empty());
        assert!(e.file_bytes(&(3048..4000)).is_empty());
    }
}
