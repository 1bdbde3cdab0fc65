//! `--pre`: the recording kept as a flight recorder keeps it. The manager
//! writes the trace into a pipe; a thread here keeps its newest records in
//! a [`Window`] (dropping what is older than `--pre` and `--post` and a
//! margin), and at the end the file gets what the window holds from
//! `--pre` before the trigger fired (before the end, if none did), as a
//! whole trace.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use trace_manager::boottime_ns;
use trace_manager::{Window, Written};
use trace_split::RecordReader;

/// Most memory the window takes.
const MAX_WINDOW_BYTES: usize = 1 << 30;
/// How often the window drops what is too old (CLOCK_BOOTTIME ns).
const EXPIRE_NS: u64 = 250_000_000;

/// The window filling on its thread.
pub(super) struct Windowed {
    output: PathBuf,
    pre: Duration,
    /// When the trigger fired (0: it has not).
    fired_ns: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Result<Window>>,
}

/// Starts the thread keeping the newest `pre` + `post` (and a margin) of
/// what comes into a pipe, whose write end is the manager's output; the
/// trace goes to `output` at the end.
pub(super) fn start(output: PathBuf, pre: Duration, post: Duration) -> Result<(OwnedFd, Windowed)> {
    // Created now, so that a path that cannot be written fails at once.
    File::create(&output).with_context(|| format!("cannot create {}", output.display()))?;
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("creating the trace's pipe")?;
    let span = (pre + post + Duration::from_secs(2)).as_nanos() as u64;
    let thread = std::thread::Builder::new()
        .name("window".into())
        .spawn(move || {
            let mut window = Window::new(span, MAX_WINDOW_BYTES);
            let mut records = RecordReader::new(File::from(read));
            let mut expired = boottime_ns();
            while let Some(record) = records.next_record()? {
                std::io::Write::write_all(&mut window, record)?;
                let now = boottime_ns();
                if now - expired >= EXPIRE_NS {
                    window.expire(now);
                    expired = now;
                }
            }
            Ok(window)
        })
        .context("starting the window thread")?;
    Ok((
        write,
        Windowed {
            output,
            pre,
            fired_ns: Arc::new(AtomicU64::new(0)),
            thread,
        },
    ))
}

impl Windowed {
    /// The trigger fired now.
    pub(super) fn fired(&self) {
        self.fired_ns.store(boottime_ns(), Ordering::Relaxed);
    }

    /// Waits for the manager to close the pipe, then writes the window
    /// from `pre` before the trigger (or the end) to the output.
    pub(super) async fn finish(self) -> Result<Written> {
        let thread = self.thread;
        let window = tokio::task::spawn_blocking(move || thread.join())
            .await
            .context("waiting for the window")?
            .map_err(|_| anyhow::anyhow!("the window thread panicked"))?;
        let mut window = window.context("reading the trace from the manager")?;
        let now = boottime_ns();
        let fired = match self.fired_ns.load(Ordering::Relaxed) {
            0 => now,
            ns => ns,
        };
        let since = fired.saturating_sub(self.pre.as_nanos() as u64);
        let contents = window.contents(now).since(since);
        let output = self.output;
        tokio::task::spawn_blocking(move || {
            let file = File::create(&output)
                .with_context(|| format!("cannot create {}", output.display()))?;
            // On a full disk the file ends on its last whole record.
            let mut out = trace_split::WholeFile::new(file, 1 << 20);
            contents
                .write_to(&mut out, &[])
                .with_context(|| format!("writing {}", output.display()))
        })
        .await
        .context("writing the window")?
    }
}
