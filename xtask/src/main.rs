//! `cargo xtask`: project chores — toolchain setup, building the eBPF
//! object, the test suite, benchmarks, and recording a trace.
//!
//! Each subcommand is one [`Command`] variant and one function in its own
//! module.

mod bench;
mod ebpf;
mod package;
mod public_api;
mod record;
mod run;
mod setup;
mod structure;
mod test;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Project chores.
#[derive(Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "Project chores: setup, building the eBPF object, tests, recording"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The chores.
#[derive(Subcommand)]
enum Command {
    /// Install what building the kernel provider's eBPF object needs (the
    /// nightly's rust-src, bpf-linker, Debian packages); fast when done.
    Setup,
    /// Build the eBPF object (trace-ebpf) from source with the nightly
    /// toolchain, make it the committed object (trace-manager/ebpf/) and
    /// print its path.
    BuildEbpf,
    /// Check the code's shape: trace-cli uses only trace-manager's root
    /// exports, no file too long without a reason, no import circles.
    Structure,
    /// Compare the public items of trace-manager with their snapshot in
    /// xtask/public-api/ (nightly rustdoc JSON).
    PublicApi {
        /// Write the snapshot from the code instead.
        #[arg(long)]
        bless: bool,
    },
    /// Run the whole test suite: formatting, lints, unit tests and the
    /// end-to-end tests with real eBPF (as root). Extra arguments go to
    /// `cargo test`.
    Test {
        /// Passed to `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure what tracing costs: the userspace engine per event
    /// (`cargo xtask bench provider`, no root needed); recording
    /// scheduling (`kernel`) and system calls (`syscall`) against the
    /// floor, trace-cmd, bpftrace and `perf record`, the system call
    /// tracepoints selected by name (`tracepoint`) and sampled stacks
    /// (`profile`, ns of CPU per sample at 99 and 999 Hz) against `perf
    /// record` (root); the manager's event rate and storms (`throughput`);
    /// and reading a large trace into `report` and `export` (`analysis`);
    /// all by default.
    Bench {
        /// Which benchmarks: `provider`, `kernel`, `syscall`, `tracepoint`,
        /// `profile`, `throughput`, `analysis` or `all` (the default).
        #[arg(value_enum, conflicts_with = "what")]
        which: Option<bench::What>,
        /// Which benchmarks, as a flag: the same as the positional argument.
        #[arg(long, value_enum)]
        what: Option<bench::What>,
        /// Interleaved rounds (untraced, trace-cli, perf) to take medians of.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Pipe round trips per run of `perf bench sched pipe` (its time
        /// is printed to the millisecond: 200 000 trips make that 5 ns per
        /// trip).
        #[arg(long, default_value_t = 200_000)]
        loops: u64,
        /// getppid calls per run of `perf bench syscall basic`.
        #[arg(long, default_value_t = 2_000_000)]
        syscalls: u64,
        /// getppid calls of each of the two processes of the storm in
        /// `throughput`.
        #[arg(long, default_value_t = 3_000_000)]
        storm_calls: u64,
        /// Events per thread per run of the provider benchmark.
        #[arg(long, default_value_t = 3_000_000)]
        iterations: u64,
        /// Batches of spinning (2^18 iterations each) in the `chain` thread
        /// of `stack_spin` per run of `profile`; its `direct` thread spins
        /// half as many.
        #[arg(long, default_value_t = 4_000)]
        spin_batches: u64,
        /// Another `trace-cli` binary (say, built from an earlier commit)
        /// to run in the same interleaved rounds of `kernel`, `syscall` and
        /// `profile`, reported as `baseline`.
        #[arg(long, value_name = "TRACE_CLI")]
        baseline: Option<std::path::PathBuf>,
        /// Size of the recording `analysis` reads, in MB.
        #[arg(long, default_value_t = 600)]
        size_mb: u64,
        /// A trace for `analysis` to read instead of making one.
        #[arg(long, value_name = "FILE")]
        trace: Option<std::path::PathBuf>,
    },
    /// Build the Debian packages (the binaries stripped, and their debug
    /// information in a -dbgsym package) into target/debian/.
    Package {
        /// Then install them on a clean Debian 12 root (debootstrap) and
        /// record there, as root and through the installed daemon.
        #[arg(long)]
        check: bool,
        /// Package the test suite's (unoptimized) build instead of a
        /// release build: for checking the packaging quickly.
        #[arg(long)]
        dev: bool,
    },
    /// Build trace-cli and record a trace: `cargo xtask record -- -d 5 -o trace.fxt`.
    /// Arguments go to `trace-cli record` (through sudo when not root).
    Record {
        /// Passed to `trace-cli record`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Setup => setup::setup(),
        Command::Test { args } => {
            setup::setup()?;
            test::test(&args)
        }
        Command::Bench {
            which,
            what,
            rounds,
            loops,
            syscalls,
            storm_calls,
            iterations,
            spin_batches,
            baseline,
            size_mb,
            trace,
        } => {
            use bench::{KernelWorkload, What};
            let baseline = baseline.as_deref();
            let what = which.or(what).unwrap_or(What::All);
            if matches!(what, What::Provider | What::All) {
                // In-process: needs neither the eBPF toolchain nor root.
                bench::provider_bench(iterations)?;
            }
            if matches!(what, What::Kernel | What::All) {
                setup::setup()?;
                bench::bench(rounds, KernelWorkload::sched_pipe(loops), baseline)?;
            }
            if matches!(what, What::Syscall | What::All) {
                setup::setup()?;
                bench::bench(rounds, KernelWorkload::getppid(syscalls), baseline)?;
            }
            if matches!(what, What::Tracepoint | What::All) {
                setup::setup()?;
                // A baseline from before `-e` could not record this one.
                bench::bench(rounds, KernelWorkload::getppid_tracepoints(syscalls), None)?;
            }
            if matches!(what, What::Profile | What::All) {
                setup::setup()?;
                bench::profile_bench(rounds, spin_batches, baseline)?;
            }
            if matches!(what, What::Throughput | What::All) {
                setup::setup()?;
                bench::throughput_bench(storm_calls)?;
            }
            if matches!(what, What::Selection | What::All) {
                setup::setup()?;
                bench::selection_bench(rounds, syscalls)?;
            }
            if matches!(what, What::Flight | What::All) {
                setup::setup()?;
                bench::flight_bench(rounds, syscalls)?;
            }
            if matches!(what, What::Analysis | What::All) {
                setup::setup()?;
                bench::analysis_bench(rounds, size_mb, trace.as_deref())?;
            }
            Ok(())
        }
        Command::Record { args } => {
            setup::setup_build()?;
            record::record(&args)
        }
        Command::Package { check, dev } => {
            setup::setup_build()?;
            let profile = if dev {
                package::Profile::Dev
            } else {
                package::Profile::Release
            };
            let debs = package::package(profile)?;
            if check {
                package::install::check(&debs)?;
            }
            Ok(())
        }
        Command::Structure => structure::structure(),
        Command::PublicApi { bless } => public_api::public_api(bless),
        Command::BuildEbpf => {
            setup::setup_ebpf()?;
            let object = ebpf::update_committed()?;
            println!("{}", object.display());
            Ok(())
        }
    }
}
