//! System calls: entries and returns paired per thread into complete
//! durations in `kernel:syscall`.

use std::io::Write;

use std::rc::Rc;

use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef};
use trace_common::kernel::{SysEnterEvent, SysExitEvent, SyscallEvent};

use super::{EventRecord, KernelTranslator, Map};
use crate::kernel::syscalls::{SyscallInfo, SyscallTable, creates_task, ends_task};
use crate::output::{FxtStream, OutputError};

/// How a system call ended, as far as the events tell.
#[derive(Clone, Copy, Debug)]
pub(super) enum CallEnd {
    /// It returned `ret` at `ts`.
    Returned { ts: u64, ret: i64 },
    /// Its thread exited inside it at `ts` (`exit`, `exit_group`).
    Exited { ts: u64 },
    /// Its return was lost; at `ts` the thread began its next call, or was
    /// switched out dead.
    Lost { ts: u64 },
    /// The recording ended inside it, at `ts`.
    Running { ts: u64 },
}

/// The argument a system call's record ends with, named by how it ended.
#[derive(Clone, Copy, Debug)]
enum LastArg {
    Ret,
    ReturnLost,
    Unfinished,
}

impl LastArg {
    fn text(self) -> &'static str {
        match self {
            LastArg::Ret => "ret",
            LastArg::ReturnLost => "return_lost",
            LastArg::Unfinished => "unfinished",
        }
    }
}

impl CallEnd {
    /// When the call ended.
    fn ts(self) -> u64 {
        match self {
            CallEnd::Returned { ts, .. }
            | CallEnd::Exited { ts }
            | CallEnd::Lost { ts }
            | CallEnd::Running { ts } => ts,
        }
    }

    /// The argument the call's record ends with, if any: the return value,
    /// or the mark of a lost return or of a call still running.
    fn last_arg(self) -> Option<(LastArg, ArgValue<'static>)> {
        match self {
            CallEnd::Returned { ret, .. } => Some((LastArg::Ret, ArgValue::Int64(ret))),
            CallEnd::Exited { .. } => None,
            CallEnd::Lost { .. } => Some((LastArg::ReturnLost, ArgValue::Bool(true))),
            CallEnd::Running { .. } => Some((LastArg::Unfinished, ArgValue::Bool(true))),
        }
    }
}

/// A thread's system calls.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ThreadCalls {
    /// The call in progress.
    pub(super) call: Option<PendingSyscall>,
    /// When its last call written ended (0: none yet).
    last_end: u64,
}

/// System call numbers whose strings are kept by number
/// ([`KernelTranslator::call_strings`]); higher ones are looked up each time.
const CALL_STRINGS_CACHED: usize = 4096;

/// The string indexes every system call record uses.
#[derive(Clone, Copy, Debug)]
struct FixedStrings {
    category: u16,
    nr: u16,
    ret: u16,
    return_lost: u16,
    unfinished: u16,
}

/// The string indexes of one system call number's records.
#[derive(Debug)]
pub(super) struct CallStrings {
    info: Rc<SyscallInfo>,
    name: u16,
    /// Each argument's name, in `info.args` order.
    args: Vec<u16>,
    fixed: FixedStrings,
}

/// What a system call in progress waited for.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CallWait {
    /// When its thread first blocked inside it (0: it has not).
    pub(super) blocked_at: u64,
    /// The last wake-up since: when, and the waker's koid.
    pub(super) woken: Option<(u64, u32)>,
}

/// A system call entered and not yet returned.
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingSyscall {
    pub(super) ts: u64,
    pub(super) tgid: u32,
    pub(super) nr: i64,
    pub(super) args: [u64; trace_common::kernel::SYSCALL_ARGS],
    /// What it waited for.
    pub(super) wait: CallWait,
}

/// What the system call translation keeps.
pub(super) struct SyscallState {
    /// Names and argument layouts of the system calls, by number.
    pub(super) table: SyscallTable,
    /// The string indexes of each system call number seen, by number.
    pub(super) call_strings: Vec<Option<Rc<CallStrings>>>,
    /// System calls by thread: the one in progress, and when the last one
    /// returned.
    pub(super) calls: Map<u32, ThreadCalls>,
}

impl SyscallState {
    /// Nothing seen yet, calls named with `table`.
    pub(super) fn new(table: SyscallTable) -> Self {
        SyscallState {
            table,
            call_strings: Vec::new(),
            calls: Map::default(),
        }
    }
}

impl KernelTranslator {
    /// The current task entered system call `id` with `args`.
    pub fn sys_enter<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SysEnterEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid, nr, args) = (e.header.ts, e.header.tid, e.header.tgid, e.id, e.args);
        let call = PendingSyscall {
            ts,
            tgid,
            nr,
            args,
            wait: CallWait::default(),
        };
        if let Some(lost) = self
            .syscall
            .calls
            .entry(tid)
            .or_default()
            .call
            .replace(call)
        {
            // Its return was lost (a full ring buffer).
            self.write_syscall(out, tid, lost, CallEnd::Lost { ts })?;
        }
        Ok(())
    }

    /// A whole system call in one event: its entry, then its return, as
    /// if they had come as two events (the return is dropped when it came
    /// after the stop, so that the call ends there, unfinished).
    pub fn syscall<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SyscallEvent,
    ) -> Result<(), OutputError> {
        let entry = e.entry();
        if !self.wants(entry.header.ts) {
            return Ok(());
        }
        self.current_task(out, &entry.header)?;
        self.sys_enter(out, &entry)?;
        if !self.wants(e.header.ts) {
            return Ok(());
        }
        self.current_task(out, &e.header)?;
        self.sys_exit(out, &e.exit())
    }

    /// The current task returned `ret` from system call `id`.
    pub fn sys_exit<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SysExitEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid, nr, ret) = (e.header.ts, e.header.tid, e.header.tgid, e.id, e.ret);
        let calls = self.syscall.calls.entry(tid).or_default();
        let last_end = std::mem::replace(&mut calls.last_end, ts);
        match calls.call.take() {
            // `rt_sigreturn` restores the registers of the interrupted
            // code, so its return reports call number -1 (the kernel's "no
            // system call" marker): it returns from the call in progress.
            Some(call) if call.nr == nr || nr == -1 => {
                self.write_syscall(out, tid, call, CallEnd::Returned { ts, ret })
            }
            other => {
                if let Some(lost) = other {
                    self.write_syscall(out, tid, lost, CallEnd::Lost { ts })?;
                }
                if nr == -1 {
                    // A return from no known call: nothing to draw.
                    return Ok(());
                }
                if last_end == 0 && ret == 0 && creates_task(nr) {
                    // A new task's first return, from the clone or fork
                    // that made it: its parent's call, not one of its own.
                    self.counts.child_returns += 1;
                    return Ok(());
                }
                // Entered before the recording, or before the thread was
                // seen: it spans from the recording's start for a thread
                // that existed then, else from when the thread was first
                // seen, never before the thread existed.
                // A thread seen returning from a call before entered this
                // one after that return: its entry was lost.
                if last_end != 0 {
                    let call = PendingSyscall {
                        ts: last_end.min(ts),
                        tgid,
                        nr,
                        args: [0; trace_common::kernel::SYSCALL_ARGS],
                        wait: CallWait::default(),
                    };
                    return self.write_syscall_without_entry(out, tid, call, ts, ret, "entry_lost");
                }
                let from = if let Some(&born) = self.created.get(&tid) {
                    born.max(self.start_ts)
                } else if self.at_start.contains(&tid) {
                    self.start_ts
                } else {
                    self.sched
                        .threads
                        .get(&tid)
                        .and_then(|t| t.first_seen)
                        .unwrap_or(ts)
                };
                let call = PendingSyscall {
                    ts: from.min(ts),
                    tgid,
                    nr,
                    args: [0; trace_common::kernel::SYSCALL_ARGS],
                    wait: CallWait::default(),
                };
                self.write_syscall_without_entry(out, tid, call, ts, ret, "began_before_recording")
            }
        }
    }

    /// Thread `tid` was switched out dead at `ts`: a call it is still in
    /// ends there. Its exit was lost (it is ended at the exit otherwise):
    /// `exit` or `exit_group` ended with it; any other call returned
    /// unrecorded before (a thread dies on its way back to user space).
    pub(super) fn call_died<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        ts: u64,
    ) -> Result<(), OutputError> {
        let Some(call) = self.syscall.calls.get_mut(&tid).and_then(|c| c.call.take()) else {
            return Ok(());
        };
        let end = if ends_task(call.nr) {
            CallEnd::Exited { ts }
        } else {
            CallEnd::Lost { ts }
        };
        self.write_syscall(out, tid, call, end)
    }

    /// Writes the system calls still running as durations that end where
    /// the recording ended, marked `unfinished`.
    pub(super) fn finish_syscalls<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<(), OutputError> {
        let mut left: Vec<(u32, PendingSyscall)> = self
            .syscall
            .calls
            .iter_mut()
            .filter_map(|(tid, c)| c.call.take().map(|call| (*tid, call)))
            .collect();
        left.sort_by_key(|(_, c)| c.ts);
        let end = self.end_ts();
        for (tid, call) in left {
            self.write_syscall(
                out,
                tid,
                call,
                CallEnd::Running {
                    ts: end.max(call.ts),
                },
            )?;
        }
        Ok(())
    }

    /// Writes one system call: a complete duration, or a begun one when
    /// the recording ended inside it.
    pub(super) fn write_syscall<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        call: PendingSyscall,
        end: CallEnd,
    ) -> Result<(), OutputError> {
        self.write_call(out, tid, call, end)?;
        self.write_call_wait(out, tid, &call)?;
        self.call_written(out, (call.tgid, tid), &call, end.ts())
    }

    fn write_call<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        call: PendingSyscall,
        end: CallEnd,
    ) -> Result<(), OutputError> {
        let end_ts = end.ts();
        self.call_ended(tid, call.ts, end_ts);
        if matches!(end, CallEnd::Returned { .. } | CallEnd::Exited { .. }) {
            self.check_syscall(out, tid, call.nr, call.ts, end_ts)?;
        }
        if let Some(strings) = self.call_strings(out, call.nr)? {
            // Every string already has its index: the record is written
            // without a look-up or an allocation.
            let fixed = strings.fixed;
            let mut list: [Arg<'_>; 2 + trace_common::kernel::SYSCALL_ARGS] =
                std::array::from_fn(|_| Arg {
                    name: StringRef::Empty,
                    value: ArgValue::Null,
                });
            list[0] = Arg {
                name: StringRef::Index(fixed.nr),
                value: ArgValue::Int64(call.nr),
            };
            let mut n = 1;
            for ((&name, spec), raw) in strings.args.iter().zip(&strings.info.args).zip(call.args) {
                list[n] = Arg {
                    name: StringRef::Index(name),
                    value: spec.kind.value(raw),
                };
                n += 1;
            }
            if let Some((which, value)) = end.last_arg() {
                // Written where it is stored: no temporary `Arg` to move.
                list[n].name = StringRef::Index(match which {
                    LastArg::Ret => fixed.ret,
                    LastArg::ReturnLost => fixed.return_lost,
                    LastArg::Unfinished => fixed.unfinished,
                });
                list[n].value = value;
                n += 1;
            }
            self.know_thread(out, tid, call.tgid)?;
            out.write(&Record::Event {
                ts: call.ts,
                thread: ThreadRef::Inline {
                    process: u64::from(call.tgid),
                    thread: u64::from(tid),
                },
                category: StringRef::Index(fixed.category),
                name: StringRef::Index(strings.name),
                args: std::borrow::Cow::Borrowed(&list[..n]),
                kind: EventKind::DurationComplete { end_ts },
            })?;
            self.counts.syscalls += 1;
            return Ok(());
        }
        let info = self.syscall.table.get(call.nr);
        let mut args: Vec<(&str, ArgValue<'_>)> = Vec::with_capacity(info.args.len() + 2);
        args.push(("nr", ArgValue::Int64(call.nr)));
        for (spec, raw) in info.args.iter().zip(call.args) {
            args.push((&spec.name, spec.kind.value(raw)));
        }
        args.extend(end.last_arg().map(|(which, value)| (which.text(), value)));
        let kind = EventKind::DurationComplete { end_ts };
        self.syscall_event(
            out,
            EventRecord {
                ts: call.ts,
                category: trace_common::category::KERNEL_SYSCALL,
                thread: (call.tgid, tid),
                name: &info.name,
                args: &args,
                kind,
            },
        )
    }

    /// The string indexes of system call `nr`'s records, interned the
    /// first time (`None` once the string table is full: the caller then
    /// writes the strings inline).
    fn call_strings<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        nr: i64,
    ) -> Result<Option<Rc<CallStrings>>, OutputError> {
        let slot = usize::try_from(nr)
            .ok()
            .filter(|&n| n < CALL_STRINGS_CACHED);
        if let Some(n) = slot
            && let Some(Some(cached)) = self.syscall.call_strings.get(n)
        {
            return Ok(Some(Rc::clone(cached)));
        }
        let mut index = |s: &str| -> Result<Option<u16>, OutputError> {
            Ok(match self.strings.intern(out, s)? {
                StringRef::Index(i) => Some(i),
                _ => None,
            })
        };
        let fixed = (|| -> Result<Option<FixedStrings>, OutputError> {
            Ok(Some(FixedStrings {
                category: match index(trace_common::category::KERNEL_SYSCALL)? {
                    Some(i) => i,
                    None => return Ok(None),
                },
                nr: match index("nr")? {
                    Some(i) => i,
                    None => return Ok(None),
                },
                ret: match index("ret")? {
                    Some(i) => i,
                    None => return Ok(None),
                },
                return_lost: match index("return_lost")? {
                    Some(i) => i,
                    None => return Ok(None),
                },
                unfinished: match index("unfinished")? {
                    Some(i) => i,
                    None => return Ok(None),
                },
            }))
        })()?;
        let Some(fixed) = fixed else { return Ok(None) };
        let info = self.syscall.table.get(nr);
        let Some(name) = index(&info.name)? else {
            return Ok(None);
        };
        let mut args = Vec::with_capacity(info.args.len());
        for spec in &info.args {
            let Some(i) = index(&spec.name)? else {
                return Ok(None);
            };
            args.push(i);
        }
        let strings = Rc::new(CallStrings {
            info,
            name,
            args,
            fixed,
        });
        if let Some(n) = slot {
            if self.syscall.call_strings.len() <= n {
                self.syscall.call_strings.resize(n + 1, None);
            }
            self.syscall.call_strings[n] = Some(Rc::clone(&strings));
        }
        Ok(Some(strings))
    }

    /// A call that returned `ret` at `end` whose entry was not seen (its
    /// arguments are unknown), marked with the Bool argument `why`.
    fn write_syscall_without_entry<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        call: PendingSyscall,
        end: u64,
        ret: i64,
        why: &'static str,
    ) -> Result<(), OutputError> {
        let info = self.syscall.table.get(call.nr);
        let args = [
            ("nr", ArgValue::Int64(call.nr)),
            ("ret", ArgValue::Int64(ret)),
            (why, ArgValue::Bool(true)),
        ];
        let kind = EventKind::DurationComplete { end_ts: end };
        self.syscall_event(
            out,
            EventRecord {
                ts: call.ts,
                category: trace_common::category::KERNEL_SYSCALL,
                thread: (call.tgid, tid),
                name: &info.name,
                args: &args,
                kind,
            },
        )
    }

    /// Writes a system call event on its thread (which `event` names
    /// first).
    fn syscall_event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: EventRecord<'_>,
    ) -> Result<(), OutputError> {
        self.event(out, e)?;
        self.counts.syscalls += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
