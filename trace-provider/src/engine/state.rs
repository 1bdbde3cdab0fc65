//! What the connection thread set up, and where writing stands: the
//! engine's one piece of shared mutable state, behind a lock.

use std::sync::{Mutex, MutexGuard};

use trace_common::provider::buffer::Layout;

/// Sends SAVE_BUFFER (wrapped count, durable end) in streaming mode.
pub(crate) type SaveRequest = Box<dyn Fn(u32, u64) + Send>;

/// What the connection thread set up, and where writing stands.
pub(super) struct State {
    pub(super) layout: Option<Layout>,
    pub(super) len: usize,
    pub(super) categories: Vec<String>,
    pub(super) extra_categories: Vec<String>,
    pub(super) started: bool,
    pub(super) next_epoch: u64,
    pub(super) wrapped: u32,
    pub(super) full: bool,
    pub(super) save_pending: bool,
    pub(super) on_save: Option<SaveRequest>,
}

static STATE: Mutex<State> = Mutex::new(State {
    layout: None,
    len: 0,
    categories: Vec::new(),
    extra_categories: Vec::new(),
    started: false,
    next_epoch: 1,
    wrapped: 0,
    full: false,
    save_pending: false,
    on_save: None,
});

/// The engine's state, locked.
pub(super) fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}
