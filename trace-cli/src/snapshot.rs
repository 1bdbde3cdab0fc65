//! `trace-cli snapshot` and `trace-cli sessions`: the daemon's flight
//! recorder written out (also every machine's of `--host` at once, merged
//! onto one timeline), and what the daemon runs.

use std::io::BufRead as _;
use std::os::fd::{AsFd as _, OwnedFd};
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
    /// Where to write the snapshot; `-` writes it to standard output.
    #[arg(short, long, default_value = "snapshot.fxt")]
    output: PathBuf,
    /// With `--host`/`--hosts`: every machine's flight recorder is written
    /// out at the same moment (the requests go out together, after every
    /// machine's daemon has been reached), into one trace on one timeline,
    /// as `record --host` merges them.
    #[command(flatten)]
    hosts: crate::hosts::HostArgs,
    /// Wait for a line `snapshot` on standard input before asking (how
    /// `snapshot --host` on another machine asks them all at once).
    #[arg(long, hide = true)]
    stdin_control: bool,
}

/// What `snapshot --stdin-control` says once its daemon is reached.
const READY: &str = "trace-cli: ready to snapshot";

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
    if args.hosts.any() {
        return snapshot_hosts(&args);
    }
    let (runtime, mut ctl) = daemon()?;
    let to_stdout = args.output.as_os_str() == "-";
    let out: OwnedFd = if to_stdout {
        use std::io::IsTerminal as _;
        if std::io::stdout().is_terminal() {
            bail!("-o - writes the binary trace to standard output: pipe or redirect it");
        }
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating standard output")?
    } else {
        std::fs::File::create(&args.output)
            .with_context(|| format!("cannot create {}", args.output.display()))?
            .into()
    };
    if args.stdin_control {
        eprintln!("{READY}");
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if line.trim() != "snapshot" {
            // Called off.
            return Ok(ExitCode::SUCCESS);
        }
    }
    let shown = if to_stdout {
        "standard output".to_owned()
    } else {
        args.output.display().to_string()
    };
    take(&runtime, &mut ctl, &out, &shown).inspect_err(|_| {
        if !to_stdout {
            let _ = std::fs::remove_file(&args.output);
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Asks the daemon for a snapshot into `out` and says what came.
fn take(
    runtime: &tokio::runtime::Runtime,
    ctl: &mut Controller,
    out: &OwnedFd,
    shown: &str,
) -> Result<()> {
    let began = Instant::now();
    match runtime.block_on(ctl.call(Request::Snapshot, Some(out.as_fd())))? {
        Reply::Snapshot(r) => {
            eprintln!(
                "trace-cli: snapshot of {} records, {} bytes in {:.0} ms -> {shown}",
                r.records,
                r.bytes,
                began.elapsed().as_secs_f64() * 1000.0,
            );
            Ok(())
        }
        Reply::Failed { message, .. } => bail!("{message}"),
        other => bail!("unexpected answer from the trace manager: {other:?}"),
    }
}

/// `snapshot --host`: every machine's daemon reached first, then every
/// snapshot asked for at once, then the snapshots merged.
fn snapshot_hosts(args: &SnapshotArgs) -> Result<ExitCode> {
    let (runtime, mut ctl) = daemon()?;
    let to_stdout = args.output.as_os_str() == "-";
    let (dir, stem) = crate::hosts::spool_place(&args.output, to_stdout);
    let remote = |_: Option<&[String]>| {
        ["snapshot", "-o", "-", "--stdin-control"]
            .map(str::to_owned)
            .to_vec()
    };
    let mut hosts = crate::hosts::Hosts::start(&args.hosts, &remote, READY, &dir, &stem)?;
    runtime.block_on(hosts.wait_ready())?;
    let spool = hosts.local_spool();
    let file = std::fs::File::create(&spool)
        .with_context(|| format!("cannot create {}", spool.display()))?;
    hosts.release("snapshot");
    let taken = take(&runtime, &mut ctl, &file.into(), "this machine's part");
    if let Err(e) = taken {
        let _ = std::fs::remove_file(&spool);
        return Err(e);
    }
    if to_stdout {
        hosts.finish(&mut std::io::stdout().lock(), "standard output")?;
    } else {
        let out = std::fs::File::create(&args.output)
            .with_context(|| format!("cannot create {}", args.output.display()))?;
        hosts.finish(
            &mut std::io::BufWriter::new(out),
            &args.output.display().to_string(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
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
