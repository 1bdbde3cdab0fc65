//! The floor of the kernel provider's cost: programs that do nothing,
//! attached to the hooks its hot paths use. What a traced program slows
//! down by with them attached is what the kernel charges for running any
//! program there; the benchmarks (`cargo xtask bench kernel`, `syscall`)
//! report every tracer's cost above it.

use aya::programs::{BtfTracePoint, ProgramError};
use aya::{Btf, Ebpf, EbpfLoader};
use trace_common::kernel::{MAP_EVENTS, MAP_FLOOR_RING};

use super::KernelError;
use super::attach::program_of;
use super::error::program_error;
use super::load::EBPF_OBJECT;

/// A program of the floor: its name for [`attach`], its BTF tracepoint,
/// the program.
pub struct FloorProgram {
    /// The hook, and what the program does there beyond returning: `HOOK`
    /// for nothing, `HOOK:clock` reads the clock, `HOOK:ids` asks for the
    /// current task's ids, `HOOK:store` stores a word in a per-CPU map
    /// (which the other two also do with what they read), `HOOK:ring`
    /// reads the clock and writes a context switch's worth of ring buffer.
    pub name: &'static str,
    /// The BTF tracepoint.
    pub tracepoint: &'static str,
    /// The program in the object.
    pub program: &'static str,
}

/// Every floor program.
pub const FLOOR_PROGRAMS: &[FloorProgram] = &[
    floor("sys_enter", "sys_enter", "floor_sys_enter"),
    floor("sys_exit", "sys_exit", "floor_sys_exit"),
    floor("sched_switch", "sched_switch", "floor_sched_switch"),
    floor("sched_waking", "sched_waking", "floor_sched_wakeup"),
    floor(
        "sched_wakeup_new",
        "sched_wakeup_new",
        "floor_sched_wakeup_new",
    ),
    floor("sys_enter:clock", "sys_enter", "floor_clock_sys_enter"),
    floor("sys_exit:clock", "sys_exit", "floor_clock_sys_exit"),
    floor("sys_enter:ids", "sys_enter", "floor_ids_sys_enter"),
    floor("sys_exit:ids", "sys_exit", "floor_ids_sys_exit"),
    floor("sys_enter:store", "sys_enter", "floor_store_sys_enter"),
    floor("sys_exit:store", "sys_exit", "floor_store_sys_exit"),
    floor(
        "sched_switch:clock",
        "sched_switch",
        "floor_clock_sched_switch",
    ),
    floor(
        "sched_waking:clock",
        "sched_waking",
        "floor_clock_sched_wakeup",
    ),
    floor(
        "sched_wakeup_new:clock",
        "sched_wakeup_new",
        "floor_clock_sched_wakeup_new",
    ),
    floor(
        "sched_switch:ring",
        "sched_switch",
        "floor_ring_sched_switch",
    ),
    floor(
        "sched_waking:ring",
        "sched_waking",
        "floor_ring_sched_wakeup",
    ),
    floor(
        "sched_wakeup_new:ring",
        "sched_wakeup_new",
        "floor_ring_sched_wakeup_new",
    ),
];

/// The floor's ring buffer (`HOOK:ring` programs): what a benchmark run
/// writes fits, so no reservation fails, and nothing reads it.
const FLOOR_RING_BYTES: u32 = 128 << 20;

const fn floor(
    name: &'static str,
    tracepoint: &'static str,
    program: &'static str,
) -> FloorProgram {
    FloorProgram {
        name,
        tracepoint,
        program,
    }
}

/// Empty programs attached to some hooks; dropping it detaches them.
pub struct Floor {
    _ebpf: Ebpf,
}

/// Attaches the floor programs named `names` ([`FloorProgram::name`]).
pub fn attach(names: &[&str]) -> Result<Floor, KernelError> {
    super::load::raise_memlock_limit();
    let mut ebpf = EbpfLoader::new()
        .map_max_entries(MAP_EVENTS, 1)
        .map_max_entries(MAP_FLOOR_RING, FLOOR_RING_BYTES)
        .load(EBPF_OBJECT)
        .map_err(|e| KernelError::Load {
            source: Box::new(e),
        })?;
    let btf = Btf::from_sys_fs().map_err(|e| KernelError::ProgramLoad {
        program: "floor",
        reason: format!("reading the kernel's BTF: {e}"),
        source: Box::new(ProgramError::from(std::io::Error::other(e.to_string()))),
    })?;
    for name in names {
        let Some(p) = FLOOR_PROGRAMS.iter().find(|p| p.name == *name) else {
            return Err(KernelError::UnknownHook {
                name: (*name).to_owned(),
                known: FLOOR_PROGRAMS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let tp: &mut BtfTracePoint = program_of(&mut ebpf, p.program)?;
        tp.load(p.tracepoint, &btf)
            .map_err(|e| program_error(p.program, e))?;
        tp.attach().map_err(|e| KernelError::Attach {
            program: p.program,
            tracepoint: format!("btf:{}", p.tracepoint),
            source: Box::new(e),
        })?;
    }
    Ok(Floor { _ebpf: ebpf })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use aya::maps::RingBuf;

    use super::*;

    /// Needs root: it loads and attaches the programs.
    #[test]
    fn root_every_floor_program_attaches_and_the_ring_step_writes_entries() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test loads eBPF programs and must run as root (sudo -E cargo test)"
        );
        for p in FLOOR_PROGRAMS {
            if let Err(e) = attach(&[p.name]) {
                panic!("floor program {}: {e}", p.name);
            }
        }
        let mut floor = attach(&["sched_switch:ring"]).expect("attaching the ring step");
        // Each sleep switches this thread out and back in.
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let map = floor._ebpf.map_mut(MAP_FLOOR_RING).expect("the floor ring");
        let mut ring = RingBuf::try_from(map).expect("a ring buffer");
        let mut entries = 0;
        while let Some(entry) = ring.next() {
            assert_eq!(
                entry.len(),
                size_of::<trace_common::kernel::SchedSwitchEvent>()
            );
            entries += 1;
        }
        assert!(entries >= 20, "{entries} entries for 20 sleeps");
    }
}
