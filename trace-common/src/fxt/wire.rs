//! Constants and bit fields of the FXT wire format.
//!
//! Everything here is `const`, needs neither `std` nor an allocator, and is
//! usable from the eBPF programs. Section numbers refer to the format
//! reference (`fxt-format.md`).
//!
//! A field is a bit range `[lo..hi]` of a 64-bit word, both ends inclusive,
//! bit 0 the least significant. [`field`] places a value into a field,
//! [`get`] reads it back. Every bit not assigned to a field is reserved and
//! written as 0.

/// The magic number record as one word (§2.1.5); on disk (little-endian)
/// `10 00 04 46 78 54 16 00`.
pub const MAGIC: u64 = 0x0016_5478_4604_0010;

/// The magic value in bits `[24..55]` of the magic number record.
pub const MAGIC_VALUE: u64 = 0x1654_7846;

/// Bytes in a word; every record and every part of a record is a whole
/// number of words.
pub const WORD_BYTES: usize = 8;

/// Largest size of a normal record (types 0–14) in words, header included:
/// the 12-bit size field (§1.2).
pub const MAX_RECORD_WORDS: usize = 0xFFF;

/// Largest size of a normal record in bytes.
pub const MAX_RECORD_BYTES: usize = MAX_RECORD_WORDS * WORD_BYTES;

/// Largest size of a large record (type 15) in words: the 32-bit size field
/// (§1.3). Perfetto frames large records with the 12-bit field too, so a
/// large record of 4096 words or more desynchronises its importer.
pub const MAX_LARGE_RECORD_WORDS: u64 = 0xFFFF_FFFF;

/// The Fuchsia trace engine's own bound on a single record, in bytes (§1.3).
pub const ENGINE_MAX_RECORD_BYTES: usize = 1 << 18;

/// Largest size of an argument in words, header included (12-bit field, §3.1).
pub const MAX_ARG_WORDS: usize = 0xFFF;

/// Most arguments a record can carry (4-bit count field).
pub const MAX_ARGS: usize = 15;

/// Bit 15 of a string ref: the string is inline in the record (§1.7).
pub const STRING_REF_INLINE: u16 = 0x8000;

/// The length bits of an inline string ref, and the mask of an index.
pub const STRING_REF_LEN_MASK: u16 = 0x7FFF;

/// The string ref of the empty string.
pub const STRING_REF_EMPTY: u16 = 0;

/// Largest string table index.
pub const MAX_STRING_INDEX: u16 = 0x7FFF;

/// Largest length of a string held in a 15-bit length field (inline strings,
/// string records, log messages, small blob payloads).
pub const MAX_STRING_LEN: usize = 0x7FFF;

/// The length the Fuchsia writers truncate strings to (§1.4).
pub const PRACTICAL_MAX_STRING_LEN: usize = 32_000;

/// The thread ref meaning "koids inline in the record" (§1.8).
pub const THREAD_REF_INLINE: u8 = 0;

/// Largest thread table index.
pub const MAX_THREAD_INDEX: u8 = 0xFF;

/// Longest provider name in bytes (8-bit length field, §2.1.1).
pub const MAX_PROVIDER_NAME_LEN: usize = 0xFF;

/// Ticks per second a reader assumes without an initialization record.
pub const DEFAULT_TICKS_PER_SECOND: u64 = 1_000_000_000;

/// The scheduler weight of an idle thread in the `"incoming_weight"`,
/// `"outgoing_weight"` and `"weight"` arguments (§2.9.1).
pub const IDLE_WEIGHT: i32 = i32::MIN;

/// The Fuchsia trace buffer header's magic (§7.1), stored little-endian as
/// `64 61 65 68 ee 66 75 62`.
pub const BUFFER_HEADER_MAGIC: u64 = 0x6275_66EE_6865_6164;

/// Size of the trace buffer header in bytes.
pub const BUFFER_HEADER_SIZE: usize = 128;

/// Version of the trace buffer header.
pub const BUFFER_HEADER_VERSION: u16 = 0;

/// Version of the provider ↔ manager FIFO protocol (§7.5).
pub const FIFO_PROTOCOL_VERSION: u32 = 1;

/// Record type numbers, bits `[0..3]` of every header (§1.6).
pub mod record_type {
    /// Metadata (provider info / section / event, trace info).
    pub const METADATA: u8 = 0;
    /// Initialization (ticks per second).
    pub const INITIALIZATION: u8 = 1;
    /// String table entry.
    pub const STRING: u8 = 2;
    /// Thread table entry.
    pub const THREAD: u8 = 3;
    /// Event.
    pub const EVENT: u8 = 4;
    /// Small blob.
    pub const BLOB: u8 = 5;
    /// Userspace object.
    pub const USERSPACE_OBJECT: u8 = 6;
    /// Kernel object.
    pub const KERNEL_OBJECT: u8 = 7;
    /// Scheduling (context switch, wakeup).
    pub const SCHEDULING: u8 = 8;
    /// Log message.
    pub const LOG: u8 = 9;
    /// Large record, framed by the 32-bit size field `[4..35]`.
    pub const LARGE: u8 = 15;
}

/// Metadata types, bits `[16..19]` of a metadata record (§2.1).
pub mod metadata_type {
    /// Provider info: declares a provider and makes it current.
    pub const PROVIDER_INFO: u8 = 1;
    /// Provider section: makes a declared provider current again.
    pub const PROVIDER_SECTION: u8 = 2;
    /// Provider event (e.g. buffer overflow).
    pub const PROVIDER_EVENT: u8 = 3;
    /// Trace info (e.g. the magic number).
    pub const TRACE_INFO: u8 = 4;
}

/// Trace info types, bits `[20..23]` of a trace info record (§2.1.4).
pub mod trace_info_type {
    /// The magic number record.
    pub const MAGIC_NUMBER: u8 = 0;
}

/// Event types, bits `[16..19]` of an event record (§2.5).
pub mod event_type {
    /// Instant.
    pub const INSTANT: u8 = 0;
    /// Counter.
    pub const COUNTER: u8 = 1;
    /// Duration begin.
    pub const DURATION_BEGIN: u8 = 2;
    /// Duration end.
    pub const DURATION_END: u8 = 3;
    /// Duration complete.
    pub const DURATION_COMPLETE: u8 = 4;
    /// Async begin.
    pub const ASYNC_BEGIN: u8 = 5;
    /// Async instant.
    pub const ASYNC_INSTANT: u8 = 6;
    /// Async end.
    pub const ASYNC_END: u8 = 7;
    /// Flow begin.
    pub const FLOW_BEGIN: u8 = 8;
    /// Flow step.
    pub const FLOW_STEP: u8 = 9;
    /// Flow end.
    pub const FLOW_END: u8 = 10;
}

/// Scheduling record types, bits `[60..63]` of a scheduling record (§2.9).
pub mod sched_type {
    /// Legacy context switch (thread refs, priorities).
    pub const LEGACY_CONTEXT_SWITCH: u8 = 0;
    /// Context switch (koids, 16-bit CPU, arguments).
    pub const CONTEXT_SWITCH: u8 = 1;
    /// Thread wakeup.
    pub const THREAD_WAKEUP: u8 = 2;
}

/// Thread state values of scheduling records (Zircon's basic states).
pub mod thread_state {
    /// Created, not yet run.
    pub const NEW: u8 = 0;
    /// Running or runnable.
    pub const RUNNING: u8 = 1;
    /// Stopped.
    pub const SUSPENDED: u8 = 2;
    /// Sleeping.
    pub const BLOCKED: u8 = 3;
    /// Exiting.
    pub const DYING: u8 = 4;
    /// Gone.
    pub const DEAD: u8 = 5;
}

/// Argument types, bits `[0..3]` of an argument header (§3.2).
pub mod arg_type {
    /// A key with no value.
    pub const NULL: u8 = 0;
    /// Signed 32-bit integer in `[32..63]` of the header.
    pub const INT32: u8 = 1;
    /// Unsigned 32-bit integer in `[32..63]` of the header.
    pub const UINT32: u8 = 2;
    /// Signed 64-bit integer in the next word.
    pub const INT64: u8 = 3;
    /// Unsigned 64-bit integer in the next word.
    pub const UINT64: u8 = 4;
    /// IEEE-754 double in the next word.
    pub const DOUBLE: u8 = 5;
    /// String ref in `[32..47]` of the header.
    pub const STRING: u8 = 6;
    /// Pointer in the next word.
    pub const POINTER: u8 = 7;
    /// Kernel object id in the next word.
    pub const KOID: u8 = 8;
    /// Boolean in bit 32 of the header.
    pub const BOOL: u8 = 9;
    /// Blob: size in `[32..63]`, payload stream after the name.
    pub const BLOB: u8 = 10;
}

/// Small blob types, bits `[48..55]` of a blob record (§2.6).
pub mod blob_type {
    /// Raw data.
    pub const DATA: u8 = 1;
    /// Intel last-branch records.
    pub const LAST_BRANCH: u8 = 2;
    /// Perfetto protobuf trace data.
    pub const PERFETTO: u8 = 3;
}

/// Large record types, bits `[36..39]` of a large record (§2.11).
pub mod large_type {
    /// Large blob.
    pub const BLOB: u8 = 0;
}

/// Large blob formats, bits `[40..43]` of a large blob record (§2.11).
pub mod large_blob_format {
    /// In-band blob with event metadata.
    pub const EVENT: u8 = 0;
    /// In-band blob without metadata (attachment).
    pub const ATTACHMENT: u8 = 1;
}

/// Zircon object types used by kernel object records (§2.8).
pub mod zx_obj_type {
    /// No type.
    pub const NONE: u8 = 0;
    /// A process (koid = tgid on Linux).
    pub const PROCESS: u8 = 1;
    /// A thread (koid = tid on Linux).
    pub const THREAD: u8 = 2;
}

/// The mask of a field `[lo..hi]` as it sits in the word.
const fn mask(lo: u32, hi: u32) -> u64 {
    let width = hi - lo + 1;
    let low = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    low << lo
}

/// `value` placed into the field `[lo..hi]` (inclusive) of a word.
///
/// Debug builds assert that `value` fits into the field; release builds
/// silently drop the excess high bits, never touching other fields.
pub const fn field(value: u64, lo: u32, hi: u32) -> u64 {
    debug_assert!(lo <= hi && hi < 64);
    debug_assert!(
        value & !(mask(lo, hi) >> lo) == 0,
        "value too wide for its field"
    );
    (value << lo) & mask(lo, hi)
}

/// The field `[lo..hi]` (inclusive) of `word`, shifted down to bit 0.
pub const fn get(word: u64, lo: u32, hi: u32) -> u64 {
    debug_assert!(lo <= hi && hi < 64);
    (word & mask(lo, hi)) >> lo
}

/// `n` rounded up to a multiple of 8: the bytes a stream of `n` bytes
/// occupies. Saturates at the largest multiple of 8.
pub const fn pad(n: usize) -> usize {
    match n.checked_add(7) {
        Some(v) => v & !7,
        None => usize::MAX & !7,
    }
}

/// Words a stream of `n` bytes occupies: `⌈n / 8⌉`.
pub const fn words(n: usize) -> usize {
    n.div_ceil(8)
}

/// The string ref of an inline string of `len` bytes (`0x8000 | len`), or
/// [`STRING_REF_EMPTY`] when `len` is 0. `len` must be at most 0x7FFF.
pub const fn inline_string_ref(len: usize) -> u16 {
    debug_assert!(len <= MAX_STRING_LEN);
    if len == 0 {
        STRING_REF_EMPTY
    } else {
        STRING_REF_INLINE | (len as u16 & STRING_REF_LEN_MASK)
    }
}

/// A normal record header: record type in `[0..3]`, size in words in
/// `[4..15]`; the type-specific bits are OR-ed in by the caller.
pub const fn record_header(record_type: u8, size_words: usize) -> u64 {
    field(record_type as u64, 0, 3) | field(size_words as u64, 4, 15)
}

/// An argument header: type `[0..3]`, size in words `[4..15]` (header
/// included), name ref `[16..31]`; the value bits `[32..63]` are OR-ed in by
/// the caller.
pub const fn arg_header(arg_type: u8, size_words: usize, name_ref: u16) -> u64 {
    field(arg_type as u64, 0, 3) | field(size_words as u64, 4, 15) | field(name_ref as u64, 16, 31)
}

/// An event record header (§2.5).
pub const fn event_header(
    size_words: usize,
    event_type: u8,
    nargs: usize,
    thread_ref: u8,
    category_ref: u16,
    name_ref: u16,
) -> u64 {
    record_header(record_type::EVENT, size_words)
        | field(event_type as u64, 16, 19)
        | field(nargs as u64, 20, 23)
        | field(thread_ref as u64, 24, 31)
        | field(category_ref as u64, 32, 47)
        | field(name_ref as u64, 48, 63)
}

/// A context switch (scheduling type 1) header (§2.9.1); the record is
/// `4 + argument words` long.
pub const fn context_switch_header(
    size_words: usize,
    nargs: usize,
    cpu: u16,
    outgoing_state: u8,
) -> u64 {
    record_header(record_type::SCHEDULING, size_words)
        | field(nargs as u64, 16, 19)
        | field(cpu as u64, 20, 35)
        | field(outgoing_state as u64, 36, 39)
        | field(sched_type::CONTEXT_SWITCH as u64, 60, 63)
}

/// A thread wakeup (scheduling type 2) header (§2.9.2); the record is
/// `3 + argument words` long.
pub const fn thread_wakeup_header(size_words: usize, nargs: usize, cpu: u16) -> u64 {
    record_header(record_type::SCHEDULING, size_words)
        | field(nargs as u64, 16, 19)
        | field(cpu as u64, 20, 35)
        | field(sched_type::THREAD_WAKEUP as u64, 60, 63)
}

/// A kernel object record header (§2.8).
pub const fn kernel_object_header(
    size_words: usize,
    obj_type: u8,
    name_ref: u16,
    nargs: usize,
) -> u64 {
    record_header(record_type::KERNEL_OBJECT, size_words)
        | field(obj_type as u64, 16, 23)
        | field(name_ref as u64, 24, 39)
        | field(nargs as u64, 40, 43)
}

/// An int32 argument in one word, name given by `name_ref` (which must not
/// be inline: an inline name needs more words).
pub const fn int32_arg(name_ref: u16, value: i32) -> u64 {
    arg_header(arg_type::INT32, 1, name_ref) | field(value as u32 as u64, 32, 63)
}

/// The record size in words of a header word: bits `[4..35]` for a large
/// record (type 15), bits `[4..15]` otherwise.
pub const fn record_size_words(header: u64) -> u64 {
    if get(header, 0, 3) == record_type::LARGE as u64 {
        get(header, 4, 35)
    } else {
        get(header, 4, 15)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        assert_eq!(field(0xF, 0, 3), 0xF);
        assert_eq!(field(1, 63, 63), 1 << 63);
        assert_eq!(field(u64::MAX, 0, 63), u64::MAX);
        assert_eq!(get(u64::MAX, 0, 63), u64::MAX);
        assert_eq!(get(0x0016_5478_4604_0010, 24, 55), MAGIC_VALUE);
        assert_eq!(get(MAGIC, 4, 15), 1);
        assert_eq!(get(MAGIC, 16, 19), 4);
        assert_eq!(get(0xF0, 4, 7), 0xF);
    }

    #[test]
    #[should_panic]
    #[cfg(debug_assertions)]
    fn field_too_wide_asserts() {
        let _ = field(0x10, 0, 3);
    }

    #[test]
    fn magic_composition() {
        let w = record_header(record_type::METADATA, 1)
            | field(metadata_type::TRACE_INFO as u64, 16, 19)
            | field(MAGIC_VALUE, 24, 55);
        assert_eq!(w, MAGIC);
        assert_eq!(
            MAGIC.to_le_bytes(),
            [0x10, 0, 0x04, 0x46, 0x78, 0x54, 0x16, 0]
        );
        assert_eq!(
            BUFFER_HEADER_MAGIC.to_le_bytes(),
            [0x64, 0x61, 0x65, 0x68, 0xee, 0x66, 0x75, 0x62]
        );
    }

    #[test]
    fn padding() {
        assert_eq!(pad(0), 0);
        assert_eq!(pad(1), 8);
        assert_eq!(pad(8), 8);
        assert_eq!(pad(9), 16);
        assert_eq!(pad(usize::MAX), usize::MAX & !7);
        assert_eq!(words(0), 0);
        assert_eq!(words(1), 1);
        assert_eq!(words(8), 1);
        assert_eq!(words(15), 2);
        assert_eq!(words(usize::MAX), usize::MAX / 8 + 1);
    }

    #[test]
    fn headers_match_the_worked_examples() {
        // E17, E18, E19 of §6.5.
        assert_eq!(context_switch_header(4, 0, 3, 3), 0x1000_0030_0030_0048);
        assert_eq!(context_switch_header(5, 1, 3, 3), 0x1000_0030_0031_0058);
        assert_eq!(thread_wakeup_header(3, 0, 1), 0x2000_0000_0010_0038);
        // E18's argument and the idle weight.
        assert_eq!(int32_arg(3, 100), 0x0000_0064_0003_0011);
        assert_eq!(int32_arg(3, IDLE_WEIGHT), 0x8000_0000_0003_0011);
        // §6.7: int32 -7 with name index 3.
        assert_eq!(int32_arg(3, -7), 0xFFFF_FFF9_0003_0011);
        // E13 and E12.
        assert_eq!(event_header(3, 4, 0, 1, 1, 2), 0x0002_0001_0104_0034);
        assert_eq!(
            event_header(8, 0, 1, 0, inline_string_ref(3), inline_string_ref(5)),
            0x8005_8003_0010_0084
        );
        // E10, E11.
        assert_eq!(kernel_object_header(3, 1, 0x8008, 0), 0x0000_0080_0801_0037);
        assert_eq!(kernel_object_header(6, 2, 0x8004, 1), 0x0000_0180_0402_0067);
        assert_eq!(record_header(record_type::INITIALIZATION, 2), 0x21);
        assert_eq!(inline_string_ref(0), 0);
        assert_eq!(inline_string_ref(0x7FFF), 0xFFFF);
        assert_eq!(record_size_words(0x0000_0100_0000_005F), 5);
        assert_eq!(record_size_words(0xFFFF_FFFF_FFFF_FFFF), 0xFFFF_FFFF);
        assert_eq!(record_size_words(0xFFFF_FFFF_FFFF_FFF4), 0xFFF);
    }
}
