//! Telling the stack programs which processes run a readable Python
//! interpreter (`trace_common::kernel::python`): the `PYTHON_PROCS` map,
//! filled as the translator finds interpreters.

use aya::maps::{HashMap as BpfHashMap, MapData};
use trace_common::kernel::python::{MAP_PYTHON_PROCS, PYTHON_ABSENT, PythonLayout, PythonProcess};
use trace_stacks::python::layout::Layout;

use super::KernelProvider;

/// The `Pod` wrapper through which `PYTHON_PROCS`'s values are written.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct PythonValue(PythonProcess);

// SAFETY: `PythonProcess` is `#[repr(C)]` plain data made of integers with
// no padding (its size is asserted in trace-common), so any bytes are a
// valid value.
unsafe impl aya::Pod for PythonValue {}

/// What the programs need of an interpreter whose `_PyRuntime` is at
/// `runtime` and whose layout is `l`.
pub fn python_process(runtime: u64, l: &Layout) -> PythonProcess {
    let absent = |o: Option<u32>| o.unwrap_or(PYTHON_ABSENT);
    PythonProcess {
        interpreters_head: runtime.wrapping_add(l.runtime_interpreters_head),
        layout: PythonLayout {
            interp_threads_head: l.interp_threads_head,
            thread_next: l.thread_next,
            thread_native_id: l.thread_native_id,
            thread_cframe: absent(l.thread_cframe),
            current_frame: l.current_frame,
            frame_code: l.frame_code,
            frame_previous: l.frame_previous,
            frame_instr: l.frame_instr,
            frame_is_entry: absent(l.frame_is_entry),
            frame_owner: l.frame_owner,
            owner_cstack: absent(l.owner_cstack),
            code_stamp: l.code_firstlineno,
        },
    }
}

/// The `PYTHON_PROCS` map, taken from the loaded programs by whoever finds
/// the interpreters (the translator, as stacks arrive), so that it tells
/// the programs at once, not after the drain that found them.
pub struct PythonProcs(BpfHashMap<MapData, u32, PythonValue>);

impl std::fmt::Debug for PythonProcs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PythonProcs")
    }
}

impl PythonProcs {
    /// Tells the programs that process `pid` runs the interpreter
    /// `process` (its Python frames are read from its next stack on), or,
    /// with `None`, no longer does.
    pub fn set(&mut self, pid: u32, process: Option<PythonProcess>) {
        let result = match process {
            Some(p) => self.0.insert(pid, PythonValue(p), 0),
            // A process not in the map has nothing to remove.
            None => self.0.remove(&pid).or(Ok(())),
        };
        if let Err(e) = result {
            log::debug!("{MAP_PYTHON_PROCS}: process {pid}: {e}");
        }
    }
}

impl KernelProvider {
    /// Takes the map of the processes whose Python frames the programs
    /// read (`None` if the object has none, or it was taken).
    pub fn take_python_procs(&mut self) -> Option<PythonProcs> {
        let map = self.ebpf.take_map(MAP_PYTHON_PROCS)?;
        match BpfHashMap::try_from(map) {
            Ok(map) => Some(PythonProcs(map)),
            Err(e) => {
                log::debug!("{MAP_PYTHON_PROCS}: {e}");
                None
            }
        }
    }
}
