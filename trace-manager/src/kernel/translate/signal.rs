//! `kernel:signal`: a signal sent becomes an instant `SIGNAME sent` on the
//! sending thread (the target thread, whether it went to the whole thread
//! group, and what became of it); a signal delivered becomes an instant
//! `SIGNAME delivered` on the receiving thread (the default action, ignored,
//! or caught by a handler at an address). Nothing is kept between events.

use std::borrow::Cow;
use std::io::Write;

use trace_common::category::KERNEL_SIGNAL;
use trace_common::fxt::{ArgValue, EventKind, StringRef};
use trace_common::kernel::{SignalDeliverEvent, SignalGenerateEvent};

use super::{EventRecord, KernelTranslator};
use crate::output::{FxtStream, OutputError};

/// `SIGTERM` for 15; real-time signals as `SIGRTMIN+n`.
pub fn signal_name(sig: i32) -> Cow<'static, str> {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(sig) {
        Ok(n @ 1..32) => Cow::Borrowed(NAMES[n]),
        Ok(n @ 32..=64) => Cow::Owned(format!("SIGRTMIN+{}", n - 32)),
        _ => Cow::Owned(format!("signal {sig}")),
    }
}

/// What `signal_generate`'s `result` says (`TRACE_SIGNAL_*`).
fn result_name(result: i32) -> &'static str {
    match result {
        0 => "delivered",
        1 => "ignored",
        2 => "already_pending",
        3 => "overflow_fail",
        4 => "lose_info",
        _ => "unknown",
    }
}

impl KernelTranslator {
    /// The current task sent signal `e.sig` to thread `e.target`.
    pub fn signal_generate<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SignalGenerateEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid) = (e.header.ts, e.header.tid, e.header.tgid);
        let name = format!("{} sent", signal_name(e.sig));
        let target_pid = self.tgid_of(e.target);
        let args = [
            ("sig", ArgValue::Int32(e.sig)),
            ("target_tid", ArgValue::Koid(u64::from(e.target))),
            ("target_pid", ArgValue::Koid(u64::from(target_pid))),
            ("group", ArgValue::Bool(e.group != 0)),
            (
                "result",
                ArgValue::String(StringRef::inline(result_name(e.result))),
            ),
        ];
        self.signal_event(out, ts, (tgid, tid), &name, &args)
    }

    /// Signal `e.sig` is being delivered to the current task.
    pub fn signal_deliver<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SignalDeliverEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid) = (e.header.ts, e.header.tid, e.header.tgid);
        let name = format!("{} delivered", signal_name(e.sig));
        let action = match e.handler {
            0 => "default",
            1 => "ignored",
            _ => "caught",
        };
        let all = [
            ("sig", ArgValue::Int32(e.sig)),
            ("action", ArgValue::String(StringRef::inline(action))),
            ("handler", ArgValue::Pointer(e.handler)),
        ];
        let args = &all[..if action == "caught" { 3 } else { 2 }];
        self.signal_event(out, ts, (tgid, tid), &name, args)
    }

    fn signal_event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        thread: (u32, u32),
        name: &str,
        args: &[(&str, ArgValue<'_>)],
    ) -> Result<(), OutputError> {
        self.event(
            out,
            EventRecord {
                ts,
                category: KERNEL_SIGNAL,
                thread,
                name,
                args,
                kind: EventKind::Instant,
            },
        )?;
        self.counts.signals += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::testing::{ev, records};
    use trace_common::fxt::Record;

    #[test]
    fn signals_are_named_and_land_on_the_sender_and_the_receiver() {
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(34), "SIGRTMIN+2");
        assert_eq!(signal_name(0), "signal 0");
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        let sent = SignalGenerateEvent {
            header: ev::header(1000, 0, 10, 10),
            sig: 15,
            target: 20,
            group: 1,
            result: 0,
        };
        let delivered = SignalDeliverEvent {
            header: ev::header(2000, 1, 20, 20),
            sig: 15,
            reserved: 0,
            handler: 0x5555_0000_1234,
        };
        t.signal_generate(&mut out, &sent).unwrap();
        t.signal_deliver(&mut out, &delivered).unwrap();
        assert_eq!(t.counts().signals, 2);
        let (state, recs) = records(&out.finish().unwrap());
        let instants: Vec<(u64, u64, String, Vec<String>)> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event {
                    ts,
                    thread,
                    name,
                    args,
                    kind: EventKind::Instant,
                    ..
                } => Some((
                    *ts,
                    state.thread(*thread).map_or(0, |(_, tid)| tid),
                    state.string(name).unwrap_or("").to_owned(),
                    args.iter()
                        .map(|a| {
                            let v = match &a.value {
                                ArgValue::String(s) => state.string(s).unwrap_or("").to_owned(),
                                v => format!("{v:?}"),
                            };
                            format!("{}={v}", state.string(&a.name).unwrap_or(""))
                        })
                        .collect(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(instants.len(), 2, "{instants:?}");
        let (ts, tid, name, args) = &instants[0];
        assert_eq!((*ts, *tid, name.as_str()), (1000, 10, "SIGTERM sent"));
        assert!(args.contains(&"result=delivered".to_owned()), "{args:?}");
        assert!(args.contains(&"group=Bool(true)".to_owned()), "{args:?}");
        let (ts, tid, name, args) = &instants[1];
        assert_eq!((*ts, *tid, name.as_str()), (2000, 20, "SIGTERM delivered"));
        assert!(args.contains(&"action=caught".to_owned()), "{args:?}");
    }
}
