//! One ring-buffer entry of any kind — a fixed-layout event, a
//! tracepoint's, a stack — decoded without trusting it.

use super::events::{EventHeader, EventKind, KernelEvent, ParseError, parse, read_plain};

/// One ring-buffer entry of any kind, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// A fixed-layout event.
    Fixed(KernelEvent),
    /// An event of a tracepoint selected by name.
    Tracepoint(crate::kernel::tracepoint::TracepointRecord<'a>),
    /// A stack.
    Stack(crate::kernel::stack::StackRecord<'a>),
}

/// Decodes one ring-buffer entry of any kind ([`parse`] for the fixed
/// kinds), without trusting it.
#[inline]
pub fn parse_entry(bytes: &[u8]) -> Result<Entry<'_>, ParseError> {
    let kind = bytes
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes);
    if kind == Some(crate::kernel::tracepoint::TRACEPOINT_KIND) {
        crate::kernel::tracepoint::TracepointRecord::parse(bytes).map(Entry::Tracepoint)
    } else if kind == Some(crate::kernel::stack::STACK_KIND) {
        crate::kernel::stack::StackRecord::parse(bytes).map(Entry::Stack)
    } else {
        parse(bytes).map(Entry::Fixed)
    }
}

/// One ring-buffer entry of any kind, decoded, lent by [`with_entry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryRef<'a> {
    /// A fixed-layout event.
    Fixed(&'a KernelEvent),
    /// An event of a tracepoint selected by name.
    Tracepoint(crate::kernel::tracepoint::TracepointRecord<'a>),
    /// A stack.
    Stack(crate::kernel::stack::StackRecord<'a>),
}

/// Decodes one ring-buffer entry of any kind as [`parse_entry`] does, and
/// lends it to `f`. What the manager does with every event: it copies a
/// fixed event once, at its kind's size, where [`parse_entry`] returns the
/// largest kind's size.
#[inline]
pub fn with_entry<R>(bytes: &[u8], f: impl FnOnce(EntryRef<'_>) -> R) -> Result<R, ParseError> {
    let header: EventHeader = read_plain(bytes)?;
    if header.kind == crate::kernel::tracepoint::TRACEPOINT_KIND {
        crate::kernel::tracepoint::TracepointRecord::parse(bytes)
            .map(|r| f(EntryRef::Tracepoint(r)))
    } else if header.kind == crate::kernel::stack::STACK_KIND {
        crate::kernel::stack::StackRecord::parse(bytes).map(|r| f(EntryRef::Stack(r)))
    } else {
        match EventKind::from_u32(header.kind) {
            Some(kind) => KernelEvent::with_fixed(kind, bytes, |e| f(EntryRef::Fixed(e))),
            None => Err(ParseError::UnknownKind(header.kind)),
        }
    }
}
