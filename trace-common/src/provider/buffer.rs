//! The shared trace buffer of one provider.
//!
//! The manager creates a memfd, sizes and seals it, and hands it to the
//! provider, which is the only one to write it. Its layout is the Fuchsia
//! trace-buffer layout (fxt-format.md §7): a 128-byte [`Header`], then the
//! durable buffer (initialization, string and thread records), then two
//! rolling buffers (everything else).
//!
//! Two differences from Fuchsia, both forced by writers that never share a
//! cache line on the hot path:
//! - Writers take the rolling buffers in regions of whole [`CHUNK_BYTES`]
//!   chunks, each thread its own, and fill them without atomics. Every chunk
//!   of a region starts with a zero word until a record replaces it, and
//!   every record is followed by a zero word within its chunk, so
//!   [`RecordWalk`] in [`WalkMode::Chunked`] jumps from a zero word to the
//!   next chunk boundary and never reads what an earlier pass over a
//!   circular buffer left behind.
//! - Oneshot mode has a durable buffer too (and a single rolling buffer):
//!   records of different threads land in different chunks, so a string
//!   record in a rolling buffer could follow the first record that uses it.

/// Size of the header at offset 0.
pub const HEADER_BYTES: usize = 128;

/// The header's magic (fxt-format.md §7.1).
pub const HEADER_MAGIC: u64 = 0x6275_66EE_6865_6164;

/// The header version this crate writes and reads.
pub const HEADER_VERSION: u16 = 0;

/// The unit in which writers take space in a rolling buffer. Chunks start at
/// multiples of this offset from the start of their rolling buffer.
pub const CHUNK_BYTES: usize = 4096;

/// The smallest buffer.
pub const MIN_BUFFER_BYTES: u64 = 64 * 1024;

/// The largest buffer.
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;

/// The largest durable buffer.
pub const MAX_DURABLE_BYTES: u64 = 1 << 20;

/// Byte offsets of the header fields (fxt-format.md §7.1).
pub mod offset {
    /// u64 magic.
    pub const MAGIC: usize = 0;
    /// u16 version.
    pub const VERSION: usize = 8;
    /// u8 buffering mode.
    pub const BUFFERING_MODE: usize = 10;
    /// u32 number of switches between rolling buffers.
    pub const WRAPPED_COUNT: usize = 12;
    /// u64 size of the whole buffer.
    pub const TOTAL_SIZE: usize = 16;
    /// u64 size of the durable buffer.
    pub const DURABLE_BUFFER_SIZE: usize = 24;
    /// u64 size of each rolling buffer (of rolling buffer 0 in oneshot mode).
    pub const ROLLING_BUFFER_SIZE: usize = 32;
    /// u64 end of the data in the durable buffer.
    pub const DURABLE_DATA_END: usize = 40;
    /// u64 end of the data in rolling buffer 0; rolling buffer 1 follows.
    pub const ROLLING_DATA_END: usize = 48;
    /// u64 records dropped so far.
    pub const NUM_RECORDS_DROPPED: usize = 64;
}

/// Why a buffer size or header is not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The size is not a multiple of 4096 or outside the allowed range.
    BadSize(u64),
    /// The header's magic or version is wrong.
    BadMagic,
    /// A header field disagrees with the layout the size and mode imply.
    BadField(&'static str),
}

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LayoutError::BadSize(n) => write!(
                f,
                "buffer size {n} is not a multiple of 4096 between {MIN_BUFFER_BYTES} and {MAX_BUFFER_BYTES}"
            ),
            LayoutError::BadMagic => f.write_str("the buffer header has a wrong magic or version"),
            LayoutError::BadField(name) => {
                write!(f, "the buffer header field {name} is out of range")
            }
        }
    }
}

impl core::error::Error for LayoutError {}

use super::BufferingMode;

/// Where the parts of a buffer lie, computed from its size and mode alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The buffering mode.
    pub mode: BufferingMode,
    /// Size of the whole buffer, header included.
    pub total: u64,
    /// Size of the durable buffer.
    pub durable: u64,
    /// Size of each rolling buffer; rolling buffer 1 has size 0 in oneshot mode.
    pub rolling: [u64; 2],
}

impl Layout {
    /// The layout of a `total`-byte buffer in `mode`.
    ///
    /// The durable buffer gets `min(avail / 16, 1 MiB)` bytes (rounded so the
    /// rest splits into multiples of 8), as the Fuchsia engine sizes it; the
    /// rest is one rolling buffer in oneshot mode and two equal ones otherwise.
    pub fn new(mode: BufferingMode, total: u64) -> Result<Layout, LayoutError> {
        if !total.is_multiple_of(4096) || !(MIN_BUFFER_BYTES..=MAX_BUFFER_BYTES).contains(&total) {
            return Err(LayoutError::BadSize(total));
        }
        let avail = total - HEADER_BYTES as u64;
        let mut durable = (avail / 16).min(MAX_DURABLE_BYTES) & !7;
        let rolling = match mode {
            BufferingMode::Oneshot => [avail - durable, 0],
            BufferingMode::Circular | BufferingMode::Streaming => {
                durable += (avail - durable) & 15;
                let r = (avail - durable) / 2;
                [r, r]
            }
        };
        Ok(Layout {
            mode,
            total,
            durable,
            rolling,
        })
    }

    /// Offset of the durable buffer in the whole buffer.
    pub const fn durable_offset(&self) -> u64 {
        HEADER_BYTES as u64
    }

    /// Offset of rolling buffer `i` (0 or 1) in the whole buffer.
    pub const fn rolling_offset(&self, i: usize) -> u64 {
        HEADER_BYTES as u64 + self.durable + if i == 0 { 0 } else { self.rolling[0] }
    }

    /// How many rolling buffers writers switch between (1 in oneshot mode).
    pub const fn rolling_count(&self) -> usize {
        match self.mode {
            BufferingMode::Oneshot => 1,
            _ => 2,
        }
    }

    /// The header a writer puts at the start of a fresh buffer.
    pub fn initial_header(&self) -> Header {
        Header {
            magic: HEADER_MAGIC,
            version: HEADER_VERSION,
            buffering_mode: self.mode.header_value(),
            wrapped_count: 0,
            total_size: self.total,
            durable_buffer_size: self.durable,
            rolling_buffer_size: self.rolling[0],
            durable_data_end: 0,
            rolling_data_end: [0, 0],
            num_records_dropped: 0,
        }
    }
}

/// The buffer header's fields (fxt-format.md §7.1), as plain values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// [`HEADER_MAGIC`].
    pub magic: u64,
    /// [`HEADER_VERSION`].
    pub version: u16,
    /// [`BufferingMode::header_value`].
    pub buffering_mode: u8,
    /// Switches between rolling buffers; `wrapped_count & 1` is the current one.
    pub wrapped_count: u32,
    /// Size of the whole buffer.
    pub total_size: u64,
    /// Size of the durable buffer.
    pub durable_buffer_size: u64,
    /// Size of each rolling buffer.
    pub rolling_buffer_size: u64,
    /// Bytes of data in the durable buffer.
    pub durable_data_end: u64,
    /// Bytes of data in each rolling buffer.
    pub rolling_data_end: [u64; 2],
    /// Records dropped so far.
    pub num_records_dropped: u64,
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

impl Header {
    /// Reads a header from the first 128 bytes of a buffer.
    pub fn read(b: &[u8; HEADER_BYTES]) -> Header {
        Header {
            magic: le_u64(b, offset::MAGIC),
            version: u16::from_le_bytes([b[offset::VERSION], b[offset::VERSION + 1]]),
            buffering_mode: b[offset::BUFFERING_MODE],
            wrapped_count: u32::from_le_bytes([
                b[offset::WRAPPED_COUNT],
                b[offset::WRAPPED_COUNT + 1],
                b[offset::WRAPPED_COUNT + 2],
                b[offset::WRAPPED_COUNT + 3],
            ]),
            total_size: le_u64(b, offset::TOTAL_SIZE),
            durable_buffer_size: le_u64(b, offset::DURABLE_BUFFER_SIZE),
            rolling_buffer_size: le_u64(b, offset::ROLLING_BUFFER_SIZE),
            durable_data_end: le_u64(b, offset::DURABLE_DATA_END),
            rolling_data_end: [
                le_u64(b, offset::ROLLING_DATA_END),
                le_u64(b, offset::ROLLING_DATA_END + 8),
            ],
            num_records_dropped: le_u64(b, offset::NUM_RECORDS_DROPPED),
        }
    }

    /// The 128 bytes of this header.
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[offset::MAGIC..][..8].copy_from_slice(&self.magic.to_le_bytes());
        b[offset::VERSION..][..2].copy_from_slice(&self.version.to_le_bytes());
        b[offset::BUFFERING_MODE] = self.buffering_mode;
        b[offset::WRAPPED_COUNT..][..4].copy_from_slice(&self.wrapped_count.to_le_bytes());
        b[offset::TOTAL_SIZE..][..8].copy_from_slice(&self.total_size.to_le_bytes());
        b[offset::DURABLE_BUFFER_SIZE..][..8]
            .copy_from_slice(&self.durable_buffer_size.to_le_bytes());
        b[offset::ROLLING_BUFFER_SIZE..][..8]
            .copy_from_slice(&self.rolling_buffer_size.to_le_bytes());
        b[offset::DURABLE_DATA_END..][..8].copy_from_slice(&self.durable_data_end.to_le_bytes());
        b[offset::ROLLING_DATA_END..][..8].copy_from_slice(&self.rolling_data_end[0].to_le_bytes());
        b[offset::ROLLING_DATA_END + 8..][..8]
            .copy_from_slice(&self.rolling_data_end[1].to_le_bytes());
        b[offset::NUM_RECORDS_DROPPED..][..8]
            .copy_from_slice(&self.num_records_dropped.to_le_bytes());
        b
    }

    /// Checks this header against the layout the reader computed itself.
    ///
    /// Every offset the header holds is within its buffer and a multiple of
    /// 8 once this returns `Ok`. A header that was never written (all zero)
    /// is `BadMagic`.
    pub fn validate(&self, layout: &Layout) -> Result<(), LayoutError> {
        if self.magic != HEADER_MAGIC || self.version != HEADER_VERSION {
            return Err(LayoutError::BadMagic);
        }
        if self.buffering_mode != layout.mode.header_value() {
            return Err(LayoutError::BadField("buffering_mode"));
        }
        if self.total_size != layout.total {
            return Err(LayoutError::BadField("total_size"));
        }
        if self.durable_buffer_size != layout.durable {
            return Err(LayoutError::BadField("durable_buffer_size"));
        }
        if self.rolling_buffer_size != layout.rolling[0] {
            return Err(LayoutError::BadField("rolling_buffer_size"));
        }
        if self.durable_data_end > layout.durable || !self.durable_data_end.is_multiple_of(8) {
            return Err(LayoutError::BadField("durable_data_end"));
        }
        for (i, &end) in self.rolling_data_end.iter().enumerate() {
            if end > layout.rolling[i] || !end.is_multiple_of(8) {
                return Err(LayoutError::BadField("rolling_data_end"));
            }
        }
        if layout.mode == BufferingMode::Oneshot && self.wrapped_count != 0 {
            return Err(LayoutError::BadField("wrapped_count"));
        }
        Ok(())
    }
}

/// How [`RecordWalk`] treats a zero word where a record header should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkMode {
    /// The data ends at the first zero word (durable buffer).
    Durable,
    /// A zero word ends the current chunk: the walk goes on at the next
    /// multiple of [`CHUNK_BYTES`] (rolling buffers).
    Chunked,
}

/// Why a [`RecordWalk`] stopped before the end of its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkStop {
    /// A non-zero header with a size of zero words.
    ZeroSize {
        /// Offset of the header in the walked data.
        offset: usize,
    },
    /// A record whose size runs past the end of the data.
    Truncated {
        /// Offset of the header in the walked data.
        offset: usize,
    },
}

/// One whole record found by a [`RecordWalk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkedRecord<'a> {
    /// Offset of the record in the walked data.
    pub offset: usize,
    /// The record's bytes, header included.
    pub bytes: &'a [u8],
    /// The record type (bits 0–3 of the header).
    pub record_type: u8,
}

/// Walks the whole records of a buffer region, trusting nothing in it.
///
/// Records are framed by the size in their header word (bits 4–15, or 4–35
/// for large records, type 15). The walk never reads past its slice.
pub struct RecordWalk<'a> {
    data: &'a [u8],
    pos: usize,
    mode: WalkMode,
    stop: Option<WalkStop>,
    skipped: usize,
}

impl<'a> RecordWalk<'a> {
    /// A walk over `data` (its length is rounded down to whole words).
    pub fn new(data: &'a [u8], mode: WalkMode) -> Self {
        let len = data.len() & !7;
        RecordWalk {
            data: &data[..len],
            pos: 0,
            mode,
            stop: None,
            skipped: 0,
        }
    }

    /// Why the walk stopped early, once it has returned `None`.
    pub fn stop(&self) -> Option<WalkStop> {
        self.stop
    }

    /// The offset just past the last whole record returned (or skipped chunk
    /// tail) so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes of chunk tails skipped so far ([`WalkMode::Chunked`]).
    pub fn skipped(&self) -> usize {
        self.skipped
    }
}

impl<'a> Iterator for RecordWalk<'a> {
    type Item = WalkedRecord<'a>;

    fn next(&mut self) -> Option<WalkedRecord<'a>> {
        loop {
            if self.stop.is_some() || self.pos + 8 > self.data.len() {
                return None;
            }
            let header = le_u64(self.data, self.pos);
            if header == 0 {
                match self.mode {
                    WalkMode::Durable => return None,
                    WalkMode::Chunked => {
                        let next = (self.pos / CHUNK_BYTES + 1) * CHUNK_BYTES;
                        let next = next.min(self.data.len());
                        self.skipped += next - self.pos;
                        self.pos = next;
                        continue;
                    }
                }
            }
            let record_type = (header & 0xF) as u8;
            let words = if record_type == crate::fxt::wire::record_type::LARGE {
                (header >> 4) & 0xFFFF_FFFF
            } else {
                (header >> 4) & 0xFFF
            };
            if words == 0 {
                self.stop = Some(WalkStop::ZeroSize { offset: self.pos });
                return None;
            }
            let len = match usize::try_from(words).ok().and_then(|w| w.checked_mul(8)) {
                Some(len) if len <= self.data.len() - self.pos => len,
                _ => {
                    self.stop = Some(WalkStop::Truncated { offset: self.pos });
                    return None;
                }
            };
            let offset = self.pos;
            self.pos += len;
            return Some(WalkedRecord {
                offset,
                bytes: &self.data[offset..offset + len],
                record_type,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn layouts_match_the_fuchsia_sizing() {
        // fxt-format.md §7.2 for circular/streaming.
        for (total, durable, rolling) in [
            (1u64 << 20, 65_536u64, 491_456u64),
            (8 << 20, 524_288, 3_932_096),
            (64 << 20, 1_048_576, 33_030_080),
        ] {
            let l = Layout::new(BufferingMode::Circular, total).unwrap();
            assert_eq!((l.durable, l.rolling), (durable, [rolling, rolling]));
            assert_eq!(l.rolling_offset(1), 128 + durable + rolling);
            assert_eq!(128 + l.durable + 2 * rolling, total);
        }
        let l = Layout::new(BufferingMode::Oneshot, 1 << 20).unwrap();
        assert_eq!(128 + l.durable + l.rolling[0], 1 << 20);
        assert_eq!(l.rolling[1], 0);
        assert!(Layout::new(BufferingMode::Oneshot, 4096).is_err());
        assert!(Layout::new(BufferingMode::Oneshot, (1 << 20) + 8).is_err());
    }

    #[test]
    fn header_round_trips_and_validates() {
        let l = Layout::new(BufferingMode::Streaming, 1 << 20).unwrap();
        let mut h = l.initial_header();
        h.durable_data_end = 64;
        h.rolling_data_end = [4096, 8];
        h.wrapped_count = 3;
        let b = h.to_bytes();
        assert_eq!(&b[..8], &[0x64, 0x61, 0x65, 0x68, 0xee, 0x66, 0x75, 0x62]);
        assert_eq!(Header::read(&b), h);
        assert_eq!(h.validate(&l), Ok(()));
        h.rolling_data_end[1] = l.rolling[1] + 8;
        assert!(h.validate(&l).is_err());
        assert_eq!(Header::default().validate(&l), Err(LayoutError::BadMagic));
    }

    fn word(v: u64) -> [u8; 8] {
        v.to_le_bytes()
    }

    #[test]
    fn walk_skips_chunk_tails_and_stops_on_bad_framing() {
        let mut data = vec![0u8; 3 * CHUNK_BYTES];
        // A 2-word record at 0, then zeros: the rest of chunk 0 is skipped.
        data[0..8].copy_from_slice(&word(0x24));
        data[8..16].copy_from_slice(&word(7));
        // A 1-word record at the start of chunk 1.
        data[CHUNK_BYTES..CHUNK_BYTES + 8].copy_from_slice(&word(0x14));
        let recs: Vec<_> = RecordWalk::new(&data, WalkMode::Chunked).collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].offset, CHUNK_BYTES);
        let recs: Vec<_> = RecordWalk::new(&data, WalkMode::Durable).collect();
        assert_eq!(recs.len(), 1);

        // Size 0 with a non-zero header stops; so does a record past the end.
        let (w4, w34, large) = (word(0x4), word(0x34), word((0xFFFF_FFFFu64 << 4) | 15));
        let mut w = RecordWalk::new(&w4, WalkMode::Chunked);
        assert!(w.next().is_none());
        assert_eq!(w.stop(), Some(WalkStop::ZeroSize { offset: 0 }));
        let mut w = RecordWalk::new(&w34, WalkMode::Chunked);
        assert!(w.next().is_none());
        assert_eq!(w.stop(), Some(WalkStop::Truncated { offset: 0 }));
        // A large record's 32-bit size is honoured.
        let mut w = RecordWalk::new(&large, WalkMode::Durable);
        assert!(w.next().is_none());
        assert_eq!(w.stop(), Some(WalkStop::Truncated { offset: 0 }));
    }
}
