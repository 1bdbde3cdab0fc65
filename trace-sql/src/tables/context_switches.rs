//! `context_switches`: every switch from one thread to another on a CPU.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Int32Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::{Context, Event, Wants};

use super::{Table, ns};

/// Builds `context_switches`.
#[derive(Default)]
pub struct ContextSwitches {
    ts: UInt64Builder,
    cpu: UInt32Builder,
    prev_pid: UInt64Builder,
    prev_tid: UInt64Builder,
    prev_state: StringBuilder,
    next_pid: UInt64Builder,
    next_tid: UInt64Builder,
    prev_prio: Int32Builder,
    next_prio: Int32Builder,
    inferred: BooleanBuilder,
    rows: usize,
}

impl Table for ContextSwitches {
    fn name(&self) -> &'static str {
        "context_switches"
    }

    fn columns(&self) -> Vec<Field> {
        vec![
            ns("ts"),
            Field::new("cpu", DataType::UInt32, false),
            Field::new("prev_pid", DataType::UInt64, false),
            Field::new("prev_tid", DataType::UInt64, false),
            Field::new("prev_state", DataType::Utf8, false),
            Field::new("next_pid", DataType::UInt64, false),
            Field::new("next_tid", DataType::UInt64, false),
            Field::new("prev_prio", DataType::Int32, true),
            Field::new("next_prio", DataType::Int32, true),
            Field::new("inferred", DataType::Boolean, false),
        ]
    }

    fn wants(&self) -> Wants {
        Wants {
            switches: true,
            ..Wants::default()
        }
    }

    fn event(&mut self, event: &Event, _cx: &Context) {
        let Event::Switch(s) = event else {
            return;
        };
        self.ts.append_value(s.ts);
        self.cpu.append_value(s.cpu);
        self.prev_pid.append_value(s.prev_pid);
        self.prev_tid.append_value(s.prev_tid);
        self.prev_state.append_value(s.prev_state.name());
        self.next_pid.append_value(s.next_pid);
        self.next_tid.append_value(s.next_tid);
        self.prev_prio.append_option(s.prev_prio);
        self.next_prio.append_option(s.next_prio);
        self.inferred.append_value(s.inferred);
        self.rows += 1;
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn take(&mut self) -> Vec<ArrayRef> {
        self.rows = 0;
        vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.cpu.finish()),
            Arc::new(self.prev_pid.finish()),
            Arc::new(self.prev_tid.finish()),
            Arc::new(self.prev_state.finish()),
            Arc::new(self.next_pid.finish()),
            Arc::new(self.next_tid.finish()),
            Arc::new(self.prev_prio.finish()),
            Arc::new(self.next_prio.finish()),
            Arc::new(self.inferred.finish()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx};
    use trace_analysis::event::{OutState, Switch};

    #[test]
    fn switches_with_states_and_priorities() {
        let cx = cx();
        let sw = |ts, state, prio, inferred| {
            Event::Switch(Switch {
                ts,
                cpu: 2,
                prev_pid: 10,
                prev_tid: 11,
                prev_state: state,
                next_pid: 0,
                next_tid: 0,
                prev_prio: prio,
                next_prio: Some(0),
                inferred,
            })
        };
        let events = [
            sw(100, OutState::Blocked, Some(120), false),
            sw(200, OutState::Runnable, None, true),
        ];
        let batch = build(&mut ContextSwitches::default(), &cx, &events);
        assert_eq!(column(&batch, "ts"), ["100", "200"]);
        assert_eq!(column(&batch, "cpu"), ["2", "2"]);
        assert_eq!(column(&batch, "prev_state"), ["S", "R"]);
        assert_eq!(column(&batch, "prev_prio"), ["120", ""]);
        assert_eq!(column(&batch, "next_tid"), ["0", "0"]);
        assert_eq!(column(&batch, "inferred"), ["false", "true"]);
    }
}
