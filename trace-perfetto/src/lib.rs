//! Call stack samples and process labels as Perfetto packets, for FXT blob
//! records.
//!
//! An FXT file can carry Perfetto protobuf data: a blob record of blob type
//! [`BLOB_TYPE_PERFETTO`] (3) holds bytes of a Perfetto `Trace`, that is
//! framed `TracePacket`s (field 1, length-delimited, one after another).
//! Perfetto's FXT importer
//! (`src/trace_processor/importers/fuchsia/fuchsia_trace_tokenizer.cc`, the
//! `kBlob` case with `kPerfettoBlob = 3`) appends the payload of every such
//! blob to one buffer and hands it to its protobuf trace reader
//! (`ProtoTraceReader`), the same one that reads `.perfetto-trace` files.
//! This crate writes CPU profile, off-CPU and probe call stacks that way, as
//! `PerfSample` packets with interned call stacks, so that ui.perfetto.dev
//! shows flamegraphs and per-thread sample marks next to the FXT events; and
//! reads them back for checks and tests.
//!
//! - [`SampleWriter`]: one sampling stream (one packet sequence) of
//!   [`Sample`]s into blob payloads of at most [`MAX_BLOB_PAYLOAD`] bytes,
//!   each a whole number of packets.
//! - [`SampleReader`]: blob payloads in file order back into
//!   [`DecodedSample`]s, following each sequence's incremental state as
//!   Perfetto does, and saying what does not resolve ([`PerfettoError`]).
//! - [`process_labels`]: a process's labels (its cgroup, container, PID
//!   namespace id) as a `TrackDescriptor` packet, which the UI shows under
//!   the process's name ([`read_process_labels`] reads them back).
//! - [`remap_payload`]: packets moved into a trace merged from several
//!   machines (times, ids, CPUs, sequences, the machine's label).
//! - [`protos`]: the protobuf messages.
//!
//! ```
//! use std::sync::Arc;
//! use trace_perfetto::{CpuMode, Frame, Mapping, Sample, SampleReader, SampleWriter};
//!
//! let libc = Arc::new(Mapping {
//!     path: "/usr/lib/libc.so.6".into(),
//!     build_id: None,
//!     start: 0x7f00_0000_0000,
//!     end: 0x7f00_0020_0000,
//!     file_offset: 0,
//!     load_bias: 0,
//! });
//! let frames = [
//!     Frame { function: "read".into(), mapping: libc.clone(), rel_pc: 0x1_1234 },
//!     Frame { function: "main".into(), mapping: libc, rel_pc: 0x2_5678 },
//! ];
//! let mut writer = SampleWriter::new(1, "cpu-clock").with_frequency(99);
//! writer.push(&Sample {
//!     ts: 1_000_000,
//!     pid: 42,
//!     tid: 42,
//!     cpu: 0,
//!     cpu_mode: CpuMode::User,
//!     timebase_count: None,
//!     frames: &frames,
//! });
//! // Each payload goes in an FXT blob record of blob type BLOB_TYPE_PERFETTO.
//! let payloads = writer.take();
//!
//! let mut reader = SampleReader::new();
//! let (samples, errors) = reader.feed(&payloads[0]);
//! assert!(errors.is_empty());
//! assert_eq!(samples[0].timebase, "cpu-clock");
//! assert_eq!(samples[0].frames[0].function, "read");
//! ```
//!
//! # What a stream looks like
//!
//! Every packet of a stream has `trusted_packet_sequence_id` (the writer's
//! sequence id), `timestamp` (the sample's) and `sequence_flags`. The first
//! packet has `SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE`
//! (3), `first_packet_on_sequence`, and `trace_packet_defaults` with
//! `perf_sample_defaults.timebase.name` (the stream's name, optionally its
//! frequency or period and perf counter); the others have
//! `SEQ_NEEDS_INCREMENTAL_STATE` (2). A sample's packet has `perf_sample`
//! (cpu, pid, tid, cpu_mode, timebase_count, callstack_iid) and, in
//! `interned_data`, whatever the sample refers to that the sequence has not
//! interned yet: function names, mapping paths, build ids, mappings, frames
//! and the call stack. When that does not fit in one packet, the interned
//! entries go in packets of their own just before the sample's, in
//! dependency order.
//!
//! # Field numbers
//!
//! Confirmed against Perfetto's `.proto` files:
//!
//! | message (file under `protos/perfetto/`) | fields |
//! |---|---|
//! | `Trace` (`trace/trace.proto`) | `packet` 1 |
//! | `TracePacket` (`trace/trace_packet.proto`) | `timestamp` 8, `trusted_packet_sequence_id` 10, `interned_data` 12, `sequence_flags` 13, `incremental_state_cleared` 41 (deprecated), `previous_packet_dropped` 42, `timestamp_clock_id` 58, `trace_packet_defaults` 59, `perf_sample` 66, `first_packet_on_sequence` 87; `SequenceFlags`: `SEQ_INCREMENTAL_STATE_CLEARED` 1, `SEQ_NEEDS_INCREMENTAL_STATE` 2 |
//! | `TracePacketDefaults` (`trace/trace_packet_defaults.proto`) | `perf_sample_defaults` 12, `timestamp_clock_id` 58 |
//! | `PerfSampleDefaults` (`trace/profiling/profile_packet.proto`) | `timebase` 1, `process_shard_count` 2, `chosen_process_shard` 3 |
//! | `PerfEvents.Timebase` (`common/perf_events.proto`) | `period` 1, `frequency` 2, `counter` 4, `name` 10 |
//! | `InternedData` (`trace/interned_data/interned_data.proto`) | `function_names` 5, `frames` 6, `callstacks` 7, `build_ids` 16, `mapping_paths` 17, `mappings` 19 |
//! | `InternedString` (`trace/profiling/profile_common.proto`) | `iid` 1, `str` 2 (bytes) |
//! | `Mapping` (same) | `iid` 1, `build_id` 2, `start_offset` 3, `start` 4, `end` 5, `load_bias` 6, `path_string_ids` 7, `exact_offset` 8 |
//! | `Frame` (same) | `iid` 1, `function_name_id` 2, `mapping_id` 3, `rel_pc` 4 |
//! | `Callstack` (same) | `iid` 1, `frame_ids` 2, bottom (root) frame first |
//! | `PerfSample` (`trace/profiling/profile_packet.proto`) | `cpu` 1, `pid` 2, `tid` 3, `callstack_iid` 4, `cpu_mode` 5, `timebase_count` 6, `kernel_records_lost` 17 |
//! | `Profiling.CpuMode` (same) | `MODE_UNKNOWN` 0, `MODE_KERNEL` 1, `MODE_USER` 2 (3–5: hypervisor, guest kernel, guest user) |
//!
//! The files are proto2, so repeated integers (`frame_ids`,
//! `path_string_ids`) are written unpacked, one tagged varint per element:
//! Perfetto's generated readers iterate such fields element by element and
//! would misread a packed run.
//!
//! # What Perfetto's importer requires
//!
//! From `src/trace_processor/importers/proto/proto_trace_reader.cc`,
//! `profile_module.cc` (`ParsePerfSample`), `perf_sample_tracker.cc`,
//! `stack_profile_sequence_state.cc` and
//! `packet_sequence_state_generation.cc`:
//!
//! - **Sequences.** The embedded packets keep their own
//!   `trusted_packet_sequence_id`: the FXT tokenizer adds no sequence of its
//!   own. Interned data and defaults are only stored for packets that have
//!   one; a packet with `SEQ_NEEDS_INCREMENTAL_STATE` on sequence 0 is an
//!   error. So every writer needs its own non-zero id.
//! - **Clearing first.** Until a packet with `SEQ_INCREMENTAL_STATE_CLEARED`
//!   arrives on a sequence, its state is invalid: interned data is dropped
//!   and packets with `SEQ_NEEDS_INCREMENTAL_STATE` are skipped. Clearing
//!   forgets the interned data *and* the defaults, so defaults go in (or
//!   after) the clearing packet. Within one packet the importer applies the
//!   clearing, then the defaults, then the interned data, then checks the
//!   flag, so one packet can do all of it and hold the first sample.
//!   `previous_packet_dropped` invalidates the state until the next clearing.
//! - **Order.** Interned data is taken when a packet is tokenized, in file
//!   order; samples are sorted by time later and resolved against the data
//!   of their sequence's generation. Interned entries must come no later in
//!   the file than the first sample using them; a later sample with an
//!   earlier timestamp still resolves.
//! - **Defaults.** `perf_sample_defaults.timebase` names the stream
//!   (`name`, else perf's name of `counter`); without defaults Perfetto
//!   assumes `cpu-clock`. Each sequence is one profiler session; its
//!   `timebase_count`s become one counter track per CPU (values are
//!   cumulative counts, not deltas); `counter` sets the unit shown (`ns` for
//!   `cpu-clock` and `task-clock`).
//! - **Clock.** A packet timestamp with no `timestamp_clock_id` (nor one in
//!   the defaults) is in the trace's default clock, which for an FXT file is
//!   CLOCK_BOOTTIME, the clock of its records. The writer sets no clock id,
//!   so samples line up with the FXT events whatever Perfetto version reads
//!   them; [`Sample::ts`] is in CLOCK_BOOTTIME nanoseconds.
//! - **Call stacks.** `frame_ids` are root first (each frame becomes the
//!   child call site of the one before). A frame's `function_name_id` 0
//!   reads as an empty name, a mapping's `build_id` 0 as none; a mapping
//!   without path components has an empty name. An iid that does not resolve
//!   drops the whole call stack (the sample stays, without one). A call stack
//!   with no frames is counted as an error, so a sample without frames is
//!   written without `callstack_iid`.
//! - **Mappings.** Path components are joined as `/a/b`; a single full path
//!   (`/usr/lib/libc.so.6`, written here as one component) keeps its name,
//!   while a name without a leading slash gets one (`[kernel.kallsyms]` shows
//!   as `/[kernel.kallsyms]`). A mapping with a non-empty address range
//!   belongs to the sample's process; one with an empty range is shared by
//!   all; traced_perf writes kernel frames in a mapping named `/kernel` with
//!   an empty range and no build id, which Perfetto treats as the kernel's.
//! - **Samples.** `PerfSample` with `kernel_records_lost` > 0 or a
//!   `producer_event` is not a sample. `cpu_mode` `MODE_UNKNOWN` is not
//!   shown. The timestamp is the packet's.
//!
//! Perfetto also has a newer, transport-neutral `StackSample` packet; the
//! `PerfSample` path is the one traced_perf writes, read by every Perfetto
//! release of the last years.
//!
//! # Sizes
//!
//! FXT gives a blob's size 15 bits and a record's 12 bits of 8-byte words,
//! so a blob record is at most 32 KiB with its header and name; payloads
//! here are at most [`MAX_BLOB_PAYLOAD`] (30 KiB) and never split a packet,
//! though Perfetto would accept a packet across blobs (it reads their
//! concatenation). Function names are cut to [`MAX_FUNCTION_NAME_LEN`]
//! bytes, stacks to the innermost [`MAX_FRAMES`] frames, mapping paths to
//! 4 KiB, build ids to 64 bytes and the timebase name to 256 bytes, so that
//! any one interned entry fits in a payload with its sample.
//!
//! # Why prost with messages written by hand
//!
//! The messages are few and small, and only some of their fields are
//! needed. Generating them from Perfetto's `.proto` files would need
//! `protoc` at build time (and Perfetto's whole proto tree), which the build
//! does not have. `prost`'s derive macros give correct encoding and decoding
//! (presence, unknown fields skipped, bounded recursion, no panics on bad
//! input) from annotated structs; it is the smallest well-maintained
//! protobuf crate with such a derive, and is used here without its default
//! features.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod process;
pub mod protos;
mod reader;
mod remap;
mod restart;
mod writer;

pub use process::{process_labels, process_track_uuid, read_process_labels};
pub use reader::{DecodedFrame, DecodedSample, PerfettoError, SampleReader};
pub use remap::{PacketMap, UndecodablePayload, remap_payload};
pub use restart::SequenceRestart;
pub use writer::{
    CpuMode, Frame, MAX_BLOB_PAYLOAD, MAX_FRAMES, MAX_FUNCTION_NAME_LEN, MAX_INTERNED, Mapping,
    Sample, SampleWriter,
};

/// FXT blob type of a blob record holding Perfetto packets.
pub const BLOB_TYPE_PERFETTO: u8 = 3;

#[cfg(test)]
mod tests;
