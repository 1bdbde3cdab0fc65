//! `processes`: every process the trace names, with its last name.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::{Context, Event, Sym, Wants};

use super::Table;

/// Builds `processes` at the end of the trace from the names it gave (one
/// entry per process while reading).
#[derive(Default)]
pub struct Processes {
    names: BTreeMap<u64, Sym>,
    pid: UInt64Builder,
    name: StringBuilder,
    rows: usize,
}

impl Table for Processes {
    fn name(&self) -> &'static str {
        "processes"
    }

    fn columns(&self) -> Vec<Field> {
        vec![
            Field::new("pid", DataType::UInt64, false),
            Field::new("name", DataType::Utf8, false),
        ]
    }

    fn wants(&self) -> Wants {
        Wants::default()
    }

    fn event(&mut self, event: &Event, _cx: &Context) {
        if let Event::Process { pid, name } = event {
            self.names.insert(*pid, *name);
        }
    }

    fn end(&mut self, cx: &Context) {
        for (pid, name) in std::mem::take(&mut self.names) {
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
        vec![Arc::new(self.pid.finish()), Arc::new(self.name.finish())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx, sym};

    #[test]
    fn last_names_by_pid() {
        let mut cx = cx();
        let events: Vec<Event> = [(20u64, "b"), (10, "a"), (20, "b2")]
            .into_iter()
            .map(|(pid, name)| Event::Process {
                pid,
                name: sym(&mut cx, name),
            })
            .collect();
        let batch = build(&mut Processes::default(), &cx, &events);
        assert_eq!(column(&batch, "pid"), ["10", "20"]);
        assert_eq!(column(&batch, "name"), ["a", "b2"]);
        assert_eq!(column(&batch, "host"), ["test-host", "test-host"]);
        assert_eq!(column(&batch, "trace_id")[0], "0123456789abcdef");
    }
}
