//! The floor of the kernel provider's cost: programs that do nothing,
//! attached to the hooks its hot paths use. What a traced program slows
//! down by with them attached is what the kernel charges for running any
//! program there; the benchmarks (`cargo xtask bench kernel`, `syscall`)
//! report every tracer's cost above it.

use aya::programs::{BtfTracePoint, ProgramError};
use aya::{Btf, Ebpf, EbpfLoader};
use trace_common::kernel::MAP_EVENTS;

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
    /// (which the other two also do with what they read).
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
    floor("sched_wakeup", "sched_wakeup", "floor_sched_wakeup"),
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
        "sched_wakeup:clock",
        "sched_wakeup",
        "floor_clock_sched_wakeup",
    ),
    floor(
        "sched_wakeup_new:clock",
        "sched_wakeup_new",
        "floor_clock_sched_wakeup_new",
    ),
];

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
