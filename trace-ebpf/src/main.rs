//! The kernel trace provider's eBPF programs.
//!
//! Every program attaches to a classic tracepoint (or a uprobe) and writes
//! one fixed-layout event (defined in `trace_common::kernel`) into the ring
//! buffer of the CPU it runs on, reserving the entry and filling it in place.
//! `EVENTS` holds one ring buffer per CPU (userspace creates and sizes them),
//! so CPUs never contend for one ring's lock or share its cache lines.
//!
//! Tracepoint fields are read at the offsets userspace parsed from the running
//! kernel's tracefs format files and stored in the `LAYOUT` map before
//! attaching; nothing here knows one kernel's offsets. A program copies the
//! raw record once (one `bpf_probe_read_kernel` of `record_size` bytes) into a
//! per-CPU scratch buffer and takes the fields from there, since helper calls
//! dominate the cost. A field this kernel lacks is absent in the layout and
//! is written with all bits set (`ABSENT_ID`, `ABSENT_INT`) or as an empty
//! string.
//!
//! Lost events (ring buffer full, layout not set) are counted per CPU in
//! `COUNTERS`, never dropped silently. The reader is woken only once
//! `wakeup_bytes` wait in the ring buffer; below that it collects on a timer,
//! which spares a wake-up (an inter-processor interrupt) per event.
//!
//! Programs by category (userspace attaches only the enabled ones):
//! - `kernel:sched`: `sched_switch`, `sched_waking` (a wake-up, in its
//!   waker's context), `sched_wakeup_new`, `cpu_idle`, `cpu_frequency` (the
//!   last two not under a pid filter);
//! - `kernel:proc`: `task_newtask`, `sched_process_exec`,
//!   `sched_process_exit`, `task_rename`;
//! - `kernel:syscall`: `sys_enter`, `sys_exit` (never for the recorder's own
//!   process);
//! - `kernel:irq`: `irq_handler_entry`, `irq_handler_exit`, `softirq_entry`,
//!   `softirq_exit` (not recorded under a pid filter: interrupts belong to
//!   no process);
//! - `kernel:block`: `block_rq_issue` (under a pid filter, only requests a
//!   followed task issues), `block_rq_complete`, `block_rq_requeue`;
//! - `kernel:vm`: `page_fault_user` (x86), `rss_stat` (under a pid filter,
//!   only changes a followed task makes);
//! - `--uprobe`: `uprobe_entry` and `uprobe_return`, attached once per probed
//!   function with its index as the attach cookie.
//! - `--usdt`: `usdt`, attached at every USDT probe site with the site's
//!   index in `USDT_SPECS` (where its arguments are) as the attach cookie.
//!
//! With a pid filter (`FILTER_PIDS`), a program records only events of the
//! threads in `FOLLOWED` (a context switch or wake-up if either thread is
//! followed). `task_newtask` adds every task a followed task creates, and
//! `sched_process_exit` removes tasks that exit; both are attached for the
//! filter even when `kernel:proc` is off, and then write no events. With a
//! cgroup filter (`FILTER_CGROUPS`), events of the current task are kept
//! when the kernel says it is in a selected cgroup (`CGROUPS`), and
//! `FOLLOWED` caches the members for the events about other tasks (see
//! `follow`). The system call programs decide before they read the clock,
//! so the tasks a filter leaves out pay for the filter alone.
//!
//! One module per category holds its programs; they share `maps` (every
//! map), `ring` (the clock, headers, the layout check, reserving and
//! submitting ring-buffer entries, counting losses), `record` (the copied
//! tracepoint record and its fields), `follow` (the process filters) and `task`
//! (the BTF programs' direct loads). `tracepoint` holds the one program
//! attached to every tracepoint selected by name (`-e`). `floor` holds
//! empty programs on the hot paths' hooks, for the benchmarks.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

mod block;
mod floor;
mod follow;
mod irq;
mod maps;
mod offcpu;
mod power;
mod proc;
mod profile;
mod python;
mod record;
mod ring;
mod sched;
mod signal;
mod stack;
mod syscall;
mod task;
mod tracepoint;
mod uprobe;
mod usdt;
mod vm;

/// The verifier rejects a program with a reachable panic (an endless loop),
/// so a panic path fails loudly at load time rather than misbehaving.
#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// The programs run only as eBPF; for the host the crate is a stub binary,
/// built so that `cargo clippy --workspace` lints them.
#[cfg(not(target_arch = "bpf"))]
fn main() {}
