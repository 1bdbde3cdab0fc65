//! `threads`: every thread the trace names, with its process and last name.

use std::collections::BTreeMap;

use datafusion::arrow::array::{StringBuilder, UInt64Builder};
use trace_analysis::{Context, Event, Sym, Wants};

use super::Table;
use super::declare::table;

table! {
    /// Builds `threads` at the end of the trace from the names it gave (one
    /// entry per thread while reading).
    pub struct Threads as "threads" {
        /// Thread id.
        tid: UInt64Builder,
        /// Its process.
        pid: UInt64Builder,
        /// Its last name.
        name: StringBuilder,
    }
    state {
        /// The process and last name of each thread, by tid.
        names: BTreeMap<u64, (u64, Sym)>,
    }
}

impl Table for Threads {
    fn wants(&self) -> Wants {
        Wants::default()
    }

    fn event(&mut self, event: &Event, _cx: &Context) {
        if let Event::Thread { pid, tid, name } = event {
            self.names.insert(*tid, (*pid, *name));
        }
    }

    fn end(&mut self, cx: &Context) {
        for (tid, (pid, name)) in std::mem::take(&mut self.names) {
            self.tid.append_value(tid);
            self.pid.append_value(pid);
            self.name.append_value(cx.strings.get(name));
            self.rows += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx, sym};

    #[test]
    fn last_names_by_tid() {
        let mut cx = cx();
        let events: Vec<Event> = [(10u64, 11u64, "main"), (10, 12, "w"), (10, 11, "renamed")]
            .into_iter()
            .map(|(pid, tid, name)| Event::Thread {
                pid,
                tid,
                name: sym(&mut cx, name),
            })
            .collect();
        let batch = build(&mut Threads::default(), &cx, &events);
        assert_eq!(column(&batch, "tid"), ["11", "12"]);
        assert_eq!(column(&batch, "pid"), ["10", "10"]);
        assert_eq!(column(&batch, "name"), ["renamed", "w"]);
    }
}
