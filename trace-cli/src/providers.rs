//! `trace-cli providers`: list the providers that register with a manager.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use trace_common::provider::BufferingMode;
use trace_manager::output::FxtStream;
use trace_manager::userspace::{Registry, UserspaceConfig, socket_path};

/// Arguments of `trace-cli providers`.
#[derive(Args)]
pub struct ProvidersArgs {
    /// How long to let waiting providers register, in seconds.
    #[arg(long, default_value_t = 0.5, value_name = "SECONDS")]
    wait: f64,
}

pub fn run(args: ProvidersArgs) -> Result<ExitCode> {
    if !(args.wait.is_finite() && args.wait >= 0.0) {
        bail!("--wait must be a non-negative number of seconds");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let mut registry = Registry::bind(UserspaceConfig {
            socket_path: socket_path(),
            mode: BufferingMode::Oneshot,
            buffer_bytes: 1 << 20,
            overrides: Vec::new(),
            categories: Vec::new(),
        })?;
        let mut sink = FxtStream::new(std::io::sink())?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(args.wait);
        while let Ok(r) = tokio::time::timeout_at(deadline, registry.serve_once(&mut sink)).await {
            r?;
        }
        let providers = registry.providers();
        if providers.is_empty() {
            eprintln!("trace-cli: no provider registered within {} s", args.wait);
        }
        for p in providers {
            println!("{:>4} {:<24} {:>8} {}", p.id, p.name, p.pid, p.state);
        }
        Ok(ExitCode::SUCCESS)
    })
}
