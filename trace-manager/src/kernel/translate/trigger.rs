//! Triggers on what the kernel sees: conditions checked on the events as
//! they are translated, each marked where it fired (an instant, category
//! `trigger`, named by the condition, on the thread it happened on) and
//! handed to the manager, which stops a recording or takes a snapshot.
//!
//! - `syscall:NAME>DURATION` (`syscall:fsync>50ms`; `*` for any call; `>=`
//!   works too): a system call that took longer.
//! - `signal:SIG` (`signal:SIGSEGV`, `signal:ABRT`, `signal:11`): a signal
//!   delivered with its default action (`signal:signal_deliver` with
//!   `sa_handler` 0): for SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE and
//!   SIGKILL, the process is killed by it.
//! - `oom`: the out-of-memory killer chose a victim (`oom:mark_victim`).
//! - `tracepoint:GROUP:EVENT`: an event of a tracepoint selected with `-e`
//!   (with its filter, evaluated in the kernel).
//! - `uprobe:NAME`, `usdt:PROVIDER:NAME`: a call of a `--uprobe` function
//!   returned, a `--usdt` site was passed.
//!
//! The signal and out-of-memory triggers record their tracepoint
//! ([`Trigger::tracepoint_spec`]), filtered in the kernel; the system call
//! trigger needs `kernel:syscall`.

use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind};

use super::{EventRecord, KernelTranslator};
use crate::output::{FxtStream, OutputError};

/// The category of the instants that mark where triggers fired.
pub const TRIGGER_CATEGORY: &str = "trigger";

/// What a trigger watches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// A system call (any, or of this number) that took at least `min_ns`.
    SlowSyscall {
        /// The call's number, or any call.
        nr: Option<i64>,
        /// The shortest duration that fires.
        min_ns: u64,
    },
    /// An event of this selected tracepoint (`group:event`).
    Tracepoint(String),
    /// A return of this `--uprobe` function (its name).
    Uprobe(String),
    /// A pass through this `--usdt` site (`PROVIDER:NAME`).
    Usdt(String),
}

/// A trigger: its spec as given, and what it watches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    /// The spec as given (`syscall:fsync>50ms`): the trigger's name.
    pub spec: String,
    /// What it watches.
    pub condition: Condition,
    /// The tracepoint it records, filtered (`-e` syntax), if any.
    tracepoint: Option<String>,
}

/// A trigger that fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fired {
    /// The trigger's spec.
    pub spec: String,
    /// When (CLOCK_BOOTTIME ns).
    pub ts: u64,
    /// The process and thread it happened on.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
}

/// Signals by name, as `kill -l` names them.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("SYS", 31),
];

/// `50ms`, `2s`, `100us`, `500ns`.
fn parse_duration_ns(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let ns = n * scale;
    (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then_some(ns as u64)
}

/// Whether `spec` names a kernel condition (else it is a provider's alert).
pub fn is_kernel_trigger(spec: &str) -> bool {
    spec == "oom"
        || ["syscall:", "signal:", "tracepoint:", "uprobe:", "usdt:"]
            .iter()
            .any(|p| spec.starts_with(p))
}

impl Trigger {
    /// Parses a kernel trigger spec (see the module documentation).
    pub fn parse(spec: &str) -> Result<Trigger, String> {
        let bad = |why: &str| format!("trigger {spec:?}: {why}");
        let trigger = |condition, tracepoint: Option<String>| Trigger {
            spec: spec.to_owned(),
            condition,
            tracepoint,
        };
        if spec == "oom" {
            return Ok(trigger(
                Condition::Tracepoint("oom:mark_victim".into()),
                Some("oom:mark_victim".into()),
            ));
        }
        if let Some(rest) = spec.strip_prefix("syscall:") {
            let (name, duration) = rest
                .split_once(">=")
                .or_else(|| rest.split_once('>'))
                .ok_or_else(|| {
                    bad(
                        "expected syscall:NAME>DURATION, e.g. 'syscall:fsync>50ms' (quoted: \
                         unquoted, a shell takes the `>` and what follows for a redirection)",
                    )
                })?;
            let min_ns = parse_duration_ns(duration.trim())
                .ok_or_else(|| bad("the duration wants a unit: ns, us, ms or s"))?;
            let name = name.trim();
            let nr = match name {
                "*" => None,
                _ => Some(match name.parse::<i64>() {
                    Ok(n) => n,
                    Err(_) => name
                        .parse::<syscalls::Sysno>()
                        .map(|s| i64::from(s.id()))
                        .map_err(|_| bad(&format!("no system call named {name:?}")))?,
                }),
            };
            return Ok(trigger(Condition::SlowSyscall { nr, min_ns }, None));
        }
        if let Some(sig) = spec.strip_prefix("signal:") {
            let upper = sig.trim().to_ascii_uppercase();
            let short = upper.strip_prefix("SIG").unwrap_or(&upper);
            let n = match short.parse::<i32>() {
                Ok(n) if (1..=64).contains(&n) => n,
                _ => SIGNALS
                    .iter()
                    .find(|(name, _)| *name == short)
                    .map(|&(_, n)| n)
                    .ok_or_else(|| bad("unknown signal (SIGSEGV, ABRT, 11...)"))?,
            };
            return Ok(trigger(
                Condition::Tracepoint("signal:signal_deliver".into()),
                Some(format!(
                    "signal:signal_deliver if sig == {n} && sa_handler == 0"
                )),
            ));
        }
        if let Some(name) = spec.strip_prefix("tracepoint:") {
            if name.split(':').count() != 2 {
                return Err(bad("expected tracepoint:GROUP:EVENT (an -e tracepoint)"));
            }
            return Ok(trigger(Condition::Tracepoint(name.to_owned()), None));
        }
        if let Some(name) = spec.strip_prefix("uprobe:") {
            return Ok(trigger(Condition::Uprobe(name.to_owned()), None));
        }
        if let Some(name) = spec.strip_prefix("usdt:") {
            return Ok(trigger(Condition::Usdt(name.to_owned()), None));
        }
        Err(bad(
            "not a kernel condition (syscall:NAME>TIME, signal:SIG, oom, tracepoint:G:E, \
             uprobe:F, usdt:P:N)",
        ))
    }

    /// The tracepoint this trigger needs recorded, as an `-e` spec with its
    /// filter.
    pub fn tracepoint_spec(&self) -> Option<&str> {
        self.tracepoint.as_deref()
    }
}

/// The translator's triggers and those that fired since the last look.
#[derive(Debug, Default)]
pub(super) struct Triggers {
    list: Vec<Trigger>,
    /// Whether any watches system calls (checked per call).
    syscalls: bool,
    fired: Vec<Fired>,
}

impl KernelTranslator {
    /// Sets the triggers checked on the events translated from now on.
    pub fn set_triggers(&mut self, list: Vec<Trigger>) {
        let syscalls = list
            .iter()
            .any(|t| matches!(t.condition, Condition::SlowSyscall { .. }));
        self.triggers = Triggers {
            list,
            syscalls,
            fired: Vec::new(),
        };
    }

    /// Whether any trigger is set.
    pub(super) fn has_triggers(&self) -> bool {
        !self.triggers.list.is_empty()
    }

    /// The triggers that fired since the last call, in order.
    pub fn take_fired(&mut self) -> Vec<Fired> {
        std::mem::take(&mut self.triggers.fired)
    }

    /// A system call of thread `tid` ran from `start` to `end`.
    pub(super) fn check_syscall<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        nr: i64,
        start: u64,
        end: u64,
    ) -> Result<(), OutputError> {
        if !self.triggers.syscalls {
            return Ok(());
        }
        let took = end.saturating_sub(start);
        let hit = self.triggers.list.iter().position(|t| {
            matches!(t.condition, Condition::SlowSyscall { nr: want, min_ns }
                if want.is_none_or(|w| w == nr) && took >= min_ns)
        });
        if let Some(i) = hit {
            let tgid = self.tgid_of(tid);
            let name = self.syscall.table.get(nr).name.clone();
            self.fire(
                out,
                i,
                end,
                (tgid, tid),
                &[
                    ("syscall", ArgValue::String(name.as_str().into())),
                    ("duration_ns", ArgValue::Uint64(took)),
                ],
            )?;
        }
        Ok(())
    }

    /// An event `what` (a tracepoint's `group:event`, a probe's name)
    /// happened at `ts` on `thread`.
    pub(super) fn check_event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        what: impl Fn(&Condition) -> bool,
        ts: u64,
        thread: (u32, u32),
    ) -> Result<(), OutputError> {
        if self.triggers.list.is_empty() {
            return Ok(());
        }
        if let Some(i) = self.triggers.list.iter().position(|t| what(&t.condition)) {
            self.fire(out, i, ts, thread, &[])?;
        }
        Ok(())
    }

    /// Trigger `i` fired: marks it and keeps it for the manager.
    fn fire<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        i: usize,
        ts: u64,
        (pid, tid): (u32, u32),
        args: &[(&str, ArgValue<'_>)],
    ) -> Result<(), OutputError> {
        let spec = self.triggers.list[i].spec.clone();
        log::info!("trigger {spec} fired (thread {tid} of process {pid})");
        self.event(
            out,
            EventRecord {
                ts,
                category: TRIGGER_CATEGORY,
                thread: (pid, tid),
                name: &spec,
                args,
                kind: EventKind::Instant,
            },
        )?;
        self.triggers.fired.push(Fired { spec, ts, pid, tid });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let t = Trigger::parse("syscall:fsync>50ms").unwrap();
        assert_eq!(
            t.condition,
            Condition::SlowSyscall {
                nr: Some(syscalls::Sysno::fsync.id().into()),
                min_ns: 50_000_000
            }
        );
        assert_eq!(t.tracepoint_spec(), None);
        assert_eq!(
            Trigger::parse("syscall:*>=1.5s").unwrap().condition,
            Condition::SlowSyscall {
                nr: None,
                min_ns: 1_500_000_000
            }
        );
        for (spec, n) in [("signal:SIGSEGV", 11), ("signal:abrt", 6), ("signal:9", 9)] {
            let t = Trigger::parse(spec).unwrap();
            assert_eq!(
                t.tracepoint_spec(),
                Some(format!("signal:signal_deliver if sig == {n} && sa_handler == 0").as_str())
            );
        }
        assert_eq!(
            Trigger::parse("oom").unwrap().tracepoint_spec(),
            Some("oom:mark_victim")
        );
        assert_eq!(
            Trigger::parse("tracepoint:block:block_rq_issue")
                .unwrap()
                .condition,
            Condition::Tracepoint("block:block_rq_issue".into())
        );
        for bad in [
            "syscall:fsync",
            "syscall:fsync>50",
            "syscall:nosuchcall>1ms",
            "signal:SIGNOPE",
            "tracepoint:sched",
            "alert-name",
        ] {
            assert!(Trigger::parse(bad).is_err(), "{bad}");
        }
        assert!(is_kernel_trigger("syscall:fsync>1ms"));
        assert!(is_kernel_trigger("oom"));
        assert!(!is_kernel_trigger("seq-500"));
    }
}
