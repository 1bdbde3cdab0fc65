//! `block_requests`: block I/O requests from issue to completion (the
//! kernel provider's slices of category `kernel:block`).

use datafusion::arrow::array::{
    BooleanBuilder, Int32Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use trace_analysis::kernel::BlockRequest;
use trace_analysis::{Context, Event, Wants};

use super::Table;
use super::declare::table;

/// The category of block requests.
pub const CATEGORY: &str = "kernel:block";

table! {
    /// Builds `block_requests`.
    pub struct BlockRequests as "block_requests" {
        /// Issue, ns.
        ts: UInt64Builder,
        /// Issue to completion, ns.
        latency: UInt64Builder,
        /// Device name, or its number if it has none.
        device: StringBuilder,
        /// Device number, `major:minor`.
        dev: StringBuilder,
        /// Operation: `read`, `write`, `flush`...
        op: StringBuilder,
        /// The kernel's flags string.
        rwbs: StringBuilder,
        /// First sector (512 bytes).
        sector: UInt64Builder nullable,
        /// Sectors.
        sectors: UInt32Builder nullable,
        /// Bytes.
        bytes: UInt64Builder nullable,
        /// Process of the thread that issued it, when known.
        issuer_pid: UInt64Builder nullable,
        /// Thread that issued it.
        issuer_tid: UInt64Builder nullable,
        /// Completion status: 0, or a negative errno.
        error: Int32Builder nullable,
        /// Not completed when the recording ended.
        unfinished: BooleanBuilder,
    }
}

impl Table for BlockRequests {
    fn wants(&self) -> Wants {
        Wants {
            durations: true,
            end_time: true,
            ..Wants::default()
        }
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Slice(s) = event else {
            return;
        };
        let Some(r) = BlockRequest::from_slice(s, cx) else {
            return;
        };
        self.ts.append_value(s.ts);
        self.latency.append_value(s.dur);
        self.device.append_value(r.device);
        self.dev.append_value(r.dev);
        self.op.append_value(cx.strings.get(s.name));
        self.rwbs.append_value(r.rwbs);
        self.sector.append_option(r.sector);
        self.sectors.append_option(r.sectors);
        self.bytes.append_option(r.bytes);
        self.issuer_pid
            .append_option(r.issuer.and_then(|t| cx.process_of(t)));
        self.issuer_tid.append_option(r.issuer);
        self.error.append_option(r.error);
        self.unfinished.append_value(r.unfinished);
        self.rows += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{args, build, column, cx, sym, track};
    use trace_analysis::Value;
    use trace_analysis::event::Slice;

    #[test]
    fn requests_from_block_slices() {
        let mut cx = cx();
        let (cat, write, flush) = (
            sym(&mut cx, CATEGORY),
            sym(&mut cx, "write"),
            sym(&mut cx, "flush"),
        );
        let done = args(
            &mut cx,
            &[
                ("device", Value::Str("vda".into())),
                ("dev", Value::Str("253:0".into())),
                ("sector", Value::Uint(2048)),
                ("sectors", Value::Uint(8)),
                ("bytes", Value::Uint(4096)),
                ("rwbs", Value::Str("WS".into())),
                ("issuer", Value::Koid(99)),
                ("error", Value::Int(0)),
            ],
        );
        let open = args(
            &mut cx,
            &[
                ("device", Value::Str("vda".into())),
                ("rwbs", Value::Str("F".into())),
                ("unfinished", Value::Bool(true)),
            ],
        );
        let req = |ts, name, args| {
            Event::Slice(Slice {
                id: ts,
                ts,
                dur: 500,
                track: track(0x7FFE_0000, 0x7FFE_0001),
                category: cat,
                name,
                depth: 0,
                parent: None,
                args,
                unfinished: false,
            })
        };
        let events = [req(10, write, done), req(20, flush, open)];
        let batch = build(&mut BlockRequests::default(), &cx, &events);
        assert_eq!(column(&batch, "op"), ["write", "flush"]);
        assert_eq!(column(&batch, "latency"), ["500", "500"]);
        assert_eq!(column(&batch, "device"), ["vda", "vda"]);
        assert_eq!(column(&batch, "dev"), ["253:0", ""]);
        assert_eq!(column(&batch, "bytes"), ["4096", ""]);
        assert_eq!(column(&batch, "sectors"), ["8", ""]);
        assert_eq!(column(&batch, "issuer_tid"), ["99", ""]);
        assert_eq!(column(&batch, "error"), ["0", ""]);
        assert_eq!(column(&batch, "unfinished"), ["false", "true"]);
    }
}
