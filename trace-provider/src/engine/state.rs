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
});

/// The notifier, kept apart from [`State`]: a writer announcing its thread
/// calls it from inside a write, where waiting for the state's lock could
/// wait for ever — a full buffer is switched under that lock, once every
/// writer inside a write has left. It is never held while writers are
/// waited for.
static NOTIFY: Mutex<Option<Notify>> = Mutex::new(None);

/// Sends `packet` to the manager, if a trace set a notifier.
pub(super) fn notify(packet: FromProvider) {
    if let Some(f) = &*NOTIFY.lock().unwrap_or_else(|e| e.into_inner()) {
        f(packet);
    }
}

/// Sets the notifier (`None`: no trace).
pub(super) fn set_notify(notify: Option<Notify>) {
    *NOTIFY.lock().unwrap_or_else(|e| e.into_inner()) = notify;
}

/// The engine's state, locked.
pub(super) fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}
