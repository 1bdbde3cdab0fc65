//! Event and blob records: the hot path of every macro.
//!
//! A record costs a timestamp, a few relaxed loads and plain stores: its
//! body, a zero word after it inside its chunk (so a reader stops there
//! instead of reading what an earlier pass of a circular buffer left), and
//! its header word last, with release ordering. [`write_event`] inlines only
//! the case where the category, name, thread and argument names all have
//! table indexes; the rest is out of line.

use std::sync::atomic::{AtomicU64, Ordering, compiler_fence};

use trace_common::fxt::wire::{self, MAX_STRING_INDEX};

use super::names::{Name, cached_name, site_names_slow, thread_slow};
use super::region::{DROPPED, next_chunk};
use super::slot::{GENERATION, ThreadSlot, WRITE_EPOCH, slot};
use super::words::Words;
use crate::args::Value;
use crate::callsite::{Callsite, StaticName};

/// The most arguments one event carries.
pub const MAX_ARGS: usize = wire::MAX_ARGS;

/// Writes one event record of `site` that happened at `ts`: the hot path
/// of every macro.
///
/// `trailer` holds the words after the arguments (end time, id, scope).
/// Arguments past [`MAX_ARGS`] are left out. Taking the arguments by value
/// lets the compiler keep them in registers: they reach memory only on the
/// out-of-line path.
#[inline(always)]
pub fn write_event<const N: usize>(
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: [(&'static StaticName, Value<'_>); N],
    trailer: &[u64],
) {
    let Some((slot, epoch)) = enter() else {
        return;
    };
    if !write_indexed(slot, epoch, site, event_type, ts, &args, trailer) {
        write_event_general_owned(slot, epoch, site, event_type, ts, args, trailer);
    }
}

/// [`write_event`] for arguments only known at run time (the C ABI, the
/// `tracing` layer).
pub fn write_event_dyn(
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: &[(&'static StaticName, Value<'_>)],
    trailer: &[u64],
) {
    let Some((slot, epoch)) = enter() else {
        return;
    };
    if !write_indexed(slot, epoch, site, event_type, ts, args, trailer) {
        write_event_general(slot, epoch, site, event_type, ts, args, trailer, None);
    }
}

/// [`write_event_dyn`] for an event of another thread of this process,
/// `(pid, tid)`: written with the thread inline (the `tracing` layer's
/// flows, which begin in a poll that ran on another thread).
pub fn write_event_on(
    thread: (u64, u64),
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: &[(&'static StaticName, Value<'_>)],
    trailer: &[u64],
) {
    let Some((slot, epoch)) = enter() else {
        return;
    };
    write_event_general(
        slot,
        epoch,
        site,
        event_type,
        ts,
        args,
        trailer,
        Some(thread),
    );
}

/// This thread's process and thread ids, as records name them.
pub fn current_thread() -> (u64, u64) {
    let s = slot();
    (s.pid.load(Ordering::Relaxed), s.tid.load(Ordering::Relaxed))
}

/// Marks this thread busy and returns its slot and the write epoch, or
/// `None` (not busy) when no trace is being written.
#[inline(always)]
fn enter() -> Option<(&'static ThreadSlot, u64)> {
    let slot = slot();
    slot.busy.store(1, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    let epoch = WRITE_EPOCH.load(Ordering::Acquire);
    if epoch == 0 {
        slot.busy.store(0, Ordering::Release);
        return None;
    }
    Some((slot, epoch))
}

/// Writes the record if it is the common case: this thread has a region of
/// this epoch, and the category, name, thread and argument names all have
/// table indexes of this trace, so the record has no inline strings.
/// Returns false, having written nothing, otherwise.
#[inline(always)]
fn write_indexed(
    slot: &'static ThreadSlot,
    epoch: u64,
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: &[(&'static StaticName, Value<'_>)],
    trailer: &[u64],
) -> bool {
    let generation = slot.generation.load(Ordering::Relaxed);
    let mut indexed = (slot.chunk_epoch.load(Ordering::Relaxed) == epoch)
        & (site.ready.load(Ordering::Relaxed) == generation)
        & (args.len() <= MAX_ARGS);
    let mut words = 2 + trailer.len();
    // An argument name is ready if its cache holds this generation and a
    // non-zero index: one subtraction and one compare.
    let ready_base = (u64::from(generation) << 32) | 1;
    for (n, v) in args {
        let c = n.cache.load(Ordering::Relaxed);
        indexed &= c.wrapping_sub(ready_base) < u64::from(MAX_STRING_INDEX);
        words += 1 + v.value_words();
    }
    if !indexed || words > wire::MAX_RECORD_WORDS {
        return false;
    }
    let Some((rec, mut w)) = reserve_checked::<false>(slot, epoch, words) else {
        return true;
    };
    let s = site.strings.load(Ordering::Relaxed);
    let (cat, name) = (((s >> 16) & 0xFFFF) as u16, s as u16);
    let thread = slot.thread_ref.load(Ordering::Relaxed) as u8;
    w.push(ts);
    for (n, v) in args {
        v.write_indexed(n.cache.load(Ordering::Relaxed) as u16, &mut w);
    }
    for &t in trailer {
        w.push(t);
    }
    let header = wire::event_header(words, event_type, args.len(), thread, cat, name);
    commit(slot, rec, header, words);
    true
}

/// [`write_event_general`] taking the arguments by value, so that only this
/// path stores them.
#[cold]
#[inline(never)]
fn write_event_general_owned<const N: usize>(
    slot: &ThreadSlot,
    epoch: u64,
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: [(&'static StaticName, Value<'_>); N],
    trailer: &[u64],
) {
    write_event_general(slot, epoch, site, event_type, ts, &args, trailer, None);
}

/// [`write_event`] for records with inline strings or threads, or names not
/// yet in the tables; `on`: another thread's `(pid, tid)`, written inline.
/// Called with `busy` set and `epoch` current.
#[cold]
#[inline(never)]
#[expect(
    clippy::too_many_arguments,
    reason = "one record's parts, passed as the hot path has them"
)]
fn write_event_general(
    slot: &ThreadSlot,
    epoch: u64,
    site: &'static Callsite,
    event_type: u8,
    ts: u64,
    args: &[(&'static StaticName, Value<'_>)],
    trailer: &[u64],
    on: Option<(u64, u64)>,
) {
    let generation = GENERATION.load(Ordering::Relaxed);
    let s = site.strings.load(Ordering::Relaxed);
    let (cat, name) = if (s >> 32) as u32 == generation {
        (
            Name::of(site.category, Some((s >> 16) as u16).filter(|&i| i != 0)),
            Name::of(site.name, Some(s as u16).filter(|&i| i != 0)),
        )
    } else {
        site_names_slow(site, generation)
    };
    let t = slot.thread_ref.load(Ordering::Relaxed);
    let thread = if on.is_some() {
        0
    } else if (t >> 8) as u32 == generation {
        t as u8
    } else {
        thread_slow(slot, generation)
    };
    let args = &args[..args.len().min(MAX_ARGS)];
    // Names are looked up twice (here and when writing) rather than kept in
    // an array: a cached lookup is one load.
    let mut arg_words = 0;
    for (n, v) in args {
        arg_words += v.words(&cached_name(&n.cache, n.name, generation));
    }
    let words = 2
        + if thread == 0 { 2 } else { 0 }
        + cat.inline_words()
        + name.inline_words()
        + arg_words
        + trailer.len();
    if words > wire::MAX_RECORD_WORDS {
        slot.busy.store(0, Ordering::Release);
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Some((rec, mut w)) = reserve(slot, epoch, words) else {
        return;
    };
    w.push(ts);
    if thread == 0 {
        let (pid, tid) = on.unwrap_or_else(|| {
            (
                slot.pid.load(Ordering::Relaxed),
                slot.tid.load(Ordering::Relaxed),
            )
        });
        w.push(pid);
        w.push(tid);
    }
    cat.write_inline(&mut w);
    name.write_inline(&mut w);
    for (n, v) in args {
        v.write(&cached_name(&n.cache, n.name, generation), &mut w);
    }
    for &t in trailer {
        w.push(t);
    }
    let header = wire::event_header(
        words,
        event_type,
        args.len(),
        thread,
        cat.reference,
        name.reference,
    );
    commit(slot, rec, header, words);
}

/// Reserves `words` words in this thread's chunk (taking a new chunk if
/// needed); returns the record's first word and a writer for its body, or
/// `None` (with `busy` clear) when the record is dropped.
///
/// Every chunk keeps room for the zero word after its last record, so a
/// record fits only if it ends before the chunk does.
#[inline(always)]
fn reserve(slot: &ThreadSlot, epoch: u64, words: usize) -> Option<(*mut u64, Words)> {
    reserve_checked::<true>(slot, epoch, words)
}

/// [`reserve`], skipping the epoch check unless `CHECK_EPOCH` (the caller
/// has checked that this thread's region belongs to `epoch`).
#[inline(always)]
fn reserve_checked<const CHECK_EPOCH: bool>(
    slot: &ThreadSlot,
    epoch: u64,
    words: usize,
) -> Option<(*mut u64, Words)> {
    let bytes = words * 8;
    let mut pos = slot.chunk_pos.load(Ordering::Relaxed);
    if (CHECK_EPOCH && slot.chunk_epoch.load(Ordering::Relaxed) != epoch)
        || pos + bytes >= slot.chunk_end.load(Ordering::Relaxed)
    {
        next_chunk(slot, epoch, bytes)?;
        pos = slot.chunk_pos.load(Ordering::Relaxed);
    }
    // [pos, pos + bytes) lies in this thread's region of the current epoch,
    // which no one else writes and no one reads before `busy` clears.
    let rec = pos as *mut u64;
    // SAFETY: as above; the record's body starts one word in.
    let body = unsafe { rec.add(1) };
    let w = Words { p: body };
    Some((rec, w))
}

/// Publishes a record whose body is written: the zero word after it (so a
/// reader stops there), the header last, then not busy.
#[inline(always)]
fn commit(slot: &ThreadSlot, rec: *mut u64, header: u64, words: usize) {
    let next = rec as usize + words * 8;
    // SAFETY: `next` is 8-aligned and inside this thread's chunk, which
    // `reserve` keeps room in for this word.
    unsafe { (next as *mut u64).write(0) };
    // SAFETY: `rec` is the first word of the reserved space, 8-aligned.
    unsafe { (*(rec as *const AtomicU64)).store(header, Ordering::Release) };
    slot.chunk_pos.store(next, Ordering::Relaxed);
    slot.busy.store(0, Ordering::Release);
}

/// Writes a blob record (type 5) named by `site`'s name: `payload` is cut
/// to what one record holds (32 000 bytes). Blob types: 1 data, 2
/// last-branch, 3 Perfetto.
pub fn write_blob(site: &'static Callsite, blob_type: u8, payload: &[u8]) {
    let slot = slot();
    slot.busy.store(1, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    let epoch = WRITE_EPOCH.load(Ordering::Acquire);
    if epoch == 0 {
        slot.busy.store(0, Ordering::Release);
        return;
    }
    let generation = GENERATION.load(Ordering::Relaxed);
    let s = site.strings.load(Ordering::Relaxed);
    let name = if (s >> 32) as u32 == generation {
        Name::of(site.name, Some(s as u16).filter(|&i| i != 0))
    } else {
        site_names_slow(site, generation).1
    };
    let payload = &payload[..payload.len().min(wire::PRACTICAL_MAX_STRING_LEN)];
    let words = 1 + name.inline_words() + wire::words(payload.len());
    let Some((rec, mut w)) = reserve(slot, epoch, words) else {
        return;
    };
    name.write_inline(&mut w);
    w.push_bytes(payload);
    let header = wire::record_header(wire::record_type::BLOB, words)
        | wire::field(u64::from(name.reference), 16, 31)
        | wire::field(payload.len() as u64, 32, 46)
        | wire::field(u64::from(blob_type), 48, 55);
    commit(slot, rec, header, words);
}
