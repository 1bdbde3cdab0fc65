//! Loading the program for tracepoints selected by name, configuring it per
//! tracepoint, and attaching it to each.

use aya::maps::{HashMap as BpfHashMap, MapError};
use std::os::fd::AsFd as _;

use aya::programs::{ProgramError, TracePoint};
use trace_common::kernel::tracepoint::{MAP_TRACEPOINTS, TRACEPOINT_PROGRAM, TracepointConfig};

use super::Selection;
use crate::kernel::attach::program_of;
use crate::kernel::error::program_error;
use crate::kernel::{KernelError, KernelProvider, perf_probe};

/// The `Pod` wrapper through which a tracepoint's configuration goes into
/// its map.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct ConfigValue(TracepointConfig);

// SAFETY: `TracepointConfig` is `#[repr(C)]` plain data made of integers
// and byte arrays with no padding (its size is asserted in trace-common), so
// any bytes are a valid value.
unsafe impl aya::Pod for ConfigValue {}

impl KernelProvider {
    /// Configures and attaches the generic program to every tracepoint of
    /// `selection`.
    pub(in crate::kernel) fn attach_tracepoints(
        &mut self,
        selection: &Selection,
    ) -> Result<(), KernelError> {
        let map_err = |e: MapError| KernelError::Map {
            name: MAP_TRACEPOINTS,
            source: Box::new(e),
        };
        let map = self
            .ebpf
            .map_mut(MAP_TRACEPOINTS)
            .ok_or(KernelError::MissingInObject {
                what: "map",
                name: MAP_TRACEPOINTS,
            })?;
        let mut configs: BpfHashMap<_, u32, ConfigValue> =
            BpfHashMap::try_from(map).map_err(map_err)?;
        for tp in &selection.tracepoints {
            configs
                .insert(tp.id, ConfigValue(tp.config), 0)
                .map_err(map_err)?;
        }
        let program = TRACEPOINT_PROGRAM;
        let prog: &mut TracePoint = program_of(&mut self.ebpf, program)?;
        prog.load().map_err(|e| {
            if let ProgramError::LoadError { verifier_log, .. } = &e {
                log::debug!("verifier log of eBPF program `{program}`:\n{verifier_log}");
            }
            program_error(program, e)
        })?;
        let fd = prog
            .fd()
            .and_then(|fd| fd.try_clone().map_err(ProgramError::from))
            .map_err(|e| program_error(program, e))?;
        self.attached.push(program);
        let mut refused = Vec::new();
        for tp in &selection.tracepoints {
            // The cookie is the id: the program's key into the map.
            match perf_probe::attach_tracepoint(fd.as_fd(), tp.id, u64::from(tp.id)) {
                Ok(link) => self.probe_links.push(link),
                // Matched by a glob only: the kernel keeps some tracepoints
                // to itself (`irq_vectors:irq_work_exit`, EPERM); the rest
                // of the glob records.
                Err(e) if !tp.named => refused.push(format!("{} ({e})", tp.name())),
                Err(source) => {
                    return Err(KernelError::ProbeAttach {
                        probe: format!("-e {}", tp.name()),
                        source,
                    });
                }
            }
            self.in_time()?;
        }
        if !refused.is_empty() {
            log::warn!(
                "-e: {} tracepoint{} a glob matched left out, the kernel refusing them: {}",
                refused.len(),
                if refused.len() == 1 { "" } else { "s" },
                refused.join(", ")
            );
        }
        log::info!(
            "tracepoints selected by name: {}",
            selection
                .tracepoints
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(())
    }
}
