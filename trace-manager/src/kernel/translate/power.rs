//! CPU power and the provider's drops: counters on the `kernel CPUs`
//! pseudo-process, one argument per CPU.

use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind};
use trace_common::kernel::{POWER_FREQUENCY, PowerEvent};

use super::{EventRecord, KernelTranslator};
use crate::output::{FxtStream, OutputError};

/// Koid of the pseudo-process holding the per-CPU counters.
pub const CPUS_PROCESS_KOID: u32 = 0x7FFD_0000;

impl KernelTranslator {
    /// CPU `cpu_id` entered idle state `state` (`IDLE_EXIT`: left idle), or
    /// (`POWER_FREQUENCY`) runs at `state` kHz.
    pub fn cpu_power<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &PowerEvent,
    ) -> Result<(), OutputError> {
        let (ts, cpu, frequency, state) =
            (e.header.ts, e.cpu_id, e.what == POWER_FREQUENCY, e.state);
        let tid = self.cpu_counter_track(out)?;
        let (name, value) = if frequency {
            ("cpu_frequency", i64::from(state))
        } else if state == trace_common::kernel::IDLE_EXIT {
            ("cpu_idle", -1)
        } else {
            ("cpu_idle", i64::from(state))
        };
        let cpu_name = format!("cpu{cpu}");
        self.event(
            out,
            EventRecord {
                ts,
                category: trace_common::category::KERNEL_SCHED,
                thread: (CPUS_PROCESS_KOID, tid),
                name,
                args: &[(&cpu_name, ArgValue::Int64(value))],
                kind: EventKind::Counter { id: 0 },
            },
        )?;
        self.counts.cpu_counters += 1;
        Ok(())
    }

    /// The track of the per-CPU counters (thread `CPU counters` of the
    /// pseudo-process `kernel CPUs`), named on first use; returns its koid.
    pub(super) fn cpu_counter_track<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<u32, OutputError> {
        let tid = CPUS_PROCESS_KOID + 1;
        if !self.processes.contains_key(&CPUS_PROCESS_KOID) {
            self.name_process(out, CPUS_PROCESS_KOID, "kernel CPUs")?;
        }
        if !self.threads.contains_key(&tid) {
            self.name_thread(out, tid, CPUS_PROCESS_KOID, "CPU counters")?;
        }
        Ok(tid)
    }

    /// At `ts`, `per_cpu` events had been lost on each CPU (`(cpu, lost)`),
    /// and `other` more that belong to no CPU (runs the kernel skipped,
    /// events beyond the oneshot budget): a counter `dropped_events` on the
    /// `kernel CPUs` track, an argument per CPU and `other`, from 0 at the
    /// recording's start to these numbers at `ts`.
    pub fn drops<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        per_cpu: &[(u32, u64)],
        other: u64,
    ) -> Result<(), OutputError> {
        let tid = self.cpu_counter_track(out)?;
        let names: Vec<String> = per_cpu.iter().map(|(cpu, _)| format!("cpu{cpu}")).collect();
        let mut args: Vec<(&str, ArgValue<'_>)> = names
            .iter()
            .zip(per_cpu)
            .map(|(name, &(_, n))| (name.as_str(), ArgValue::Uint64(n)))
            .collect();
        args.push(("other", ArgValue::Uint64(other)));
        // A sample of 0 where the recording started, so that Perfetto draws
        // a step rather than one lone point.
        let zeros: Vec<(&str, ArgValue<'_>)> = args
            .iter()
            .map(|(k, _)| (*k, ArgValue::Uint64(0)))
            .collect();
        self.event(
            out,
            EventRecord {
                ts: self.start_ts.min(ts),
                category: "kernel",
                thread: (CPUS_PROCESS_KOID, tid),
                name: "dropped_events",
                args: &zeros,
                kind: EventKind::Counter { id: 0 },
            },
        )?;
        self.event(
            out,
            EventRecord {
                ts,
                category: "kernel",
                thread: (CPUS_PROCESS_KOID, tid),
                name: "dropped_events",
                args: &args,
                kind: EventKind::Counter { id: 0 },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::testing::{ev, records};
    use trace_common::fxt::Record;

    #[test]
    fn cpu_idle_and_frequency_are_counters_per_cpu() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.cpu_power(&mut out, &ev::cpu_power(10, 1, false, 2))
            .unwrap();
        t.cpu_power(
            &mut out,
            &ev::cpu_power(20, 1, false, trace_common::kernel::IDLE_EXIT),
        )
        .unwrap();
        t.cpu_power(&mut out, &ev::cpu_power(30, 0, true, 2_400_000))
            .unwrap();
        assert_eq!(t.counts().cpu_counters, 3);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let ev: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event {
                    ts,
                    name,
                    args,
                    kind: EventKind::Counter { .. },
                    ..
                } => Some((
                    *ts,
                    st.string(name).unwrap().to_owned(),
                    st.string(&args[0].name).unwrap().to_owned(),
                    args[0].value.clone().into_owned(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            ev,
            [
                (10, "cpu_idle".into(), "cpu1".into(), ArgValue::Int64(2)),
                (20, "cpu_idle".into(), "cpu1".into(), ArgValue::Int64(-1)),
                (
                    30,
                    "cpu_frequency".into(),
                    "cpu0".into(),
                    ArgValue::Int64(2_400_000)
                ),
            ]
        );
    }
}
