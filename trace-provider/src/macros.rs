//! The instrumentation macros.
//!
//! Every macro takes a category and a name (string literals or `&'static
//! str` constants) and up to 15 arguments written `"name" => value`, where
//! the value is anything [`crate::Value`] converts from: integers, floats,
//! `bool`, `&str`, `&String`, pointers, [`crate::Koid`], `()`.

/// Expands to the arguments array of an event.
#[doc(hidden)]
#[macro_export]
macro_rules! __trace_args {
    ($($k:literal => $v:expr),*) => {
        [$(
            ({
                static __NAME: $crate::__private::StaticName = $crate::__private::StaticName::new($k);
                &__NAME
            }, $crate::__private::Value::from($v)),
        )*]
    };
}

/// Writes one event when its category is enabled.
#[doc(hidden)]
#[cfg(not(feature = "off"))]
#[macro_export]
macro_rules! __trace_event {
    ($cat:expr, $name:expr, $ty:expr, $trailer:expr $(, $k:literal => $v:expr)*) => {{
        static __SITE: $crate::__private::Callsite = $crate::__private::Callsite::new($cat, $name);
        if __SITE.enabled() {
            // Keeps the disabled case a fall-through past the call.
            ::core::hint::cold_path();
            $crate::__private::write_event(
                &__SITE,
                $ty,
                $crate::__private::now(),
                $crate::__trace_args!($($k => $v),*),
                $trailer,
            );
        }
    }};
}

#[doc(hidden)]
#[cfg(feature = "off")]
#[macro_export]
macro_rules! __trace_event {
    ($($t:tt)*) => {{}};
}

/// Whether a trace runs that enables `category`:
/// `if category_enabled!("net") { ... }`.
#[cfg(not(feature = "off"))]
#[macro_export]
macro_rules! category_enabled {
    ($cat:expr) => {{
        static __SITE: $crate::__private::Callsite = $crate::__private::Callsite::new($cat, "");
        __SITE.enabled()
    }};
}

/// Whether a trace runs that enables `category` (always false: tracing is
/// compiled out).
#[cfg(feature = "off")]
#[macro_export]
macro_rules! category_enabled {
    ($cat:expr) => {
        false
    };
}

/// Traces the rest of the enclosing block as one complete duration event:
/// `duration!("net", "send", "bytes" => n);`.
#[cfg(not(feature = "off"))]
#[macro_export]
macro_rules! duration {
    ($cat:expr, $name:expr $(, $k:literal => $v:expr)* $(,)?) => {
        static __SITE: $crate::__private::Callsite = $crate::__private::Callsite::new($cat, $name);
        let __trace_duration = if __SITE.enabled() {
            ::core::hint::cold_path();
            Some($crate::__private::DurationScope::new(
                &__SITE,
                $crate::__trace_args!($($k => $v),*),
            ))
        } else {
            None
        };
    };
}

/// Traces the rest of the enclosing block (compiled out).
#[cfg(feature = "off")]
#[macro_export]
macro_rules! duration {
    ($($t:tt)*) => {};
}

/// Begins a duration on this thread; pair with [`duration_end!`](crate::duration_end).
#[macro_export]
macro_rules! duration_begin {
    ($cat:expr, $name:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::DURATION_BEGIN, &[] $(, $k => $v)*)
    };
}

/// Ends the innermost duration begun with [`duration_begin!`].
#[macro_export]
macro_rules! duration_end {
    ($cat:expr, $name:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::DURATION_END, &[] $(, $k => $v)*)
    };
}

/// A point in time: `instant!("cat", "name", args...)` on this thread, or
/// `instant!(process, ...)` / `instant!(global, ...)` for wider scopes.
#[macro_export]
macro_rules! instant {
    (thread, $cat:expr, $name:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::INSTANT, &[] $(, $k => $v)*)
    };
    (process, $cat:expr, $name:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::INSTANT,
            $crate::__private::scope_words($crate::Scope::Process) $(, $k => $v)*)
    };
    (global, $cat:expr, $name:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::INSTANT,
            $crate::__private::scope_words($crate::Scope::Global) $(, $k => $v)*)
    };
    ($cat:expr, $name:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::INSTANT, &[] $(, $k => $v)*)
    };
}

/// A counter sample; every numeric argument is one series:
/// `counter!("mem", "heap", 0, "bytes" => n)` (the third value is the
/// counter id).
#[macro_export]
macro_rules! counter {
    ($cat:expr, $name:expr, $id:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::COUNTER, &[($id) as u64] $(, $k => $v)*)
    };
}

/// Begins an asynchronous operation with correlation id `id`.
#[macro_export]
macro_rules! async_begin {
    ($cat:expr, $name:expr, $id:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::ASYNC_BEGIN, &[($id) as u64] $(, $k => $v)*)
    };
}

/// A point in an asynchronous operation.
#[macro_export]
macro_rules! async_instant {
    ($cat:expr, $name:expr, $id:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::ASYNC_INSTANT, &[($id) as u64] $(, $k => $v)*)
    };
}

/// Ends an asynchronous operation (same category, name and id as its begin).
#[macro_export]
macro_rules! async_end {
    ($cat:expr, $name:expr, $id:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::ASYNC_END, &[($id) as u64] $(, $k => $v)*)
    };
}

/// Begins a flow (an arrow) from the enclosing duration.
#[macro_export]
macro_rules! flow_begin {
    ($cat:expr, $name:expr, $id:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::FLOW_BEGIN, &[($id) as u64] $(, $k => $v)*)
    };
}

/// A step of a flow in the enclosing duration.
#[macro_export]
macro_rules! flow_step {
    ($cat:expr, $name:expr, $id:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::FLOW_STEP, &[($id) as u64] $(, $k => $v)*)
    };
}

/// Ends a flow in the enclosing duration.
#[macro_export]
macro_rules! flow_end {
    ($cat:expr, $name:expr, $id:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::__trace_event!($cat, $name, $crate::__private::event_type::FLOW_END, &[($id) as u64] $(, $k => $v)*)
    };
}

/// A blob of bytes (record type 5, blob type "data"), written when its
/// category is enabled: `blob!("gpu", "frame", &bytes)`. Payloads longer than
/// 32 000 bytes are cut.
#[macro_export]
macro_rules! blob {
    ($cat:expr, $name:expr, $bytes:expr $(,)?) => {
        $crate::__trace_blob!($cat, $name, $bytes)
    };
}

#[doc(hidden)]
#[cfg(not(feature = "off"))]
#[macro_export]
macro_rules! __trace_blob {
    ($cat:expr, $name:expr, $bytes:expr) => {{
        static __SITE: $crate::__private::Callsite = $crate::__private::Callsite::new($cat, $name);
        if __SITE.enabled() {
            ::core::hint::cold_path();
            $crate::engine::write_blob(&__SITE, 1, ::core::convert::AsRef::<[u8]>::as_ref($bytes));
        }
    }};
}

#[doc(hidden)]
#[cfg(feature = "off")]
#[macro_export]
macro_rules! __trace_blob {
    ($($t:tt)*) => {{}};
}

/// With the `off` feature every macro compiles to nothing, like NTRACE:
/// arguments are not evaluated and nothing is written, even while a trace
/// that enables every category runs.
#[cfg(all(test, feature = "off"))]
mod off_tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use trace_common::provider::buffer::{HEADER_BYTES, Header};
    use trace_common::provider::{BufferDisposition, BufferingMode};

    use crate::engine;

    static EVALUATED: AtomicBool = AtomicBool::new(false);

    #[allow(
        dead_code,
        reason = "called only by the macros that evaluate their arguments: not with the `off` feature"
    )]
    fn evaluated() -> u64 {
        EVALUATED.store(true, Ordering::Relaxed);
        1
    }

    #[test]
    fn macros_compile_to_nothing() {
        let _g = engine::serial();
        let mut words = vec![0u64; 64 * 1024 / 8];
        // SAFETY: the buffer outlives the trace: the engine is terminated below.
        unsafe {
            engine::initialize(
                words.as_mut_ptr().cast(),
                words.len() * 8,
                BufferingMode::Oneshot,
                Vec::new(),
                None,
            )
        }
        .unwrap();
        engine::start(BufferDisposition::ClearEntire, Vec::new());

        crate::instant!("c", "instant", "a" => evaluated());
        crate::duration!("c", "duration", "a" => evaluated());
        crate::duration_begin!("c", "begin", "a" => evaluated());
        crate::duration_end!("c", "begin");
        crate::counter!("c", "counter", 1, "v" => evaluated());
        crate::async_begin!("c", "async", 7, "a" => evaluated());
        crate::flow_begin!("c", "flow", 8);
        crate::blob!("c", "blob", b"bytes");
        let enabled = crate::category_enabled!("c");

        engine::stop();
        let dropped = engine::dropped();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        engine::terminate();
        assert!(!enabled);
        assert!(
            !EVALUATED.load(Ordering::Relaxed),
            "arguments were evaluated"
        );
        assert_eq!(dropped, 0);
        let h = Header::read(bytes[..HEADER_BYTES].try_into().unwrap());
        assert_eq!(h.rolling_data_end[0], 0, "no record was written");
    }
}
