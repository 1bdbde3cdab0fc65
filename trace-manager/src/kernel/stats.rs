//! What the kernel provider lost: the programs' per-CPU drop counters and
//! the kernel's `recursion_misses` of each program.

use std::os::fd::{AsFd as _, BorrowedFd};

use aya::maps::{MapData, MapError, PerCpuArray};
use trace_common::kernel::{COUNTER_COUNT, COUNTER_FOLLOW_FULL, MAP_COUNTERS};

use super::{KernelError, KernelProvider};

impl KernelProvider {
    /// Counts entries found malformed outside [`KernelProvider::drain`].
    pub fn add_malformed(&mut self, n: u64) {
        self.malformed += n;
    }

    /// Ring-buffer entries skipped so far because they did not decode.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Events lost so far in the kernel on each CPU with a ring buffer (the
    /// programs' own counts: ring buffer full, layout not set), as `(cpu,
    /// lost)`. Runs the kernel skipped ([`KernelProvider::recursion_misses`])
    /// are not counted per CPU.
    pub fn dropped_per_cpu(&self) -> Result<Vec<(u32, u64)>, KernelError> {
        let mut lost: Vec<(u32, u64)> = self.rings.iter().map(|r| (r.cpu, 0)).collect();
        for index in (0..COUNTER_COUNT).filter(|&i| i != COUNTER_FOLLOW_FULL) {
            let values = self.counter_per_cpu(index)?;
            for (cpu, n) in &mut lost {
                *n += values.get(*cpu as usize).copied().unwrap_or(0);
            }
        }
        Ok(lost)
    }

    /// Events lost so far in the kernel, summed over every CPU: the
    /// programs' own counts (ring buffer full, layout not set) plus the runs
    /// the kernel skipped because another BPF program was running on that CPU
    /// (the programs' `recursion_misses`).
    pub fn dropped(&self) -> Result<u64, KernelError> {
        Ok(self.lost_in_programs()? + self.recursion_misses())
    }

    /// Runs of the attached programs the kernel skipped because another BPF
    /// program was running on the same CPU (each a lost event), including
    /// those of programs detached since.
    pub fn recursion_misses(&self) -> u64 {
        self.detached_misses
            + self
                .attached
                .iter()
                .filter_map(|name| self.ebpf.program(name)?.fd().ok())
                .map(|fd| recursion_misses_of(fd.as_fd()))
                .sum::<u64>()
    }

    /// Events the programs counted as lost (`COUNTERS`), over every CPU.
    pub(super) fn lost_in_programs(&self) -> Result<u64, KernelError> {
        let mut total = 0u64;
        for index in (0..COUNTER_COUNT).filter(|&i| i != COUNTER_FOLLOW_FULL) {
            total += self.counter(index)?;
        }
        Ok(total)
    }

    /// Counter `index` of `COUNTERS`, summed over every CPU.
    pub(super) fn counter(&self, index: u32) -> Result<u64, KernelError> {
        Ok(self.counter_per_cpu(index)?.iter().sum())
    }

    /// Counter `index` of `COUNTERS` of each possible CPU, by CPU id.
    fn counter_per_cpu(&self, index: u32) -> Result<Vec<u64>, KernelError> {
        let map = self
            .ebpf
            .map(MAP_COUNTERS)
            .ok_or(KernelError::MissingInObject {
                what: "map",
                name: MAP_COUNTERS,
            })?;
        let map_err = |e: MapError| KernelError::Map {
            name: MAP_COUNTERS,
            source: Box::new(e),
        };
        let counters: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map).map_err(map_err)?;
        Ok(counters.get(&index, 0).map_err(map_err)?.to_vec())
    }
}

/// The `recursion_misses` the kernel reports for the program behind `fd`
/// (0 when it does not say, as before Linux 5.12).
pub(super) fn recursion_misses_of(fd: BorrowedFd<'_>) -> u64 {
    crate::procfs::fdinfo(fd)
        .and_then(|info| parse_recursion_misses(&info))
        .unwrap_or(0)
}

/// The `recursion_misses:` value of a BPF program's fdinfo text.
pub(super) fn parse_recursion_misses(fdinfo: &str) -> Option<u64> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("recursion_misses:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recursion_misses_are_read_from_fdinfo() {
        let info = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nrun_cnt:\t12\n\
                    recursion_misses:\t3\nverified_insns:\t741\n";
        assert_eq!(parse_recursion_misses(info), Some(3));
        assert_eq!(parse_recursion_misses("prog_type:\t5\n"), None);
    }
}
