//! The trace manager.
//!
//! - [`kernel`]: the kernel trace provider — loads the eBPF programs for the
//!   enabled kernel categories and drains their ring buffers.
pub mod kernel;
