//! `async_spans`: asynchronous operations, a begin paired with its end by
//! provider, category, name and correlation id.

use datafusion::arrow::array::{BooleanBuilder, StringBuilder, UInt64Builder};
use trace_analysis::{Context, Event, Wants};

use super::declare::table;
use super::track::TrackColumns;
use super::{Table, args};

table! {
    /// Builds `async_spans`.
    pub struct AsyncSpans as "async_spans" {
        /// Begin, ns.
        ts: UInt64Builder,
        /// Begin to end, ns.
        dur: UInt64Builder,
        /// Where the begin is, and what the span is.
        track: TrackColumns flatten,
        /// Correlation id.
        async_id: UInt64Builder,
        /// Arguments of the begin and the end, JSON.
        args: StringBuilder,
        /// No end was seen before the trace ended.
        unfinished: BooleanBuilder,
    }
    state {
        /// Where a row's `args` is written.
        scratch: String,
        /// `args` is not built.
        skip_args: bool,
    }
}

impl Table for AsyncSpans {
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
