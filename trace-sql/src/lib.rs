//! SQL tables over Fuchsia Trace Format traces.
//!
//! A trace is streamed ([`trace_analysis::read_trace`]) into the tables of
//! [`tables`] — processes, threads, slices, instants, counters, context
//! switches, wake-ups, system calls, block requests, samples, async spans
//! and losses — in Arrow record batches of bounded size ([`TableWriter`]).
//! The batches are either kept in memory and queried with DataFusion
//! ([`engine`]), or written as Parquet files, one per table and trace
//! ([`parquet_export`]), which [`engine`] (or any engine reading Parquet)
//! queries across many traces.

#![forbid(unsafe_code)]

pub mod engine;
pub mod error;
pub mod functions;
pub mod parquet_export;
pub mod scan;
pub mod tables;
pub mod trace_id;
pub mod writer;

pub use error::SqlError;
pub use tables::TraceInfo;
pub use writer::{BatchConsumer, TableWriter, stream_tables, stream_trace};

/// The query engine, re-exported so that users of the tables get the
/// Arrow, Parquet and DataFusion versions they are built with.
pub use datafusion;
