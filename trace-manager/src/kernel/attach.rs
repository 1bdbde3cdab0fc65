//! Loading programs and attaching them: classic and BTF tracepoints,
//! uprobes, USDT sites; and the map helpers loading uses.

use std::os::fd::AsFd as _;

use aya::Ebpf;
use aya::maps::{Array, MapData, MapError};
use aya::programs::{BtfTracePoint, ProgramError, TracePoint};
use trace_common::kernel::{BtfVariant, MAP_USDT_SPECS, TracepointSpec, USDT_PROGRAM, UsdtSpec};

use super::error::{is_eperm, program_error};
use super::{KernelError, KernelProvider, perf_probe};

/// The `Pod` wrapper through which a USDT site's argument spec goes into
/// its map.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub(super) struct UsdtSpecValue(UsdtSpec);

// SAFETY: `UsdtSpec` is `#[repr(C)]` plain data made of integers with no
// padding (its size is asserted in trace-common), so any bytes are a valid
// value.
unsafe impl aya::Pod for UsdtSpecValue {}

impl KernelProvider {
    /// Attaches the entry and return programs to every probe, with its index
    /// as the cookie: to the `pids` processes only when given (a probe in a
    /// shared library would otherwise trap in every process using it), else
    /// to every process.
    pub(super) fn attach_uprobes(
        &mut self,
        probes: &[crate::kernel::uprobes::ResolvedProbe],
        pids: &[u32],
    ) -> Result<(), KernelError> {
        use aya::programs::UProbe;
        use trace_common::kernel::{UPROBE_ENTRY_PROGRAM, UPROBE_RETURN_PROGRAM};
        // A probe resolved for some processes goes into those; else into
        // the filtered processes, or every process.
        let scopes = |probe: &crate::kernel::uprobes::ResolvedProbe| -> Vec<Option<u32>> {
            let pids = if probe.pids.is_empty() {
                pids
            } else {
                &probe.pids[..]
            };
            if pids.is_empty() {
                vec![None]
            } else {
                pids.iter().map(|&p| Some(p)).collect()
            }
        };
        for program in [UPROBE_ENTRY_PROGRAM, UPROBE_RETURN_PROGRAM] {
            let up: &mut UProbe = program_of(&mut self.ebpf, program)?;
            up.load().map_err(|e| program_error(program, e))?;
            let fd = up
                .fd()
                .and_then(|fd| fd.try_clone().map_err(ProgramError::from))
                .map_err(|e| program_error(program, e))?;
            self.attached.push(program);
            for (index, probe) in probes.iter().enumerate() {
                // A symbol's file offset was found when it was resolved:
                // the file is not searched again for each process.
                let (crate::kernel::uprobes::ProbeLocation::Symbol { offset, .. }
                | crate::kernel::uprobes::ProbeLocation::Offset(offset)) = probe.location;
                // Through the file resolved, not its path (see
                // `ProgramFile`). Linked here, not through aya, so that
                // detaching many does not hold up the caller
                // (`perf_probe::detach_all`).
                let path = probe.file.attach_path();
                for pid in scopes(probe) {
                    let cookie = index as u64;
                    let link = if program == UPROBE_RETURN_PROGRAM {
                        perf_probe::attach_uretprobe(fd.as_fd(), &path, offset, pid, cookie)
                    } else {
                        perf_probe::attach_uprobe(fd.as_fd(), &path, offset, 0, pid, cookie)
                    }
                    .map_err(|source| KernelError::ProbeAttach {
                        probe: format!("--uprobe {}", probe.spec),
                        source,
                    })?;
                    self.probe_links.push(link);
                    self.in_time()?;
                }
            }
        }
        Ok(())
    }

    /// Attaches the USDT program at every site, with its index as the
    /// cookie, after storing where each site's arguments are: to the `pids`
    /// processes only when given, else to every process. A site with a
    /// semaphore gets it raised by the kernel while attached.
    pub(super) fn attach_usdt(
        &mut self,
        sites: &[crate::kernel::usdt::UsdtSite],
        pids: &[u32],
    ) -> Result<(), KernelError> {
        use aya::programs::UProbe;
        fill_array(
            &mut self.ebpf,
            MAP_USDT_SPECS,
            sites.iter().map(|site| UsdtSpecValue(site.spec_value)),
        )?;
        let up: &mut UProbe = program_of(&mut self.ebpf, USDT_PROGRAM)?;
        up.load().map_err(|e| program_error(USDT_PROGRAM, e))?;
        let program = up
            .fd()
            .and_then(|fd| fd.try_clone().map_err(ProgramError::from))
            .map_err(|e| program_error(USDT_PROGRAM, e))?;
        self.attached.push(USDT_PROGRAM);
        for (index, site) in sites.iter().enumerate() {
            // A site resolved for some processes goes into those; else into
            // the filtered processes, or every process.
            let pids = if site.pids.is_empty() {
                pids
            } else {
                &site.pids[..]
            };
            let scopes: Vec<Option<u32>> = if pids.is_empty() {
                vec![None]
            } else {
                pids.iter().map(|&p| Some(p)).collect()
            };
            for &pid in &scopes {
                let link = perf_probe::attach_uprobe(
                    program.as_fd(),
                    &site.file.attach_path(),
                    site.offset,
                    site.semaphore,
                    pid,
                    index as u64,
                )
                .map_err(|source| KernelError::ProbeAttach {
                    probe: format!(
                        "--usdt {} ({} at {:#x} of {})",
                        site.spec,
                        site.event_name(),
                        site.offset,
                        site.binary.display()
                    ),
                    source,
                })?;
                self.probe_links.push(link);
                self.in_time()?;
            }
        }
        Ok(())
    }

    /// Loads BTF tracepoint program `variant` and attaches it; `btf` holds
    /// the kernel's BTF once read.
    pub(super) fn attach_btf(
        &mut self,
        variant: &BtfVariant,
        btf: &mut Option<aya::Btf>,
    ) -> Result<(), KernelError> {
        let program = variant.program;
        if btf.is_none() {
            *btf = Some(
                aya::Btf::from_sys_fs().map_err(|e| KernelError::ProgramLoad {
                    program,
                    reason: format!("reading the kernel's BTF: {e}"),
                    source: Box::new(ProgramError::from(std::io::Error::other(e.to_string()))),
                })?,
            );
        }
        let Some(btf) = btf.as_ref() else {
            unreachable!("read just above")
        };
        let tp: &mut BtfTracePoint = program_of(&mut self.ebpf, program)?;
        tp.load(variant.tracepoint, btf).map_err(|e| {
            if let ProgramError::LoadError { verifier_log, .. } = &e {
                log::debug!("verifier log of eBPF program `{program}`:\n{verifier_log}");
            }
            program_error(program, e)
        })?;
        tp.attach().map_err(|e| KernelError::Attach {
            program,
            tracepoint: format!("btf:{}", variant.tracepoint),
            source: Box::new(e),
        })?;
        self.attached.push(program);
        Ok(())
    }

    /// Loads program `spec.program` and attaches it to its tracepoint.
    pub(super) fn attach(&mut self, spec: &'static TracepointSpec) -> Result<(), KernelError> {
        let program = spec.program;
        let tracepoint = format!("{}:{}", spec.group, spec.event);
        let tp: &mut TracePoint = program_of(&mut self.ebpf, program)?;
        tp.load().map_err(|e| {
            if let ProgramError::LoadError { verifier_log, .. } = &e {
                log::debug!("verifier log of eBPF program `{program}`:\n{verifier_log}");
            }
            program_error(program, e)
        })?;
        tp.attach(spec.group, spec.event).map_err(|e| {
            if is_eperm(&e) {
                KernelError::Permission {
                    detail: format!("attaching to tracepoint {tracepoint}: {e}"),
                }
            } else {
                KernelError::Attach {
                    program,
                    tracepoint,
                    source: Box::new(e),
                }
            }
        })?;
        self.attached.push(program);
        Ok(())
    }
}

/// Program `name` of the object, as the program type `P` it must be.
pub(super) fn program_of<'a, P>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut P, KernelError>
where
    &'a mut P: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or(KernelError::MissingInObject {
            what: "program",
            name,
        })?
        .try_into()
        .map_err(|e| program_error(name, e))
}

/// Writes `values` into array map `name` from index 0.
pub(super) fn fill_array<V: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
    values: impl IntoIterator<Item = V>,
) -> Result<(), KernelError> {
    let map = ebpf
        .map_mut(name)
        .ok_or(KernelError::MissingInObject { what: "map", name })?;
    let map_err = |e: MapError| KernelError::Map {
        name,
        source: Box::new(e),
    };
    let mut array: Array<&mut MapData, V> = Array::try_from(map).map_err(map_err)?;
    for (index, value) in values.into_iter().enumerate() {
        array.set(index as u32, value, 0).map_err(map_err)?;
    }
    Ok(())
}
