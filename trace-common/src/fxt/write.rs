//! Encoding [`Record`]s into FXT bytes.
//!
//! [`encode`] appends one record to a byte vector, [`encoded_len`] says how
//! many bytes it would append. Both validate the record the same way: a
//! record that [`encode`] refuses is refused by [`encoded_len`] with the same
//! error, and nothing is appended.
//!
//! Encoding rules (format reference §8.2): sizes are computed from the words
//! actually written, reserved bits and padding bytes are zero, an empty
//! string (whether [`StringRef::Empty`] or an empty [`StringRef::Inline`])
//! is written as ref `0x0000`, instant events get no scope word, and event
//! data words go after the arguments.
//!
//! Large blob records (type 15) may use the whole 32-bit size field, but
//! Perfetto frames every record with the 12-bit size field: a large record
//! of 4096 words (32 KiB) or more makes it lose track of the records that
//! follow. Keep large records below [`wire::MAX_RECORD_WORDS`] words when a
//! file must open in Perfetto.

use alloc::vec::Vec;
use core::fmt;

use super::wire::{self, arg_type, field, metadata_type, record_type, sched_type};
use super::{Arg, ArgValue, LargeBlob, Record, StringRef, ThreadRef};

/// Why a record cannot be encoded. These are errors of the caller's record,
/// never of I/O.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// More than 15 arguments.
    TooManyArgs {
        /// The number of arguments given.
        count: usize,
    },
    /// The record needs more words than its size field can hold (4095 for a
    /// normal record, 2³²−1 for a large record).
    RecordTooLarge {
        /// Words the record would need, header included.
        words: usize,
        /// The largest size allowed for this record type.
        max: usize,
    },
    /// An argument needs more than 4095 words.
    ArgTooLarge {
        /// Words the argument would need, header included.
        words: usize,
    },
    /// A string is longer than its 15-bit length field allows (0x7FFF bytes):
    /// an inline string, a string record, or a log message.
    StringTooLong {
        /// Length in bytes.
        len: usize,
    },
    /// A small blob's payload is longer than 0x7FFF bytes.
    PayloadTooLong {
        /// Length in bytes.
        len: usize,
    },
    /// A provider name is longer than 255 bytes.
    NameTooLong {
        /// Length in bytes.
        len: usize,
    },
    /// A string index is 0 or above 0x7FFF (in a string ref or a string
    /// record).
    BadStringIndex {
        /// The index given.
        index: u16,
    },
    /// A thread index is 0 (0 means "inline" in a thread ref, and is
    /// reserved in a thread record).
    BadThreadIndex,
    /// A value does not fit into its field, or is not allowed there.
    ValueOutOfRange {
        /// Which field.
        field: &'static str,
        /// The value given.
        value: u64,
    },
    /// A [`Record::Unknown`] whose bytes are not one well-framed record of
    /// its `record_type`.
    MalformedUnknown,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::TooManyArgs { count } => {
                write!(f, "{count} arguments, at most {} allowed", wire::MAX_ARGS)
            }
            EncodeError::RecordTooLarge { words, max } => {
                write!(f, "record needs {words} words, at most {max} allowed")
            }
            EncodeError::ArgTooLarge { words } => write!(
                f,
                "argument needs {words} words, at most {} allowed",
                wire::MAX_ARG_WORDS
            ),
            EncodeError::StringTooLong { len } => write!(
                f,
                "string of {len} bytes, at most {} allowed",
                wire::MAX_STRING_LEN
            ),
            EncodeError::PayloadTooLong { len } => write!(
                f,
                "blob payload of {len} bytes, at most {} allowed",
                wire::MAX_STRING_LEN
            ),
            EncodeError::NameTooLong { len } => write!(
                f,
                "provider name of {len} bytes, at most {} allowed",
                wire::MAX_PROVIDER_NAME_LEN
            ),
            EncodeError::BadStringIndex { index } => {
                write!(f, "string index {index} outside 1..=0x7FFF")
            }
            EncodeError::BadThreadIndex => f.write_str("thread index 0 is reserved"),
            EncodeError::ValueOutOfRange { field, value } => {
                write!(f, "value {value:#x} out of range for the {field}")
            }
            EncodeError::MalformedUnknown => {
                f.write_str("unknown record's bytes are not one well-framed record")
            }
        }
    }
}

impl core::error::Error for EncodeError {}

/// The number of bytes [`encode`] appends for `record`, or why it cannot be
/// encoded.
pub fn encoded_len(record: &Record<'_>) -> Result<usize, EncodeError> {
    let mut count = Count(0);
    encode_into(record, &mut count)?;
    Ok(count.0)
}

/// Appends the encoding of `record` to `out` (little-endian words) and
/// returns the number of bytes appended. On error `out` is left as it was.
pub fn encode(record: &Record<'_>, out: &mut Vec<u8>) -> Result<usize, EncodeError> {
    let start = out.len();
    match encode_into(record, out) {
        Ok(()) => Ok(out.len() - start),
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// Where encoded words go: a byte vector, or a counter for [`encoded_len`].
trait Sink {
    /// Bytes written so far.
    fn len(&self) -> usize;
    /// Appends one word.
    fn word(&mut self, w: u64);
    /// Appends a stream, zero-padded to a multiple of 8.
    fn stream(&mut self, b: &[u8]);
    /// Overwrites the word written at byte offset `at`.
    fn set_word(&mut self, at: usize, w: u64);
}

struct Count(usize);

impl Sink for Count {
    fn len(&self) -> usize {
        self.0
    }
    fn word(&mut self, _: u64) {
        self.0 = self.0.saturating_add(8);
    }
    fn stream(&mut self, b: &[u8]) {
        self.0 = self.0.saturating_add(wire::pad(b.len()));
    }
    fn set_word(&mut self, _: usize, _: u64) {}
}

impl Sink for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn word(&mut self, w: u64) {
        self.extend_from_slice(&w.to_le_bytes());
    }
    fn stream(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
        let padding = wire::pad(b.len()) - b.len();
        self.extend_from_slice(&[0u8; 8][..padding]);
    }
    fn set_word(&mut self, at: usize, w: u64) {
        if let Some(dst) = self.get_mut(at..at + 8) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// The 16-bit ref of a string.
fn string_ref(r: &StringRef<'_>) -> Result<u16, EncodeError> {
    match r {
        StringRef::Empty => Ok(wire::STRING_REF_EMPTY),
        StringRef::Index(i) => {
            if *i == 0 || *i > wire::MAX_STRING_INDEX {
                Err(EncodeError::BadStringIndex { index: *i })
            } else {
                Ok(*i)
            }
        }
        StringRef::Inline(s) => {
            if s.len() > wire::MAX_STRING_LEN {
                Err(EncodeError::StringTooLong { len: s.len() })
            } else {
                Ok(wire::inline_string_ref(s.len()))
            }
        }
    }
}

/// Writes the stream of an inline string (nothing for other refs).
fn string_stream<S: Sink>(r: &StringRef<'_>, out: &mut S) {
    if let StringRef::Inline(s) = r {
        out.stream(s.as_bytes());
    }
}

/// The 8-bit ref of a thread.
fn thread_ref(r: ThreadRef) -> Result<u8, EncodeError> {
    match r {
        ThreadRef::Index(0) => Err(EncodeError::BadThreadIndex),
        ThreadRef::Index(i) => Ok(i),
        ThreadRef::Inline { .. } => Ok(wire::THREAD_REF_INLINE),
    }
}

/// Writes the koids of an inline thread (nothing for an index).
fn thread_words<S: Sink>(r: ThreadRef, out: &mut S) {
    if let ThreadRef::Inline { process, thread } = r {
        out.word(process);
        out.word(thread);
    }
}

/// The argument count field, checked.
fn arg_count(args: &[Arg<'_>]) -> Result<u64, EncodeError> {
    if args.len() > wire::MAX_ARGS {
        Err(EncodeError::TooManyArgs { count: args.len() })
    } else {
        Ok(args.len() as u64)
    }
}

fn check(field: &'static str, value: u64, bits: u32) -> Result<u64, EncodeError> {
    if bits < 64 && value >> bits != 0 {
        Err(EncodeError::ValueOutOfRange { field, value })
    } else {
        Ok(value)
    }
}

fn write_args<S: Sink>(args: &[Arg<'_>], out: &mut S) -> Result<(), EncodeError> {
    for arg in args {
        write_arg(arg, out)?;
    }
    Ok(())
}

fn write_arg<S: Sink>(arg: &Arg<'_>, out: &mut S) -> Result<(), EncodeError> {
    let start = out.len();
    let name = string_ref(&arg.name)?;
    out.word(0);
    string_stream(&arg.name, out);
    let (ty, value_bits) = match &arg.value {
        ArgValue::Null => (arg_type::NULL, 0),
        ArgValue::Int32(v) => (arg_type::INT32, u64::from(*v as u32)),
        ArgValue::Uint32(v) => (arg_type::UINT32, u64::from(*v)),
        ArgValue::Int64(v) => {
            out.word(*v as u64);
            (arg_type::INT64, 0)
        }
        ArgValue::Uint64(v) => {
            out.word(*v);
            (arg_type::UINT64, 0)
        }
        ArgValue::Double(v) => {
            out.word(v.to_bits());
            (arg_type::DOUBLE, 0)
        }
        ArgValue::String(s) => {
            let r = string_ref(s)?;
            string_stream(s, out);
            (arg_type::STRING, u64::from(r))
        }
        ArgValue::Pointer(v) => {
            out.word(*v);
            (arg_type::POINTER, 0)
        }
        ArgValue::Koid(v) => {
            out.word(*v);
            (arg_type::KOID, 0)
        }
        ArgValue::Bool(v) => (arg_type::BOOL, u64::from(*v)),
        ArgValue::Blob(b) => {
            let len = u32::try_from(b.len()).map_err(|_| EncodeError::ArgTooLarge {
                words: wire::words(b.len()),
            })?;
            out.stream(b);
            (arg_type::BLOB, u64::from(len))
        }
    };
    let words = (out.len() - start) / 8;
    if words > wire::MAX_ARG_WORDS {
        return Err(EncodeError::ArgTooLarge { words });
    }
    out.set_word(
        start,
        wire::arg_header(ty, words, name) | field(value_bits, 32, 63),
    );
    Ok(())
}

fn encode_into<S: Sink>(record: &Record<'_>, out: &mut S) -> Result<(), EncodeError> {
    if let Record::Unknown { record_type, bytes } = record {
        return encode_unknown(*record_type, bytes, out);
    }
    let start = out.len();
    // The header is written last, once the size is known.
    out.word(0);
    let (rtype, header) = body(record, out)?;
    let words = (out.len() - start) / 8;
    let size = if rtype == record_type::LARGE {
        match u32::try_from(words) {
            Ok(w) => field(u64::from(w), 4, 35),
            Err(_) => {
                return Err(EncodeError::RecordTooLarge {
                    words,
                    max: wire::MAX_LARGE_RECORD_WORDS as usize,
                });
            }
        }
    } else if words > wire::MAX_RECORD_WORDS {
        return Err(EncodeError::RecordTooLarge {
            words,
            max: wire::MAX_RECORD_WORDS,
        });
    } else {
        field(words as u64, 4, 15)
    };
    out.set_word(start, header | field(u64::from(rtype), 0, 3) | size);
    Ok(())
}

fn encode_unknown<S: Sink>(rtype: u8, bytes: &[u8], out: &mut S) -> Result<(), EncodeError> {
    let Some(header) = bytes.first_chunk::<8>().map(|b| u64::from_le_bytes(*b)) else {
        return Err(EncodeError::MalformedUnknown);
    };
    let size = wire::record_size_words(header);
    if rtype > 15
        || wire::get(header, 0, 3) != u64::from(rtype)
        || !bytes.len().is_multiple_of(8)
        || Some(bytes.len() / 8) != usize::try_from(size).ok()
    {
        return Err(EncodeError::MalformedUnknown);
    }
    out.stream(bytes);
    Ok(())
}

/// Writes everything after the header word; returns the record type and the
/// header bits other than the type and the size.
fn body<S: Sink>(record: &Record<'_>, out: &mut S) -> Result<(u8, u64), EncodeError> {
    Ok(match record {
        Record::Magic => (
            record_type::METADATA,
            field(u64::from(metadata_type::TRACE_INFO), 16, 19) | field(wire::MAGIC_VALUE, 24, 55),
        ),
        Record::ProviderInfo { id, name } => {
            if name.len() > wire::MAX_PROVIDER_NAME_LEN {
                return Err(EncodeError::NameTooLong { len: name.len() });
            }
            out.stream(name.as_bytes());
            (
                record_type::METADATA,
                field(u64::from(metadata_type::PROVIDER_INFO), 16, 19)
                    | field(u64::from(*id), 20, 51)
                    | field(name.len() as u64, 52, 59),
            )
        }
        Record::ProviderSection { id } => (
            record_type::METADATA,
            field(u64::from(metadata_type::PROVIDER_SECTION), 16, 19)
                | field(u64::from(*id), 20, 51),
        ),
        Record::ProviderEvent { id, event } => {
            let event = check("provider event id", u64::from(*event), 4)?;
            (
                record_type::METADATA,
                field(u64::from(metadata_type::PROVIDER_EVENT), 16, 19)
                    | field(u64::from(*id), 20, 51)
                    | field(event, 52, 55),
            )
        }
        Record::TraceInfo { info_type, data } => {
            let info_type = check("trace info type", u64::from(*info_type), 4)?;
            let data = check("trace info data", *data, 40)?;
            (
                record_type::METADATA,
                field(u64::from(metadata_type::TRACE_INFO), 16, 19)
                    | field(info_type, 20, 23)
                    | field(data, 24, 63),
            )
        }
        Record::Initialization { ticks_per_second } => {
            if *ticks_per_second == 0 {
                return Err(EncodeError::ValueOutOfRange {
                    field: "ticks per second",
                    value: 0,
                });
            }
            out.word(*ticks_per_second);
            (record_type::INITIALIZATION, 0)
        }
        Record::String { index, value } => {
            if *index == 0 || *index > wire::MAX_STRING_INDEX {
                return Err(EncodeError::BadStringIndex { index: *index });
            }
            if value.len() > wire::MAX_STRING_LEN {
                return Err(EncodeError::StringTooLong { len: value.len() });
            }
            out.stream(value.as_bytes());
            (
                record_type::STRING,
                field(u64::from(*index), 16, 30) | field(value.len() as u64, 32, 46),
            )
        }
        Record::Thread {
            index,
            process,
            thread,
        } => {
            if *index == 0 {
                return Err(EncodeError::BadThreadIndex);
            }
            out.word(*process);
            out.word(*thread);
            (record_type::THREAD, field(u64::from(*index), 16, 23))
        }
        Record::Event {
            ts,
            thread,
            category,
            name,
            args,
            kind,
        } => {
            let nargs = arg_count(args)?;
            let tref = thread_ref(*thread)?;
            let cref = string_ref(category)?;
            let nref = string_ref(name)?;
            out.word(*ts);
            thread_words(*thread, out);
            string_stream(category, out);
            string_stream(name, out);
            write_args(args, out)?;
            if let Some(extra) = kind.extra_word() {
                out.word(extra);
            }
            (
                record_type::EVENT,
                field(u64::from(kind.type_number()), 16, 19)
                    | field(nargs, 20, 23)
                    | field(u64::from(tref), 24, 31)
                    | field(u64::from(cref), 32, 47)
                    | field(u64::from(nref), 48, 63),
            )
        }
        Record::Blob {
            name,
            blob_type,
            payload,
        } => {
            let nref = string_ref(name)?;
            if payload.len() > wire::MAX_STRING_LEN {
                return Err(EncodeError::PayloadTooLong { len: payload.len() });
            }
            string_stream(name, out);
            out.stream(payload);
            (
                record_type::BLOB,
                field(u64::from(nref), 16, 31)
                    | field(payload.len() as u64, 32, 46)
                    | field(u64::from(*blob_type), 48, 55),
            )
        }
        Record::UserspaceObject {
            pointer,
            process,
            name,
            args,
        } => {
            let nargs = arg_count(args)?;
            let pref = thread_ref(*process)?;
            let nref = string_ref(name)?;
            out.word(*pointer);
            if let ThreadRef::Inline { process, .. } = process {
                out.word(*process);
            }
            string_stream(name, out);
            write_args(args, out)?;
            (
                record_type::USERSPACE_OBJECT,
                field(u64::from(pref), 16, 23)
                    | field(u64::from(nref), 24, 39)
                    | field(nargs, 40, 43),
            )
        }
        Record::KernelObject {
            koid,
            obj_type,
            name,
            args,
        } => {
            let nargs = arg_count(args)?;
            let nref = string_ref(name)?;
            out.word(*koid);
            string_stream(name, out);
            write_args(args, out)?;
            (
                record_type::KERNEL_OBJECT,
                field(u64::from(*obj_type), 16, 23)
                    | field(u64::from(nref), 24, 39)
                    | field(nargs, 40, 43),
            )
        }
        Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state,
            outgoing_tid,
            incoming_tid,
            args,
        } => {
            let nargs = arg_count(args)?;
            let state = check("outgoing thread state", u64::from(*outgoing_state), 4)?;
            out.word(*ts);
            out.word(*outgoing_tid);
            out.word(*incoming_tid);
            write_args(args, out)?;
            (
                record_type::SCHEDULING,
                field(nargs, 16, 19)
                    | field(u64::from(*cpu), 20, 35)
                    | field(state, 36, 39)
                    | field(u64::from(sched_type::CONTEXT_SWITCH), 60, 63),
            )
        }
        Record::ThreadWakeup { ts, cpu, tid, args } => {
            let nargs = arg_count(args)?;
            out.word(*ts);
            out.word(*tid);
            write_args(args, out)?;
            (
                record_type::SCHEDULING,
                field(nargs, 16, 19)
                    | field(u64::from(*cpu), 20, 35)
                    | field(u64::from(sched_type::THREAD_WAKEUP), 60, 63),
            )
        }
        Record::LegacyContextSwitch {
            ts,
            cpu,
            outgoing_state,
            outgoing_thread,
            incoming_thread,
            outgoing_priority,
            incoming_priority,
        } => {
            let state = check("outgoing thread state", u64::from(*outgoing_state), 4)?;
            let oref = thread_ref(*outgoing_thread)?;
            let iref = thread_ref(*incoming_thread)?;
            out.word(*ts);
            thread_words(*outgoing_thread, out);
            thread_words(*incoming_thread, out);
            (
                record_type::SCHEDULING,
                field(u64::from(*cpu), 16, 23)
                    | field(state, 24, 27)
                    | field(u64::from(oref), 28, 35)
                    | field(u64::from(iref), 36, 43)
                    | field(u64::from(*outgoing_priority), 44, 51)
                    | field(u64::from(*incoming_priority), 52, 59)
                    | field(u64::from(sched_type::LEGACY_CONTEXT_SWITCH), 60, 63),
            )
        }
        Record::Log {
            ts,
            thread,
            message,
        } => {
            if message.len() > wire::MAX_STRING_LEN {
                return Err(EncodeError::StringTooLong { len: message.len() });
            }
            let tref = thread_ref(*thread)?;
            out.word(*ts);
            thread_words(*thread, out);
            out.stream(message.as_bytes());
            (
                record_type::LOG,
                field(message.len() as u64, 16, 30) | field(u64::from(tref), 32, 39),
            )
        }
        Record::LargeBlob(LargeBlob::Event {
            category,
            name,
            ts,
            thread,
            args,
            payload,
        }) => {
            let nargs = arg_count(args)?;
            let cref = string_ref(category)?;
            let nref = string_ref(name)?;
            let tref = thread_ref(*thread)?;
            out.word(
                field(u64::from(cref), 0, 15)
                    | field(u64::from(nref), 16, 31)
                    | field(nargs, 32, 35)
                    | field(u64::from(tref), 36, 43),
            );
            string_stream(category, out);
            string_stream(name, out);
            out.word(*ts);
            thread_words(*thread, out);
            write_args(args, out)?;
            out.word(payload.len() as u64);
            out.stream(payload);
            (
                record_type::LARGE,
                field(u64::from(wire::large_type::BLOB), 36, 39)
                    | field(u64::from(wire::large_blob_format::EVENT), 40, 43),
            )
        }
        Record::LargeBlob(LargeBlob::Attachment {
            category,
            name,
            payload,
        }) => {
            let cref = string_ref(category)?;
            let nref = string_ref(name)?;
            out.word(field(u64::from(cref), 0, 15) | field(u64::from(nref), 16, 31));
            string_stream(category, out);
            string_stream(name, out);
            out.word(payload.len() as u64);
            out.stream(payload);
            (
                record_type::LARGE,
                field(u64::from(wire::large_type::BLOB), 36, 39)
                    | field(u64::from(wire::large_blob_format::ATTACHMENT), 40, 43),
            )
        }
        Record::Unknown { .. } => return Err(EncodeError::MalformedUnknown),
    })
}
