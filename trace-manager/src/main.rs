//! `trace-manager`: the trace manager as a daemon. Userspace providers
//! register with it and stay registered across sessions; `trace-cli`
//! drives sessions through it.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

/// The trace manager daemon: providers register with it, `trace-cli`
/// records through it. Runs in the foreground; logs to standard error
/// (with syslog priorities under systemd).
#[derive(Parser)]
#[command(name = "trace-manager", version, about)]
struct Args {
    /// The socket providers register on and clients connect to. Default:
    /// `$TRACE_MANAGER_SOCKET`, else /run/trace-manager/provider.sock.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// What to log: error, warn, info, debug or trace (`RUST_LOG` works
    /// too).
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    log_level: log::LevelFilter,
}

fn init_logging(level: log::LevelFilter) {
    let mut builder = env_logger::Builder::new();
    builder.filter_level(level).parse_default_env();
    // Under systemd, stderr goes to the journal: a `<N>` prefix gives each
    // line its priority, and the journal adds the time.
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.format(|f, record| {
            let priority = match record.level() {
                log::Level::Error => 3,
                log::Level::Warn => 4,
                log::Level::Info => 6,
                log::Level::Debug | log::Level::Trace => 7,
            };
            writeln!(f, "<{priority}>{}", record.args())
        });
    }
    builder.init();
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_logging(args.log_level);
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let socket = args
        .socket
        .unwrap_or_else(trace_manager::userspace::socket_path);
    if !nix::unistd::geteuid().is_root() {
        log::warn!(
            "not running as root: recording kernel events needs root (or CAP_BPF and \
             CAP_PERFMON)"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let manager = trace_manager::service::Manager::bind(Some(socket.clone()), false)
            .with_context(|| format!("listening on {}", socket.display()))?;
        log::info!("trace manager listening on {}", socket.display());
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing a SIGTERM handler")?;
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("installing a SIGINT handler")?;
        tokio::select! {
            () = manager.run() => {}
            _ = sigterm.recv() => log::info!("SIGTERM: exiting"),
            _ = sigint.recv() => log::info!("SIGINT: exiting"),
        }
        Ok(())
    })
}
