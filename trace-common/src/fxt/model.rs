//! The record model shared by the writer and the reader.
//!
//! Every record type of the format has a variant of [`Record`]. String and
//! thread references keep their encoded form ([`StringRef`], [`ThreadRef`]):
//! the writer needs to know whether to inline, and a reader resolves indexes
//! against per-provider tables (see [`read::ProviderTables`](super::read::ProviderTables)).

use alloc::borrow::Cow;
use alloc::vec::Vec;

/// A reference to a string: empty, an index into the current provider's
/// string table, or the text itself, inline in the record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StringRef<'a> {
    /// The empty string (encoded as `0x0000`).
    Empty,
    /// Index 1..=0x7FFF into the provider's string table.
    Index(u16),
    /// Inline text; at most 0x7FFF bytes.
    Inline(Cow<'a, str>),
}

impl<'a> StringRef<'a> {
    /// An inline reference to `s`, or [`StringRef::Empty`] when `s` is empty.
    pub fn inline(s: impl Into<Cow<'a, str>>) -> Self {
        let s = s.into();
        if s.is_empty() {
            StringRef::Empty
        } else {
            StringRef::Inline(s)
        }
    }

    /// A copy that borrows nothing.
    pub fn into_owned(self) -> StringRef<'static> {
        match self {
            StringRef::Empty => StringRef::Empty,
            StringRef::Index(i) => StringRef::Index(i),
            StringRef::Inline(s) => StringRef::Inline(Cow::Owned(s.into_owned())),
        }
    }
}

impl<'a> From<&'a str> for StringRef<'a> {
    fn from(s: &'a str) -> Self {
        StringRef::inline(s)
    }
}

/// A reference to a thread: an index into the provider's thread table, or the
/// (process koid, thread koid) pair inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadRef {
    /// Index 1..=255 into the provider's thread table.
    Index(u8),
    /// Koids inline in the record.
    Inline {
        /// Process koid (the tgid on Linux).
        process: u64,
        /// Thread koid (the tid on Linux).
        thread: u64,
    },
}

/// The value of an argument.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue<'a> {
    /// A key with no value.
    Null,
    /// Signed 32-bit integer.
    Int32(i32),
    /// Unsigned 32-bit integer.
    Uint32(u32),
    /// Signed 64-bit integer.
    Int64(i64),
    /// Unsigned 64-bit integer.
    Uint64(u64),
    /// IEEE-754 double.
    Double(f64),
    /// A string.
    String(StringRef<'a>),
    /// A pointer value.
    Pointer(u64),
    /// A kernel object id.
    Koid(u64),
    /// A boolean.
    Bool(bool),
    /// Opaque bytes (argument type 10).
    Blob(Cow<'a, [u8]>),
}

impl ArgValue<'_> {
    /// A copy that borrows nothing.
    pub fn into_owned(self) -> ArgValue<'static> {
        match self {
            ArgValue::Null => ArgValue::Null,
            ArgValue::Int32(v) => ArgValue::Int32(v),
            ArgValue::Uint32(v) => ArgValue::Uint32(v),
            ArgValue::Int64(v) => ArgValue::Int64(v),
            ArgValue::Uint64(v) => ArgValue::Uint64(v),
            ArgValue::Double(v) => ArgValue::Double(v),
            ArgValue::String(s) => ArgValue::String(s.into_owned()),
            ArgValue::Pointer(v) => ArgValue::Pointer(v),
            ArgValue::Koid(v) => ArgValue::Koid(v),
            ArgValue::Bool(v) => ArgValue::Bool(v),
            ArgValue::Blob(b) => ArgValue::Blob(Cow::Owned(b.into_owned())),
        }
    }
}

/// A named argument attached to a record.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg<'a> {
    /// The argument's name; should not be empty.
    pub name: StringRef<'a>,
    /// The argument's value.
    pub value: ArgValue<'a>,
}

impl<'a> Arg<'a> {
    /// An argument with the given name and value.
    pub fn new(name: impl Into<StringRef<'a>>, value: ArgValue<'a>) -> Self {
        Arg {
            name: name.into(),
            value,
        }
    }
}

/// The argument list of a record: borrowed by a writer, owned by a reader.
pub type Args<'a> = Cow<'a, [Arg<'a>]>;

/// What kind of event an event record (type 4) is, with the word each kind
/// appends after the arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A point in time on the thread.
    Instant,
    /// A counter sample; every numeric argument is one series.
    Counter {
        /// Distinguishes series with the same name.
        id: u64,
    },
    /// Opens a span on the thread.
    DurationBegin,
    /// Closes the innermost open span on the thread.
    DurationEnd,
    /// A whole span.
    DurationComplete {
        /// End timestamp in ticks.
        end_ts: u64,
    },
    /// Begins an asynchronous operation.
    AsyncBegin {
        /// Correlation id.
        id: u64,
    },
    /// A point inside an asynchronous operation.
    AsyncInstant {
        /// Correlation id.
        id: u64,
    },
    /// Ends an asynchronous operation.
    AsyncEnd {
        /// Correlation id.
        id: u64,
    },
    /// Starts a flow arrow.
    FlowBegin {
        /// Correlation id.
        id: u64,
    },
    /// An intermediate point of a flow.
    FlowStep {
        /// Correlation id.
        id: u64,
    },
    /// Ends a flow arrow.
    FlowEnd {
        /// Correlation id.
        id: u64,
    },
}

impl EventKind {
    /// The event type number in bits `[16..19]` of the header.
    pub fn type_number(self) -> u8 {
        match self {
            EventKind::Instant => 0,
            EventKind::Counter { .. } => 1,
            EventKind::DurationBegin => 2,
            EventKind::DurationEnd => 3,
            EventKind::DurationComplete { .. } => 4,
            EventKind::AsyncBegin { .. } => 5,
            EventKind::AsyncInstant { .. } => 6,
            EventKind::AsyncEnd { .. } => 7,
            EventKind::FlowBegin { .. } => 8,
            EventKind::FlowStep { .. } => 9,
            EventKind::FlowEnd { .. } => 10,
        }
    }

    /// The word appended after the arguments, if this kind has one.
    pub fn extra_word(self) -> Option<u64> {
        match self {
            EventKind::Instant | EventKind::DurationBegin | EventKind::DurationEnd => None,
            EventKind::Counter { id }
            | EventKind::AsyncBegin { id }
            | EventKind::AsyncInstant { id }
            | EventKind::AsyncEnd { id }
            | EventKind::FlowBegin { id }
            | EventKind::FlowStep { id }
            | EventKind::FlowEnd { id } => Some(id),
            EventKind::DurationComplete { end_ts } => Some(end_ts),
        }
    }

    /// The kind for a type number and its extra word, or `None` for an
    /// unknown type number.
    pub fn from_parts(type_number: u8, extra: u64) -> Option<Self> {
        Some(match type_number {
            0 => EventKind::Instant,
            1 => EventKind::Counter { id: extra },
            2 => EventKind::DurationBegin,
            3 => EventKind::DurationEnd,
            4 => EventKind::DurationComplete { end_ts: extra },
            5 => EventKind::AsyncBegin { id: extra },
            6 => EventKind::AsyncInstant { id: extra },
            7 => EventKind::AsyncEnd { id: extra },
            8 => EventKind::FlowBegin { id: extra },
            9 => EventKind::FlowStep { id: extra },
            10 => EventKind::FlowEnd { id: extra },
            _ => return None,
        })
    }
}

/// Thread states carried by scheduling records (Zircon's basic states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ThreadState {
    /// Created, not yet run.
    New = 0,
    /// Running or runnable (preempted).
    Running = 1,
    /// Stopped.
    Suspended = 2,
    /// Sleeping.
    Blocked = 3,
    /// Exiting (zombie).
    Dying = 4,
    /// Gone.
    Dead = 5,
}

impl ThreadState {
    /// The state for a 4-bit field value, `None` if undefined.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => ThreadState::New,
            1 => ThreadState::Running,
            2 => ThreadState::Suspended,
            3 => ThreadState::Blocked,
            4 => ThreadState::Dying,
            5 => ThreadState::Dead,
            _ => return None,
        })
    }
}

/// Object types of kernel object records that tracing tools understand.
pub mod obj_type {
    /// A process (koid = tgid).
    pub const PROCESS: u8 = 1;
    /// A thread (koid = tid).
    pub const THREAD: u8 = 2;
}

/// Provider event ids (metadata type 3).
pub mod provider_event {
    /// One of the provider's buffers ran full; records were lost.
    pub const BUFFER_OVERFLOW: u8 = 0;
}

/// Formats of a large blob record.
#[derive(Clone, Debug, PartialEq)]
pub enum LargeBlob<'a> {
    /// Format 0: a blob with event metadata.
    Event {
        /// Category.
        category: StringRef<'a>,
        /// Name.
        name: StringRef<'a>,
        /// Timestamp in ticks.
        ts: u64,
        /// Thread.
        thread: ThreadRef,
        /// Arguments.
        args: Args<'a>,
        /// Payload.
        payload: Cow<'a, [u8]>,
    },
    /// Format 1: an attachment with no metadata.
    Attachment {
        /// Category.
        category: StringRef<'a>,
        /// Name.
        name: StringRef<'a>,
        /// Payload.
        payload: Cow<'a, [u8]>,
    },
}

/// One FXT record.
#[derive(Clone, Debug, PartialEq)]
pub enum Record<'a> {
    /// The magic number record that starts every trace.
    Magic,
    /// Declares a provider and makes it current.
    ProviderInfo {
        /// Provider id (≥ 1 by convention; 32 bits on the wire).
        id: u32,
        /// Provider name, at most 255 bytes.
        name: Cow<'a, str>,
    },
    /// Makes an already declared provider current again.
    ProviderSection {
        /// Provider id.
        id: u32,
    },
    /// A notification about a provider (e.g. buffer overflow).
    ProviderEvent {
        /// Provider id.
        id: u32,
        /// Event id, see [`provider_event`].
        event: u8,
    },
    /// Trace info of a type other than the magic number (kept for round trips).
    TraceInfo {
        /// Trace info type (4 bits).
        info_type: u8,
        /// Bits `[24..63]` of the header.
        data: u64,
    },
    /// Ticks per second for the current provider.
    Initialization {
        /// Ticks per second, non-zero.
        ticks_per_second: u64,
    },
    /// A string table entry.
    String {
        /// Index 1..=0x7FFF.
        index: u16,
        /// The text.
        value: Cow<'a, str>,
    },
    /// A thread table entry.
    Thread {
        /// Index 1..=255.
        index: u8,
        /// Process koid.
        process: u64,
        /// Thread koid.
        thread: u64,
    },
    /// An event: instant, counter, duration, async or flow.
    Event {
        /// Timestamp in ticks.
        ts: u64,
        /// The thread it happened on.
        thread: ThreadRef,
        /// Category.
        category: StringRef<'a>,
        /// Name.
        name: StringRef<'a>,
        /// Arguments (at most 15).
        args: Args<'a>,
        /// The event type and its extra word.
        kind: EventKind,
    },
    /// A small blob (record type 5).
    Blob {
        /// Name.
        name: StringRef<'a>,
        /// Blob type (1 data, 2 last-branch, 3 Perfetto).
        blob_type: u8,
        /// Payload, at most 0x7FFF bytes.
        payload: Cow<'a, [u8]>,
    },
    /// Labels a pointer value inside a process.
    UserspaceObject {
        /// The pointer.
        pointer: u64,
        /// The process, as a thread ref whose inline form holds only the
        /// process koid ([`ThreadRef::Inline::thread`] is ignored and read as 0).
        process: ThreadRef,
        /// Name.
        name: StringRef<'a>,
        /// Arguments.
        args: Args<'a>,
    },
    /// Labels a kernel object (process, thread, ...).
    KernelObject {
        /// The object's koid.
        koid: u64,
        /// Object type, see [`obj_type`].
        obj_type: u8,
        /// Name.
        name: StringRef<'a>,
        /// Arguments (a thread carries a `"process"` koid argument).
        args: Args<'a>,
    },
    /// A context switch (scheduling type 1).
    ContextSwitch {
        /// Timestamp in ticks.
        ts: u64,
        /// CPU number.
        cpu: u16,
        /// State of the outgoing thread (4 bits).
        outgoing_state: u8,
        /// Outgoing thread koid.
        outgoing_tid: u64,
        /// Incoming thread koid.
        incoming_tid: u64,
        /// Arguments, by convention `incoming_weight` and `outgoing_weight`.
        args: Args<'a>,
    },
    /// A thread wakeup (scheduling type 2).
    ThreadWakeup {
        /// Timestamp in ticks.
        ts: u64,
        /// CPU number.
        cpu: u16,
        /// Koid of the woken thread.
        tid: u64,
        /// Arguments, by convention `weight` and `waker`.
        args: Args<'a>,
    },
    /// A legacy context switch (scheduling type 0).
    LegacyContextSwitch {
        /// Timestamp in ticks.
        ts: u64,
        /// CPU number (8 bits).
        cpu: u8,
        /// State of the outgoing thread (4 bits).
        outgoing_state: u8,
        /// Outgoing thread.
        outgoing_thread: ThreadRef,
        /// Incoming thread.
        incoming_thread: ThreadRef,
        /// Outgoing thread priority.
        outgoing_priority: u8,
        /// Incoming thread priority.
        incoming_priority: u8,
    },
    /// A log message.
    Log {
        /// Timestamp in ticks.
        ts: u64,
        /// Thread.
        thread: ThreadRef,
        /// Message, at most 0x7FFF bytes.
        message: Cow<'a, str>,
    },
    /// A large blob (record type 15).
    LargeBlob(LargeBlob<'a>),
    /// A record of a type, or sub-type, this reader does not know; kept whole.
    Unknown {
        /// Record type (bits `[0..3]`).
        record_type: u8,
        /// The whole record, header included.
        bytes: Cow<'a, [u8]>,
    },
}

impl Record<'_> {
    /// A copy that borrows nothing.
    pub fn into_owned(self) -> Record<'static> {
        use Cow::Owned;
        fn args(a: Args<'_>) -> Args<'static> {
            Owned(
                a.into_owned()
                    .into_iter()
                    .map(|a| Arg {
                        name: a.name.into_owned(),
                        value: a.value.into_owned(),
                    })
                    .collect::<Vec<_>>(),
            )
        }
        fn s(c: Cow<'_, str>) -> Cow<'static, str> {
            Owned(c.into_owned())
        }
        fn b(c: Cow<'_, [u8]>) -> Cow<'static, [u8]> {
            Owned(c.into_owned())
        }
        match self {
            Record::Magic => Record::Magic,
            Record::ProviderInfo { id, name } => Record::ProviderInfo { id, name: s(name) },
            Record::ProviderSection { id } => Record::ProviderSection { id },
            Record::ProviderEvent { id, event } => Record::ProviderEvent { id, event },
            Record::TraceInfo { info_type, data } => Record::TraceInfo { info_type, data },
            Record::Initialization { ticks_per_second } => {
                Record::Initialization { ticks_per_second }
            }
            Record::String { index, value } => Record::String {
                index,
                value: s(value),
            },
            Record::Thread {
                index,
                process,
                thread,
            } => Record::Thread {
                index,
                process,
                thread,
            },
            Record::Event {
                ts,
                thread,
                category,
                name,
                args: a,
                kind,
            } => Record::Event {
                ts,
                thread,
                category: category.into_owned(),
                name: name.into_owned(),
                args: args(a),
                kind,
            },
            Record::Blob {
                name,
                blob_type,
                payload,
            } => Record::Blob {
                name: name.into_owned(),
                blob_type,
                payload: b(payload),
            },
            Record::UserspaceObject {
                pointer,
                process,
                name,
                args: a,
            } => Record::UserspaceObject {
                pointer,
                process,
                name: name.into_owned(),
                args: args(a),
            },
            Record::KernelObject {
                koid,
                obj_type,
                name,
                args: a,
            } => Record::KernelObject {
                koid,
                obj_type,
                name: name.into_owned(),
                args: args(a),
            },
            Record::ContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_tid,
                incoming_tid,
                args: a,
            } => Record::ContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_tid,
                incoming_tid,
                args: args(a),
            },
            Record::ThreadWakeup {
                ts,
                cpu,
                tid,
                args: a,
            } => Record::ThreadWakeup {
                ts,
                cpu,
                tid,
                args: args(a),
            },
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_thread,
                incoming_thread,
                outgoing_priority,
                incoming_priority,
            } => Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_thread,
                incoming_thread,
                outgoing_priority,
                incoming_priority,
            },
            Record::Log {
                ts,
                thread,
                message,
            } => Record::Log {
                ts,
                thread,
                message: s(message),
            },
            Record::LargeBlob(LargeBlob::Event {
                category,
                name,
                ts,
                thread,
                args: a,
                payload,
            }) => Record::LargeBlob(LargeBlob::Event {
                category: category.into_owned(),
                name: name.into_owned(),
                ts,
                thread,
                args: args(a),
                payload: b(payload),
            }),
            Record::LargeBlob(LargeBlob::Attachment {
                category,
                name,
                payload,
            }) => Record::LargeBlob(LargeBlob::Attachment {
                category: category.into_owned(),
                name: name.into_owned(),
                payload: b(payload),
            }),
            Record::Unknown { record_type, bytes } => Record::Unknown {
                record_type,
                bytes: b(bytes),
            },
        }
    }
}
