//! Call sites: the static state behind every instrumentation macro.
//!
//! A call site caches whether its category is enabled (one relaxed load on
//! the hot path) and the string-table indexes of its category and name. The
//! engine sets the enabled state of every registered call site whenever
//! tracing starts or stops; a call site registers itself the first time it
//! runs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering};

const UNREGISTERED: u8 = 0;
const DISABLED: u8 = 1;
const ENABLED: u8 = 2;

/// The static state of one instrumentation point.
///
/// `#[repr(C)]` with the state byte first: the C macros read it directly
/// (2 enabled, 1 disabled, 0 not yet registered).
#[repr(C)]
pub struct Callsite {
    state: AtomicU8,
    pub(crate) category: &'static str,
    pub(crate) name: &'static str,
    /// `generation << 32 | category index << 16 | name index`, see
    /// [`crate::engine`]'s string table.
    pub(crate) strings: AtomicU64,
    /// The generation in which both `strings` indexes are valid and
    /// non-zero (0: none), so the hot path checks one word.
    pub(crate) ready: AtomicU32,
    next: AtomicPtr<Callsite>,
}

/// A string literal whose string-table index is cached (argument names).
pub struct StaticName {
    pub(crate) name: &'static str,
    pub(crate) cache: AtomicU64,
}

impl StaticName {
    /// A name; used by the macros.
    pub const fn new(name: &'static str) -> Self {
        StaticName {
            name,
            cache: AtomicU64::new(0),
        }
    }
}

static HEAD: AtomicPtr<Callsite> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises registration against the engine's updates.
pub(crate) static REGISTRY: Mutex<()> = Mutex::new(());

impl Callsite {
    /// A call site; used by the macros.
    pub const fn new(category: &'static str, name: &'static str) -> Self {
        Callsite {
            state: AtomicU8::new(UNREGISTERED),
            category,
            name,
            strings: AtomicU64::new(0),
            ready: AtomicU32::new(0),
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Whether events of this call site are recorded now.
    #[inline(always)]
    pub fn enabled(&'static self) -> bool {
        // One compare decides the disabled case.
        let s = self.state.load(Ordering::Relaxed);
        s != DISABLED && (s == ENABLED || self.register())
    }

    #[cold]
    #[inline(never)]
    fn register(&'static self) -> bool {
        let _g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        if self.state.load(Ordering::Relaxed) == UNREGISTERED {
            let mut head = HEAD.load(Ordering::Acquire);
            loop {
                self.next.store(head, Ordering::Relaxed);
                match HEAD.compare_exchange(
                    head,
                    self as *const Callsite as *mut Callsite,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(h) => head = h,
                }
            }
            self.refresh();
        }
        self.state.load(Ordering::Relaxed) == ENABLED
    }

    fn refresh(&self) {
        let on = crate::engine::category_enabled(self.category);
        self.state
            .store(if on { ENABLED } else { DISABLED }, Ordering::Relaxed);
    }
}

/// Recomputes the state of every registered call site. The caller holds
/// [`REGISTRY`].
pub(crate) fn refresh_all() {
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: only `&'static Callsite`s are ever pushed on the list.
        let site = unsafe { &*p };
        site.refresh();
        p = site.next.load(Ordering::Acquire);
    }
}
