//! Make a program a trace provider.
//!
//! A program calls [`init`] once; from then on its instrumentation macros
//! ([`duration!`], [`instant!`], [`counter!`], the async and flow macros)
//! write Fuchsia Trace Format records into a buffer it shares with the trace
//! manager whenever a trace that enables their category runs.
//!
//! ```no_run
//! let _provider = trace_provider::init("my-server");
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
mod connection;
pub mod engine;
pub mod ffi;
#[cfg(feature = "tracing")]
pub mod layer;
mod macros;

use std::os::fd::OwnedFd;
use std::thread::JoinHandle;

pub use connection::socket_path;

pub use args::{Koid, Pointer, Value};
pub use callsite::{Callsite, StaticName};
pub use trace_common::provider::{BufferDisposition, BufferingMode};

/// A registered provider; dropping it unregisters and stops tracing.
pub struct Provider {
    shutdown: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

/// Registers this program as the trace provider `name` with the manager
/// (socket from `TRACE_MANAGER_SOCKET`, else the default path), on a
/// background thread. Without a manager it waits for one to appear and
/// registers then; it never blocks the caller.
pub fn init(name: &str) -> Provider {
    init_with_categories(name, &[])
}

/// Like [`init`], also declaring the categories the program writes.
pub fn init_with_categories(name: &str, categories: &[&str]) -> Provider {
    let name: String = name.chars().take(100).collect();
    let categories: Vec<String> = categories.iter().map(|c| (*c).to_owned()).collect();
    let path = connection::socket_path();
    let spawned = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).and_then(|(rx, tx)| {
        std::thread::Builder::new()
            .name("trace-provider".into())
            .spawn(move || connection::run(name, categories, path, connection::Shutdown { fd: rx }))
            .map(|t| (tx, t))
            .map_err(|_| nix::Error::EAGAIN)
    });
    match spawned {
        Ok((tx, t)) => Provider {
            shutdown: Some(tx),
            thread: Some(t),
        },
        Err(e) => {
            log::warn!("trace provider could not start its thread: {e}");
            Provider {
                shutdown: None,
                thread: None,
            }
        }
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        // Closing the pipe wakes the thread, which terminates the trace.
        drop(self.shutdown.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Why an alert was not sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AlertError {
    /// Alert names are 1 to 14 bytes without NUL.
    #[error("alert names are 1 to 14 bytes without NUL, not {0:?}")]
    BadName(String),
    /// No trace is running.
    #[error("no trace is running")]
    NotTracing,
}

/// Raises an alert in the running trace (the manager logs it; a recording
/// can stop on it).
pub fn alert(name: &str) -> Result<(), AlertError> {
    let n = trace_common::provider::fifo::AlertName::new(name)
        .ok_or_else(|| AlertError::BadName(name.to_owned()))?;
    if connection::alert(n) {
        Ok(())
    } else {
        Err(AlertError::NotTracing)
    }
}

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
                self.args,
                &[end],
            );
        }
    }
}
