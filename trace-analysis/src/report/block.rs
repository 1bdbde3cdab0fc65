//! The `block` section: per device and operation, requests, bytes, errors
//! and latency (issue to completion) percentiles.

use foldhash::HashMap;

use super::filter::Filter;
use super::histogram::Latency;
use super::table::{Cell, Column, Kind, Section, Table};
use super::{Finish, Name, arg};
use crate::event::Event;
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
#[derive(Debug)]
pub struct Block {
    category: Name,
    device: Name,
    bytes: Name,
    error: Name,
    issuer: Name,
    unfinished: Name,
    devices: HashMap<(String, Sym), Requests>,
    seen: u64,
}

impl Default for Block {
    fn default() -> Self {
        Block {
            category: Name::new(trace_common::category::KERNEL_BLOCK),
            device: Name::new("device"),
            bytes: Name::new("bytes"),
            error: Name::new("error"),
            issuer: Name::new("issuer"),
            unfinished: Name::new("unfinished"),
            devices: HashMap::default(),
            seen: 0,
        }
    }
}

impl Block {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        let Event::Slice(s) = e else { return };
        if !self.category.is(s.category, cx) {
            return;
        }
        self.seen += 1;
        if !f.at(s.ts) {
            return;
        }
        if f.selection().by_thread() {
            let issuer = arg(&s.args, &mut self.issuer, cx).and_then(|v| v.as_i64());
            let tid = issuer.and_then(|t| u64::try_from(t).ok()).unwrap_or(0);
            if !f.thread(0, tid, cx) {
                return;
            }
        }
        let device = arg(&s.args, &mut self.device, cx)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_owned();
        let bytes = arg(&s.args, &mut self.bytes, cx)
            .and_then(|v| v.as_i64())
            .and_then(|b| u64::try_from(b).ok())
            .unwrap_or(0);
        let failed = arg(&s.args, &mut self.error, cx)
            .and_then(|v| v.as_i64())
            .is_some_and(|e| e != 0);
        let unfinished =
            s.unfinished || arg(&s.args, &mut self.unfinished, cx).is_some_and(|v| v.is_true());
        let r = self.devices.entry((device, s.name)).or_default();
        r.latency.record(s.dur);
        r.bytes = r.bytes.saturating_add(bytes);
        r.errors += u64::from(failed);
        r.unfinished += u64::from(unfinished);
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
            .map(|((d, op), r)| ((d, end.cx.strings.get(op).to_owned()), r))
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
        .diffed(&["device", "op"], &["total", "requests", "bytes", "p99"]);
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
