//! `trace-cli snapshot` and `trace-cli sessions`: the daemon's flight
//! recorder written out, and what the daemon runs.

use std::os::fd::AsFd as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use trace_common::controller::{Reply, Request, SessionKind};
use trace_manager::{ClientError, Controller};

/// Arguments of `trace-cli snapshot`.
#[derive(Args)]
pub struct SnapshotArgs {
    /// Where to write the snapshot.
    #[arg(short, long, default_value = "snapshot.fxt")]
    output: PathBuf,
}

/// Arguments of `trace-cli sessions`.
#[derive(Args)]
pub struct SessionsArgs {}

/// A runtime and a connection to the daemon (no manager is started here:
/// these commands ask what one that runs holds).
fn daemon() -> Result<(tokio::runtime::Runtime, Controller)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let path = trace_manager::socket_path();
    let ctl = {
        let _guard = runtime.enter();
        match Controller::connect(&path) {
            Ok(ctl) => ctl,
            // The path and the system's reason, each said once.
            Err(ClientError::NoManager { source, .. }) => {
                return Err(anyhow::Error::new(source).context(format!(
                    "no trace manager daemon runs on {} (start one with trace-manager \
                     --flight-recorder)",
                    path.display()
                )));
            }
            Err(e) => return Err(e.into()),
        }
    };
    Ok((runtime, ctl))
}

/// Runs `trace-cli snapshot`.
pub fn snapshot(args: SnapshotArgs) -> Result<ExitCode> {
    let (runtime, mut ctl) = daemon()?;
    let file = std::fs::File::create(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let began = Instant::now();
    let reply = runtime.block_on(ctl.call(Request::Snapshot, Some(file.as_fd())))?;
    match reply {
        Reply::Snapshot(r) => {
            eprintln!(
                "trace-cli: snapshot of {} records, {} bytes in {:.0} ms -> {}",
                r.records,
                r.bytes,
                began.elapsed().as_secs_f64() * 1000.0,
                args.output.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Reply::Failed { message, .. } => {
            let _ = std::fs::remove_file(&args.output);
            bail!("{message}")
        }
        other => bail!("unexpected answer from the trace manager: {other:?}"),
    }
}

/// Runs `trace-cli sessions`.
pub fn sessions(_args: SessionsArgs) -> Result<ExitCode> {
    let (runtime, mut ctl) = daemon()?;
    let list = match runtime.block_on(ctl.call(Request::GetSessions, None))? {
        Reply::Sessions(list) => list,
        Reply::Failed { message, .. } => bail!("{message}"),
        other => bail!("unexpected answer from the trace manager: {other:?}"),
    };
    if list.is_empty() {
        eprintln!("trace-cli: no session runs");
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header([
            "kind",
            "owner",
            "state",
            "for",
            "window",
            "bytes",
            "dropped",
            "categories",
        ]);
    for s in list {
        let secs = |ns: u64| format!("{:.1} s", Duration::from_nanos(ns).as_secs_f64());
        table.add_row([
            match s.kind {
                SessionKind::FlightRecorder => "flight recorder".to_owned(),
                SessionKind::Recording => "recording".to_owned(),
            },
            if s.owner_pid == 0 {
                "trace-manager".to_owned()
            } else {
                format!("pid {}", s.owner_pid)
            },
            s.state,
            secs(s.elapsed_ns),
            if s.window_ns == 0 {
                "-".to_owned()
            } else if s.window_ns > 1 << 60 {
                "by size".to_owned()
            } else {
                secs(s.window_ns)
            },
            s.bytes.to_string(),
            s.dropped.to_string(),
            if s.categories.is_empty() {
                "(default)".to_owned()
            } else {
                s.categories.join(",")
            },
        ]);
    }
    println!("{table}");
    Ok(ExitCode::SUCCESS)
}
