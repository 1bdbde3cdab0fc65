//! The manager's clock: CLOCK_BOOTTIME, the timeline of every trace.

pub use trace_common::provider::clock::boottime_ns;
