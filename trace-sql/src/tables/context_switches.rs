//! `context_switches`: every switch from one thread to another on a CPU.

use datafusion::arrow::array::{
    BooleanBuilder, Int32Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use trace_analysis::{Context, Event, Wants};

use super::Table;
use super::declare::table;

table! {
    /// Builds `context_switches`.
    pub struct ContextSwitches as "context_switches" {
        /// Time, ns.
        ts: UInt64Builder,
        /// CPU.
        cpu: UInt32Builder,
        /// Process of the thread switched out.
        prev_pid: UInt64Builder,
        /// Thread switched out.
        prev_tid: UInt64Builder,
        /// Its state (`R`, `S`, `T`, `Z`, `X`, or a number).
        prev_state: StringBuilder,
        /// Process of the thread switched in.
        next_pid: UInt64Builder,
        /// Thread switched in.
        next_tid: UInt64Builder,
        /// Kernel priority of the outgoing thread, when written.
        prev_prio: Int32Builder nullable,
        /// Kernel priority of the incoming thread, when written.
        next_prio: Int32Builder nullable,
        /// The recorder inferred the switch.
        inferred: BooleanBuilder,
        /// Inferred, out of a thread that showed nothing of its own since.
        untraced: BooleanBuilder,
    }
}

impl Table for ContextSwitches {
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
        self.untraced.append_value(s.untraced);
        self.rows += 1;
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
        let sw = |ts, state, prio, inferred: bool| {
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
                untraced: inferred,
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
        assert_eq!(column(&batch, "untraced"), ["false", "true"]);
    }
}
