//! The core shared by every part of the tracing system.
//!
//! - [`fxt`]: the Fuchsia Trace Format — constants, header fields, the record
//!   model, a writer and a reader that never panics on any input.
//! - [`kernel`]: the fixed-layout events the eBPF kernel provider writes into
//!   its ring buffers, and the tracepoint field layouts it is configured with.
//! - [`category`]: category names and glob matching.
//! - [`controller`]: the protocol between a client (`trace-cli`) and the
//!   trace manager: sessions, their states, start and stop.
//! - [`provider`]: the shared trace buffer, FIFO packets and control
//!   messages between userspace providers and the manager.
//!
//! The crate is `#![no_std]`; the record model, writer and reader need the
//! `alloc` feature (on by default through `std`). The eBPF programs use the
//! crate with default features off.
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod category;
#[cfg(feature = "alloc")]
pub mod controller;
pub mod fxt;
pub mod kernel;
#[cfg(feature = "alloc")]
pub mod provider;
