//! The trace engine: writes FXT records straight into the shared buffer.
//!
//! One engine per process, in parts:
//! - `region`: the rolling buffers' lock-free allocation word, per-thread
//!   regions and chunks, switching rolling buffers, the durable buffer and
//!   the buffer header;
//! - `slot`: each writing thread's slot, the write epoch, and waiting until
//!   no writer is inside a record;
//! - `write`: event and blob records, the hot path of every macro;
//! - `names`: the string and thread tables, and names written inline when
//!   the tables are full;
//! - `lifecycle`: attaching to a buffer, start, stop and terminate, as the
//!   connection thread asks for them, and the enabled categories.

mod lifecycle;
mod names;
mod region;
mod slot;
mod state;
mod words;
mod write;

#[cfg(all(test, not(feature = "off")))]
mod tests;

pub(crate) use lifecycle::{
    EngineError, buffer_saved, category_enabled, initialize, start, stop, terminate,
};
pub use lifecycle::{buffer_len, dropped, is_started};
pub use names::Name;
pub(crate) use state::Notify;
pub use words::Words;
pub use write::{
    MAX_ARGS, current_thread, write_blob, write_event, write_event_dyn, write_event_on,
};

/// Holds the engine for one test: it is one per process, so tests that
/// attach it take turns.
#[cfg(test)]
pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
