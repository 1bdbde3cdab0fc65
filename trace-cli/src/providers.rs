//! `trace-cli providers`: list the providers registered with the manager,
//! each with its pid on the host and inside its own PID namespace, and its
//! container.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use trace_common::controller::{Reply, Request};

/// Arguments of `trace-cli providers`.
#[derive(Args)]
pub struct ProvidersArgs {
    /// Without a running daemon: how long to let waiting providers
    /// register, in seconds.
    #[arg(long, default_value_t = 0.5, value_name = "SECONDS")]
    wait: f64,
}

pub fn run(args: ProvidersArgs) -> Result<ExitCode> {
    if !(args.wait.is_finite() && (0.0..=3600.0).contains(&args.wait)) {
        bail!("--wait must be a number of seconds from 0 to 3600");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(async {
        let mut conn = crate::record::connect(false)?;
        let embedded = conn.embedded.is_some();
        if embedded {
            // Providers waiting for a manager connect when its socket
            // appears.
            tokio::time::sleep(Duration::try_from_secs_f64(args.wait)?).await;
        }
        let providers = match conn.ctl.call(Request::GetProviders, None).await? {
            Reply::Providers(p) => p,
            Reply::Failed { message, .. } => bail!("{message}"),
            other => bail!("unexpected answer from the trace manager: {other:?}"),
        };
        drop(conn.ctl);
        if let Some(task) = conn.embedded {
            let _ = task.await;
        }
        if providers.is_empty() {
            if embedded {
                eprintln!("trace-cli: no provider registered within {} s", args.wait);
            } else {
                eprintln!("trace-cli: no provider is registered with the trace manager");
            }
        }
        if !providers.is_empty() {
            println!(
                "{:>4} {:<24} {:>8} {:>8} {:<24} state",
                "id", "name", "pid", "ns pid", "container"
            );
        }
        for p in providers {
            // Where it runs, as this machine's /proc says (the manager
            // shares it): its own namespace's pid, its container.
            let labels = u32::try_from(p.pid)
                .ok()
                .and_then(trace_manager::ProcessLabels::of);
            let ns_pid = labels
                .as_ref()
                .and_then(|l| l.ns_pid)
                .map_or_else(|| "-".to_owned(), |n| n.to_string());
            let container = labels
                .as_ref()
                .and_then(|l| l.container.as_ref())
                .map_or_else(|| "-".to_owned(), |c| c.label());
            println!(
                "{:>4} {:<24} {:>8} {:>8} {:<24} {}",
                p.id, p.name, p.pid, ns_pid, container, p.state
            );
        }
        Ok(ExitCode::SUCCESS)
    }))
}
