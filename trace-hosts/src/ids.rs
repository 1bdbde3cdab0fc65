//! The ids a machine's processes, threads, CPUs, providers and packet
//! sequences get in a merged trace.
//!
//! Perfetto keeps pids and tids as 32-bit values (its FXT importer casts
//! every koid to `uint32_t`), so machines cannot be told apart by high bits
//! of a 64-bit koid. Machine `k` gets the decimal block from
//! `k × 10 000 000`: pid 1234 of the second machine (`k` = 1) is
//! 10 001 234, which reads as "machine 1, pid 1234" and stays apart from
//! every pid of another machine (the kernel's largest `pid_max` is
//! 4 194 304). Id 0 (the idle task) stays 0 on every machine: CPUs keep
//! the machines apart there. The first machine (the recording one) keeps
//! its ids, so a trace of one machine reads as before.

/// The width of each machine's block of process and thread ids.
pub const PID_STRIDE: u64 = 10_000_000;

/// At most this many machines fit in 32-bit ids.
pub const MAX_MACHINES: u32 = (u32::MAX as u64 / PID_STRIDE) as u32;

/// How one machine's ids are written in the merged trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineIds {
    index: u32,
    cpu_base: u32,
}

impl MachineIds {
    /// The ids of machine `index` (0: the recording machine), whose CPU 0
    /// is the merged trace's CPU `cpu_base`.
    pub fn new(index: u32, cpu_base: u32) -> Self {
        MachineIds { index, cpu_base }
    }

    /// The recording machine's: every id as it is.
    pub fn local() -> Self {
        MachineIds::new(0, 0)
    }

    /// The machine's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The merged trace's CPU number of the machine's CPU 0.
    pub fn cpu_base(&self) -> u32 {
        self.cpu_base
    }

    /// The first id of the machine's block.
    pub fn pid_base(&self) -> u64 {
        u64::from(self.index) * PID_STRIDE
    }

    /// The merged id of a process or thread koid (pids and tids share one
    /// space). An id past the block (a namespaced provider's thread that
    /// was never mapped) is folded into it.
    pub fn koid(&self, id: u64) -> u64 {
        if self.index == 0 || id == 0 {
            id
        } else {
            self.pid_base() + id % PID_STRIDE
        }
    }

    /// [`Self::koid`] of a 32-bit id.
    pub fn id32(&self, id: u32) -> u32 {
        u32::try_from(self.koid(u64::from(id))).unwrap_or(u32::MAX)
    }

    /// The merged trace's number of the machine's CPU `cpu`.
    pub fn cpu(&self, cpu: u32) -> u32 {
        self.cpu_base + cpu
    }

    /// The merged id of provider `id`: the machine's index above 16 bits.
    pub fn provider(&self, id: u32) -> u32 {
        (self.index << 16) | (id & 0xFFFF)
    }

    /// The merged id of a Perfetto packet sequence: the machine's index
    /// above 20 bits.
    pub fn sequence(&self, id: u32) -> u32 {
        (self.index << 20) | (id & 0xF_FFFF)
    }

    /// The machine of merged id `koid` among `machines` machines (0 for an
    /// id of no machine's block: the recording machine's own).
    pub fn machine_of(koid: u64, machines: u32) -> u32 {
        let k = koid / PID_STRIDE;
        match u32::try_from(k) {
            Ok(k) if k < machines => k,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_machine_has_its_decimal_block() {
        let b = MachineIds::new(2, 4);
        assert_eq!(b.koid(1234), 20_001_234);
        assert_eq!(b.koid(0), 0);
        assert_eq!(b.cpu(1), 5);
        assert_eq!(MachineIds::local().koid(1234), 1234);
        assert_eq!(MachineIds::machine_of(20_001_234, 3), 2);
        assert_eq!(MachineIds::machine_of(1234, 3), 0);
        assert_eq!(MachineIds::machine_of(1 << 30, 3), 0);
        assert!(b.koid((1 << 30) + 5) < 30_000_000);
        assert_ne!(b.provider(1), MachineIds::local().provider(1));
        assert_ne!(b.sequence(1), MachineIds::local().sequence(1));
        assert!(u64::from(MAX_MACHINES) * PID_STRIDE <= u64::from(u32::MAX));
    }
}
