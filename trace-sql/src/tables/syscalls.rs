//! `syscalls`: the kernel provider's system calls (slices of category
//! `kernel:syscall`), with their number, arguments, return value and error.

use datafusion::arrow::array::{
    BooleanBuilder, Int32Builder, Int64Builder, StringBuilder, UInt64Builder,
};
use trace_analysis::errno;
use trace_analysis::kernel::{CallEnd, Syscall};
use trace_analysis::{Context, Event, Wants};

use super::declare::table;
use super::{Table, args};

/// The category of system calls.
pub const CATEGORY: &str = "kernel:syscall";

table! {
    /// Builds `syscalls`.
    pub struct Syscalls as "syscalls" {
        /// The call's slice id.
        id: UInt64Builder,
        /// Entry, ns.
        ts: UInt64Builder,
        /// Entry to return, ns.
        dur: UInt64Builder,
        /// Process.
        pid: UInt64Builder,
        /// Thread.
        tid: UInt64Builder,
        /// The call.
        name: StringBuilder,
        /// Its number.
        nr: Int64Builder nullable,
        /// Its return value; null if it did not return.
        ret: Int64Builder nullable,
        /// The error's name when `ret` is an error.
        errno: StringBuilder nullable,
        /// The error number when `ret` is an error.
        errno_num: Int32Builder nullable,
        /// The call's arguments, JSON.
        args: StringBuilder,
        /// The call was still running when the recording ended.
        unfinished: BooleanBuilder,
        /// Its entry was before the recording (or before its thread was seen).
        began_before_recording: BooleanBuilder,
        /// Its entry was lost.
        entry_lost: BooleanBuilder,
        /// Its return was lost.
        return_lost: BooleanBuilder,
    }
    state {
        /// Where a row's `args` is written.
        scratch: String,
        /// `args` is not built.
        skip_args: bool,
    }
}

impl Table for Syscalls {
    fn wants(&self) -> Wants {
        Wants {
            durations: true,
            end_time: true,
            ..Wants::default()
        }
    }

    fn keep_columns(&mut self, keep: &dyn Fn(&str) -> bool) {
        self.skip_args = !keep("args");
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Slice(s) = event else {
            return;
        };
        let Some(call) = Syscall::from_slice(s, cx) else {
            return;
        };
        let err = call.errno();
        self.id.append_value(s.id);
        self.ts.append_value(s.ts);
        self.dur.append_value(s.dur);
        self.pid.append_value(s.track.pid);
        self.tid.append_value(s.track.tid);
        self.name.append_value(cx.strings.get(s.name));
        self.nr.append_option(call.nr);
        self.ret.append_option(call.ret());
        self.errno.append_option(
            err.map(|e| errno::name(e).map_or_else(|| format!("E{e}"), str::to_owned)),
        );
        self.errno_num
            .append_option(err.and_then(|e| i32::try_from(e).ok()));
        if !self.skip_args {
            args::write_json(&mut self.scratch, &s.args, cx, |n| {
                Syscall::is_call_arg(n, cx)
            });
            self.args.append_value(&self.scratch);
        }
        self.unfinished.append_value(call.unfinished());
        self.began_before_recording
            .append_value(call.began_before_recording);
        self.entry_lost.append_value(call.entry_lost);
        self.return_lost
            .append_value(call.end == CallEnd::ReturnLost);
        self.rows += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{args, build, column, cx, sym, track};
    use trace_analysis::Value;
    use trace_analysis::event::Slice;

    #[test]
    fn calls_with_returns_errors_and_flags() {
        let mut cx = cx();
        let (sc, app) = (sym(&mut cx, CATEGORY), sym(&mut cx, "app"));
        let (openat, read) = (sym(&mut cx, "openat"), sym(&mut cx, "read"));
        let call = |id, category, name, args| {
            Event::Slice(Slice {
                id,
                ts: 1000 + id,
                dur: 10,
                track: track(7, 8),
                category,
                name,
                depth: 0,
                parent: None,
                args,
                unfinished: false,
            })
        };
        let failed = args(
            &mut cx,
            &[
                ("nr", Value::Int(257)),
                ("dfd", Value::Int(-100)),
                ("filename", Value::Str("/missing".into())),
                ("ret", Value::Int(-2)),
            ],
        );
        let ok = args(&mut cx, &[("nr", Value::Int(0)), ("ret", Value::Int(5))]);
        let running = args(
            &mut cx,
            &[("nr", Value::Int(0)), ("unfinished", Value::Bool(true))],
        );
        let early = args(
            &mut cx,
            &[
                ("nr", Value::Int(0)),
                ("ret", Value::Int(0)),
                ("began_before_recording", Value::Bool(true)),
            ],
        );
        let exit_group = sym(&mut cx, "exit_group");
        let exited = args(
            &mut cx,
            &[("nr", Value::Int(231)), ("status", Value::Int(0))],
        );
        let lost = args(
            &mut cx,
            &[("nr", Value::Int(0)), ("return_lost", Value::Bool(true))],
        );
        let events = [
            call(1, sc, openat, failed),
            call(2, app, read, Vec::new()),
            call(3, sc, read, ok),
            call(4, sc, read, running),
            call(5, sc, read, early),
            call(6, sc, exit_group, exited),
            call(7, sc, read, lost),
        ];
        let batch = build(&mut Syscalls::default(), &cx, &events);
        assert_eq!(column(&batch, "id"), ["1", "3", "4", "5", "6", "7"]);
        assert_eq!(
            column(&batch, "name"),
            ["openat", "read", "read", "read", "exit_group", "read"]
        );
        assert_eq!(column(&batch, "nr"), ["257", "0", "0", "0", "231", "0"]);
        assert_eq!(column(&batch, "ret"), ["-2", "5", "", "0", "", ""]);
        assert_eq!(column(&batch, "errno"), ["ENOENT", "", "", "", "", ""]);
        assert_eq!(column(&batch, "errno_num"), ["2", "", "", "", "", ""]);
        assert_eq!(
            column(&batch, "args"),
            [
                "{\"dfd\":-100,\"filename\":\"/missing\"}",
                "{}",
                "{}",
                "{}",
                "{\"status\":0}",
                "{}"
            ]
        );
        // A call its thread exited in is neither unfinished nor lost.
        assert_eq!(
            column(&batch, "unfinished"),
            ["false", "false", "true", "false", "false", "false"]
        );
        assert_eq!(
            column(&batch, "return_lost"),
            ["false", "false", "false", "false", "false", "true"]
        );
        assert_eq!(
            column(&batch, "began_before_recording"),
            ["false", "false", "false", "true", "false", "false"]
        );
        assert_eq!(column(&batch, "pid"), ["7"; 6]);
    }
}
