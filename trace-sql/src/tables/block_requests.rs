//! `block_requests`: block I/O requests from issue to completion (the
//! kernel provider's slices of category `kernel:block`).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Int32Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::kernel::BlockRequest;
use trace_analysis::{Context, Event, Wants};

use super::{Table, ns};

/// The category of block requests.
pub const CATEGORY: &str = "kernel:block";

/// Builds `block_requests`.
#[derive(Default)]
pub struct BlockRequests {
    ts: UInt64Builder,
    latency: UInt64Builder,
    device: StringBuilder,
    dev: StringBuilder,
    op: StringBuilder,
    rwbs: StringBuilder,
    sector: UInt64Builder,
    sectors: UInt32Builder,
    bytes: UInt64Builder,
    issuer_pid: UInt64Builder,
    issuer_tid: UInt64Builder,
    error: Int32Builder,
    unfinished: BooleanBuilder,
    rows: usize,
}

impl Table for BlockRequests {
    fn name(&self) -> &'static str {
        "block_requests"
    }

    fn columns(&self) -> Vec<Field> {
        vec![
            ns("ts"),
            ns("latency"),
            Field::new("device", DataType::Utf8, false),
            Field::new("dev", DataType::Utf8, false),
            Field::new("op", DataType::Utf8, false),
            Field::new("rwbs", DataType::Utf8, false),
            Field::new("sector", DataType::UInt64, true),
            Field::new("sectors", DataType::UInt32, true),
            Field::new("bytes", DataType::UInt64, true),
            Field::new("issuer_pid", DataType::UInt64, true),
            Field::new("issuer_tid", DataType::UInt64, true),
            Field::new("error", DataType::Int32, true),
            Field::new("unfinished", DataType::Boolean, false),
        ]
    }

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

    fn rows(&self) -> usize {
        self.rows
    }

    fn take(&mut self) -> Vec<ArrayRef> {
        self.rows = 0;
        vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.latency.finish()),
            Arc::new(self.device.finish()),
            Arc::new(self.dev.finish()),
            Arc::new(self.op.finish()),
            Arc::new(self.rwbs.finish()),
            Arc::new(self.sector.finish()),
            Arc::new(self.sectors.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.issuer_pid.finish()),
            Arc::new(self.issuer_tid.finish()),
            Arc::new(self.error.finish()),
            Arc::new(self.unfinished.finish()),
        ]
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
