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
    /// Memory every session's trace buffers may take together (kernel
    /// ring buffers, the backlog of kernel events not yet translated, and
    /// providers' buffers): `512M`, `4G`... Default: a quarter of the
    /// machine's memory.
    #[arg(long, value_name = "SIZE", value_parser = trace_manager::limits::parse_size)]
    memory_budget: Option<u64>,
    /// Memory one session's trace buffers may take. A session asking for a
    /// larger kernel buffer is refused; providers beyond it get smaller
    /// buffers, or none. Default: the memory budget.
    #[arg(long, value_name = "SIZE", value_parser = trace_manager::limits::parse_size)]
    session_memory_budget: Option<u64>,
    /// Connections (providers and clients) open at once; more are closed
    /// at once.
    #[arg(long, value_name = "N", default_value_t = trace_manager::limits::Limits::for_this_machine().max_connections)]
    max_connections: usize,
    /// Connections one user other than root may have open at once.
    #[arg(long, value_name = "N", default_value_t = trace_manager::limits::Limits::for_this_machine().max_connections_per_uid)]
    max_connections_per_user: usize,
    /// Run a flight recorder: record from now on, keeping the newest
    /// `--window` of events in memory, for `trace-cli snapshot` to write out
    /// at any moment. Recordings still run beside it.
    #[arg(long)]
    flight_recorder: bool,
    /// What the flight recorder records: kernel categories (globs work) and
    /// userspace categories, comma-separated. Default: the kernel
    /// categories `trace-cli record` records by default.
    #[arg(
        short,
        long = "categories",
        value_name = "CAT,CAT...",
        value_delimiter = ',',
        requires = "flight_recorder"
    )]
    categories: Vec<String>,
    /// How much the flight recorder keeps: a time (`30s`, `5min`) or a
    /// size (`256M`).
    #[arg(long, value_name = "TIME|SIZE", default_value = "30s", value_parser = trace_split::parse_limit, requires = "flight_recorder")]
    window: trace_split::Limit,
    /// With a time `--window`, the most memory the window may take; the
    /// oldest events go first. Default: 256M, or less within the memory
    /// budget.
    #[arg(long, value_name = "SIZE", value_parser = trace_manager::limits::parse_size, requires = "flight_recorder")]
    window_max: Option<u64>,
    /// The flight recorder's kernel ring buffers, all CPUs together, in
    /// megabytes.
    #[arg(
        long,
        value_name = "MEGABYTES",
        default_value_t = 16,
        requires = "flight_recorder"
    )]
    flight_buffer_size: u64,
    /// Take a snapshot when this kernel condition is seen:
    /// `syscall:NAME>TIME` (a slow system call, e.g. `syscall:fsync>50ms`),
    /// `signal:SIG` (a process killed by SIGSEGV, SIGABRT...), `oom` (an
    /// out-of-memory kill); may repeat. The condition is marked in the
    /// snapshot where it fired.
    #[arg(
        long = "trigger",
        value_name = "CONDITION",
        requires = "flight_recorder"
    )]
    triggers: Vec<String>,
    /// A trigger's snapshot holds at least this many seconds before it fired.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        requires = "triggers"
    )]
    pre: f64,
    /// A trigger's snapshot is taken this many seconds after it fired.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        requires = "triggers"
    )]
    post: f64,
    /// Where triggers' snapshots go.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/lib/trace-manager/snapshots",
        requires = "triggers"
    )]
    trigger_dir: PathBuf,
    /// The least time between two triggers' snapshots, in seconds: a
    /// trigger that fires sooner after the last snapshot is counted (and
    /// logged), not snapshotted.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30.0,
        requires = "triggers"
    )]
    trigger_interval: f64,
    /// What the snapshots in the trigger folder may take together
    /// (`trigger-*.fxt`, earlier runs' too; `512M`, `2G`): a snapshot that
    /// would take more is not taken (logged, counted).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "1G",
        value_parser = trace_manager::limits::parse_size,
        requires = "triggers"
    )]
    trigger_space: u64,
    /// The flight recorder records only the tasks in this cgroup (cgroup
    /// v2) or below it, and the providers there: a path from the
    /// hierarchy's root or absolute under its mount point. May repeat.
    #[arg(long = "cgroup", value_name = "PATH", requires = "flight_recorder")]
    cgroups: Vec<String>,
    /// The flight recorder records only this systemd unit's processes (its
    /// cgroup; `nginx` means `nginx.service`). May repeat.
    #[arg(long = "unit", value_name = "NAME", requires = "flight_recorder")]
    units: Vec<String>,
    /// The flight recorder records only this container's processes (its
    /// cgroup): its name, its id or a prefix of its id. May repeat.
    #[arg(
        long = "container",
        value_name = "ID|NAME",
        requires = "flight_recorder"
    )]
    containers: Vec<String>,
}

impl Args {
    /// The cgroups `--cgroup`, `--unit` and `--container` name, as paths
    /// from the cgroup v2 hierarchy's root (empty: none named).
    fn cgroups(&self) -> anyhow::Result<Vec<String>> {
        if self.cgroups.is_empty() && self.units.is_empty() && self.containers.is_empty() {
            return Ok(Vec::new());
        }
        let hierarchy = trace_manager::CgroupHierarchy::find()?;
        let mut paths = Vec::new();
        for c in &self.cgroups {
            paths.push(hierarchy.resolve(c)?);
        }
        for unit in &self.units {
            paths.push(trace_manager::find_unit(&hierarchy, unit)?);
        }
        let all = trace_manager::list_containers(&hierarchy);
        for wanted in &self.containers {
            paths.push(trace_manager::find_container(&all, wanted)?.cgroup.clone());
        }
        Ok(paths)
    }

    /// The limits these options set.
    fn limits(&self) -> trace_manager::limits::Limits {
        let defaults = trace_manager::limits::Limits::for_this_machine();
        let memory_budget = self.memory_budget.unwrap_or(defaults.memory_budget);
        trace_manager::limits::Limits {
            memory_budget,
            session_memory_budget: self
                .session_memory_budget
                .unwrap_or(memory_budget)
                .min(memory_budget),
            max_connections: self.max_connections,
            max_connections_per_uid: self.max_connections_per_user,
        }
    }
}

/// Raises the limit of open descriptors, so that the connection limits are
/// what bounds the daemon: every connection is a descriptor, a traced
/// provider about five. With CAP_SYS_RESOURCE to 2^20 (the kernel's usual
/// `nr_open`), else the soft limit to the hard one.
fn raise_descriptor_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with structs we own.
    unsafe {
        let wide = libc::rlimit {
            rlim_cur: 1 << 20,
            rlim_max: 1 << 20,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0
            && lim.rlim_max < wide.rlim_max
            && libc::setrlimit(libc::RLIMIT_NOFILE, &wide) == 0
        {
            return;
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
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
        .clone()
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
    let limits = args.limits();
    raise_descriptor_limit();
    runtime.block_on(async {
        let mut manager = trace_manager::service::Manager::bind(Some(socket.clone()), false)
            .with_context(|| format!("listening on {}", socket.display()))?;
        manager.set_limits(limits);
        if args.flight_recorder {
            let default_max = (256u64 << 20).min(limits.memory_budget / 4);
            let (window, window_bytes) = match args.window {
                trace_split::Limit::Time(d) => (d, args.window_max.unwrap_or(default_max)),
                trace_split::Limit::Bytes(b) => {
                    (std::time::Duration::from_secs(u64::MAX / 4_000_000_000), b)
                }
            };
            manager
                .start_flight_recorder(trace_manager::service::FlightConfig {
                    categories: args.categories.clone(),
                    window,
                    window_bytes,
                    kernel_buffer_bytes: args.flight_buffer_size.clamp(1, 4096) << 20,
                    provider_buffer_bytes: 4 << 20,
                    triggers: args.triggers.clone(),
                    pre: std::time::Duration::try_from_secs_f64(args.pre)
                        .context("--pre wants seconds")?,
                    post: std::time::Duration::try_from_secs_f64(args.post)
                        .context("--post wants seconds")?,
                    trigger_dir: args.trigger_dir.clone(),
                    trigger_interval: std::time::Duration::try_from_secs_f64(args.trigger_interval)
                        .context("--trigger-interval wants seconds")?,
                    trigger_space: args.trigger_space,
                    cgroups: args.cgroups()?,
                })
                .map_err(anyhow::Error::msg)
                .context("starting the flight recorder")?;
        }
        let limits = manager.limits();
        log::info!(
            "trace manager listening on {} (trace buffers: {} per session, {} in all; \
             {} connections, {} per user)",
            socket.display(),
            trace_manager::limits::mib(limits.session_memory_budget),
            trace_manager::limits::mib(limits.memory_budget),
            limits.max_connections,
            limits.max_connections_per_uid
        );
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
