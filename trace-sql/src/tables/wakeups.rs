//! `wakeups`: threads made runnable, and by whom.

use datafusion::arrow::array::{UInt32Builder, UInt64Builder};
use trace_analysis::{Context, Event, Wants};

use super::Table;
use super::declare::table;

table! {
    /// Builds `wakeups`.
    pub struct Wakeups as "wakeups" {
        /// Time, ns.
        ts: UInt64Builder,
        /// CPU the wake-up was written on.
        cpu: UInt32Builder,
        /// Process of the woken thread.
        pid: UInt64Builder,
        /// The woken thread.
        tid: UInt64Builder,
        /// Process of the waker, when known.
        waker_pid: UInt64Builder nullable,
        /// The thread that woke it, when written.
        waker_tid: UInt64Builder nullable,
    }
}

impl Table for Wakeups {
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
