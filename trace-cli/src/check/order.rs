//! The items of a check put in the order the parser takes them: timestamp,
//! then file order (`trace_sorter.cc` sorts a file's events so), in
//! bounded memory whatever the file's length.
//!
//! Items are gathered in runs of [`RUN`]; each full run is sorted and
//! written to an unnamed temporary file in a compact form, and the runs
//! are merged as they are read back, as `sort(1)` does with a file larger
//! than its memory. A file of fewer items than a run never touches the
//! disk.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use trace_common::fxt::EventKind;

use super::items::{Body, Item, Sym, Value};

/// Items held in memory before a run is written out.
const RUN: usize = 1 << 18;

/// Items gathered in file order, to be read back sorted.
#[derive(Debug, Default)]
pub struct ItemOrder {
    run: Vec<Item>,
    /// Sorted runs written out.
    spilled: Vec<File>,
    items: u64,
    /// The earliest and latest timestamps.
    range: Option<(i64, i64)>,
}

impl ItemOrder {
    /// Adds the next item of the file.
    pub fn push(&mut self, item: Item) -> io::Result<()> {
        self.items += 1;
        self.range = Some(match self.range {
            Some((a, b)) => (a.min(item.ts), b.max(item.ts)),
            None => (item.ts, item.ts),
        });
        self.run.push(item);
        if self.run.len() >= RUN {
            self.spill()?;
        }
        Ok(())
    }

    /// The earliest and latest timestamps of the items.
    pub fn range(&self) -> Option<(i64, i64)> {
        self.range
    }

    fn spill(&mut self) -> io::Result<()> {
        sort(&mut self.run);
        let mut out = BufWriter::with_capacity(1 << 20, tempfile::tempfile()?);
        for item in self.run.drain(..) {
            write_item(&mut out, &item)?;
        }
        let mut file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.seek(SeekFrom::Start(0))?;
        self.spilled.push(file);
        Ok(())
    }

    /// Every item, sorted.
    pub fn into_sorted(mut self) -> Sorted {
        sort(&mut self.run);
        let mut sources: Vec<Source> = self
            .spilled
            .into_iter()
            .map(|f| Source::Run(BufReader::with_capacity(64 << 10, f)))
            .collect();
        sources.push(Source::Memory(self.run.into_iter()));
        let mut sorted = Sorted {
            heads: Vec::with_capacity(sources.len()),
            sources,
            heap: BinaryHeap::new(),
        };
        for i in 0..sorted.sources.len() {
            sorted.heads.push(None);
            sorted.advance(i);
        }
        sorted
    }
}

fn sort(items: &mut [Item]) {
    items.sort_by_key(|i| (i.ts, i.offset));
}

enum Source {
    Run(BufReader<File>),
    Memory(std::vec::IntoIter<Item>),
}

/// The items of an [`ItemOrder`] in order; an error is one of reading a
/// run back.
pub struct Sorted {
    sources: Vec<Source>,
    /// The next item of each source.
    heads: Vec<Option<Item>>,
    /// (timestamp, offset, source) of each head.
    heap: BinaryHeap<Reverse<(i64, u64, usize)>>,
}

impl Sorted {
    /// Reads source `i`'s next item into its head.
    fn advance(&mut self, i: usize) -> Option<io::Error> {
        let next = match &mut self.sources[i] {
            Source::Memory(items) => Ok(items.next()),
            Source::Run(r) => read_item(r),
        };
        match next {
            Ok(Some(item)) => {
                self.heap.push(Reverse((item.ts, item.offset, i)));
                self.heads[i] = Some(item);
                None
            }
            Ok(None) => None,
            Err(e) => Some(e),
        }
    }
}

impl Iterator for Sorted {
    type Item = io::Result<Item>;

    fn next(&mut self) -> Option<io::Result<Item>> {
        let Reverse((_, _, i)) = self.heap.pop()?;
        let item = self.heads[i].take()?;
        if let Some(e) = self.advance(i) {
            self.heap.clear();
            return Some(Err(e));
        }
        Some(Ok(item))
    }
}

// The form of a run on disk: little-endian fixed-size fields, a tag byte
// per variant.

fn write_item(w: &mut impl Write, item: &Item) -> io::Result<()> {
    w.write_all(&item.ts.to_le_bytes())?;
    w.write_all(&item.offset.to_le_bytes())?;
    match &item.body {
        Body::Event {
            kind,
            pid,
            tid,
            category,
            name,
            args,
            end_ts,
        } => {
            let (k, v) = kind_parts(*kind);
            w.write_all(&[0, k])?;
            w.write_all(&v.to_le_bytes())?;
            w.write_all(&pid.to_le_bytes())?;
            w.write_all(&tid.to_le_bytes())?;
            w.write_all(&category.0.to_le_bytes())?;
            w.write_all(&name.0.to_le_bytes())?;
            match end_ts {
                Some(t) => {
                    w.write_all(&[1])?;
                    w.write_all(&t.to_le_bytes())?;
                }
                None => w.write_all(&[0])?,
            }
            w.write_all(&(args.len() as u32).to_le_bytes())?;
            for (n, v) in args {
                w.write_all(&n.0.to_le_bytes())?;
                match v {
                    Value::Number(x) => {
                        w.write_all(&[0])?;
                        w.write_all(&x.to_le_bytes())?;
                    }
                    Value::Koid(k) => {
                        w.write_all(&[1])?;
                        w.write_all(&k.to_le_bytes())?;
                    }
                    Value::Other => w.write_all(&[2])?,
                }
            }
        }
        Body::LegacySwitch {
            cpu,
            outgoing,
            incoming,
            outgoing_priority,
            incoming_priority,
        } => {
            w.write_all(&[1])?;
            w.write_all(&cpu.to_le_bytes())?;
            for x in [outgoing.0, outgoing.1, incoming.0, incoming.1] {
                w.write_all(&x.to_le_bytes())?;
            }
            w.write_all(&[*outgoing_priority, *incoming_priority])?;
        }
        Body::Switch {
            cpu,
            outgoing_tid,
            incoming_tid,
            outgoing_weight,
            incoming_weight,
        } => {
            w.write_all(&[2])?;
            w.write_all(&cpu.to_le_bytes())?;
            w.write_all(&outgoing_tid.to_le_bytes())?;
            w.write_all(&incoming_tid.to_le_bytes())?;
            w.write_all(&outgoing_weight.to_le_bytes())?;
            w.write_all(&incoming_weight.to_le_bytes())?;
        }
        Body::Wakeup { tid, weight, waker } => {
            w.write_all(&[3])?;
            w.write_all(&tid.to_le_bytes())?;
            w.write_all(&weight.to_le_bytes())?;
            match waker {
                Some(k) => {
                    w.write_all(&[1])?;
                    w.write_all(&k.to_le_bytes())?;
                }
                None => w.write_all(&[0])?,
            }
        }
    }
    Ok(())
}

/// The next item of a run, or `None` at its end.
fn read_item(r: &mut impl Read) -> io::Result<Option<Item>> {
    let mut first = [0u8; 1];
    loop {
        match r.read(&mut first) {
            Ok(0) => return Ok(None),
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let mut rest = [0u8; 7];
    r.read_exact(&mut rest)?;
    let mut ts = [first[0]; 8];
    ts[1..].copy_from_slice(&rest);
    let ts = i64::from_le_bytes(ts);
    let offset = u64_(r)?;
    let body = match u8_(r)? {
        0 => {
            let k = u8_(r)?;
            let v = u64_(r)?;
            let kind = kind_from(k, v)?;
            let pid = u64_(r)?;
            let tid = u64_(r)?;
            let category = Sym(u32_(r)?);
            let name = Sym(u32_(r)?);
            let end_ts = match u8_(r)? {
                1 => Some(u64_(r)? as i64),
                _ => None,
            };
            let n = u32_(r)? as usize;
            let mut args = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                let name = Sym(u32_(r)?);
                let value = match u8_(r)? {
                    0 => Value::Number(f64::from_bits(u64_(r)?)),
                    1 => Value::Koid(u64_(r)?),
                    _ => Value::Other,
                };
                args.push((name, value));
            }
            Body::Event {
                kind,
                pid,
                tid,
                category,
                name,
                args,
                end_ts,
            }
        }
        1 => {
            let cpu = u32_(r)?;
            let o0 = u64_(r)?;
            let o1 = u64_(r)?;
            let i0 = u64_(r)?;
            let i1 = u64_(r)?;
            Body::LegacySwitch {
                cpu,
                outgoing: (o0, o1),
                incoming: (i0, i1),
                outgoing_priority: u8_(r)?,
                incoming_priority: u8_(r)?,
            }
        }
        2 => Body::Switch {
            cpu: u32_(r)?,
            outgoing_tid: u64_(r)?,
            incoming_tid: u64_(r)?,
            outgoing_weight: u32_(r)? as i32,
            incoming_weight: u32_(r)? as i32,
        },
        3 => {
            let tid = u64_(r)?;
            let weight = u32_(r)? as i32;
            let waker = match u8_(r)? {
                1 => Some(u64_(r)?),
                _ => None,
            };
            Body::Wakeup { tid, weight, waker }
        }
        t => return Err(corrupt(t)),
    };
    Ok(Some(Item { ts, offset, body }))
}

fn kind_parts(kind: EventKind) -> (u8, u64) {
    match kind {
        EventKind::Instant => (0, 0),
        EventKind::Counter { id } => (1, id),
        EventKind::DurationBegin => (2, 0),
        EventKind::DurationEnd => (3, 0),
        EventKind::DurationComplete { end_ts } => (4, end_ts),
        EventKind::AsyncBegin { id } => (5, id),
        EventKind::AsyncInstant { id } => (6, id),
        EventKind::AsyncEnd { id } => (7, id),
        EventKind::FlowBegin { id } => (8, id),
        EventKind::FlowStep { id } => (9, id),
        EventKind::FlowEnd { id } => (10, id),
    }
}

fn kind_from(k: u8, v: u64) -> io::Result<EventKind> {
    Ok(match k {
        0 => EventKind::Instant,
        1 => EventKind::Counter { id: v },
        2 => EventKind::DurationBegin,
        3 => EventKind::DurationEnd,
        4 => EventKind::DurationComplete { end_ts: v },
        5 => EventKind::AsyncBegin { id: v },
        6 => EventKind::AsyncInstant { id: v },
        7 => EventKind::AsyncEnd { id: v },
        8 => EventKind::FlowBegin { id: v },
        9 => EventKind::FlowStep { id: v },
        10 => EventKind::FlowEnd { id: v },
        t => return Err(corrupt(t)),
    })
}

fn corrupt(tag: u8) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a sorted run read back has an unknown tag {tag}"),
    )
}

fn u8_(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

fn u32_(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn u64_(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items() -> Vec<Item> {
        let kinds = [
            EventKind::Instant,
            EventKind::Counter { id: 7 },
            EventKind::DurationComplete { end_ts: 99 },
            EventKind::FlowEnd { id: u64::MAX },
        ];
        let mut v = Vec::new();
        for i in 0..1000u64 {
            // Timestamps out of file order, with ties.
            let ts = ((i * 7919) % 301) as i64 - 150;
            let body = match i % 4 {
                0 => Body::Event {
                    kind: kinds[(i / 4 % 4) as usize],
                    pid: i,
                    tid: i + 1,
                    category: Sym(3),
                    name: Sym(i as u32),
                    args: vec![
                        (Sym(1), Value::Number(-1.5)),
                        (Sym(2), Value::Koid(i)),
                        (Sym(4), Value::Other),
                    ],
                    end_ts: (i % 8 == 0).then_some(ts + 5),
                },
                1 => Body::LegacySwitch {
                    cpu: 1,
                    outgoing: (1, 2),
                    incoming: (3, i),
                    outgoing_priority: 4,
                    incoming_priority: 5,
                },
                2 => Body::Switch {
                    cpu: 0,
                    outgoing_tid: i,
                    incoming_tid: 0,
                    outgoing_weight: -3,
                    incoming_weight: 1 << 20,
                },
                _ => Body::Wakeup {
                    tid: i,
                    weight: 6,
                    waker: (i % 8 == 3).then_some(9),
                },
            };
            v.push(Item {
                ts,
                offset: i * 16,
                body,
            });
        }
        v
    }

    fn key(i: &Item) -> String {
        format!("{i:?}")
    }

    #[test]
    fn runs_written_out_and_merged_give_the_order_of_one_sort() {
        let all = items();
        let mut want = all.clone();
        sort(&mut want);
        let mut order = ItemOrder::default();
        // Spill every 100 items, by hand, to merge eleven sources.
        for (n, item) in all.into_iter().enumerate() {
            order.push(item).unwrap();
            if n % 100 == 99 {
                order.spill().unwrap();
            }
        }
        assert_eq!(order.spilled.len(), 10);
        assert_eq!(order.range(), Some((-150, 150)));
        let got: Vec<Item> = order.into_sorted().map(Result::unwrap).collect();
        assert_eq!(
            got.iter().map(key).collect::<Vec<_>>(),
            want.iter().map(key).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_run_cut_short_is_an_error_not_a_panic() {
        let mut bytes = Vec::new();
        write_item(&mut bytes, &items()[0]).unwrap();
        for cut in 1..bytes.len() {
            assert!(read_item(&mut &bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(read_item(&mut &bytes[..0]).unwrap().is_none());
    }
}
