//! The resolved events a trace is read into: names and threads looked up,
//! timestamps in nanoseconds, durations paired and nested.

use crate::strings::Sym;

/// An argument value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// No value.
    Null,
    /// A signed integer (Int32 or Int64).
    Int(i64),
    /// An unsigned integer (Uint32 or Uint64).
    Uint(u64),
    /// A floating point number.
    Double(f64),
    /// A string.
    Str(Box<str>),
    /// A boolean.
    Bool(bool),
    /// A pointer.
    Pointer(u64),
    /// A kernel object id (process or thread id).
    Koid(u64),
}

impl Value {
    /// The value as a signed integer, if it is a number that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            Value::Uint(v) | Value::Pointer(v) | Value::Koid(v) => i64::try_from(v).ok(),
            Value::Bool(b) => Some(i64::from(b)),
            Value::Double(_) | Value::Null | Value::Str(_) => None,
        }
    }

    /// The value as a floating point number, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(v) => Some(v as f64),
            Value::Uint(v) => Some(v as f64),
            Value::Double(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Whether the value is `true`.
    pub fn is_true(&self) -> bool {
        matches!(self, Value::Bool(true))
    }
}

/// Named arguments, in the order of the record.
pub type Args = Vec<(Sym, Value)>;

/// The value of the argument named `name`.
pub fn arg(args: &Args, name: Sym) -> Option<&Value> {
    args.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
}

/// Where an event was written: provider, process and thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Track {
    /// Provider id (1 is the kernel provider of this project's recorder).
    pub provider: u32,
    /// Process id (koid).
    pub pid: u64,
    /// Thread id (koid).
    pub tid: u64,
}

/// A finished duration: a complete event, or a begin paired with its end.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// Unique within one read of a trace, in order of the slices' starts
    /// being seen; what [`Slice::parent`] refers to.
    pub id: u64,
    /// Start, ns.
    pub ts: u64,
    /// Duration, ns.
    pub dur: u64,
    /// Where it was written.
    pub track: Track,
    /// Category.
    pub category: Sym,
    /// Name.
    pub name: Sym,
    /// Nesting depth on its thread (0 at the top).
    pub depth: u32,
    /// The id of the enclosing slice.
    pub parent: Option<u64>,
    /// Arguments (of the begin and the end, for a begin/end pair).
    pub args: Args,
    /// Still running when the recording ended: a begin with no end before
    /// the trace's end (`dur` runs to its last timestamp), or a complete
    /// event its writer marked `unfinished` (the recorder's calls,
    /// interrupts, probes and block requests in progress at the stop).
    pub unfinished: bool,
}

/// The scope of an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Its thread.
    Thread,
    /// Its process.
    Process,
    /// The whole system.
    Global,
}

/// A point event.
#[derive(Clone, Debug, PartialEq)]
pub struct Instant {
    /// Time, ns.
    pub ts: u64,
    /// Where it was written.
    pub track: Track,
    /// Category.
    pub category: Sym,
    /// Name.
    pub name: Sym,
    /// Scope.
    pub scope: Scope,
    /// Arguments.
    pub args: Args,
}

/// A counter sample: every numeric argument is one series.
#[derive(Clone, Debug, PartialEq)]
pub struct Counter {
    /// Time, ns.
    pub ts: u64,
    /// Where it was written.
    pub track: Track,
    /// Category.
    pub category: Sym,
    /// Name.
    pub name: Sym,
    /// Series id.
    pub id: u64,
    /// The series' values.
    pub args: Args,
}

/// An asynchronous span: a begin paired with its end by category, name and
/// id.
#[derive(Clone, Debug, PartialEq)]
pub struct AsyncSpan {
    /// Begin, ns.
    pub ts: u64,
    /// Duration, ns.
    pub dur: u64,
    /// Where it began.
    pub track: Track,
    /// Category.
    pub category: Sym,
    /// Name.
    pub name: Sym,
    /// Correlation id.
    pub id: u64,
    /// Arguments of the begin and the end.
    pub args: Args,
    /// No end was seen before the trace ended.
    pub unfinished: bool,
}

/// Linux scheduling state of a thread switched out, as FXT says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutState {
    /// Still runnable: preempted (an involuntary switch).
    Runnable,
    /// Blocked or sleeping (a voluntary switch).
    Blocked,
    /// Stopped.
    Suspended,
    /// Exiting.
    Dying,
    /// Dead.
    Dead,
    /// Another state number.
    Other(u8),
}

impl OutState {
    /// The state of FXT's 4-bit thread state field.
    pub fn from_fxt(state: u8) -> Self {
        match state {
            1 => OutState::Runnable,
            2 => OutState::Suspended,
            3 => OutState::Blocked,
            4 => OutState::Dying,
            5 => OutState::Dead,
            n => OutState::Other(n),
        }
    }

    /// A short name: `R`, `S`, `T`, `Z`, `X`, or the number.
    pub fn name(self) -> String {
        match self {
            OutState::Runnable => "R".into(),
            OutState::Blocked => "S".into(),
            OutState::Suspended => "T".into(),
            OutState::Dying => "Z".into(),
            OutState::Dead => "X".into(),
            OutState::Other(n) => n.to_string(),
        }
    }
}

/// A context switch on a CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Switch {
    /// Time, ns.
    pub ts: u64,
    /// CPU.
    pub cpu: u32,
    /// The thread switched out (tid 0: idle) and its process.
    pub prev_pid: u64,
    /// Thread switched out.
    pub prev_tid: u64,
    /// Its state.
    pub prev_state: OutState,
    /// The thread switched in (tid 0: idle) and its process.
    pub next_pid: u64,
    /// Thread switched in.
    pub next_tid: u64,
    /// Kernel priority of the outgoing thread, when written.
    pub prev_prio: Option<i32>,
    /// Kernel priority of the incoming thread, when written.
    pub next_prio: Option<i32>,
    /// The recorder inferred this switch (it was not seen).
    pub inferred: bool,
    /// An inferred switch out of a thread that a recorded switch switched
    /// in and that showed no event of its own before it left (in a
    /// recording of every task): the kernel kept it out of tracing, or its
    /// switch out was lost.
    pub untraced: bool,
}

/// Which end of a flow a flow event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowPhase {
    /// Where it starts.
    Begin,
    /// A point it passes through.
    Step,
    /// Where it ends.
    End,
}

/// One point of a flow: an arrow from the slice open on its thread at its
/// begin to the slices at its steps and end.
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    /// Time, ns.
    pub ts: u64,
    /// Where it is.
    pub track: Track,
    /// Category.
    pub category: Sym,
    /// Name.
    pub name: Sym,
    /// The flow's id (a provider's flows are told apart by it).
    pub id: u64,
    /// Which point.
    pub phase: FlowPhase,
}

/// A thread made runnable.
#[derive(Clone, Debug, PartialEq)]
pub struct Wakeup {
    /// Time, ns.
    pub ts: u64,
    /// CPU it was written on.
    pub cpu: u32,
    /// Woken thread's process (0 when not known).
    pub pid: u64,
    /// Woken thread.
    pub tid: u64,
    /// The thread that woke it, when written.
    pub waker_tid: Option<u64>,
}

/// The name of a frame whose function has no name (`""` or `[unknown]`):
/// for one in a file, the file and the address in it (`[libc.so.6+0x27304]`,
/// the address as `addr2line -e FILE` takes it), so that unnamed frames
/// stay apart and can be named later; else the mapping's own name
/// (`[anon]`, `[kernel.kallsyms]`), or `[unknown]`. `None` when the
/// function has a name.
pub fn unnamed_frame(function: &str, mapping_path: &str, rel_pc: u64) -> Option<String> {
    if !(function.is_empty() || function == "[unknown]") {
        return None;
    }
    let base = mapping_path.rsplit('/').next().unwrap_or(mapping_path);
    Some(if base.is_empty() {
        "[unknown]".to_owned()
    } else if base.starts_with('[') {
        base.to_owned()
    } else {
        format!("[{base}+{rel_pc:#x}]")
    })
}

/// One frame of a sample's call stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Function name ([`unnamed_frame`]'s for a function with none).
    pub function: Sym,
    /// Mapping (binary) path.
    pub mapping: Sym,
}

/// A stack sample (Perfetto `PerfSample` in a blob record).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Time, ns.
    pub ts: u64,
    /// Process.
    pub pid: u64,
    /// Thread.
    pub tid: u64,
    /// CPU.
    pub cpu: u32,
    /// The stream: `cpu-clock`, `off-cpu`, `wakeup`, `uprobe:F`, ...
    pub timebase: Sym,
    /// The sample's weight when its stream has one (ns blocked for
    /// `off-cpu`).
    pub weight: Option<u64>,
    /// Call stack, leaf first.
    pub frames: Vec<Frame>,
}

/// Events lost on one CPU, or not on any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The CPU whose buffer was full; `None` for losses of no one CPU
    /// (the kernel's `other`: events its programs skipped, or events past
    /// a oneshot budget).
    pub cpu: Option<u32>,
    /// Events lost there since the provider's previous [`Loss`].
    pub events: u64,
}

/// Records a provider lost.
///
/// The kernel provider writes its losses as a counter (`dropped_events`,
/// category `kernel`, arguments `cpu0`..`cpuN` and `other`) of running
/// totals; each sample of it that shows an increase is given as one
/// `Loss` holding only that increase, so the `events` of a provider's
/// losses add up to what it lost. A series that goes down starts counting
/// again from its new value.
#[derive(Clone, Debug, PartialEq)]
pub struct Loss {
    /// Provider id.
    pub provider: u32,
    /// Provider name.
    pub provider_name: Sym,
    /// What was lost since the provider's previous loss, per CPU (only
    /// the series that grew); empty for a buffer overflow notice.
    pub per_cpu: Vec<Dropped>,
    /// Events lost since the provider's previous loss (the sum of
    /// `per_cpu`); `None` for a buffer overflow notice, which does not say
    /// how many.
    pub events: Option<u64>,
}

/// One resolved event of a trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A process was named.
    Process {
        /// Process id.
        pid: u64,
        /// Name.
        name: Sym,
    },
    /// A thread was named.
    Thread {
        /// Process id.
        pid: u64,
        /// Thread id.
        tid: u64,
        /// Name.
        name: Sym,
    },
    /// A finished duration.
    Slice(Slice),
    /// A point event.
    Instant(Instant),
    /// A counter sample.
    Counter(Counter),
    /// An asynchronous span.
    Async(AsyncSpan),
    /// A context switch.
    Switch(Switch),
    /// A wake-up.
    Wakeup(Wakeup),
    /// A stack sample.
    Sample(Sample),
    /// A loss of records.
    Loss(Loss),
    /// A point of a flow.
    Flow(Flow),
}
