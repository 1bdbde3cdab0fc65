//! The machines of a merged trace, declared at its start.
//!
//! A merged trace begins with the records of a provider named
//! [`PROVIDER_NAME`]: for each machine a process named `host NAME` (the
//! last id of the machine's block) with a thread `clock`, on which an
//! instant [`MACHINE_EVENT`] says what the machine is (its name, where it
//! was reached, its CPUs and kernel), and an instant [`SYNC_EVENT`] per
//! clock sync point says the offset found then and its error bound. In
//! ui.perfetto.dev each machine thus has a track of its own with its sync
//! points on it; readers find the machines with [`read_machines`].

use std::borrow::Cow;
use std::io::Read;

use trace_common::fxt::read::{TraceState, decode};
use trace_common::fxt::stream::RecordStream;
use trace_common::fxt::write::{EncodeError, encode};
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef, obj_type};

use crate::clock::SyncPoint;
use crate::ids::{MachineIds, PID_STRIDE};

/// The name of the provider that declares the machines.
pub const PROVIDER_NAME: &str = "hosts";
/// Its provider id (above every machine's provider ids).
pub const PROVIDER_ID: u32 = 0x7FFF_FFFF;
/// The category of its events.
pub const CATEGORY: &str = "hosts";
/// The instant that declares a machine.
pub const MACHINE_EVENT: &str = "machine";
/// The instant of one clock sync point.
pub const SYNC_EVENT: &str = "clock sync";

/// One machine of a merged trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    /// Its name, as the recording named it.
    pub name: String,
    /// How it was reached (empty for the recording machine).
    pub destination: String,
    /// Its index: 0 for the recording machine.
    pub index: u32,
    /// Its number of CPUs.
    pub cpus: u32,
    /// The merged trace's number of its CPU 0.
    pub cpu_base: u32,
    /// Its kernel release.
    pub kernel: String,
    /// Its clock against the recording machine's, point by point.
    pub clock: Vec<SyncPoint>,
}

impl Machine {
    /// How its ids are written.
    pub fn ids(&self) -> MachineIds {
        MachineIds::new(self.index, self.cpu_base)
    }

    /// Whether merged CPU `cpu` is one of its CPUs.
    pub fn has_cpu(&self, cpu: u32) -> bool {
        cpu >= self.cpu_base && cpu - self.cpu_base < self.cpus.max(1)
    }

    /// The koid of the process and thread its declaration is written on.
    fn koid(&self) -> u64 {
        self.ids().pid_base() + PID_STRIDE - 1
    }
}

/// The machine of merged pid or tid `koid` among `machines`.
pub fn machine_of_pid(machines: &[Machine], koid: u64) -> Option<&Machine> {
    let k = MachineIds::machine_of(koid, machines.len() as u32);
    machines.iter().find(|m| m.index == k)
}

/// The machine of merged CPU `cpu` among `machines`.
pub fn machine_of_cpu(machines: &[Machine], cpu: u32) -> Option<&Machine> {
    machines.iter().find(|m| m.has_cpu(cpu))
}

/// Appends the start of a merged trace to `out`: the magic number record
/// and the declaration of `machines`, each declared at `at_ns`.
pub fn write_declarations(
    machines: &[Machine],
    at_ns: u64,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode(&Record::Magic, out)?;
    encode(
        &Record::ProviderInfo {
            id: PROVIDER_ID,
            name: PROVIDER_NAME.into(),
        },
        out,
    )?;
    encode(
        &Record::Initialization {
            ticks_per_second: 1_000_000_000,
        },
        out,
    )?;
    for m in machines {
        let koid = m.koid();
        encode(
            &Record::KernelObject {
                koid,
                obj_type: obj_type::PROCESS,
                name: StringRef::inline(format!("host {}", m.name)),
                args: Cow::Borrowed(&[]),
            },
            out,
        )?;
        encode(
            &Record::KernelObject {
                koid,
                obj_type: obj_type::THREAD,
                name: StringRef::inline("clock"),
                args: vec![Arg::new("process", ArgValue::Koid(koid))].into(),
            },
            out,
        )?;
        let instant = |ts, name: &'static str, args: Vec<Arg<'static>>| Record::Event {
            ts,
            thread: ThreadRef::Inline {
                process: koid,
                thread: koid,
            },
            category: StringRef::inline(CATEGORY),
            name: StringRef::inline(name),
            args: args.into(),
            kind: EventKind::Instant,
        };
        let text = |s: &str| ArgValue::String(StringRef::inline(s.to_owned()));
        encode(
            &instant(
                at_ns,
                MACHINE_EVENT,
                vec![
                    Arg::new("name", text(&m.name)),
                    Arg::new("destination", text(&m.destination)),
                    Arg::new("index", ArgValue::Uint32(m.index)),
                    Arg::new("cpus", ArgValue::Uint32(m.cpus)),
                    Arg::new("cpu_base", ArgValue::Uint32(m.cpu_base)),
                    Arg::new("kernel", text(&m.kernel)),
                ],
            ),
            out,
        )?;
        for p in &m.clock {
            encode(
                &instant(
                    p.local_ns,
                    SYNC_EVENT,
                    vec![
                        Arg::new("offset_ns", ArgValue::Int64(p.offset_ns)),
                        Arg::new("bound_ns", ArgValue::Uint64(p.bound_ns)),
                        Arg::new("rtt_ns", ArgValue::Uint64(p.rtt_ns)),
                    ],
                ),
                out,
            )?;
        }
    }
    Ok(())
}

/// The machines a merged trace declares at its start; none for a trace of
/// one machine. Reads only the records before the first other provider.
pub fn read_machines(input: impl Read) -> Vec<Machine> {
    let mut stream = RecordStream::new(input);
    let mut state = TraceState::new();
    let mut machines: Vec<Machine> = Vec::new();
    let mut seen = false;
    while let Some(Ok((_, bytes))) = stream.next_record() {
        let Ok((record, _)) = decode(bytes) else {
            break;
        };
        state.apply(&record);
        match &record {
            Record::Magic => continue,
            Record::ProviderInfo { id, .. } if *id == PROVIDER_ID => seen = true,
            _ if state.current_provider().0 != PROVIDER_ID => break,
            Record::Event { ts, name, args, .. } => {
                let arg = |n: &str| state.arg(args, n);
                let text = |n: &str| match arg(n) {
                    Some(ArgValue::String(s)) => state.string(s).unwrap_or_default().to_owned(),
                    _ => String::new(),
                };
                let uint = |n: &str| match arg(n) {
                    Some(ArgValue::Uint32(v)) => u64::from(*v),
                    Some(ArgValue::Uint64(v)) => *v,
                    _ => 0,
                };
                match state.string(name) {
                    Some(MACHINE_EVENT) => machines.push(Machine {
                        name: text("name"),
                        destination: text("destination"),
                        index: uint("index") as u32,
                        cpus: uint("cpus") as u32,
                        cpu_base: uint("cpu_base") as u32,
                        kernel: text("kernel"),
                        clock: Vec::new(),
                    }),
                    Some(SYNC_EVENT) => {
                        if let Some(m) = machines.last_mut() {
                            m.clock.push(SyncPoint {
                                local_ns: *ts,
                                offset_ns: match arg("offset_ns") {
                                    Some(ArgValue::Int64(v)) => *v,
                                    _ => 0,
                                },
                                bound_ns: uint("bound_ns"),
                                rtt_ns: uint("rtt_ns"),
                            });
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if seen { machines } else { Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_read_back() {
        let machines = vec![
            Machine {
                name: "web".into(),
                index: 0,
                cpus: 2,
                kernel: "6.18".into(),
                ..Machine::default()
            },
            Machine {
                name: "db".into(),
                destination: "root@10.0.0.2".into(),
                index: 1,
                cpus: 4,
                cpu_base: 2,
                kernel: "6.1".into(),
                clock: vec![SyncPoint {
                    local_ns: 10,
                    offset_ns: -5,
                    bound_ns: 40_000,
                    rtt_ns: 80_000,
                }],
            },
        ];
        let mut out = Vec::new();
        write_declarations(&machines, 7, &mut out).unwrap();
        // A trace follows the declarations.
        encode(
            &Record::ProviderInfo {
                id: 1,
                name: "kernel".into(),
            },
            &mut out,
        )
        .unwrap();
        let read = read_machines(&out[..]);
        assert_eq!(read, machines);
        assert_eq!(machine_of_pid(&read, 10_000_042).unwrap().name, "db");
        assert_eq!(machine_of_pid(&read, 42).unwrap().name, "web");
        assert_eq!(machine_of_cpu(&read, 3).unwrap().name, "db");
        assert_eq!(machine_of_cpu(&read, 1).unwrap().name, "web");
        assert!(read_machines(&out[8 * 3..]).is_empty());
    }
}
