//! What `check` can find, and the importer rule each finding stands for.
//!
//! A *violation* loses or misdraws data in Perfetto (and `check` exits 1);
//! a *warning* is something Perfetto shows differently from what the file
//! says, or does not show at all, without losing what it imports.

use std::collections::BTreeMap;

/// Whether a finding loses or misdraws data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Data is lost or drawn wrongly.
    Violation,
    /// Shown differently from what the file says; nothing imported is lost.
    Warning,
}

/// Every kind of finding, in the order they are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    NotFxt,
    ZeroSize,
    Truncated,
    LargeRecordDesync,
    Malformed,
    UndeclaredProvider,
    ZeroTicksPerSecond,
    TimestampOverflow,
    InvalidStringRef,
    UndefinedThreadRef,
    KoidTruncated,
    ThreadWithoutProcess,
    SchedThreadWithoutProcess,
    ThreadSplit,
    ProcessZero,
    UnnamedProcess,
    InvalidArgType,
    SwitchContinuity,
    SwitchInWhileRunning,
    WakeupOfRunning,
    WakerZero,
    OverlappingComplete,
    NegativeDuration,
    MisnestedEnd,
    UnmatchedEnd,
    UnmatchedBegin,
    MaxDepth,
    SliceBeforeThread,
    AsyncEndMismatch,
    AsyncIdCollision,
    FlowOutsideSlice,
    FlowStaleSlice,
    FlowUnmatched,
    FlowDuplicate,
    FlowIdCollision,
    CounterCollision,
    NonNumericCounter,
    BadPerfettoPacket,
    ProviderEventIgnored,
    LogIgnored,
    InstantScopeIgnored,
    NoInitialization,
    ThreadNamedLate,
    UnnamedThread,
}

impl Kind {
    /// Whether this kind is a violation or a warning.
    pub fn severity(self) -> Severity {
        match self {
            Kind::ProviderEventIgnored
            | Kind::LogIgnored
            | Kind::InstantScopeIgnored
            | Kind::NoInitialization
            | Kind::ThreadNamedLate
            | Kind::UnnamedThread => Severity::Warning,
            _ => Severity::Violation,
        }
    }

    /// A stable identifier (for `--json`).
    pub fn id(self) -> &'static str {
        match self {
            Kind::NotFxt => "not_fxt",
            Kind::ZeroSize => "zero_size_record",
            Kind::Truncated => "truncated_record",
            Kind::LargeRecordDesync => "large_record_desync",
            Kind::Malformed => "malformed_record",
            Kind::UndeclaredProvider => "undeclared_provider",
            Kind::ZeroTicksPerSecond => "zero_ticks_per_second",
            Kind::TimestampOverflow => "timestamp_overflow",
            Kind::InvalidStringRef => "invalid_string_ref",
            Kind::UndefinedThreadRef => "undefined_thread_ref",
            Kind::KoidTruncated => "koid_truncated",
            Kind::ThreadWithoutProcess => "thread_without_process",
            Kind::SchedThreadWithoutProcess => "sched_thread_without_process",
            Kind::ThreadSplit => "thread_split_across_processes",
            Kind::ProcessZero => "record_in_process_zero",
            Kind::UnnamedProcess => "process_without_name",
            Kind::InvalidArgType => "invalid_arg_type",
            Kind::SwitchContinuity => "switch_continuity",
            Kind::SwitchInWhileRunning => "switch_in_while_running",
            Kind::WakeupOfRunning => "wakeup_of_running_thread",
            Kind::WakerZero => "waker_koid_zero",
            Kind::OverlappingComplete => "overlapping_complete_slices",
            Kind::NegativeDuration => "negative_duration",
            Kind::MisnestedEnd => "misnested_end",
            Kind::UnmatchedEnd => "unmatched_end",
            Kind::UnmatchedBegin => "unmatched_begin",
            Kind::MaxDepth => "max_depth_exceeded",
            Kind::SliceBeforeThread => "slice_before_thread_creation",
            Kind::AsyncEndMismatch => "async_end_mismatch",
            Kind::AsyncIdCollision => "async_id_collision",
            Kind::FlowOutsideSlice => "flow_outside_slice",
            Kind::FlowStaleSlice => "flow_bound_to_ended_slice",
            Kind::FlowUnmatched => "flow_unmatched",
            Kind::FlowDuplicate => "flow_duplicate_id",
            Kind::FlowIdCollision => "flow_id_collision",
            Kind::CounterCollision => "counter_name_collision",
            Kind::NonNumericCounter => "non_numeric_counter",
            Kind::BadPerfettoPacket => "bad_perfetto_packet",
            Kind::ProviderEventIgnored => "provider_event_ignored",
            Kind::LogIgnored => "log_ignored",
            Kind::InstantScopeIgnored => "instant_scope_ignored",
            Kind::NoInitialization => "no_initialization",
            Kind::ThreadNamedLate => "thread_named_after_its_records",
            Kind::UnnamedThread => "thread_without_name",
        }
    }

    /// What the finding means for a user, in one line.
    pub fn title(self) -> &'static str {
        match self {
            Kind::NotFxt => "not an FXT file: Perfetto does not recognise it",
            Kind::ZeroSize => "record of size 0: Perfetto's import fails here",
            Kind::Truncated => "the last record is cut short: Perfetto ignores it",
            Kind::LargeRecordDesync => {
                "large record of 4096 words or more: Perfetto frames it by 12 bits and loses sync"
            }
            Kind::Malformed => "malformed record: its content does not decode",
            Kind::UndeclaredProvider => {
                "records of a provider never declared (section before provider info): dropped"
            }
            Kind::ZeroTicksPerSecond => {
                "initialization record with 0 ticks per second: the provider's events are dropped"
            }
            Kind::TimestampOverflow => {
                "timestamp outside what the tick rate can express (or before 0): record dropped"
            }
            Kind::InvalidStringRef => {
                "string index with no string record before it: record dropped"
            }
            Kind::UndefinedThreadRef => {
                "thread index with no thread record before it: read as process 0, thread 0"
            }
            Kind::KoidTruncated => "koid above 32 bits: truncated, so different koids collide",
            Kind::ThreadWithoutProcess => {
                "thread name record without a \"process\" koid: the thread lands in process 0"
            }
            Kind::SchedThreadWithoutProcess => {
                "scheduling record whose thread no thread object places in a process: its CPU slices and states go to a process with pid 0"
            }
            Kind::ThreadSplit => {
                "one thread id in several processes: it becomes several threads, its scheduling on one and its events on another"
            }
            Kind::ProcessZero => {
                "record placed in a process with pid 0 (not a real process): its thread is shown there"
            }
            Kind::UnnamedProcess => {
                "process that threads or events refer to and no process object names: shown without a name"
            }
            Kind::InvalidArgType => {
                "argument of the wrong type where the importer expects one: record dropped"
            }
            Kind::SwitchContinuity => {
                "a CPU switches out a thread other than the one it switched in: an open-ended slice is left"
            }
            Kind::SwitchInWhileRunning => {
                "a thread switched in while already running on another CPU: its first slice never ends"
            }
            Kind::WakeupOfRunning => {
                "wake-up of a thread that is running: it is drawn as waking while on a CPU"
            }
            Kind::WakerZero => {
                "wake-up naming waker koid 0: an unnamed, non-idle \"thread 0\" becomes the waker"
            }
            Kind::OverlappingComplete => {
                "complete slices on one track that partly overlap: the later one is dropped"
            }
            Kind::NegativeDuration => "complete slice that ends before it begins: dropped",
            Kind::MisnestedEnd => {
                "slice that ends while one opened inside it is still open: the inner one is cut"
            }
            Kind::UnmatchedEnd => "end with no open slice on its track: ignored",
            Kind::UnmatchedBegin => "begin never ended: drawn as \"did not end\"",
            Kind::MaxDepth => "slices nested deeper than 512: dropped",
            Kind::SliceBeforeThread => "slice that starts before its thread was created",
            Kind::AsyncEndMismatch => {
                "async end whose category or name differs from the open begin: the slice never closes"
            }
            Kind::AsyncIdCollision => {
                "async id used by several processes: their slices share one global track"
            }
            Kind::FlowOutsideSlice => "flow event with no slice on its thread's track: not drawn",
            Kind::FlowStaleSlice => {
                "flow event bound to a slice that ended before it: the arrow attaches to the wrong slice"
            }
            Kind::FlowUnmatched => {
                "flow step or end whose begin cannot be found (or is ambiguous across processes): not drawn"
            }
            Kind::FlowDuplicate => {
                "flow begun twice with the same id in one process: second dropped"
            }
            Kind::FlowIdCollision => {
                "flow id begun in several processes: steps and ends in other processes cannot be matched"
            }
            Kind::CounterCollision => {
                "different counter series with one Perfetto track name \"<name>:<arg>:<id>\": merged"
            }
            Kind::NonNumericCounter => "counter argument that is not a number: not drawn",
            Kind::BadPerfettoPacket => {
                "Perfetto packet (blob type 3) that does not decode, or whose interned ids do not resolve: its samples are lost or have no call stack"
            }
            Kind::ProviderEventIgnored => {
                "provider event (buffer overflow) record, which Perfetto ignores, and no drop counter: the drop is invisible there"
            }
            Kind::LogIgnored => "log records: Perfetto does not import them",
            Kind::InstantScopeIgnored => {
                "instant with process or global scope: Perfetto draws it on the thread's track"
            }
            Kind::NoInitialization => {
                "provider without an initialization record: Perfetto assumes 10^9 ticks per second"
            }
            Kind::ThreadNamedLate => {
                "thread whose first record comes before its thread object: a reader in file order (trace-cli report, convert) sees it unnamed until then"
            }
            Kind::UnnamedThread => {
                "thread in records that no thread object (of that process) names: shown by its id alone"
            }
        }
    }

    /// The importer code this finding follows (google/perfetto,
    /// src/trace_processor/importers/...).
    pub fn rule(self) -> &'static str {
        match self {
            Kind::NotFxt => "fuchsia_trace_tokenizer.cc FuchsiaImporter::Sniff (first 8 bytes)",
            Kind::ZeroSize => {
                "fuchsia_trace_tokenizer.cc Parse: \"Unexpected record of size 0\" (error status)"
            }
            Kind::Truncated => "fuchsia_trace_tokenizer.cc Parse: leftover bytes never completed",
            Kind::LargeRecordDesync => {
                "fuchsia_trace_tokenizer.cc Parse: size read from bits [4..15] for every type"
            }
            Kind::Malformed => "fuchsia_trace_tokenizer.cc ParseRecord: fuchsia_record_read_error",
            Kind::UndeclaredProvider => {
                "fuchsia_trace_tokenizer.cc kProviderSection: providers_[id] is null; fuchsia_invalid_event"
            }
            Kind::ZeroTicksPerSecond | Kind::TimestampOverflow => {
                "fuchsia_trace_utils.cc TicksToNs returns -1; fuchsia_timestamp_overflow"
            }
            Kind::InvalidStringRef => {
                "fuchsia_trace_tokenizer.cc GetString == Null; fuchsia_invalid_string_ref"
            }
            Kind::UndefinedThreadRef => {
                "fuchsia_trace_tokenizer.h ProviderInfo::GetThread returns {0, 0}"
            }
            Kind::KoidTruncated => "fuchsia_trace_parser.cc static_cast<uint32_t>(tid/pid)",
            Kind::ThreadWithoutProcess => "fuchsia_trace_tokenizer.cc kZxObjTypeThread: pid = 0",
            Kind::SchedThreadWithoutProcess => {
                "fuchsia_trace_parser.cc SwitchFrom/SwitchTo/Wake: UpdateThread(tid, threads_[tid].info.pid), pid 0 without a thread object; GetOrCreateThread(waker)"
            }
            Kind::ThreadSplit => {
                "process_tracker.cc UpdateThread: GetThreadOrNull skips a row of another pid and StartNewThread makes a new one"
            }
            Kind::ProcessZero => {
                "process_tracker.cc UpdateThread(tid, 0): pid 0 is a process like any other in FXT (no pid_zero_is_idle)"
            }
            Kind::UnnamedProcess => {
                "fuchsia_trace_tokenizer.cc kZxObjTypeProcess: SetProcessMetadata is the only source of a process name"
            }
            Kind::InvalidArgType => {
                "fuchsia_trace_parser.cc / tokenizer: weight not Int32, waker or process not Koid; fuchsia_invalid_event_arg_type"
            }
            Kind::SwitchContinuity => {
                "fuchsia_trace_parser.cc SwitchFrom closes only the outgoing thread's own slice"
            }
            Kind::SwitchInWhileRunning => {
                "fuchsia_trace_parser.cc SwitchTo replaces last_slice_row without closing it"
            }
            Kind::WakeupOfRunning => {
                "fuchsia_trace_parser.cc Wake closes the Running state and opens \"W\""
            }
            Kind::WakerZero => {
                "fuchsia_trace_parser.cc kSchedulerEventThreadWakeup: GetOrCreateThread(waker)"
            }
            Kind::OverlappingComplete => {
                "slice_tracker.cc MaybeCloseStack: slice_drop_overlapping_complete_event"
            }
            Kind::NegativeDuration => "fuchsia_trace_parser.cc kDurationComplete: duration < 0",
            Kind::MisnestedEnd => "slice_tracker.cc MaybeCloseStack: misplaced_end_event",
            Kind::UnmatchedEnd => "slice_tracker.cc CompleteSliceBegin: no matching open slice",
            Kind::UnmatchedBegin => "slice_tracker.cc FlushPendingSlices: dur stays -1",
            Kind::MaxDepth => "slice_tracker.cc StartSlice: kMaxDepth = 512",
            Kind::SliceBeforeThread => {
                "fuchsia_trace_parser.cc: slices are drawn at their timestamp, whatever the thread's life"
            }
            Kind::AsyncEndMismatch => {
                "slice_tracker.cc MatchingIncompleteSliceIndex: category and name must match"
            }
            Kind::AsyncIdCollision => {
                "track_compressor.cc InternLegacyAsyncTrack(trace_id_is_process_scoped = false)"
            }
            Kind::FlowOutsideSlice => "flow_tracker.cc: flow_no_enclosing_slice",
            Kind::FlowStaleSlice => {
                "slice_tracker.cc GetTopmostSliceOnTrack returns the stack's top even when it has ended"
            }
            Kind::FlowUnmatched => {
                "fuchsia_trace_parser.cc GetGlobalFlowId; flow_tracker.cc flow_step/end_without_start"
            }
            Kind::FlowDuplicate => "flow_tracker.cc: flow_duplicate_id",
            Kind::FlowIdCollision => "fuchsia_trace_parser.cc GetGlobalFlowId: is_ambiguous",
            Kind::CounterCollision => {
                "fuchsia_trace_parser.cc kCounter: track named name + \":\" + arg + \":\" + id per process"
            }
            Kind::NonNumericCounter => {
                "fuchsia_trace_parser.cc kCounter: fuchsia_non_numeric_counters"
            }
            Kind::BadPerfettoPacket => {
                "fuchsia_trace_tokenizer.cc kBlob (kPerfettoBlob) hands the payload to ProtoTraceReader; profile_module.cc ParsePerfSample: FindOrInsertCallstack finds no interned callstack"
            }
            Kind::ProviderEventIgnored => {
                "fuchsia_trace_tokenizer.cc kProviderEvent: \"Ignoring provider event\""
            }
            Kind::LogIgnored => "fuchsia_trace_tokenizer.cc ParseRecord: no case for record type 9",
            Kind::InstantScopeIgnored => {
                "fuchsia_trace_parser.cc kInstant: InternThreadTrack whatever the scope"
            }
            Kind::NoInitialization => {
                "fuchsia_trace_tokenizer.h ProviderInfo::ticks_per_second = 10^9"
            }
            Kind::ThreadNamedLate => {
                "the FXT format: readers apply records in file order (Perfetto sorts fully, so it is not affected)"
            }
            Kind::UnnamedThread => {
                "fuchsia_trace_tokenizer.cc kZxObjTypeThread: set_name on the (tid, pid) row only"
            }
        }
    }
}

/// Where a finding was seen: the record's byte offset and timestamp.
#[derive(Clone, Debug)]
pub struct Example {
    /// Byte offset of the record in the file.
    pub offset: u64,
    /// Timestamp in nanoseconds, if the record has one.
    pub ts: Option<i64>,
    /// What exactly is wrong.
    pub detail: String,
}

/// Findings of one file: a count per kind and the first examples.
#[derive(Debug)]
pub struct Findings {
    max_examples: usize,
    by_kind: BTreeMap<Kind, (u64, Vec<Example>)>,
}

impl Findings {
    /// Keeps at most `max_examples` examples per kind.
    pub fn new(max_examples: usize) -> Self {
        Findings {
            max_examples,
            by_kind: BTreeMap::new(),
        }
    }

    /// Adds one finding of `kind`.
    pub fn add(
        &mut self,
        kind: Kind,
        offset: u64,
        ts: Option<i64>,
        detail: impl FnOnce() -> String,
    ) {
        let (count, examples) = self.by_kind.entry(kind).or_default();
        *count += 1;
        if examples.len() < self.max_examples {
            examples.push(Example {
                offset,
                ts,
                detail: detail(),
            });
        }
    }

    /// Adds the findings of `other` after these, keeping the first
    /// examples of each kind.
    pub fn append(&mut self, other: Findings) {
        for (kind, (count, examples)) in other.by_kind {
            let (n, mine) = self.by_kind.entry(kind).or_default();
            *n += count;
            let room = self.max_examples.saturating_sub(mine.len());
            mine.extend(examples.into_iter().take(room));
        }
    }

    /// Every kind found, with its count and examples, violations first.
    pub fn iter(&self) -> impl Iterator<Item = (Kind, u64, &[Example])> {
        let mut all: Vec<_> = self
            .by_kind
            .iter()
            .map(|(k, (n, ex))| (*k, *n, ex.as_slice()))
            .collect();
        all.sort_by_key(|(k, _, _)| (k.severity(), *k));
        all.into_iter()
    }

    /// How many violations there are, all kinds together.
    pub fn violations(&self) -> u64 {
        self.by_kind
            .iter()
            .filter(|(k, _)| k.severity() == Severity::Violation)
            .map(|(_, (n, _))| *n)
            .sum()
    }
}
