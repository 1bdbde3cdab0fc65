//! `kernel:profile`: the sampling program attached to a software
//! `cpu-clock` perf event on every online CPU (no hardware PMU needed, so
//! it works in virtual machines), sampling at a frequency.

use aya::programs::PerfEvent;
use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent};
use trace_common::kernel::stack::PROFILE_PROGRAM;

use super::attach::program_of;
use super::error::{is_eperm, program_error};
use super::{KernelError, KernelProvider};

/// Highest sampling frequency accepted: the kernel's own limit
/// (`kernel.perf_event_max_sample_rate`) is usually lower and is checked
/// when the events open.
pub const MAX_SAMPLE_HZ: u32 = 100_000;

impl KernelProvider {
    /// Loads the sampling program and attaches it to a `cpu-clock` event of
    /// each of `cpus` sampling `hz` times a second.
    pub(super) fn attach_profile(&mut self, cpus: &[u32], hz: u32) -> Result<(), KernelError> {
        let hz = hz.clamp(1, MAX_SAMPLE_HZ);
        let program: &mut PerfEvent = program_of(&mut self.ebpf, PROFILE_PROGRAM)?;
        program.load().map_err(|e| {
            if let aya::programs::ProgramError::LoadError { verifier_log, .. } = &e {
                log::debug!("verifier log of eBPF program `{PROFILE_PROGRAM}`:\n{verifier_log}");
            }
            program_error(PROFILE_PROGRAM, e)
        })?;
        for &cpu in cpus {
            program
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Frequency(u64::from(hz)),
                    false,
                )
                .map_err(|e| {
                    if is_eperm(&e) {
                        KernelError::Permission {
                            detail: format!("opening the cpu-clock event of CPU {cpu}: {e}"),
                        }
                    } else {
                        KernelError::Attach {
                            program: PROFILE_PROGRAM,
                            tracepoint: format!("cpu-clock on CPU {cpu} at {hz} Hz"),
                            source: Box::new(e),
                        }
                    }
                })?;
        }
        self.attached.push(PROFILE_PROGRAM);
        Ok(())
    }
}
