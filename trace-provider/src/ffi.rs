//! The C ABI behind `include/trace/event.h`.
//!
//! C call sites keep a `static trace_site_t *` and get it once from
//! [`trace_site`]; its first byte is the enabled state, so the header's
//! macros check it with one relaxed load. Category, name and argument-name
//! strings are copied once per distinct text and kept for the life of the
//! process. Null pointers and strings that are not UTF-8 make a call do
//! nothing.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Mutex;

use trace_common::fxt::wire::event_type;

use crate::__private::now;
use crate::engine::{MAX_ARGS, write_event};
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

/// The current timestamp, for `trace_duration_complete`.
#[unsafe(no_mangle)]
pub extern "C" fn trace_now() -> u64 {
    now()
}

fn arg_name(p: *const c_char) -> Option<&'static StaticName> {
    let s = leak_str(p)?;
    static NAMES: Mutex<Option<HashMap<usize, &'static StaticName>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    Some(
        *names
            .get_or_insert_with(HashMap::new)
            .entry(s.as_ptr() as usize)
            .or_insert_with(|| Box::leak(Box::new(StaticName::new(s)))),
    )
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
    let raw: &[Arg] = if args.is_null() || nargs == 0 {
        &[]
    } else {
        // SAFETY: the caller passes `nargs` arguments at `args`.
        unsafe { std::slice::from_raw_parts(args, nargs.min(MAX_ARGS)) }
    };
    let mut list: Vec<(&'static StaticName, Value<'_>)> = Vec::with_capacity(raw.len());
    for a in raw {
        let Some(name) = arg_name(a.name) else {
            continue;
        };
        // SAFETY: the union member read matches `kind`, as the header's
        // constructors write it.
        let v = unsafe {
            match a.kind {
                arg_type::NULL => Value::Null,
                arg_type::INT32 => Value::I32(a.value.i64 as i32),
                arg_type::UINT32 => Value::U32(a.value.u64 as u32),
                arg_type::INT64 => Value::I64(a.value.i64),
                arg_type::UINT64 => Value::U64(a.value.u64),
                arg_type::DOUBLE => Value::F64(a.value.f64),
                arg_type::STRING => {
                    if a.value.str.is_null() {
                        Value::Null
                    } else {
                        match CStr::from_ptr(a.value.str).to_str() {
                            Ok(s) => Value::Str(s),
                            Err(_) => continue,
                        }
                    }
                }
                arg_type::POINTER => Value::Pointer(a.value.ptr as usize),
                arg_type::KOID => Value::Koid(a.value.u64),
                arg_type::BOOL => Value::Bool(a.value.u64 != 0),
                _ => continue,
            }
        };
        list.push((name, v));
    }
    write_event(site, kind, ts, &list, trailer);
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

    #[test]
    fn bad_input_is_ignored() {
        // SAFETY: null and invalid inputs are what is being tested.
        unsafe {
            assert!(trace_site(std::ptr::null(), c"x".as_ptr()).is_null());
            let bad = [0xFFu8, 0];
            assert!(trace_site(bad.as_ptr().cast(), c"x".as_ptr()).is_null());
            assert_eq!(trace_site_enabled(std::ptr::null()), 0);
            trace_instant(std::ptr::null(), 0, std::ptr::null(), 5);
            let s = trace_site(c"cat".as_ptr(), c"name".as_ptr());
            assert!(!s.is_null());
            assert_eq!(s, trace_site(c"cat".as_ptr(), c"name".as_ptr()));
            // Not tracing: disabled, and events are dropped silently.
            assert_eq!(trace_site_enabled(s), 0);
            assert_eq!(*(s as *const u8), 1);
            trace_instant(s, 0, std::ptr::null(), 3);
            assert!(trace_provider_init(std::ptr::null()).is_null());
            trace_provider_fini(std::ptr::null_mut());
        }
    }
}
