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

/// The hooks with a floor program: the BTF tracepoint and the program.
pub const FLOOR_HOOKS: &[(&str, &str)] = &[
    ("sys_enter", "floor_sys_enter"),
    ("sys_exit", "floor_sys_exit"),
    ("sched_switch", "floor_sched_switch"),
    ("sched_wakeup", "floor_sched_wakeup"),
    ("sched_wakeup_new", "floor_sched_wakeup_new"),
];

/// Empty programs attached to some hooks; dropping it detaches them.
pub struct Floor {
    _ebpf: Ebpf,
}

/// Attaches an empty program to each of `hooks` (BTF tracepoint names
/// from [`FLOOR_HOOKS`]).
pub fn attach(hooks: &[&str]) -> Result<Floor, KernelError> {
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
    for hook in hooks {
        let Some(&(tracepoint, program)) = FLOOR_HOOKS.iter().find(|(t, _)| t == hook) else {
            return Err(KernelError::UnknownHook {
                name: (*hook).to_owned(),
                known: FLOOR_HOOKS
                    .iter()
                    .map(|(t, _)| *t)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let tp: &mut BtfTracePoint = program_of(&mut ebpf, program)?;
        tp.load(tracepoint, &btf)
            .map_err(|e| program_error(program, e))?;
        tp.attach().map_err(|e| KernelError::Attach {
            program,
            tracepoint: format!("btf:{tracepoint}"),
            source: Box::new(e),
        })?;
    }
    Ok(Floor { _ebpf: ebpf })
}
