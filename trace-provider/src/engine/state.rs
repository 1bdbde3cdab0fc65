//! What the connection thread set up, and where writing stands: the
//! engine's one piece of shared mutable state, behind a lock.

use std::sync::{Mutex, MutexGuard};

use trace_common::provider::buffer::Layout;
use trace_common::provider::fifo::FromProvider;

/// Sends a packet to the manager on the trace's FIFO: SAVE_BUFFER in
/// streaming mode, NEW_THREAD when a thread first writes.
pub(crate) type Notify = Box<dyn Fn(FromProvider) + Send>;

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
    pub(super) notify: Option<Notify>,
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
    notify: None,
});

/// The engine's state, locked.
pub(super) fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}
