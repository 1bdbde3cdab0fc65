//! Streaming analysis of Fuchsia Trace Format files.
//!
//! [`read_trace`] reads an FXT stream of any length record by record and
//! hands each resolved [`Event`] to a [`Sink`]: strings and threads looked
//! up in their provider's tables, timestamps in nanoseconds, begins paired
//! with their ends and every duration given its depth and parent on its
//! thread ([`nesting`]). What it holds is bounded by the number of threads,
//! distinct strings and open spans, never by the number of events, so a
//! multi-gigabyte trace reads in constant memory.

#![forbid(unsafe_code)]

mod context;
pub mod critical_path;
pub mod errno;
pub mod event;
pub mod kernel;
pub mod nesting;
pub mod reader;
pub mod report;
pub mod strings;
mod wants;

pub use event::{Event, Value};
pub use reader::{
    Context, ProcessLabels, ReadStats, ReadTraceError, Sink, Wants, read_trace, read_trace_wanting,
};
pub use strings::{Strings, Sym};

#[cfg(test)]
mod reader_tests;
