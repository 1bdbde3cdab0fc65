//! `async_spans`: asynchronous operations, a begin paired with its end by
//! provider, category, name and correlation id.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanBuilder, StringBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::{Context, Event, Wants};

use super::track::TrackColumns;
use super::{Table, args, ns};

/// Builds `async_spans`.
#[derive(Default)]
pub struct AsyncSpans {
    ts: UInt64Builder,
    dur: UInt64Builder,
    track: TrackColumns,
    async_id: UInt64Builder,
    args: StringBuilder,
    unfinished: BooleanBuilder,
    scratch: String,
    /// `args` is not built.
    skip_args: bool,
    rows: usize,
}

impl Table for AsyncSpans {
    fn name(&self) -> &'static str {
        "async_spans"
    }

    fn columns(&self) -> Vec<Field> {
        let mut f = vec![ns("ts"), ns("dur")];
        f.extend(TrackColumns::fields());
        f.push(Field::new("async_id", DataType::UInt64, false));
        f.push(Field::new("args", DataType::Utf8, false));
        f.push(Field::new("unfinished", DataType::Boolean, false));
        f
    }

    fn wants(&self) -> Wants {
        Wants {
            asyncs: true,
            end_time: true,
            ..Wants::default()
        }
    }

    fn keep_columns(&mut self, keep: &dyn Fn(&str) -> bool) {
        self.skip_args = !keep("args");
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Async(a) = event else {
            return;
        };
        self.ts.append_value(a.ts);
        self.dur.append_value(a.dur);
        self.track.append(&a.track, a.category, a.name, cx);
        self.async_id.append_value(a.id);
        if !self.skip_args {
            args::write_json(&mut self.scratch, &a.args, cx, |_| true);
            self.args.append_value(&self.scratch);
        }
        self.unfinished.append_value(a.unfinished);
        self.rows += 1;
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn take(&mut self) -> Vec<ArrayRef> {
        self.rows = 0;
        let mut c: Vec<ArrayRef> = vec![Arc::new(self.ts.finish()), Arc::new(self.dur.finish())];
        c.extend(self.track.finish());
        c.push(Arc::new(self.async_id.finish()));
        c.push(Arc::new(self.args.finish()));
        c.push(Arc::new(self.unfinished.finish()));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx, sym, track};
    use trace_analysis::event::AsyncSpan;

    #[test]
    fn spans_with_ids() {
        let mut cx = cx();
        let (cat, name) = (sym(&mut cx, "net"), sym(&mut cx, "request"));
        let span = |id, ts, dur, unfinished| {
            Event::Async(AsyncSpan {
                ts,
                dur,
                track: track(1, 2),
                category: cat,
                name,
                id,
                args: Vec::new(),
                unfinished,
            })
        };
        let batch = build(
            &mut AsyncSpans::default(),
            &cx,
            &[span(7, 10, 30, false), span(8, 20, 90, true)],
        );
        assert_eq!(column(&batch, "async_id"), ["7", "8"]);
        assert_eq!(column(&batch, "dur"), ["30", "90"]);
        assert_eq!(column(&batch, "unfinished"), ["false", "true"]);
        assert_eq!(column(&batch, "name"), ["request", "request"]);
    }
}
