//! A provider's shared buffer: a sealed memfd the manager maps read-only.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use trace_common::provider::BufferingMode;

use super::io;

/// A provider's buffer, created when its trace is initialized.
pub(super) struct Buffer {
    pub(super) map: *const u8,
    pub(super) len: usize,
    memfd: OwnedFd,
}

// SAFETY: the mapping is read-only and owned by this struct.
unsafe impl Send for Buffer {}

impl Buffer {
    /// A sealed memfd of `len` bytes (no shrinking, no growing, no more
    /// seals), mapped read-only.
    pub(super) fn new(len: u64) -> std::io::Result<Buffer> {
        let memfd = nix::sys::memfd::memfd_create(
            c"trace-buffer",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC
                | nix::sys::memfd::MemFdCreateFlag::MFD_ALLOW_SEALING,
        )
        .map_err(io)?;
        nix::unistd::ftruncate(&memfd, len as i64).map_err(io)?;
        // SAFETY: fcntl on a descriptor we own.
        let r = unsafe {
            libc::fcntl(
                memfd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: mapping `len` bytes of a memfd of exactly that size that
        // can no longer shrink; read-only, owned by `Buffer`.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                memfd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Buffer {
            map: map as *const u8,
            len: len as usize,
            memfd,
        })
    }

    /// The memfd, to pass to the provider.
    pub(super) fn memfd(&self) -> RawFd {
        self.memfd.as_raw_fd()
    }

    /// A private copy of the buffer (the provider may be writing it): the
    /// header and, of each part of the buffer (`mode`'s layout), the bytes
    /// up to the end of its data as that header says. The rest stays zero
    /// pages the copy never touches, so a provider that wrote little costs
    /// little, whatever the size of its buffer. The header is the
    /// provider's to write: ends are clamped to the parts' sizes here, and
    /// validated where the copy is read.
    pub(super) fn snapshot(&self, mode: BufferingMode) -> Vec<u8> {
        use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout};
        // Zeroed memory from the allocator: untouched pages are never
        // backed.
        let mut v = vec![0u8; self.len];
        let copy = |v: &mut Vec<u8>, from: usize, len: usize| {
            let len = len.min(self.len.saturating_sub(from));
            // SAFETY: `map` is `self.len` readable bytes until drop (the
            // memfd is sealed against shrinking, so reading never faults),
            // `from + len <= self.len` and `v` is as long.
            unsafe {
                std::ptr::copy_nonoverlapping(self.map.add(from), v.as_mut_ptr().add(from), len)
            };
        };
        copy(&mut v, 0, HEADER_BYTES);
        let (Some(raw), Ok(layout)) = (
            v.first_chunk::<HEADER_BYTES>().copied(),
            Layout::new(mode, self.len as u64),
        ) else {
            copy(&mut v, 0, self.len);
            return v;
        };
        let header = Header::read(&raw);
        let durable = header.durable_data_end.min(layout.durable) as usize;
        copy(&mut v, layout.durable_offset() as usize, durable);
        for i in 0..layout.rolling_count() {
            let used = header.rolling_data_end[i].min(layout.rolling[i]) as usize;
            copy(&mut v, layout.rolling_offset(i) as usize, used);
        }
        v
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len) };
    }
}
