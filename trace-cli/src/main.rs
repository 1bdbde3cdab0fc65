//! `trace-cli`: record what the kernel and instrumented programs did into one
//! Fuchsia Trace Format file, and inspect or convert such files.

mod convert;
mod dump;
mod providers;
mod record;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Record and inspect Fuchsia Trace Format (FXT) traces on Linux.
#[derive(Parser)]
#[command(name = "trace-cli", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Record a trace (needs root, or CAP_BPF and CAP_PERFMON).
    Record(record::RecordArgs),
    /// List the userspace providers that register with a manager.
    Providers(providers::ProvidersArgs),
    /// Print every record of a trace file, one per line.
    Dump(dump::DumpArgs),
    /// Convert a trace file to Chrome trace-event JSON.
    Convert(convert::ConvertArgs),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(args) => record::run(args),
        Command::Dump(args) => dump::run(args),
        Command::Providers(args) => providers::run(args),
        Command::Convert(args) => convert::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("trace-cli: {e:#}");
            ExitCode::FAILURE
        }
    }
}
