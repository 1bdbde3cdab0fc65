//! What the translator wrote, counted by kind; [`KernelRecordCounts::of`]
//! gives each as the controller protocol names it.

use trace_common::controller::KernelCount;

/// Counts of what the translator wrote, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelRecordCounts {
    /// Context switch records.
    pub context_switches: u64,
    /// Thread wakeup records.
    pub wakeups: u64,
    /// fork/clone, exec, exit and rename instants.
    pub proc_events: u64,
    /// Process and thread name records.
    pub names: u64,
    /// System call durations (complete, or begun and not ended).
    pub syscalls: u64,
    /// Hard IRQ and softirq durations.
    pub interrupts: u64,
    /// Block requests issued (async begins).
    pub block_requests: u64,
    /// Page fault instants and resident-set counter events.
    pub memory_events: u64,
    /// CPU idle and frequency counter events.
    pub cpu_counters: u64,
    /// Probed function durations.
    pub probes: u64,
    /// USDT probe instants.
    pub usdt: u64,
    /// Context switches the kernel did not record, written where the first
    /// event of another thread on that CPU shows them (`inferred`).
    pub inferred_switches: u64,
    /// Wake-ups of threads that were running (not written: nothing changed).
    pub running_wakeups: u64,
    /// Events that reached the translator after the CPUs' tracks had moved
    /// past their time (system calls staged on a CPU while their thread
    /// kept running): written on their thread, no switch inferred.
    pub late_events: u64,
    /// Block requests the kernel took back from their device to issue
    /// again (one duration each, from its last issue, `requeued`).
    pub block_requeues: u64,
    /// Returns of new tasks from the `clone` or `fork` that made them: not
    /// written (the call is their parent's).
    pub child_returns: u64,
    /// Stack samples (profile, off-CPU, wakers, probes' stacks).
    pub samples: u64,
    /// Signals sent and delivered (instants).
    pub signals: u64,
    /// Stack samples with Python frames.
    pub python_stacks: u64,
    /// Processes running an interpreter whose frames cannot be read.
    pub python_unreadable: u64,
    /// Wake-ups from one thread's system call of a thread blocked in one,
    /// written as flows.
    pub wake_flows: u64,
    /// Futex waits written as `kernel:lock` slices.
    pub lock_waits: u64,
}

impl KernelRecordCounts {
    /// The count the controller protocol reports as `kind` (0 for a
    /// tracepoint's, which [`super::KernelTranslator::tracepoint_counts`]
    /// gives).
    pub fn of(&self, kind: &KernelCount) -> u64 {
        match kind {
            KernelCount::Switches => self.context_switches,
            KernelCount::Wakeups => self.wakeups,
            KernelCount::ProcessEvents => self.proc_events,
            KernelCount::Names => self.names,
            KernelCount::SystemCalls => self.syscalls,
            KernelCount::Interrupts => self.interrupts,
            KernelCount::BlockRequests => self.block_requests,
            KernelCount::MemoryEvents => self.memory_events,
            KernelCount::CpuCounters => self.cpu_counters,
            KernelCount::ProbeHits => self.probes,
            KernelCount::UsdtEvents => self.usdt,
            KernelCount::StackSamples => self.samples,
            KernelCount::Signals => self.signals,
            KernelCount::PythonStacks => self.python_stacks,
            KernelCount::PythonUnreadable => self.python_unreadable,
            KernelCount::Tracepoint(_) => 0,
        }
    }
}
