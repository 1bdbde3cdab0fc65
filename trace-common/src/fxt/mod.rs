//! The Fuchsia Trace Format (FXT).
//!
//! [`wire`] holds the constants and bit fields of §1–§3 of the format
//! reference. With the `alloc` feature, [`Record`] models every record type,
//! [`mod@write`] encodes records and [`read`] decodes a byte stream into records
//! without ever panicking or reading out of bounds; with `std`, [`stream`]
//! reads the records of a file of any size in bounded memory.

pub mod wire;

#[cfg(feature = "alloc")]
mod model;
#[cfg(feature = "alloc")]
pub mod read;
#[cfg(feature = "std")]
pub mod stream;
#[cfg(feature = "alloc")]
pub mod write;

#[cfg(feature = "alloc")]
pub use model::*;
