//! `slices`: every finished duration (complete events and begin/end
//! pairs, of every provider), with its depth and parent on its thread.

use datafusion::arrow::array::{BooleanBuilder, StringBuilder, UInt32Builder, UInt64Builder};
use trace_analysis::{Context, Event, Wants};

use super::declare::table;
use super::{Table, args};

table! {
    /// Builds `slices`.
    pub struct Slices as "slices" {
        /// The slice's id, unique within the trace.
        id: UInt64Builder,
        /// Start, ns.
        ts: UInt64Builder,
        /// Duration, ns.
        dur: UInt64Builder,
        /// Process.
        pid: UInt64Builder,
        /// Thread.
        tid: UInt64Builder,
        /// Provider id.
        provider_id: UInt32Builder,
        /// Provider name.
        provider: StringBuilder,
        /// Category.
        category: StringBuilder,
        /// Name.
        name: StringBuilder,
        /// Nesting depth on its thread and provider: 0 at the top.
        depth: UInt32Builder,
        /// The `id` of the enclosing slice; null at depth 0.
        parent_id: UInt64Builder nullable,
        /// Arguments, JSON.
        args: StringBuilder,
        /// The slice had not ended when the recording did.
        unfinished: BooleanBuilder,
    }
    state {
        /// Where a row's `args` is written.
        scratch: String,
        /// `args` is not built.
        skip_args: bool,
    }
}

impl Table for Slices {
    fn wants(&self) -> Wants {
        Wants {
            durations: true,
            end_time: true,
            ..Wants::default()
        }
    }

    fn keep_columns(&mut self, keep: &dyn Fn(&str) -> bool) {
        self.skip_args = !keep("args");
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Slice(s) = event else {
            return;
        };
        self.id.append_value(s.id);
        self.ts.append_value(s.ts);
        self.dur.append_value(s.dur);
        self.pid.append_value(s.track.pid);
        self.tid.append_value(s.track.tid);
        self.provider_id.append_value(s.track.provider);
        self.provider
            .append_value(cx.provider_name(s.track.provider));
        self.category.append_value(cx.strings.get(s.category));
        self.name.append_value(cx.strings.get(s.name));
        self.depth.append_value(s.depth);
        self.parent_id.append_option(s.parent);
        if !self.skip_args {
            args::write_json(&mut self.scratch, &s.args, cx, |_| true);
            self.args.append_value(&self.scratch);
        }
        self.unfinished.append_value(s.unfinished);
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
    fn nested_slices_keep_depth_parent_and_args() {
        let mut cx = cx();
        let (cat, outer, inner) = (
            sym(&mut cx, "app"),
            sym(&mut cx, "outer"),
            sym(&mut cx, "inner"),
        );
        let slice = |id, ts, dur, name, depth, parent, args, unfinished| {
            Event::Slice(Slice {
                id,
                ts,
                dur,
                track: track(10, 11),
                category: cat,
                name,
                depth,
                parent,
                args,
                unfinished,
            })
        };
        let a = args(&mut cx, &[("seq", Value::Uint(7))]);
        let open = args(&mut cx, &[("unfinished", Value::Bool(true))]);
        let events = [
            slice(2, 110, 20, inner, 1, Some(1), a, false),
            slice(1, 100, 50, outer, 0, None, Vec::new(), false),
            // The reader marks a slice its writer said is `unfinished`.
            slice(3, 200, 5, outer, 0, None, open, true),
            Event::Process {
                pid: 10,
                name: outer,
            },
        ];
        let batch = build(&mut Slices::default(), &cx, &events);
        assert_eq!(column(&batch, "id"), ["2", "1", "3"]);
        assert_eq!(column(&batch, "ts"), ["110", "100", "200"]);
        assert_eq!(column(&batch, "dur"), ["20", "50", "5"]);
        assert_eq!(column(&batch, "name"), ["inner", "outer", "outer"]);
        assert_eq!(column(&batch, "category"), ["app", "app", "app"]);
        assert_eq!(column(&batch, "depth"), ["1", "0", "0"]);
        assert_eq!(column(&batch, "parent_id"), ["1", "", ""]);
        assert_eq!(column(&batch, "tid"), ["11", "11", "11"]);
        assert_eq!(column(&batch, "provider_id"), ["1", "1", "1"]);
        assert_eq!(
            column(&batch, "args"),
            ["{\"seq\":7}", "{}", "{\"unfinished\":true}"]
        );
        // An unfinished slice is marked.
        assert_eq!(column(&batch, "unfinished"), ["false", "false", "true"]);
    }
}
