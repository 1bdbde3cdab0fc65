//! `slices`: every finished duration (complete events and begin/end
//! pairs, of every provider), with its depth and parent on its thread.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, StringBuilder, UInt32Builder, UInt64Builder,
};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::{Context, Event, Wants};

use super::{Table, args, ns};

/// Builds `slices`.
#[derive(Default)]
pub struct Slices {
    id: UInt64Builder,
    ts: UInt64Builder,
    dur: UInt64Builder,
    pid: UInt64Builder,
    tid: UInt64Builder,
    provider_id: UInt32Builder,
    provider: StringBuilder,
    category: StringBuilder,
    name: StringBuilder,
    depth: UInt32Builder,
    parent_id: UInt64Builder,
    args: StringBuilder,
    unfinished: BooleanBuilder,
    scratch: String,
    /// `args` is not built.
    skip_args: bool,
    rows: usize,
}

impl Table for Slices {
    fn name(&self) -> &'static str {
        "slices"
    }

    fn columns(&self) -> Vec<Field> {
        vec![
            Field::new("id", DataType::UInt64, false),
            ns("ts"),
            ns("dur"),
            Field::new("pid", DataType::UInt64, false),
            Field::new("tid", DataType::UInt64, false),
            Field::new("provider_id", DataType::UInt32, false),
            Field::new("provider", DataType::Utf8, false),
            Field::new("category", DataType::Utf8, false),
            Field::new("name", DataType::Utf8, false),
            Field::new("depth", DataType::UInt32, false),
            Field::new("parent_id", DataType::UInt64, true),
            Field::new("args", DataType::Utf8, false),
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

    fn rows(&self) -> usize {
        self.rows
    }

    fn take(&mut self) -> Vec<ArrayRef> {
        self.rows = 0;
        vec![
            Arc::new(self.id.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.dur.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.provider_id.finish()),
            Arc::new(self.provider.finish()),
            Arc::new(self.category.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.depth.finish()),
            Arc::new(self.parent_id.finish()),
            Arc::new(self.args.finish()),
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
