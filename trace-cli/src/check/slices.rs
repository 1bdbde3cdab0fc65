//! Perfetto's slice tracker (`importers/common/slice_tracker.cc`): a stack
//! of slices per track, closed lazily as later slices start.

use std::collections::HashMap;

use super::findings::{Findings, Kind};
use super::tokenizer::{Sym, Symbols};

/// Deepest nesting the importer keeps (`kMaxDepth`).
const MAX_DEPTH: usize = 512;

/// A track slices are drawn on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Track {
    /// A thread's track, by thread koid.
    Thread(u64),
    /// One of the tracks of a global async track set: the set's name and
    /// the track's index in it.
    Async(Sym, usize),
}

/// A slice on a track's stack.
#[derive(Clone, Copy, Debug)]
pub struct Slice {
    pub ts: i64,
    /// `None` while it has not ended.
    pub dur: Option<i64>,
    pub category: Sym,
    pub name: Sym,
    pub offset: u64,
}

/// Why an end found nothing to close.
pub enum EndMiss {
    /// No slice was open on the track.
    NothingOpen,
    /// Slices were open, but none with that category and name.
    NoMatch,
}

/// The stacks of every track.
#[derive(Debug, Default)]
pub struct Slices {
    stacks: HashMap<Track, Vec<Slice>>,
}

impl Slices {
    /// Opens a slice (duration or async begin).
    pub fn begin(&mut self, track: Track, slice: Slice, findings: &mut Findings, sym: &Symbols) {
        let stack = self.stacks.entry(track).or_default();
        // A begin never conflicts: it has no duration yet.
        let _ = maybe_close(stack, slice.ts, None, slice.offset, findings, sym);
        push(stack, slice, findings, sym);
    }

    /// A slice whose duration is known (complete, instant).
    pub fn scoped(&mut self, track: Track, slice: Slice, findings: &mut Findings, sym: &Symbols) {
        let stack = self.stacks.entry(track).or_default();
        if let Err(other) = maybe_close(stack, slice.ts, slice.dur, slice.offset, findings, sym) {
            findings.add(
                Kind::OverlappingComplete,
                slice.offset,
                Some(slice.ts),
                || {
                    format!(
                        "{:?} [{}, +{}] partly overlaps {:?} [{}, +{}] (offset {:#x}); dropped",
                        sym.get(slice.name),
                        super::fmt_ts(slice.ts),
                        slice.dur.unwrap_or(0),
                        sym.get(other.name),
                        super::fmt_ts(other.ts),
                        other.dur.unwrap_or(0),
                        other.offset
                    )
                },
            );
            return;
        }
        push(stack, slice, findings, sym);
    }

    /// Closes the innermost open slice with `(category, name)` (`None`:
    /// the innermost open slice, whatever its name).
    pub fn end(
        &mut self,
        track: Track,
        ts: i64,
        matching: Option<(Sym, Sym)>,
        offset: u64,
        findings: &mut Findings,
        sym: &Symbols,
    ) -> Result<(), EndMiss> {
        let Some(stack) = self.stacks.get_mut(&track) else {
            return Err(EndMiss::NothingOpen);
        };
        let _ = maybe_close(stack, ts, None, offset, findings, sym);
        if stack.is_empty() {
            return Err(EndMiss::NothingOpen);
        }
        let found = stack.iter().rposition(|s| {
            s.dur.is_none() && matching.is_none_or(|(c, n)| c == s.category && n == s.name)
        });
        let Some(i) = found else {
            return Err(if stack.iter().any(|s| s.dur.is_none()) {
                EndMiss::NoMatch
            } else {
                EndMiss::NothingOpen
            });
        };
        stack[i].dur = Some(ts - stack[i].ts);
        if i == stack.len() - 1 {
            stack.pop();
        }
        Ok(())
    }

    /// The slice on top of `track`'s stack, ended or not (what a flow
    /// event binds to).
    pub fn top(&self, track: Track) -> Option<&Slice> {
        self.stacks.get(&track).and_then(|s| s.last())
    }

    /// Reports every slice still open at the end of the trace.
    pub fn finish(&self, findings: &mut Findings, sym: &Symbols) {
        let mut open: Vec<&Slice> = self
            .stacks
            .values()
            .flatten()
            .filter(|s| s.dur.is_none())
            .collect();
        open.sort_by_key(|s| (s.ts, s.offset));
        for s in open {
            findings.add(Kind::UnmatchedBegin, s.offset, Some(s.ts), || {
                format!("{:?} ({:?})", sym.get(s.name), sym.get(s.category))
            });
        }
    }
}

fn push(stack: &mut Vec<Slice>, slice: Slice, findings: &mut Findings, sym: &Symbols) {
    if stack.len() >= MAX_DEPTH {
        findings.add(Kind::MaxDepth, slice.offset, Some(slice.ts), || {
            format!("{:?} at depth {}", sym.get(slice.name), stack.len())
        });
        return;
    }
    stack.push(slice);
}

/// `SliceTracker::MaybeCloseStack`: pops the slices that ended before
/// `new_ts`; a slice of known duration `new_dur` that starts inside one and
/// ends after it is refused (the conflicting slice is returned).
fn maybe_close(
    stack: &mut Vec<Slice>,
    new_ts: i64,
    new_dur: Option<i64>,
    offset: u64,
    findings: &mut Findings,
    sym: &Symbols,
) -> Result<(), Slice> {
    let mut incomplete_descendant = false;
    let mut i = stack.len();
    while i > 0 {
        i -= 1;
        let Some(s) = stack.get(i).copied() else {
            continue;
        };
        let Some(dur) = s.dur else {
            incomplete_descendant = true;
            continue;
        };
        let end = s.ts + dur;
        if incomplete_descendant {
            if new_ts <= end {
                continue;
            }
            // A slice ended while slices opened inside it are still open:
            // the importer cuts them at its end and pops them all.
            let cut: Vec<Sym> = stack[i + 1..].iter().map(|c| c.name).collect();
            findings.add(Kind::MisnestedEnd, s.offset, Some(s.ts), || {
                let names: Vec<&str> = cut.iter().map(|n| sym.get(*n)).collect();
                format!(
                    "{:?} ended at {} with {:?} still open inside it (seen at offset {offset:#x})",
                    sym.get(s.name),
                    super::fmt_ts(end),
                    names
                )
            });
            stack.truncate(i);
            incomplete_descendant = false;
            continue;
        }
        let ends_before = end < new_ts;
        let ends_same = end == new_ts && !(dur == 0 && new_dur == Some(0));
        if ends_before || ends_same {
            stack.pop();
            continue;
        }
        let Some(new_dur) = new_dur else {
            continue;
        };
        if new_ts < end && new_ts + new_dur > end {
            return Err(s);
        }
    }
    Ok(())
}
