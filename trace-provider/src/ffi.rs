//! The C ABI behind `include/trace/event.h`.
//!
//! C call sites keep a `static trace_site_t *` and get it once from
//! [`trace_site`]; its first byte is the enabled state, so the header's
//! macros check it with one relaxed load. Category, name and argument-name
//! strings are copied once per distinct text and kept for the life of the
//! process. Null pointers (a null `args` with `nargs > 0`, a null argument
//! name) and strings that are not UTF-8 make a call do nothing; the one
//! null accepted is a string argument's value, written as a null argument.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Mutex;

use trace_common::fxt::wire::event_type;

use crate::__private::now;
use crate::engine::{MAX_ARGS, write_event_dyn};
use crate::{Callsite, Provider, StaticName, Value};

/// Argument types of `trace_arg_t`.
pub mod arg_type {
    /// No value.
    pub const NULL: u32 = 0;
    /// `value.i64` as a signed 32-bit integer.
    pub const INT32: u32 = 1;
    /// `value.u64` as an unsigned 32-bit integer.
    pub const UINT32: u32 = 2;
    /// `value.i64`.
    pub const INT64: u32 = 3;
    /// `value.u64`.
    pub const UINT64: u32 = 4;
    /// `value.f64`.
    pub const DOUBLE: u32 = 5;
    /// `value.str`, a NUL-terminated UTF-8 string.
    pub const STRING: u32 = 6;
    /// `value.ptr`.
    pub const POINTER: u32 = 7;
    /// `value.u64` as a kernel object id.
    pub const KOID: u32 = 8;
    /// `value.u64 != 0`.
    pub const BOOL: u32 = 9;
}

/// The value of a `trace_arg_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ArgUnion {
    /// Signed integers.
    pub i64: i64,
    /// Unsigned integers, koids, booleans.
    pub u64: u64,
    /// Doubles.
    pub f64: f64,
    /// Strings.
    pub str: *const c_char,
    /// Pointers.
    pub ptr: *const c_void,
}

/// `trace_arg_t`: one named argument.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Arg {
    /// NUL-terminated name.
    pub name: *const c_char,
    /// One of [`arg_type`].
    pub kind: u32,
    /// Zero.
    pub reserved: u32,
    /// The value.
    pub value: ArgUnion,
}

fn leak_str(p: *const c_char) -> Option<&'static str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller passes a NUL-terminated string (checked non-null).
    let s = unsafe { CStr::from_ptr(p) }.to_str().ok()?;
    static TEXTS: Mutex<Option<HashMap<String, &'static str>>> = Mutex::new(None);
    let mut t = TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    let map = t.get_or_insert_with(HashMap::new);
    if let Some(v) = map.get(s) {
        return Some(v);
    }
    let v: &'static str = Box::leak(s.to_owned().into_boxed_str());
    map.insert(s.to_owned(), v);
    Some(v)
}

/// The call site of (`category`, `name`), created on first use; null when
/// either is null or not UTF-8.
///
/// # Safety
/// Both arguments are null or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trace_site(
    category: *const c_char,
    name: *const c_char,
) -> *const Callsite {
    static SITES: Mutex<Option<HashMap<(usize, usize), &'static Callsite>>> = Mutex::new(None);
    let (Some(c), Some(n)) = (leak_str(category), leak_str(name)) else {
        return std::ptr::null();
    };
    let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    let map = sites.get_or_insert_with(HashMap::new);
    let key = (c.as_ptr() as usize, n.as_ptr() as usize);
    *map.entry(key)
        .or_insert_with(|| Box::leak(Box::new(Callsite::new(c, n))))
}

/// Whether the call site's category is enabled now (registers it the first
/// time); 0 for a null site.
///
/// # Safety
/// `site` is null or came from [`trace_site`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trace_site_enabled(site: *const Callsite) -> c_int {
    // SAFETY: sites from trace_site are leaked and live forever.
    match unsafe { site.as_ref() } {
        Some(s) => c_int::from(s.enabled()),
        None => 0,
    }
}

/// The current timestamp, for `trace_duration_complete`: invariant TSC ticks,
/// else CLOCK_BOOTTIME nanoseconds.
#[unsafe(no_mangle)]
pub extern "C" fn trace_now() -> u64 {
    now()
}

/// The interned argument name for `p`; `None` for null or non-UTF-8.
/// One lock and, after the first time a name is seen, no allocation.
fn arg_name(p: *const c_char) -> Option<&'static StaticName> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller passes a NUL-terminated string (checked non-null).
    let s = unsafe { CStr::from_ptr(p) }.to_str().ok()?;
    static NAMES: Mutex<Option<HashMap<&'static str, &'static StaticName>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let map = names.get_or_insert_with(HashMap::new);
    if let Some(n) = map.get(s) {
        return Some(n);
    }
    let text: &'static str = Box::leak(s.to_owned().into_boxed_str());
    let n: &'static StaticName = Box::leak(Box::new(StaticName::new(text)));
    map.insert(text, n);
    Some(n)
}

/// The value of `a`; `None` (the event is skipped) for an unknown type or
/// a string that is not UTF-8. A null string is a null argument.
///
/// # Safety
/// A string argument's pointer is null or NUL-terminated, alive for `'a`.
unsafe fn arg_value<'a>(a: &Arg) -> Option<Value<'a>> {
    // SAFETY: every union member is plain data of 8 bytes, so reading any
    // of them is defined; the member read matches `kind` as the header's
    // constructors write it.
    let v = unsafe {
        match a.kind {
            arg_type::NULL => Value::Null,
            arg_type::INT32 => Value::I32(a.value.i64 as i32),
            arg_type::UINT32 => Value::U32(a.value.u64 as u32),
            arg_type::INT64 => Value::I64(a.value.i64),
            arg_type::UINT64 => Value::U64(a.value.u64),
            arg_type::DOUBLE => Value::F64(a.value.f64),
            arg_type::STRING if a.value.str.is_null() => Value::Null,
            arg_type::STRING => Value::Str(CStr::from_ptr(a.value.str).to_str().ok()?),
            arg_type::POINTER => Value::Pointer(a.value.ptr as usize),
            arg_type::KOID => Value::Koid(a.value.u64),
            arg_type::BOOL => Value::Bool(a.value.u64 != 0),
            _ => return None,
        }
    };
    Some(v)
}

/// Writes one event; `args` may be null when `nargs` is 0.
///
/// # Safety
/// `site` is null or from [`trace_site`]; `args` points to `nargs` valid
/// arguments whose strings are NUL-terminated.
unsafe fn emit(
    site: *const Callsite,
    kind: u8,
    ts: u64,
    args: *const Arg,
    nargs: usize,
    trailer: &[u64],
) {
    // SAFETY: sites from trace_site are leaked and live forever.
    let Some(site) = (unsafe { site.as_ref() }) else {
        return;
    };
    if !site.enabled() {
        return;
    }
    let raw: &[Arg] = if nargs == 0 {
        &[]
    } else if args.is_null() {
        return;
    } else {
        // SAFETY: the caller passes `nargs` arguments at `args`.
        unsafe { std::slice::from_raw_parts(args, nargs.min(MAX_ARGS)) }
    };
    let mut list: Vec<(&'static StaticName, Value<'_>)> = Vec::with_capacity(raw.len());
    for a in raw {
        // A bad argument (null or non-UTF-8 name or string, unknown type)
        // drops the whole event rather than writing a misleading one.
        let Some(name) = arg_name(a.name) else {
            return;
        };
        // SAFETY: the caller's strings are NUL-terminated and outlive the call.
        let Some(v) = (unsafe { arg_value(a) }) else {
            return;
        };
        list.push((name, v));
    }
    write_event_dyn(site, kind, ts, &list, trailer);
}

macro_rules! simple {
    ($(#[$m:meta])* $fn:ident, $ty:expr) => {
        $(#[$m])*
        ///
        /// # Safety
        /// As for every event function: `site` from `trace_site` (or null),
        /// `args` pointing to `nargs` valid arguments.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $fn(site: *const Callsite, args: *const Arg, nargs: usize) {
            // SAFETY: forwarded from the caller.
            unsafe { emit(site, $ty, now(), args, nargs, &[]) }
        }
    };
}

macro_rules! with_id {
    ($(#[$m:meta])* $fn:ident, $ty:expr) => {
        $(#[$m])*
        ///
        /// # Safety
        /// As for every event function: `site` from `trace_site` (or null),
        /// `args` pointing to `nargs` valid arguments.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $fn(site: *const Callsite, id: u64, args: *const Arg, nargs: usize) {
            // SAFETY: forwarded from the caller.
            unsafe { emit(site, $ty, now(), args, nargs, &[id]) }
        }
    };
}

simple!(
    /// Begins a duration on this thread.
    trace_duration_begin,
    event_type::DURATION_BEGIN
);
simple!(
    /// Ends the innermost duration on this thread.
    trace_duration_end,
    event_type::DURATION_END
);
with_id!(
    /// A counter sample with counter id `id`.
    trace_counter,
    event_type::COUNTER
);
with_id!(
    /// Begins an asynchronous operation.
    trace_async_begin,
    event_type::ASYNC_BEGIN
);
with_id!(
    /// A point in an asynchronous operation.
    trace_async_instant,
    event_type::ASYNC_INSTANT
);
with_id!(
    /// Ends an asynchronous operation.
    trace_async_end,
    event_type::ASYNC_END
);
with_id!(
    /// Begins a flow.
    trace_flow_begin,
    event_type::FLOW_BEGIN
);
with_id!(
    /// A step of a flow.
    trace_flow_step,
    event_type::FLOW_STEP
);
with_id!(
    /// Ends a flow.
    trace_flow_end,
    event_type::FLOW_END
);

/// An instant; `scope` 0 thread, 1 process, 2 global.
///
/// # Safety
/// `site` from `trace_site` (or null), `args` pointing to `nargs` valid
/// arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trace_instant(
    site: *const Callsite,
    scope: c_int,
    args: *const Arg,
    nargs: usize,
) {
    let trailer: &[u64] = match scope {
        1 => &[1],
        2 => &[2],
        _ => &[],
    };
    // SAFETY: forwarded from the caller.
    unsafe { emit(site, event_type::INSTANT, now(), args, nargs, trailer) }
}

/// A complete duration from `start` (a [`trace_now`] value) to now.
///
/// # Safety
/// `site` from `trace_site` (or null), `args` pointing to `nargs` valid
/// arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trace_duration_complete(
    site: *const Callsite,
    start: u64,
    args: *const Arg,
    nargs: usize,
) {
    let end = now();
    // SAFETY: forwarded from the caller.
    unsafe {
        emit(
            site,
            event_type::DURATION_COMPLETE,
            start,
            args,
            nargs,
            &[end],
        )
    }
}

/// Registers the program as provider `name` (see [`crate::init`]); returns
/// a handle for [`trace_provider_fini`], or null for a bad name.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trace_provider_init(name: *const c_char) -> *mut c_void {
    if name.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: checked non-null; NUL-terminated by contract.
    match unsafe { CStr::from_ptr(name) }.to_str() {
        Ok(n) if !n.is_empty() => Box::into_raw(Box::new(crate::init(n))).cast(),
        _ => std::ptr::null_mut(),
    }
}

/// Unregisters and stops tracing; `handle` from [`trace_provider_init`].
///
/// # Safety
/// `handle` is null or from `trace_provider_init`, and not used after.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trace_provider_fini(handle: *mut c_void) {
    if !handle.is_null() {
        // SAFETY: the pointer came from Box::into_raw in trace_provider_init.
        drop(unsafe { Box::from_raw(handle.cast::<Provider>()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine;
    use trace_common::fxt::read::{Reader, TraceState};
    use trace_common::fxt::{EventKind, Record};
    use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout, RecordWalk, WalkMode};
    use trace_common::provider::{BufferDisposition, BufferingMode};

    fn arg(name: *const c_char, kind: u32, value: ArgUnion) -> Arg {
        Arg {
            name,
            kind,
            reserved: 0,
            value,
        }
    }

    /// Runs `f` while a oneshot trace of category `capi` is written, and
    /// returns the (name, kind, argument names) of the events it wrote.
    fn traced(f: impl FnOnce()) -> Vec<(String, EventKind, Vec<String>)> {
        let _g = engine::serial();
        let mut words = vec![0u64; (1 << 20) / 8];
        let len = words.len() * 8;
        // SAFETY: `words` outlives the trace: the engine is terminated below
        // before it is dropped.
        unsafe {
            engine::initialize(
                words.as_mut_ptr().cast(),
                len,
                BufferingMode::Oneshot,
                vec!["capi".to_owned()],
                None,
            )
        }
        .unwrap();
        engine::start(BufferDisposition::ClearEntire, vec![]);
        f();
        engine::stop();
        engine::terminate();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let layout = Layout::new(BufferingMode::Oneshot, len as u64).unwrap();
        let h = Header::read(bytes[..HEADER_BYTES].try_into().unwrap());
        let mut fxt = Vec::new();
        trace_common::fxt::write::encode(&Record::Magic, &mut fxt).unwrap();
        let d = layout.durable_offset() as usize;
        for r in RecordWalk::new(
            &bytes[d..d + h.durable_data_end as usize],
            WalkMode::Durable,
        ) {
            fxt.extend_from_slice(r.bytes);
        }
        let r0 = layout.rolling_offset(0) as usize;
        for r in RecordWalk::new(
            &bytes[r0..r0 + h.rolling_data_end[0] as usize],
            WalkMode::Chunked,
        ) {
            fxt.extend_from_slice(r.bytes);
        }
        let mut state = TraceState::new();
        let mut out = Vec::new();
        for r in Reader::new(&fxt) {
            let (_, rec) = r.expect("valid FXT");
            state.apply(&rec);
            if let Record::Event {
                name, args, kind, ..
            } = &rec
            {
                out.push((
                    state.string(name).unwrap().to_owned(),
                    *kind,
                    args.iter()
                        .map(|a| state.string(&a.name).unwrap().to_owned())
                        .collect(),
                ));
            }
        }
        out
    }

    #[test]
    fn bad_input_is_ignored() {
        // SAFETY: null and invalid inputs are what is being tested.
        unsafe {
            assert!(trace_site(std::ptr::null(), c"x".as_ptr()).is_null());
            assert!(trace_site(c"x".as_ptr(), std::ptr::null()).is_null());
            let bad = [0xFFu8, 0];
            assert!(trace_site(bad.as_ptr().cast(), c"x".as_ptr()).is_null());
            assert!(trace_site(c"x".as_ptr(), bad.as_ptr().cast()).is_null());
            assert_eq!(trace_site_enabled(std::ptr::null()), 0);
            trace_instant(std::ptr::null(), 0, std::ptr::null(), 5);
            let s = trace_site(c"cat".as_ptr(), c"name".as_ptr());
            assert!(!s.is_null());
            // Deduplicated by content, not by pointer.
            let cat = std::ffi::CString::new("cat").unwrap();
            assert_eq!(s, trace_site(cat.as_ptr(), c"name".as_ptr()));
            assert!(trace_provider_init(std::ptr::null()).is_null());
            assert!(trace_provider_init(bad.as_ptr().cast()).is_null());
            trace_provider_fini(std::ptr::null_mut());
        }
    }

    #[test]
    fn the_state_byte_is_first() {
        let _g = engine::serial();
        // SAFETY: valid strings; the site lives forever.
        unsafe {
            let s = trace_site(c"not-traced".as_ptr(), c"n".as_ptr());
            assert_eq!(*(s as *const u8), 0, "unregistered");
            // Not tracing: disabled, and events are dropped silently.
            assert_eq!(trace_site_enabled(s), 0);
            assert_eq!(*(s as *const u8), 1, "disabled");
            trace_instant(s, 0, std::ptr::null(), 3);
        }
    }

    #[test]
    fn good_events_are_written_and_bad_ones_skipped() {
        let bad = [0xFFu8, 0];
        let events = traced(|| {
            // SAFETY: every pointer is null or a NUL-terminated string that
            // outlives the calls; the sites come from trace_site.
            unsafe {
                let s = trace_site(c"capi".as_ptr(), c"good".as_ptr());
                assert_eq!(trace_site_enabled(s), 1);
                assert_eq!(*(s as *const u8), 2, "enabled");
                let good = [
                    arg(c"i".as_ptr(), arg_type::INT64, ArgUnion { i64: -1 }),
                    arg(
                        c"s".as_ptr(),
                        arg_type::STRING,
                        ArgUnion { str: c"x".as_ptr() },
                    ),
                    arg(
                        c"n".as_ptr(),
                        arg_type::STRING,
                        ArgUnion {
                            str: std::ptr::null(),
                        },
                    ),
                    arg(c"b".as_ptr(), arg_type::BOOL, ArgUnion { u64: 1 }),
                ];
                trace_instant(s, 0, good.as_ptr(), good.len());
                trace_counter(s, 9, std::ptr::null(), 0);
                let start = trace_now();
                trace_duration_complete(s, start, good.as_ptr(), 1);

                let skip = trace_site(c"capi".as_ptr(), c"skipped".as_ptr());
                // Null args with a count, null or non-UTF-8 argument name,
                // non-UTF-8 string value, unknown type.
                trace_instant(skip, 0, std::ptr::null(), 2);
                let cases = [
                    arg(std::ptr::null(), arg_type::UINT64, ArgUnion { u64: 1 }),
                    arg(bad.as_ptr().cast(), arg_type::UINT64, ArgUnion { u64: 1 }),
                    arg(
                        c"v".as_ptr(),
                        arg_type::STRING,
                        ArgUnion {
                            str: bad.as_ptr().cast(),
                        },
                    ),
                    arg(c"v".as_ptr(), 99, ArgUnion { u64: 1 }),
                ];
                for a in &cases {
                    let two = [good[0], *a];
                    trace_instant(skip, 0, two.as_ptr(), 2);
                    trace_async_begin(skip, 1, two.as_ptr(), 2);
                    trace_duration_complete(skip, trace_now(), two.as_ptr(), 2);
                }
                trace_instant(std::ptr::null(), 0, good.as_ptr(), 1);

                let off = trace_site(c"other".as_ptr(), c"off".as_ptr());
                trace_instant(off, 0, good.as_ptr(), 1);
                assert_eq!(trace_site_enabled(off), 0);
            }
        });
        let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(names, ["good", "good", "good"], "{events:?}");
        assert_eq!(events[0].2, ["i", "s", "n", "b"]);
        assert!(matches!(events[1].1, EventKind::Counter { id: 9 }));
        assert!(matches!(events[2].1, EventKind::DurationComplete { .. }));
    }
}
