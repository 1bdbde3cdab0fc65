//! Make a program a trace provider.
//!
//! The engine ([`engine`]) is attached to a buffer shared with the trace
//! manager; from then on a program's instrumentation macros
//! ([`duration!`], [`instant!`], [`counter!`], the async and flow macros)
//! write Fuchsia Trace Format records into a buffer it shares with the trace
//! manager whenever a trace that enables their category runs.
//!
//! ```
//! let n = 42u64;
//! trace_provider::duration!("net", "send", "bytes" => n, "peer" => "10.0.0.1");
//! trace_provider::instant!("net", "connected");
//! ```
//!
//! When no trace runs, or the category is not enabled, a macro costs one
//! relaxed atomic load and a branch. With the cargo feature `off` every macro
//! compiles to nothing (its arguments are not evaluated).

#![deny(missing_docs)]

pub mod args;
mod callsite;
mod clock;
pub mod engine;
mod macros;

pub use args::{Koid, Pointer, Value};
pub use callsite::{Callsite, StaticName};
pub use trace_common::provider::{BufferDisposition, BufferingMode};

/// Where an instant event applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The calling thread (the default).
    Thread,
    /// The calling process.
    Process,
    /// The whole system.
    Global,
}

/// Items the macros use; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::args::Value;
    pub use crate::callsite::{Callsite, StaticName};
    pub use crate::engine::write_event;
    pub use trace_common::fxt::wire::event_type;

    /// The timestamp source of the hot path.
    #[inline(always)]
    pub fn now() -> u64 {
        crate::clock::now()
    }

    /// The trailer word of an instant event with `scope` (none for threads).
    pub const fn scope_words(scope: crate::Scope) -> &'static [u64] {
        match scope {
            crate::Scope::Thread => &[],
            crate::Scope::Process => &[1],
            crate::Scope::Global => &[2],
        }
    }

    /// Writes a complete duration event when dropped.
    pub struct DurationScope<'a, const N: usize> {
        site: &'static Callsite,
        start: u64,
        args: [(&'static StaticName, Value<'a>); N],
    }

    impl<'a, const N: usize> DurationScope<'a, N> {
        /// Starts the duration now.
        #[inline(always)]
        pub fn new(site: &'static Callsite, args: [(&'static StaticName, Value<'a>); N]) -> Self {
            DurationScope {
                site,
                start: now(),
                args,
            }
        }
    }

    impl<const N: usize> Drop for DurationScope<'_, N> {
        #[inline(always)]
        fn drop(&mut self) {
            let end = now();
            write_event(
                self.site,
                event_type::DURATION_COMPLETE,
                self.start,
                &self.args,
                &[end],
            );
        }
    }
}
