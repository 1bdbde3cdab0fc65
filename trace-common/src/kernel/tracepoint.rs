//! Tracepoints selected by name (`trace-cli record -e GROUP:EVENT`): the
//! configuration the manager gives the one generic eBPF program, and the
//! variable-length event it writes.
//!
//! The program runs on every selected tracepoint. The first field of a raw
//! tracepoint record, `common_type`, is the tracepoint's id (the `ID:` line
//! of its format file); the program looks its [`TracepointConfig`] up by
//! that id in [`MAP_TRACEPOINTS`], copies the record, evaluates the
//! configured filter on the copy, reads the user strings the configuration
//! names, and writes one [`TracepointEvent`] followed by the record bytes
//! and the strings.
//!
//! ## The filter program
//!
//! A filter is a postfix program of at most [`FILTER_MAX_INSNS`]
//! [`FilterInsn`]s over a stack of booleans (a bit stack in one register):
//! comparisons push one result, [`OP_AND`]/[`OP_OR`] pop two and push one,
//! [`OP_NOT`] flips the top. The event is kept when the top is true at the
//! end, or when the program is empty. The manager compiles the user's
//! expression into it and checks its depth; the eBPF side trusts only the
//! bounds it masks itself.

use core::mem::size_of;

use super::{EventHeader, ParseError};

/// The `EventHeader::kind` of a [`TracepointEvent`].
pub const TRACEPOINT_KIND: u32 = 20;
/// The map of [`TracepointConfig`]s by tracepoint id.
pub const MAP_TRACEPOINTS: &str = "TRACEPOINTS";
/// The program attached to every selected tracepoint.
pub const TRACEPOINT_PROGRAM: &str = "tracepoint_any";
/// Most tracepoints one recording selects.
pub const TRACEPOINTS_MAX: u32 = 4096;
/// Most record bytes copied (longer records are cut; the event says so).
pub const DATA_MAX: usize = 1024;
/// Most user strings read per event.
pub const STRINGS_MAX: usize = 4;
/// Most bytes of one user string, its NUL included.
pub const STRING_MAX: usize = 256;
/// Most location words (`__data_loc` / `__rel_loc` fields) whose data the
/// copy includes.
pub const LOCS_MAX: usize = 8;
/// Marks a [`TracepointConfig::locs`] entry as a `__rel_loc` word (its
/// offset counts from the end of the word).
pub const LOC_RELATIVE: u16 = 0x8000;
/// Most instructions in a filter program.
pub const FILTER_MAX_INSNS: usize = 16;
/// Most bytes a string comparison compares.
pub const FILTER_TEXT_MAX: usize = 16;
/// A user string length meaning the string could not be read.
pub const STRING_UNREADABLE: u16 = u16::MAX;
/// Size of the per-CPU scratch area the program assembles an event in.
pub const SCRATCH_BYTES: usize = 4096;

// The program writes each string at an offset masked into the scratch area.
const _: () = assert!(
    size_of::<TracepointEvent>() + DATA_MAX + STRINGS_MAX * (2 + STRING_MAX) <= SCRATCH_BYTES
);
const _: () = assert!(
    DATA_MAX.is_power_of_two()
        && STRING_MAX.is_power_of_two()
        && FILTER_MAX_INSNS.is_power_of_two()
);

/// Compare the field with [`FilterInsn::value`]: equal.
pub const OP_EQ: u8 = 1;
/// Not equal.
pub const OP_NE: u8 = 2;
/// Less than.
pub const OP_LT: u8 = 3;
/// Less than or equal.
pub const OP_LE: u8 = 4;
/// Greater than.
pub const OP_GT: u8 = 5;
/// Greater than or equal.
pub const OP_GE: u8 = 6;
/// Any of the bits of [`FilterInsn::value`] set in the field.
pub const OP_BITS: u8 = 7;
/// The field's text equals [`FilterInsn::text`] (its first
/// [`FilterInsn::len`] bytes), or starts with it under [`FLAG_PREFIX`].
pub const OP_TEXT: u8 = 8;
/// Pops two results, pushes their conjunction.
pub const OP_AND: u8 = 16;
/// Pops two results, pushes their disjunction.
pub const OP_OR: u8 = 17;
/// Flips the top result.
pub const OP_NOT: u8 = 18;

/// [`FilterInsn::flags`]: compare as signed integers.
pub const FLAG_SIGNED: u8 = 1;
/// [`OP_TEXT`]: the field is a `__data_loc` word pointing at the text.
pub const FLAG_DATA_LOC: u8 = 2;
/// [`OP_TEXT`]: the field is a `__rel_loc` word pointing at the text.
pub const FLAG_REL_LOC: u8 = 4;
/// [`OP_TEXT`]: a prefix match (the pattern ended in `*`).
pub const FLAG_PREFIX: u8 = 8;

/// One filter instruction.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilterInsn {
    /// `OP_*`.
    pub op: u8,
    /// Bytes of the integer field read (1, 2, 4 or 8).
    pub size: u8,
    /// `FLAG_*`.
    pub flags: u8,
    /// [`OP_TEXT`]: bytes of [`FilterInsn::text`] compared.
    pub len: u8,
    /// Offset of the field in the record.
    pub offset: u16,
    /// Zero.
    pub reserved: u16,
    /// The constant an integer field is compared with (sign-extended to
    /// 64 bits for signed fields).
    pub value: u64,
    /// [`OP_TEXT`]: the text compared with.
    pub text: [u8; FILTER_TEXT_MAX],
}

/// What the program does for one tracepoint, by its id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TracepointConfig {
    /// Instructions of the filter in use (0: keep every event).
    pub n_insns: u8,
    /// Entries of `strings` in use.
    pub n_strings: u8,
    /// Entries of `locs` in use.
    pub n_locs: u8,
    /// Zero.
    pub reserved: u8,
    /// Bytes of the record's fixed part (every field's end, the largest).
    pub fixed_len: u16,
    /// Zero.
    pub reserved2: u16,
    /// Offsets of the record's location words; the copy extends to the end
    /// of the data each points at. [`LOC_RELATIVE`] marks `__rel_loc`.
    pub locs: [u16; LOCS_MAX],
    /// Offsets of 8-byte user pointers to NUL-terminated strings (a system
    /// call's file name), read into the event after the record.
    pub strings: [u16; STRINGS_MAX],
    /// The filter program.
    pub insns: [FilterInsn; FILTER_MAX_INSNS],
}

/// The start of a tracepoint event: followed by `data_len` bytes of the raw
/// record, then `n_strings` strings, each a native-endian `u16` length
/// ([`STRING_UNREADABLE`] when unreadable) and that many bytes (no NUL).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TracepointEvent {
    /// The common header (kind [`TRACEPOINT_KIND`]).
    pub header: EventHeader,
    /// The tracepoint's id.
    pub id: u32,
    /// Bytes of the record that follow.
    pub data_len: u16,
    /// Bytes the record had beyond `data_len` (cut off; at most `u16::MAX`).
    pub cut: u16,
    /// Strings after the record.
    pub n_strings: u32,
    /// Zero.
    pub reserved: u32,
}

/// A tracepoint event, decoded without trusting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointRecord<'a> {
    /// The fixed start.
    pub event: TracepointEvent,
    /// The raw record (as much as was copied).
    pub data: &'a [u8],
    /// The bytes after the record: the strings.
    strings: &'a [u8],
}

impl<'a> TracepointRecord<'a> {
    /// Decodes one ring-buffer entry of kind `EventKind::Tracepoint`.
    pub fn parse(bytes: &'a [u8]) -> Result<TracepointRecord<'a>, ParseError> {
        let start = size_of::<TracepointEvent>();
        let Some(head) = bytes.get(..start) else {
            return Err(ParseError::TooShort {
                len: bytes.len(),
                needed: start,
            });
        };
        // SAFETY: `head` holds size_of::<TracepointEvent>() bytes and the
        // struct is plain integers, valid for any bit pattern.
        let event: TracepointEvent =
            unsafe { head.as_ptr().cast::<TracepointEvent>().read_unaligned() };
        let end = start + usize::from(event.data_len);
        let Some(data) = bytes.get(start..end) else {
            return Err(ParseError::TooShort {
                len: bytes.len(),
                needed: end,
            });
        };
        Ok(TracepointRecord {
            event,
            data,
            strings: &bytes[end..],
        })
    }

    /// The user strings, in the order of [`TracepointConfig::strings`]:
    /// `None` for one the program could not read. Stops at the first
    /// malformed one.
    pub fn strings(&self) -> impl Iterator<Item = Option<&'a [u8]>> + 'a {
        let mut rest = self.strings;
        let mut left = self.event.n_strings.min(STRINGS_MAX as u32);
        core::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            left -= 1;
            let len = u16::from_ne_bytes(rest.get(..2)?.try_into().ok()?);
            rest = &rest[2..];
            if len == STRING_UNREADABLE {
                return Some(None);
            }
            let text = rest.get(..usize::from(len))?;
            rest = &rest[usize::from(len)..];
            Some(Some(text))
        })
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_fixed() {
        assert_eq!(size_of::<FilterInsn>(), 32);
        assert_eq!(size_of::<TracepointEvent>(), 40);
        assert_eq!(
            size_of::<TracepointConfig>(),
            8 + 2 * LOCS_MAX + 2 * STRINGS_MAX + 32 * FILTER_MAX_INSNS
        );
    }

    fn event(data: &[u8], strings: &[u8], n_strings: u32) -> alloc::vec::Vec<u8> {
        let e = TracepointEvent {
            id: 7,
            data_len: data.len() as u16,
            n_strings,
            ..Default::default()
        };
        // SAFETY: plain data, read as its bytes.
        let head = unsafe {
            core::slice::from_raw_parts(
                core::ptr::from_ref(&e).cast::<u8>(),
                size_of::<TracepointEvent>(),
            )
        };
        [head, data, strings].concat()
    }

    #[test]
    fn parses_record_and_strings() {
        let mut strings = alloc::vec::Vec::new();
        strings.extend_from_slice(&3u16.to_ne_bytes());
        strings.extend_from_slice(b"abc");
        strings.extend_from_slice(&STRING_UNREADABLE.to_ne_bytes());
        let bytes = event(&[1, 2, 3, 4], &strings, 2);
        let r = TracepointRecord::parse(&bytes).unwrap();
        assert_eq!(r.event.id, 7);
        assert_eq!(r.data, &[1, 2, 3, 4]);
        let s: alloc::vec::Vec<_> = r.strings().collect();
        assert_eq!(s, [Some(&b"abc"[..]), None]);
    }

    #[test]
    fn truncated_events_are_errors_or_stop_the_strings() {
        let bytes = event(&[1, 2, 3, 4], &[], 0);
        assert!(TracepointRecord::parse(&bytes[..bytes.len() - 1]).is_err());
        assert!(TracepointRecord::parse(&bytes[..10]).is_err());
        // Claims three strings, holds a cut one.
        let bytes = event(&[], &[9, 0, b'x'], 3);
        let r = TracepointRecord::parse(&bytes).unwrap();
        assert_eq!(r.strings().count(), 0);
    }
}
