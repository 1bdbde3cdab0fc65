//! The Perfetto protobuf messages this crate reads and writes, written by hand.
//!
//! Each message mirrors a message of Perfetto's `.proto` files with the same
//! field numbers and wire types, holding only the fields used here; any other
//! field of a decoded message is skipped. The `.proto` files are proto2:
//! scalar fields have presence (`Option`), and repeated scalars are *not*
//! packed (Perfetto's readers expect one tagged entry per element, hence
//! `packed = "false"`). A `oneof` is modelled by the members used here, as
//! plain optional fields (the wire format is the same).

/// `protos/perfetto/trace/trace.proto`: `Trace`, the sequence of packets a
/// Perfetto blob holds.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    /// The packets, in order.
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `protos/perfetto/trace/trace_packet.proto`: `TracePacket`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// When the packet's event happened, in the clock of `timestamp_clock_id`
    /// (else of the sequence's defaults, else the trace's clock).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// The sequence the packet belongs to; interned data and defaults are
    /// scoped to it. Zero is invalid.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// Interned data introduced by this packet (`interned_data = 12`).
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// Bits of [`trace_packet::SequenceFlags`].
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// Deprecated form of `SEQ_INCREMENTAL_STATE_CLEARED`.
    #[prost(bool, optional, tag = "41")]
    pub incremental_state_cleared: Option<bool>,
    /// Non-zero when packets of this sequence were lost before this one
    /// (a bit set of `DataLossReason`).
    #[prost(uint32, optional, tag = "42")]
    pub previous_packet_dropped: Option<u32>,
    /// The clock of `timestamp` (a `BuiltinClock` or a sequence clock).
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// Defaults for later packets of the sequence.
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    /// A track's description (member `track_descriptor = 60` of the
    /// `data` oneof).
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    /// A perf sample (member `perf_sample = 66` of the `data` oneof).
    #[prost(message, optional, tag = "66")]
    pub perf_sample: Option<PerfSample>,
    /// Set on the first packet a writer emits on its sequence.
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
}

/// Nested types of `TracePacket` (`protos/perfetto/trace/trace_packet.proto`).
pub mod trace_packet {
    /// `TracePacket.SequenceFlags`, bits of `TracePacket.sequence_flags`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum SequenceFlags {
        /// No flag.
        SeqUnspecified = 0,
        /// The writer forgets its interned data and defaults before this
        /// packet: later packets refer only to what is emitted from here on.
        SeqIncrementalStateCleared = 1,
        /// The packet refers to interned data or defaults; a reader skips it
        /// while the sequence has no valid incremental state.
        SeqNeedsIncrementalState = 2,
    }
}

/// `protos/perfetto/trace/trace_packet_defaults.proto`: `TracePacketDefaults`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    /// Default `perf_sample` stream description of the sequence.
    #[prost(message, optional, tag = "12")]
    pub perf_sample_defaults: Option<PerfSampleDefaults>,
    /// Default `timestamp_clock_id` of the sequence's packets.
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
}

/// `protos/perfetto/trace/profiling/profile_packet.proto`: `PerfSampleDefaults`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PerfSampleDefaults {
    /// The event whose samples the sequence holds.
    #[prost(message, optional, tag = "1")]
    pub timebase: Option<perf_events::Timebase>,
    /// Process sharding: how many shards.
    #[prost(uint32, optional, tag = "2")]
    pub process_shard_count: Option<u32>,
    /// Process sharding: the shard recorded.
    #[prost(uint32, optional, tag = "3")]
    pub chosen_process_shard: Option<u32>,
}

/// Nested types of `PerfEvents` (`protos/perfetto/common/perf_events.proto`).
pub mod perf_events {
    /// `PerfEvents.Timebase`: the sampled event and its rate. Perfetto names
    /// the stream by `name`, else by `counter` (perf's names, e.g.
    /// `cpu-clock`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Timebase {
        /// Sample every `period` events (member of the `interval` oneof).
        #[prost(uint64, optional, tag = "1")]
        pub period: Option<u64>,
        /// Sample `frequency` times a second (member of the `interval` oneof).
        #[prost(uint64, optional, tag = "2")]
        pub frequency: Option<u64>,
        /// A built-in counter (member of the `event` oneof).
        #[prost(enumeration = "Counter", optional, tag = "4")]
        pub counter: Option<i32>,
        /// The name shown for the stream.
        #[prost(string, optional, tag = "10")]
        pub name: Option<String>,
    }

    /// `PerfEvents.Counter`: perf's built-in software and hardware counters.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum Counter {
        /// Not set.
        UnknownCounter = 0,
        /// `cpu-clock` (nanoseconds).
        SwCpuClock = 1,
        /// `page-faults`.
        SwPageFaults = 2,
        /// `task-clock` (nanoseconds).
        SwTaskClock = 3,
        /// `context-switches`.
        SwContextSwitches = 4,
        /// `cpu-migrations`.
        SwCpuMigrations = 5,
        /// `minor-faults`.
        SwPageFaultsMin = 6,
        /// `major-faults`.
        SwPageFaultsMaj = 7,
        /// `alignment-faults`.
        SwAlignmentFaults = 8,
        /// `emulation-faults`.
        SwEmulationFaults = 9,
        /// `cpu-cycles`.
        HwCpuCycles = 10,
        /// `instructions`.
        HwInstructions = 11,
        /// `cache-references`.
        HwCacheReferences = 12,
        /// `cache-misses`.
        HwCacheMisses = 13,
        /// `branch-instructions`.
        HwBranchInstructions = 14,
        /// `branch-misses`.
        HwBranchMisses = 15,
        /// `bus-cycles`.
        HwBusCycles = 16,
        /// `stalled-cycles-frontend`.
        HwStalledCyclesFrontend = 17,
        /// `stalled-cycles-backend`.
        HwStalledCyclesBackend = 18,
        /// `ref-cycles`.
        HwRefCpuCycles = 19,
        /// `dummy`.
        SwDummy = 20,
    }

    impl Counter {
        /// The name Perfetto gives a stream of this counter when its timebase
        /// has no `name` (`perf_sample_tracker.cc`, after perf's).
        pub fn perf_name(self) -> &'static str {
            match self {
                Counter::UnknownCounter => "unknown",
                Counter::SwCpuClock => "cpu-clock",
                Counter::SwPageFaults => "page-faults",
                Counter::SwTaskClock => "task-clock",
                Counter::SwContextSwitches => "context-switches",
                Counter::SwCpuMigrations => "cpu-migrations",
                Counter::SwPageFaultsMin => "minor-faults",
                Counter::SwPageFaultsMaj => "major-faults",
                Counter::SwAlignmentFaults => "alignment-faults",
                Counter::SwEmulationFaults => "emulation-faults",
                Counter::HwCpuCycles => "cpu-cycles",
                Counter::HwInstructions => "instructions",
                Counter::HwCacheReferences => "cache-references",
                Counter::HwCacheMisses => "cache-misses",
                Counter::HwBranchInstructions => "branch-instructions",
                Counter::HwBranchMisses => "branch-misses",
                Counter::HwBusCycles => "bus-cycles",
                Counter::HwStalledCyclesFrontend => "stalled-cycles-frontend",
                Counter::HwStalledCyclesBackend => "stalled-cycles-backend",
                Counter::HwRefCpuCycles => "ref-cycles",
                Counter::SwDummy => "dummy",
            }
        }
    }
}

/// `protos/perfetto/trace/interned_data/interned_data.proto`: `InternedData`
/// (the call stack tables).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// Function names, referenced by `Frame.function_name_id`.
    #[prost(message, repeated, tag = "5")]
    pub function_names: Vec<InternedString>,
    /// Frames, referenced by `Callstack.frame_ids`.
    #[prost(message, repeated, tag = "6")]
    pub frames: Vec<Frame>,
    /// Call stacks, referenced by `PerfSample.callstack_iid`.
    #[prost(message, repeated, tag = "7")]
    pub callstacks: Vec<Callstack>,
    /// Build ids (raw bytes), referenced by `Mapping.build_id`.
    #[prost(message, repeated, tag = "16")]
    pub build_ids: Vec<InternedString>,
    /// Mapping path components, referenced by `Mapping.path_string_ids`.
    #[prost(message, repeated, tag = "17")]
    pub mapping_paths: Vec<InternedString>,
    /// Mappings, referenced by `Frame.mapping_id`.
    #[prost(message, repeated, tag = "19")]
    pub mappings: Vec<Mapping>,
}

/// `protos/perfetto/trace/profiling/profile_common.proto`: `InternedString`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    /// Interning id, from 1 (0 means unset).
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// The string's bytes.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

/// `protos/perfetto/trace/profiling/profile_common.proto`: `Mapping`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Interning id, from 1.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Iid of the build id in `InternedData.build_ids`; 0 or unset: none.
    #[prost(uint64, optional, tag = "2")]
    pub build_id: Option<u64>,
    /// Offset in the file of the file's first mapping.
    #[prost(uint64, optional, tag = "3")]
    pub start_offset: Option<u64>,
    /// First address of the mapping.
    #[prost(uint64, optional, tag = "4")]
    pub start: Option<u64>,
    /// End address of the mapping.
    #[prost(uint64, optional, tag = "5")]
    pub end: Option<u64>,
    /// `p_vaddr - p_offset` of the executable segment.
    #[prost(uint64, optional, tag = "6")]
    pub load_bias: Option<u64>,
    /// Iids of the path's components in `InternedData.mapping_paths`.
    #[prost(uint64, repeated, packed = "false", tag = "7")]
    pub path_string_ids: Vec<u64>,
    /// Offset in the file of this mapping.
    #[prost(uint64, optional, tag = "8")]
    pub exact_offset: Option<u64>,
}

/// `protos/perfetto/trace/profiling/profile_common.proto`: `Frame`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Frame {
    /// Interning id, from 1.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Iid of the name in `InternedData.function_names`; 0 or unset: "".
    #[prost(uint64, optional, tag = "2")]
    pub function_name_id: Option<u64>,
    /// Iid of the mapping; 0 or unset: none.
    #[prost(uint64, optional, tag = "3")]
    pub mapping_id: Option<u64>,
    /// Instruction pointer relative to the mapping.
    #[prost(uint64, optional, tag = "4")]
    pub rel_pc: Option<u64>,
}

/// `protos/perfetto/trace/profiling/profile_common.proto`: `Callstack`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Callstack {
    /// Interning id, from 1.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Frame iids, bottom (outermost, root) frame first.
    #[prost(uint64, repeated, packed = "false", tag = "2")]
    pub frame_ids: Vec<u64>,
}

/// `protos/perfetto/trace/profiling/profile_packet.proto`: `PerfSample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PerfSample {
    /// CPU the sample was taken on.
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    /// Process id.
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    /// Thread id.
    #[prost(uint32, optional, tag = "3")]
    pub tid: Option<u32>,
    /// Iid of the call stack in `InternedData.callstacks`.
    #[prost(uint64, optional, tag = "4")]
    pub callstack_iid: Option<u64>,
    /// Execution state sampled, a [`profiling::CpuMode`].
    #[prost(enumeration = "profiling::CpuMode", optional, tag = "5")]
    pub cpu_mode: Option<i32>,
    /// Value of the timebase counter since the event was set up (not a delta).
    #[prost(uint64, optional, tag = "6")]
    pub timebase_count: Option<u64>,
    /// Set on a record of kernel ring buffer loss instead of a sample.
    #[prost(uint64, optional, tag = "17")]
    pub kernel_records_lost: Option<u64>,
    /// Set on a notable event of the sampler instead of a sample.
    #[prost(message, optional, tag = "19")]
    pub producer_event: Option<perf_sample::ProducerEvent>,
}

/// Nested types of `PerfSample` (`protos/perfetto/trace/profiling/profile_packet.proto`).
pub mod perf_sample {
    /// `PerfSample.ProducerEvent`: a notable event of the sampler.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProducerEvent {
        /// Why the data source stopped (`DataSourceStopReason`: 1, a
        /// guardrail).
        #[prost(int32, optional, tag = "1")]
        pub source_stop_reason: Option<i32>,
    }
}

/// Nested types of `Profiling` (`protos/perfetto/trace/profiling/profile_packet.proto`).
pub mod profiling {
    /// `Profiling.CpuMode`: the execution state a sample was taken in.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum CpuMode {
        /// Not known.
        ModeUnknown = 0,
        /// Kernel.
        ModeKernel = 1,
        /// User space.
        ModeUser = 2,
        /// Hypervisor.
        ModeHypervisor = 3,
        /// Guest kernel.
        ModeGuestKernel = 4,
        /// Guest user space.
        ModeGuestUser = 5,
    }
}

/// `protos/perfetto/trace/track_event/track_descriptor.proto`:
/// `TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// The track's id, unique in the trace; non-zero.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// The process the track describes.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
}

/// `protos/perfetto/trace/track_event/process_descriptor.proto`:
/// `ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// The process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Labels; the importer keeps them as the process's
    /// `chrome.process_label[i]` arguments, and the UI shows them under the
    /// process's name and in its details.
    #[prost(string, repeated, tag = "8")]
    pub process_labels: Vec<String>,
}
