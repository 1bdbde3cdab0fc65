//! `samples`: stack samples (CPU profile, off-CPU, wake-up and probe
//! stacks), each with its call stack, leaf first.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, ListArray, StringBuilder, StructArray, UInt32Builder, UInt64Builder,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use trace_analysis::event::Frame;
use trace_analysis::{Context, Event, Wants};

use super::Table;
use super::declare::{ColumnBuilder, table};

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

/// Builds the `stack` column: a list of frames, each a function and a
/// mapping.
pub struct StackBuilder {
    function: StringBuilder,
    mapping: StringBuilder,
    /// Where each stack's frames start, then where the last one ends.
    offsets: Vec<i32>,
}

impl Default for StackBuilder {
    fn default() -> Self {
        StackBuilder {
            function: StringBuilder::new(),
            mapping: StringBuilder::new(),
            offsets: vec![0],
        }
    }
}

impl StackBuilder {
    /// Appends one stack, leaf first.
    pub fn append(&mut self, frames: &[Frame], cx: &Context) {
        for f in frames {
            self.function.append_value(cx.strings.get(f.function));
            self.mapping.append_value(cx.strings.get(f.mapping));
        }
        let end = self.offsets.last().copied().unwrap_or(0);
        // A batch holds at most a few million frames: far from i32::MAX.
        let len = i32::try_from(frames.len()).unwrap_or(i32::MAX);
        self.offsets.push(end.saturating_add(len));
    }
}

impl ColumnBuilder for StackBuilder {
    fn data_type() -> DataType {
        DataType::List(frame_field())
    }

    fn finish_array(&mut self) -> ArrayRef {
        let frames = StructArray::new(
            frame_fields(),
            vec![
                Arc::new(self.function.finish()) as ArrayRef,
                Arc::new(self.mapping.finish()),
            ],
            None,
        );
        let offsets = OffsetBuffer::new(std::mem::replace(&mut self.offsets, vec![0]).into());
        Arc::new(ListArray::new(
            frame_field(),
            offsets,
            Arc::new(frames),
            None,
        ))
    }
}

table! {
    /// Builds `samples`.
    pub struct Samples as "samples" {
        /// Time, ns.
        ts: UInt64Builder,
        /// Process.
        pid: UInt64Builder,
        /// Thread.
        tid: UInt64Builder,
        /// CPU.
        cpu: UInt32Builder,
        /// The stream (`cpu-clock`, `off-cpu`, `wakeup`, a probe's).
        timebase: StringBuilder,
        /// The sample's weight when its stream has one.
        weight: UInt64Builder nullable,
        /// The function of the first (innermost) frame.
        leaf: StringBuilder nullable,
        /// The call stack, leaf first.
        stack: StackBuilder,
    }
    state {
        /// `stack` is not built.
        skip_stack: bool,
    }
}

impl Table for Samples {
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
            self.stack.append(&s.frames, cx);
        }
        self.rows += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx, sym};
    use trace_analysis::event::Sample;

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
