//! The `block` section: per device and operation, requests, bytes, errors
//! and latency (issue to completion) percentiles.

use foldhash::HashMap;

use super::Finish;
use super::filter::Filter;
use super::histogram::Latency;
use super::table::{Cell, Column, Kind, Section, Table};
use crate::event::Event;
use crate::kernel::BlockRequest;
use crate::reader::Context;
use crate::strings::Sym;

#[derive(Debug, Default)]
struct Requests {
    latency: Latency,
    bytes: u64,
    errors: u64,
    unfinished: u64,
}

/// Block requests of a trace.
#[derive(Debug, Default)]
pub struct Block {
    /// Per device (a handful: looked up by name, not hashed), per
    /// operation.
    devices: Vec<(Box<str>, HashMap<Sym, Requests>)>,
    seen: u64,
}

impl Block {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        let Event::Slice(s) = e else { return };
        let Some(r) = BlockRequest::from_slice(s, cx) else {
            return;
        };
        self.seen += 1;
        if !f.at(s.ts) {
            return;
        }
        if f.selection().by_thread() && !f.thread(0, r.issuer.unwrap_or(0), cx) {
            return;
        }
        let device = if r.device.is_empty() { "?" } else { r.device };
        let i = match self.devices.iter().position(|(d, _)| &**d == device) {
            Some(i) => i,
            None => {
                self.devices.push((device.into(), HashMap::default()));
                self.devices.len() - 1
            }
        };
        let q = self.devices[i].1.entry(s.name).or_default();
        q.latency.record(s.dur);
        q.bytes = q.bytes.saturating_add(r.bytes.unwrap_or(0));
        q.errors += u64::from(r.failed());
        q.unfinished += u64::from(r.unfinished);
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>) -> Section {
        let mut section = Section::new("block", "Block I/O");
        if self.seen == 0 {
            section
                .notes
                .push("The trace has no block requests (record kernel:block to see them).".into());
            return section;
        }
        let mut rows: Vec<((String, String), Requests)> = self
            .devices
            .into_iter()
            .flat_map(|(d, ops)| {
                ops.into_iter()
                    .map(move |(op, r)| ((d.to_string(), end.cx.strings.get(op).to_owned()), r))
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let mut table = Table::new(
            "devices",
            "Block requests per device and operation",
            vec![
                Column::new("device", "device", Kind::Text),
                Column::new("op", "op", Kind::Text),
                Column::new("requests", "requests", Kind::Count),
                Column::new("bytes", "bytes", Kind::Bytes),
                Column::new("errors", "errors", Kind::Count),
                Column::new("p50", "p50", Kind::Duration),
                Column::new("p90", "p90", Kind::Duration),
                Column::new("p99", "p99", Kind::Duration),
                Column::new("max", "max", Kind::Duration),
                Column::new("total", "total", Kind::Duration),
            ],
        )
        .diffed(&["device", "op"], &["total", "requests", "bytes", "p99"])
        .peaks(&["p99"]);
        let unfinished: u64 = rows.iter().map(|r| r.1.unfinished).sum();
        for ((device, op), r) in rows {
            let l = &r.latency;
            table.push(vec![
                Cell::Text(device),
                Cell::Text(op),
                Cell::Count(l.count),
                Cell::Count(r.bytes),
                Cell::Count(r.errors),
                l.cell(0.5),
                l.cell(0.9),
                l.cell(0.99),
                l.max_cell(),
                Cell::Ns(l.sum),
            ]);
        }
        table.truncate(end.top);
        table.note("Latency is from the request's issue to the device to its completion.");
        if unfinished > 0 {
            table.note(format!(
                "{unfinished} requests were still in flight when the trace ended."
            ));
        }
        section.tables.push(table);
        section
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::{Arg, ArgValue, StringRef};

    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn requests_per_device_and_operation() {
        let mut t = Fxt::new();
        for i in 0..4u64 {
            t.slice(
                i * 1000,
                i * 1000 + 100 * (i + 1),
                0x7FFE_0000,
                0x7FFE_0001,
                "kernel:block",
                if i < 3 { "read" } else { "write" },
                vec![
                    Arg::new("device", ArgValue::String(StringRef::inline("vda"))),
                    Arg::new("bytes", ArgValue::Uint32(4096)),
                    Arg::new("issuer", ArgValue::Koid(11)),
                    Arg::new("error", ArgValue::Int32(if i == 1 { -5 } else { 0 })),
                ],
            );
        }
        let r = t.report(Options {
            sections: vec![SectionId::Block],
            ..Options::default()
        });
        let d = r.section("block").unwrap().table("devices").unwrap();
        assert_eq!(d.rows.len(), 2);
        assert_eq!(d.cell(0, "op"), Some(&Cell::Text("read".into())));
        assert_eq!(d.cell(0, "requests"), Some(&Cell::Count(3)));
        assert_eq!(d.cell(0, "bytes"), Some(&Cell::Count(3 * 4096)));
        assert_eq!(d.cell(0, "errors"), Some(&Cell::Count(1)));
        assert_eq!(d.cell(0, "max"), Some(&Cell::Ns(300)));
        assert_eq!(d.cell(1, "total"), Some(&Cell::Ns(400)));
    }
}
