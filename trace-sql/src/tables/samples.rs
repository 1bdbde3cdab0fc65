//! `samples`: stack samples (CPU profile, off-CPU, wake-up and probe
//! stacks), each with its call stack, leaf first.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, ListArray, StringBuilder, StructArray, UInt32Builder, UInt64Builder,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use trace_analysis::{Context, Event, Wants};

use super::{Table, ns};

/// The fields of one frame.
fn frame_fields() -> Fields {
    Fields::from(vec![
        Field::new("function", DataType::Utf8, false),
        Field::new("mapping", DataType::Utf8, false),
    ])
}

/// The field of a stack's items.
fn frame_field() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Struct(frame_fields()), false))
}

/// Builds `samples`.
pub struct Samples {
    ts: UInt64Builder,
    pid: UInt64Builder,
    tid: UInt64Builder,
    cpu: UInt32Builder,
    timebase: StringBuilder,
    weight: UInt64Builder,
    leaf: StringBuilder,
    function: StringBuilder,
    mapping: StringBuilder,
    offsets: Vec<i32>,
    /// `stack` is not built.
    skip_stack: bool,
    rows: usize,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            ts: UInt64Builder::new(),
            pid: UInt64Builder::new(),
            tid: UInt64Builder::new(),
            cpu: UInt32Builder::new(),
            timebase: StringBuilder::new(),
            weight: UInt64Builder::new(),
            leaf: StringBuilder::new(),
            function: StringBuilder::new(),
            mapping: StringBuilder::new(),
            offsets: vec![0],
            skip_stack: false,
            rows: 0,
        }
    }
}

impl Table for Samples {
    fn name(&self) -> &'static str {
        "samples"
    }

    fn columns(&self) -> Vec<Field> {
        vec![
            ns("ts"),
            Field::new("pid", DataType::UInt64, false),
            Field::new("tid", DataType::UInt64, false),
            Field::new("cpu", DataType::UInt32, false),
            Field::new("timebase", DataType::Utf8, false),
            Field::new("weight", DataType::UInt64, true),
            Field::new("leaf", DataType::Utf8, true),
            Field::new("stack", DataType::List(frame_field()), false),
        ]
    }

    fn wants(&self) -> Wants {
        Wants {
            samples: true,
            ..Wants::default()
        }
    }

    fn keep_columns(&mut self, keep: &dyn Fn(&str) -> bool) {
        self.skip_stack = !keep("stack");
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Sample(s) = event else {
            return;
        };
        self.ts.append_value(s.ts);
        self.pid.append_value(s.pid);
        self.tid.append_value(s.tid);
        self.cpu.append_value(s.cpu);
        self.timebase.append_value(cx.strings.get(s.timebase));
        self.weight.append_option(s.weight);
        self.leaf
            .append_option(s.frames.first().map(|f| cx.strings.get(f.function)));
        if !self.skip_stack {
            for f in &s.frames {
                self.function.append_value(cx.strings.get(f.function));
                self.mapping.append_value(cx.strings.get(f.mapping));
            }
            let end = self.offsets.last().copied().unwrap_or(0);
            // A batch holds at most a few million frames: far from i32::MAX.
            let len = i32::try_from(s.frames.len()).unwrap_or(i32::MAX);
            self.offsets.push(end.saturating_add(len));
        }
        self.rows += 1;
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn take(&mut self) -> Vec<ArrayRef> {
        self.rows = 0;
        let frames = StructArray::new(
            frame_fields(),
            vec![
                Arc::new(self.function.finish()) as ArrayRef,
                Arc::new(self.mapping.finish()),
            ],
            None,
        );
        let offsets = OffsetBuffer::new(std::mem::replace(&mut self.offsets, vec![0]).into());
        let stack = ListArray::new(frame_field(), offsets, Arc::new(frames), None);
        vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.cpu.finish()),
            Arc::new(self.timebase.finish()),
            Arc::new(self.weight.finish()),
            Arc::new(self.leaf.finish()),
            Arc::new(stack),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx, sym};
    use trace_analysis::event::{Frame, Sample};

    #[test]
    fn stacks_leaf_first() {
        let mut cx = cx();
        let exe = sym(&mut cx, "/bin/spin");
        let frame = |cx: &mut Context, f| Frame {
            function: sym(cx, f),
            mapping: exe,
        };
        let frames = vec![
            frame(&mut cx, "spin_c"),
            frame(&mut cx, "spin_b"),
            frame(&mut cx, "main"),
        ];
        let (cpu_clock, off_cpu) = (sym(&mut cx, "cpu-clock"), sym(&mut cx, "off-cpu"));
        let events = [
            Event::Sample(Sample {
                ts: 1,
                pid: 10,
                tid: 11,
                cpu: 3,
                timebase: cpu_clock,
                weight: None,
                frames,
            }),
            Event::Sample(Sample {
                ts: 2,
                pid: 10,
                tid: 11,
                cpu: 0,
                timebase: off_cpu,
                weight: Some(20_000_000),
                frames: Vec::new(),
            }),
        ];
        let mut table = Samples::default();
        let batch = build(&mut table, &cx, &events);
        assert_eq!(column(&batch, "timebase"), ["cpu-clock", "off-cpu"]);
        assert_eq!(column(&batch, "weight"), ["", "20000000"]);
        assert_eq!(column(&batch, "leaf"), ["spin_c", ""]);
        assert_eq!(
            column(&batch, "stack"),
            [
                "[{function: spin_c, mapping: /bin/spin}, {function: spin_b, mapping: /bin/spin}, \
                 {function: main, mapping: /bin/spin}]",
                "[]"
            ]
        );
        // The builder starts over after a batch.
        let again = build(&mut table, &cx, &events[1..]);
        assert_eq!(column(&again, "stack"), ["[]"]);
    }
}
