//! Depth and parent of durations, found from the order a writer wrote them.
//!
//! A complete event is written when its span ends, so the spans nested in it
//! were written before it; a begin/end pair is finished at its end the same
//! way. Every finished slice of a thread is therefore held as a *root* until
//! it is known whether a slice written later encloses it: a newly finished
//! slice adopts the roots written just before it that lie within it. A root
//! is handed on (with the depth of its tree) when more than
//! [`MAX_ROOTS_PER_THREAD`] roots wait on its thread, when more than
//! [`MAX_ROOTS`] wait in all (then by the thread that writes next), or at
//! the end of the trace; begins still open
//! then enclose it. Memory is so bounded by the number of threads and open
//! spans, whatever the length of the trace.

use foldhash::HashMap;
use std::collections::VecDeque;

use crate::event::{Args, Slice, Track};
use crate::strings::Sym;

/// Finished slices held per thread waiting for a possible parent.
pub const MAX_ROOTS_PER_THREAD: usize = 1024;
/// Finished slices held in all.
pub const MAX_ROOTS: usize = 131_072;
/// Begins open per thread; deeper ones are closed as unfinished.
const MAX_OPEN_PER_THREAD: usize = 1024;

/// A slice with the slices it encloses.
#[derive(Debug)]
struct Node {
    slice: Slice,
    children: Vec<Node>,
}

impl Node {
    fn end(&self) -> u64 {
        self.slice.ts.saturating_add(self.slice.dur)
    }
}

/// A begin waiting for its end.
#[derive(Debug)]
struct Open {
    id: u64,
    ts: u64,
    category: Sym,
    name: Sym,
    args: Args,
}

#[derive(Debug, Default)]
struct ThreadSlices {
    open: Vec<Open>,
    roots: VecDeque<Node>,
}

/// Nests the durations of every thread.
#[derive(Debug, Default)]
pub struct Nesting {
    threads: HashMap<Track, ThreadSlices>,
    next_id: u64,
    roots: usize,
    /// Ends without a begin.
    pub unmatched_ends: u64,
}

impl Nesting {
    /// A fresh id for a slice.
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A begin on `track`.
    pub fn begin(
        &mut self,
        track: Track,
        ts: u64,
        category: Sym,
        name: Sym,
        args: Args,
        out: &mut impl FnMut(Slice),
    ) {
        let id = self.id();
        let t = self.threads.entry(track).or_default();
        if t.open.len() >= MAX_OPEN_PER_THREAD {
            // A writer that never ends its spans: the outermost is closed
            // here rather than growing without bound.
            let o = t.open.remove(0);
            let slice = unfinished(track, o, ts);
            self.finish(slice, out);
        }
        let t = self.threads.entry(track).or_default();
        t.open.push(Open {
            id,
            ts,
            category,
            name,
            args,
        });
    }

    /// An end on `track`: closes its innermost begin.
    pub fn end(&mut self, track: Track, ts: u64, mut args: Args, out: &mut impl FnMut(Slice)) {
        let Some(o) = self.threads.get_mut(&track).and_then(|t| t.open.pop()) else {
            self.unmatched_ends += 1;
            return;
        };
        let mut all = o.args;
        all.append(&mut args);
        let slice = Slice {
            id: o.id,
            ts: o.ts,
            dur: ts.saturating_sub(o.ts),
            track,
            category: o.category,
            name: o.name,
            depth: 0,
            parent: None,
            args: all,
            unfinished: false,
        };
        self.finish(slice, out);
    }

    /// A complete event on `track`; `unfinished` when its writer says the
    /// span was still running when the recording ended.
    #[expect(clippy::too_many_arguments, reason = "one slice's fields, as read")]
    pub fn complete(
        &mut self,
        track: Track,
        ts: u64,
        end: u64,
        category: Sym,
        name: Sym,
        args: Args,
        unfinished: bool,
        out: &mut impl FnMut(Slice),
    ) {
        let id = self.id();
        let slice = Slice {
            id,
            ts,
            dur: end.saturating_sub(ts),
            track,
            category,
            name,
            depth: 0,
            parent: None,
            args,
            unfinished,
        };
        self.finish(slice, out);
    }

    /// A slice whose span is over: adopts the roots it encloses and waits
    /// as a root itself.
    fn finish(&mut self, slice: Slice, out: &mut impl FnMut(Slice)) {
        let track = slice.track;
        let t = self.threads.entry(track).or_default();
        let mut node = Node {
            slice,
            children: Vec::new(),
        };
        let start = node.slice.ts;
        let end = node.end();
        let mut adopted = 0;
        while let Some(last) = t.roots.back() {
            if last.slice.ts >= start && last.end() <= end {
                adopted += 1;
                if let Some(child) = t.roots.pop_back() {
                    node.children.push(child);
                }
            } else {
                break;
            }
        }
        node.children.reverse();
        t.roots.push_back(node);
        self.roots = self.roots + 1 - adopted;
        let over_thread = t.roots.len() > MAX_ROOTS_PER_THREAD;
        if over_thread {
            self.release_oldest(track, out);
        }
        if self.roots > MAX_ROOTS {
            // Over the budget in all: the thread writing now gives its
            // oldest, which keeps this O(1) per slice.
            self.release_oldest(track, out);
        }
    }

    /// Hands on the oldest root of `track`, below the begins still open.
    fn release_oldest(&mut self, track: Track, out: &mut impl FnMut(Slice)) {
        let Some(t) = self.threads.get_mut(&track) else {
            return;
        };
        let Some(node) = t.roots.pop_front() else {
            return;
        };
        self.roots -= 1;
        let enclosing: Vec<&Open> = t.open.iter().filter(|o| o.ts <= node.slice.ts).collect();
        let depth = u32::try_from(enclosing.len()).unwrap_or(u32::MAX);
        let parent = enclosing.last().map(|o| o.id);
        emit(node, depth, parent, out);
    }

    /// Ends the trace at `last_ts`: open begins end there as unfinished,
    /// and every slice is handed on.
    pub fn finish_all(&mut self, last_ts: u64, out: &mut impl FnMut(Slice)) {
        let tracks: Vec<Track> = self.threads.keys().copied().collect();
        for track in tracks {
            while let Some(o) = self.threads.get_mut(&track).and_then(|t| t.open.pop()) {
                let end = last_ts.max(o.ts);
                let slice = unfinished(track, o, end);
                self.finish(slice, out);
            }
            while self
                .threads
                .get(&track)
                .is_some_and(|t| !t.roots.is_empty())
            {
                self.release_oldest(track, out);
            }
        }
        self.threads.clear();
    }

    /// Slices waiting for a possible parent.
    pub fn waiting(&self) -> usize {
        self.roots
    }
}

fn unfinished(track: Track, o: Open, end: u64) -> Slice {
    Slice {
        id: o.id,
        ts: o.ts,
        dur: end.saturating_sub(o.ts),
        track,
        category: o.category,
        name: o.name,
        depth: 0,
        parent: None,
        args: o.args,
        unfinished: true,
    }
}

/// Hands on `node` at `depth` under `parent`, then its subtree.
fn emit(node: Node, depth: u32, parent: Option<u64>, out: &mut impl FnMut(Slice)) {
    let mut stack = vec![(node, depth, parent)];
    while let Some((node, depth, parent)) = stack.pop() {
        let mut slice = node.slice;
        slice.depth = depth;
        slice.parent = parent;
        let id = slice.id;
        out(slice);
        for child in node.children.into_iter().rev() {
            stack.push((child, depth.saturating_add(1), Some(id)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(tid: u64) -> Track {
        Track {
            provider: 2,
            pid: 1,
            tid,
        }
    }

    fn names(out: &[Slice]) -> Vec<(u64, u32, Option<u64>)> {
        let mut v: Vec<_> = out.iter().map(|s| (s.ts, s.depth, s.parent)).collect();
        v.sort();
        v
    }

    #[test]
    fn complete_events_nest_by_write_order() {
        let mut n = Nesting::default();
        let mut out = Vec::new();
        let mut push = |s: Slice| out.push(s);
        let s = Sym::EMPTY;
        // outer [0,100] holds a [10,20] and b [30,60] which holds c [40,50].
        n.complete(track(1), 10, 20, s, s, vec![], false, &mut push);
        n.complete(track(1), 40, 50, s, s, vec![], false, &mut push);
        n.complete(track(1), 30, 60, s, s, vec![], false, &mut push);
        n.complete(track(1), 0, 100, s, s, vec![], false, &mut push);
        n.complete(track(1), 200, 300, s, s, vec![], false, &mut push);
        n.finish_all(1000, &mut push);
        let ids: HashMap<u64, u64> = out.iter().map(|s| (s.ts, s.id)).collect();
        assert_eq!(
            names(&out),
            vec![
                (0, 0, None),
                (10, 1, Some(ids[&0])),
                (30, 1, Some(ids[&0])),
                (40, 2, Some(ids[&30])),
                (200, 0, None),
            ]
        );
    }

    #[test]
    fn begin_end_pairs_and_open_begins() {
        let mut n = Nesting::default();
        let mut out = Vec::new();
        let mut push = |s: Slice| out.push(s);
        let s = Sym::EMPTY;
        n.begin(track(1), 0, s, s, vec![], &mut push);
        n.begin(track(1), 5, s, s, vec![], &mut push);
        n.complete(track(1), 6, 7, s, s, vec![], false, &mut push);
        n.end(track(1), 10, vec![], &mut push);
        n.end(track(2), 11, vec![], &mut push);
        n.complete(track(1), 20, 30, s, s, vec![], false, &mut push);
        n.finish_all(50, &mut push);
        assert_eq!(n.unmatched_ends, 1);
        let outer = out.iter().find(|s| s.ts == 0).unwrap();
        assert!(outer.unfinished);
        assert_eq!(outer.dur, 50);
        let d: Vec<_> = names(&out).into_iter().map(|(ts, d, _)| (ts, d)).collect();
        assert_eq!(d, vec![(0, 0), (5, 1), (6, 2), (20, 1)]);
    }

    #[test]
    fn memory_is_bounded_per_thread() {
        let mut n = Nesting::default();
        let mut count = 0;
        let mut push = |_: Slice| count += 1;
        for i in 0..10_000u64 {
            n.complete(
                track(1),
                i * 10,
                i * 10 + 5,
                Sym::EMPTY,
                Sym::EMPTY,
                vec![],
                false,
                &mut push,
            );
        }
        assert!(n.waiting() <= MAX_ROOTS_PER_THREAD);
        n.finish_all(1_000_000, &mut push);
        assert_eq!(count, 10_000);
        assert_eq!(n.waiting(), 0);
    }
}
