//! `wakeups`: threads made runnable, and by whom.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, UInt32Builder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::{Context, Event, Wants};

use super::{Table, ns};

/// Builds `wakeups`.
#[derive(Default)]
pub struct Wakeups {
    ts: UInt64Builder,
    cpu: UInt32Builder,
    pid: UInt64Builder,
    tid: UInt64Builder,
    waker_pid: UInt64Builder,
    waker_tid: UInt64Builder,
    rows: usize,
}

impl Table for Wakeups {
    fn name(&self) -> &'static str {
        "wakeups"
    }

    fn columns(&self) -> Vec<Field> {
        vec![
            ns("ts"),
            Field::new("cpu", DataType::UInt32, false),
            Field::new("pid", DataType::UInt64, false),
            Field::new("tid", DataType::UInt64, false),
            Field::new("waker_pid", DataType::UInt64, true),
            Field::new("waker_tid", DataType::UInt64, true),
        ]
    }

    fn wants(&self) -> Wants {
        Wants {
            wakeups: true,
            ..Wants::default()
        }
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Wakeup(w) = event else {
            return;
        };
        self.ts.append_value(w.ts);
        self.cpu.append_value(w.cpu);
        self.pid.append_value(w.pid);
        self.tid.append_value(w.tid);
        self.waker_pid
            .append_option(w.waker_tid.and_then(|t| cx.process_of(t)));
        self.waker_tid.append_option(w.waker_tid);
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
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.waker_pid.finish()),
            Arc::new(self.waker_tid.finish()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx};
    use trace_analysis::event::Wakeup;

    #[test]
    fn wakeups_with_and_without_waker() {
        let cx = cx();
        let events = [
            Event::Wakeup(Wakeup {
                ts: 1,
                cpu: 0,
                pid: 10,
                tid: 11,
                waker_tid: Some(20),
            }),
            Event::Wakeup(Wakeup {
                ts: 2,
                cpu: 1,
                pid: 10,
                tid: 12,
                waker_tid: None,
            }),
        ];
        let batch = build(&mut Wakeups::default(), &cx, &events);
        assert_eq!(column(&batch, "tid"), ["11", "12"]);
        assert_eq!(column(&batch, "waker_tid"), ["20", ""]);
        // The waker's process is not known from these events alone.
        assert_eq!(column(&batch, "waker_pid"), ["", ""]);
        assert_eq!(column(&batch, "cpu"), ["0", "1"]);
    }
}
