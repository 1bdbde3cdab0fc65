//! Attaching to a buffer, start, stop and terminate, as the connection
//! thread asks for them, and the categories the running trace enables.

use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use trace_common::fxt::Record;
use trace_common::fxt::write::encode;
use trace_common::provider::buffer::{HEADER_BYTES, Layout, offset};
use trace_common::provider::{BufferDisposition, BufferingMode};

use super::names;
use super::region::{
    self, ALLOC, BASE, BLOCKED, DROPPED, DURABLE_NEXT, DURABLE_SIZE, durable_write, finish_header,
    set_header, set_wrapped,
};
use super::slot::{WRITE_EPOCH, bump_generation, quiesce};
use super::state::{Notify, State, set_notify, state};
use crate::{callsite, clock};

/// The categories the running trace enables (empty: all).
static ENABLED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether `category` is enabled by the running trace.
pub(crate) fn category_enabled(category: &str) -> bool {
    if WRITE_EPOCH.load(Ordering::Acquire) == 0 {
        return false;
    }
    let enabled = ENABLED.lock().unwrap_or_else(|e| e.into_inner());
    trace_common::category::is_enabled(&enabled, category)
}

/// Enables `categories` and updates every call site.
fn refresh_callsites(categories: Vec<String>) {
    let _g = callsite::REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    *ENABLED.lock().unwrap_or_else(|e| e.into_inner()) = categories;
    callsite::refresh_all();
}

/// Errors from the engine's control operations.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    /// The buffer's size does not fit the layout rules.
    #[error("unusable trace buffer: {0}")]
    Layout(#[from] trace_common::provider::buffer::LayoutError),
}

/// Attaches the engine to a buffer of `len` bytes mapped at `base`.
///
/// # Safety
/// `base` must point to `len` writable bytes, 8-aligned, shared with the
/// manager, that stay mapped until [`terminate`] returns.
pub(crate) unsafe fn initialize(
    base: *mut u8,
    len: usize,
    mode: BufferingMode,
    categories: Vec<String>,
    notify: Option<Notify>,
) -> Result<(), EngineError> {
    let layout = Layout::new(mode, len as u64)?;
    let mut st = state();
    if st.layout.is_some() {
        // At most one trace at a time: a repeated Initialize is ignored.
        return Ok(());
    }
    region::attach(base, &layout);
    st.layout = Some(layout);
    st.len = len;
    st.categories = categories;
    st.extra_categories.clear();
    set_notify(notify);
    clear(&mut st, &layout, BufferDisposition::ClearEntire);
    Ok(())
}

/// Clears what `disposition` says before a trace starts.
fn clear(st: &mut State, layout: &Layout, disposition: BufferDisposition) {
    // Retain: go on where the last run stopped, rolling data included.
    if disposition == BufferDisposition::Retain {
        return;
    }
    st.wrapped = 0;
    st.full = false;
    st.save_pending = false;
    ALLOC.store(0, Ordering::Relaxed);
    BLOCKED.store(false, Ordering::Relaxed);
    DROPPED.store(0, Ordering::Relaxed);
    if disposition == BufferDisposition::ClearEntire {
        let base = BASE.load(Ordering::Acquire);
        let h = layout.initial_header().to_bytes();
        // SAFETY: the mapping holds at least HEADER_BYTES; no writer runs.
        unsafe { ptr::copy_nonoverlapping(h.as_ptr(), base, HEADER_BYTES) };
        DURABLE_SIZE.store(layout.durable, Ordering::Relaxed);
        DURABLE_NEXT.store(0, Ordering::Relaxed);
        names::clear_tables();
        let mut init = Vec::with_capacity(16);
        if encode(
            &Record::Initialization {
                ticks_per_second: clock::ticks_per_second(),
            },
            &mut init,
        )
        .is_ok()
        {
            durable_write(&init);
        }
    }
    set_wrapped(0);
    set_header(offset::ROLLING_DATA_END, 0);
    set_header(offset::ROLLING_DATA_END + 8, 0);
    set_header(offset::NUM_RECORDS_DROPPED, 0);
}

/// Begins writing. Ignored while started.
pub(crate) fn start(disposition: BufferDisposition, additional: Vec<String>) {
    let mut st = state();
    let Some(layout) = st.layout else { return };
    if st.started {
        return;
    }
    clear(&mut st, &layout, disposition);
    st.extra_categories = additional;
    st.started = true;
    let epoch = st.next_epoch;
    st.next_epoch += 1;
    WRITE_EPOCH.store(epoch, Ordering::SeqCst);
    let mut cats = st.categories.clone();
    if !cats.is_empty() {
        cats.extend(st.extra_categories.iter().cloned());
    }
    drop(st);
    refresh_callsites(cats);
}

/// Stops writing; once this returns every record is complete in the buffer
/// and the header holds the final ends. Ignored while stopped.
pub(crate) fn stop() {
    let mut st = state();
    if !st.started {
        return;
    }
    st.started = false;
    quiesce(0);
    finish_header(&st);
    drop(st);
    refresh_callsites(Vec::new());
}

/// Stops if needed and lets go of the buffer; the caller may unmap it after.
pub(crate) fn terminate() {
    stop();
    let mut st = state();
    quiesce(0);
    BASE.store(ptr::null_mut(), Ordering::Release);
    st.layout = None;
    set_notify(None);
    bump_generation();
}

/// The manager saved rolling buffer `wrapped & 1` (streaming).
pub(crate) fn buffer_saved(wrapped: u32) {
    let mut st = state();
    if st.save_pending && wrapped.wrapping_add(1) == st.wrapped {
        st.save_pending = false;
        BLOCKED.store(false, Ordering::Relaxed);
    }
}

/// Records dropped so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Whether a trace is being written now.
pub fn is_started() -> bool {
    WRITE_EPOCH.load(Ordering::Relaxed) != 0
}

/// Size of the attached buffer, 0 when none.
pub fn buffer_len() -> usize {
    state().len
}
