//! The string and thread tables: names written to the durable buffer once
//! per trace and then referenced by index.
//!
//! When the tables or the durable buffer are full, strings and threads are
//! written inline instead.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use trace_common::fxt::wire::{self, MAX_STRING_INDEX, MAX_THREAD_INDEX};
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue as FxtArgValue, Record, StringRef, obj_type};
use trace_common::provider::fifo::FromProvider;

use super::region::durable_write;
use super::slot::{GENERATION, NOT_READY, ThreadSlot, bump_generation};
use super::state::notify;
use super::words::Words;
use crate::callsite::Callsite;

/// A string reference as it goes into a record: an index, or inline bytes.
#[derive(Clone, Copy)]
pub struct Name {
    pub(crate) reference: u16,
    inline: &'static str,
}

impl Name {
    /// Words of inline bytes after the fixed part.
    #[inline(always)]
    pub fn inline_words(&self) -> usize {
        if self.reference & wire::STRING_REF_INLINE != 0 {
            wire::words(self.inline.len())
        } else {
            0
        }
    }

    #[inline(always)]
    pub(crate) fn write_inline(&self, w: &mut Words) {
        if self.reference & wire::STRING_REF_INLINE != 0 {
            w.push_bytes(self.inline.as_bytes());
        }
    }

    #[inline(always)]
    pub(super) fn of(s: &'static str, index: Option<u16>) -> Name {
        match index {
            Some(i) => Name {
                reference: i,
                inline: "",
            },
            None => Name::inline(s),
        }
    }

    #[cold]
    #[inline(never)]
    fn inline(s: &'static str) -> Name {
        let s = clip_name(s);
        Name {
            reference: wire::inline_string_ref(s.len()),
            inline: s,
        }
    }
}

fn clip_name(s: &'static str) -> &'static str {
    let mut end = s.len().min(wire::PRACTICAL_MAX_STRING_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The next thread table index to hand out.
static THREAD_NEXT: AtomicU32 = AtomicU32::new(1);

/// The string table of the trace: each string's index.
static STRINGS: Mutex<Option<HashMap<&'static str, u16>>> = Mutex::new(None);

/// Empties the string and thread tables, for a trace whose durable buffer
/// starts over.
pub(super) fn clear_tables() {
    THREAD_NEXT.store(1, Ordering::Relaxed);
    bump_generation();
    *STRINGS.lock().unwrap_or_else(|e| e.into_inner()) = Some(HashMap::new());
}

/// The table index of `s`, writing its string record the first time.
#[cold]
fn intern(s: &'static str) -> Option<u16> {
    if s.is_empty() || s.len() > wire::PRACTICAL_MAX_STRING_LEN {
        return None;
    }
    let mut guard = STRINGS.lock().unwrap_or_else(|e| e.into_inner());
    let table = guard.as_mut()?;
    if let Some(&i) = table.get(s) {
        return Some(i);
    }
    let index = u16::try_from(table.len() + 1)
        .ok()
        .filter(|&i| i <= MAX_STRING_INDEX)?;
    let mut rec = Vec::with_capacity(16 + s.len());
    encode(
        &Record::String {
            index,
            value: s.into(),
        },
        &mut rec,
    )
    .ok()?;
    if !durable_write(&rec) {
        return None;
    }
    table.insert(s, index);
    Some(index)
}

#[inline(always)]
pub(super) fn cached_name(cache: &AtomicU64, s: &'static str, generation: u32) -> Name {
    let c = cache.load(Ordering::Relaxed);
    if (c >> 32) as u32 == generation {
        return Name::of(s, Some(c as u16).filter(|&i| i != 0));
    }
    name_slow(cache, s, generation)
}

#[cold]
fn name_slow(cache: &AtomicU64, s: &'static str, generation: u32) -> Name {
    let i = intern(s);
    cache.store(
        (u64::from(generation) << 32) | u64::from(i.unwrap_or(0)),
        Ordering::Relaxed,
    );
    Name::of(s, i)
}

#[cold]
pub(super) fn thread_slow(slot: &ThreadSlot, generation: u32) -> u8 {
    let pid = slot.pid.load(Ordering::Relaxed);
    let tid = slot.tid.load(Ordering::Relaxed);
    let mut index = 0u8;
    let i = THREAD_NEXT.fetch_add(1, Ordering::Relaxed);
    if i <= u32::from(MAX_THREAD_INDEX) {
        let mut rec = Vec::with_capacity(24);
        if encode(
            &Record::Thread {
                index: i as u8,
                process: pid,
                thread: tid,
            },
            &mut rec,
        )
        .is_ok()
            && durable_write(&rec)
        {
            index = i as u8;
        }
    }
    write_thread_names(pid, tid);
    // The manager maps the ids of a provider in a PID namespace to the
    // host's, which it can only look up while the thread lives: now.
    notify(FromProvider::NewThread { tid: tid as u32 });
    slot.thread_ref.store(
        (u64::from(generation) << 8) | u64::from(index),
        Ordering::Relaxed,
    );
    slot.generation.store(
        if index != 0 { generation } else { NOT_READY },
        Ordering::Relaxed,
    );
    index
}

/// Names this thread (and, once per trace, this process) with kernel object
/// records, so a trace without kernel categories still has names. Runs on
/// the thread named.
fn write_thread_names(pid: u64, tid: u64) {
    static PROCESS_NAMED: AtomicU32 = AtomicU32::new(0);
    let generation = GENERATION.load(Ordering::Relaxed);
    let comm = |path: String| {
        std::fs::read_to_string(path)
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default()
    };
    let mut rec = Vec::with_capacity(64);
    if PROCESS_NAMED.swap(generation, Ordering::Relaxed) != generation {
        // Through `self`: in a PID namespace whose /proc is the host's,
        // `/proc/{pid}` is another process.
        let name = comm("/proc/self/comm".to_owned());
        if encode(
            &Record::KernelObject {
                koid: pid,
                obj_type: obj_type::PROCESS,
                name: StringRef::inline(&name),
                args: Vec::new().into(),
            },
            &mut rec,
        )
        .is_ok()
        {
            durable_write(&rec);
        }
        rec.clear();
    }
    // This runs on the thread itself (its slot is thread-local).
    let name = comm("/proc/thread-self/comm".to_owned());
    let args = [Arg {
        name: StringRef::inline("process"),
        value: FxtArgValue::Koid(pid),
    }];
    if encode(
        &Record::KernelObject {
            koid: tid,
            obj_type: obj_type::THREAD,
            name: StringRef::inline(&name),
            args: args[..].into(),
        },
        &mut rec,
    )
    .is_ok()
    {
        durable_write(&rec);
    }
}

#[cold]
pub(super) fn site_names_slow(site: &'static Callsite, generation: u32) -> (Name, Name) {
    let c = intern(site.category);
    let n = intern(site.name);
    site.strings.store(
        (u64::from(generation) << 32)
            | (u64::from(c.unwrap_or(0)) << 16)
            | u64::from(n.unwrap_or(0)),
        Ordering::Relaxed,
    );
    site.ready.store(
        if c.is_some() && n.is_some() {
            generation
        } else {
            0
        },
        Ordering::Relaxed,
    );
    (Name::of(site.category, c), Name::of(site.name, n))
}
