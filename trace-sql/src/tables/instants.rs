//! `instants`: point events (of every provider: the kernel's process
//! events and page faults, userspace instants, USDT hits).

use datafusion::arrow::array::{StringBuilder, UInt64Builder};
use trace_analysis::event::Scope;
use trace_analysis::{Context, Event, Wants};

use super::declare::table;
use super::track::TrackColumns;
use super::{Table, args};

table! {
    /// Builds `instants`.
    pub struct Instants as "instants" {
        /// Time, ns.
        ts: UInt64Builder,
        /// Where the event is, and what it is.
        track: TrackColumns flatten,
        /// `thread`, `process` or `global`.
        scope: StringBuilder,
        /// Arguments, JSON.
        args: StringBuilder,
    }
    state {
        /// Where a row's `args` is written.
        scratch: String,
        /// `args` is not built.
        skip_args: bool,
    }
}

impl Table for Instants {
    fn wants(&self) -> Wants {
        Wants {
            instants: true,
            ..Wants::default()
        }
    }

    fn keep_columns(&mut self, keep: &dyn Fn(&str) -> bool) {
        self.skip_args = !keep("args");
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Instant(i) = event else {
            return;
        };
        self.ts.append_value(i.ts);
        self.track.append(&i.track, i.category, i.name, cx);
        self.scope.append_value(match i.scope {
            Scope::Thread => "thread",
            Scope::Process => "process",
            Scope::Global => "global",
        });
        if !self.skip_args {
            args::write_json(&mut self.scratch, &i.args, cx, |_| true);
            self.args.append_value(&self.scratch);
        }
        self.rows += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{args, build, column, cx, sym, track};
    use trace_analysis::Value;
    use trace_analysis::event::Instant;

    #[test]
    fn instants_with_scope_and_args() {
        let mut cx = cx();
        let (cat, name) = (sym(&mut cx, "kernel:proc"), sym(&mut cx, "exec"));
        let a = args(&mut cx, &[("filename", Value::Str("/bin/true".into()))]);
        let events = [
            Event::Instant(Instant {
                ts: 5,
                track: track(3, 4),
                category: cat,
                name,
                scope: Scope::Process,
                args: a,
            }),
            Event::Instant(Instant {
                ts: 9,
                track: track(3, 3),
                category: cat,
                name,
                scope: Scope::Global,
                args: Vec::new(),
            }),
        ];
        let batch = build(&mut Instants::default(), &cx, &events);
        assert_eq!(column(&batch, "ts"), ["5", "9"]);
        assert_eq!(column(&batch, "tid"), ["4", "3"]);
        assert_eq!(column(&batch, "category"), ["kernel:proc", "kernel:proc"]);
        assert_eq!(column(&batch, "name"), ["exec", "exec"]);
        assert_eq!(column(&batch, "scope"), ["process", "global"]);
        assert_eq!(
            column(&batch, "args"),
            ["{\"filename\":\"/bin/true\"}", "{}"]
        );
    }
}
