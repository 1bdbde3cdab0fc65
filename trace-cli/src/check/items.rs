//! What the tokenizer hands the parser of each event and scheduling
//! record: the vocabulary `tokenizer`, `order`, `parser` and `processes`
//! share.

use trace_common::fxt::EventKind;

/// An interned string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub(super) u32);

/// An argument value, as far as the parser needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Int32, Uint32, Int64, Uint64 or Double.
    Number(f64),
    /// A koid.
    Koid(u64),
    /// Anything else (null, string, pointer, bool, unknown).
    Other,
}

/// What the parser gets of one event or scheduling record.
#[derive(Clone, Debug)]
pub enum Body {
    /// An event record (type 4).
    Event {
        kind: EventKind,
        pid: u64,
        tid: u64,
        category: Sym,
        name: Sym,
        args: Vec<(Sym, Value)>,
        /// The end of a complete duration, in ns (`None` if it overflows).
        end_ts: Option<i64>,
    },
    /// A legacy context switch (8/0): threads as the tables said.
    LegacySwitch {
        cpu: u32,
        outgoing: (u64, u64),
        incoming: (u64, u64),
        outgoing_priority: u8,
        incoming_priority: u8,
    },
    /// A context switch (8/1).
    Switch {
        cpu: u32,
        outgoing_tid: u64,
        incoming_tid: u64,
        outgoing_weight: i32,
        incoming_weight: i32,
    },
    /// A thread wakeup (8/2).
    Wakeup {
        tid: u64,
        weight: i32,
        waker: Option<u64>,
    },
}

/// An event or scheduling record waiting for the parser.
#[derive(Clone, Debug)]
pub struct Item {
    /// Timestamp in ns.
    pub ts: i64,
    /// Byte offset in the file.
    pub offset: u64,
    pub body: Body,
}

/// Whether an event of `kind` puts its thread in its process
/// (`UpdateThread`); counters and async events only make the process.
pub(super) fn makes_thread_row(kind: EventKind) -> bool {
    !matches!(
        kind,
        EventKind::Counter { .. }
            | EventKind::AsyncBegin { .. }
            | EventKind::AsyncInstant { .. }
            | EventKind::AsyncEnd { .. }
    )
}
