//! `threads`: every thread the trace names, with its process and last name.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::{Context, Event, Sym, Wants};

use super::Table;

/// Builds `threads` at the end of the trace from the names it gave (one
/// entry per thread while reading).
#[derive(Default)]
pub struct Threads {
    names: BTreeMap<u64, (u64, Sym)>,
    tid: UInt64Builder,
    pid: UInt64Builder,
    name: StringBuilder,
    rows: usize,
}

impl Table for Threads {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn columns(&self) -> Vec<Field> {
        vec![
            Field::new("tid", DataType::UInt64, false),
            Field::new("pid", DataType::UInt64, false),
            Field::new("name", DataType::Utf8, false),
        ]
    }

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

    fn rows(&self) -> usize {
        self.rows
    }

    fn take(&mut self) -> Vec<ArrayRef> {
        self.rows = 0;
        vec![
            Arc::new(self.tid.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.name.finish()),
        ]
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
