//! The other side of `record --host`: what `trace-cli record` does when it
//! runs on a remote machine for the recording machine (stopping when its
//! standard input ends; the tests' offset on its clock).

use std::fs::File;
use std::os::fd::OwnedFd;

use anyhow::{Context, Result};

/// Resolves when standard input ends (or fails).
pub async fn stdin_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        use std::io::Read as _;
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 64];
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        let _ = tx.send(());
    });
    let _ = rx.await;
}

/// Standard output behind a pipe whose trace is moved `offset_ns` later
/// (the tests' offset on a remote machine's clock): the pipe's writing end,
/// and the thread that copies.
pub fn shift_output(
    offset_ns: i64,
) -> Result<(
    OwnedFd,
    std::thread::JoinHandle<Result<(), trace_hosts::RemapError>>,
)> {
    use std::io::Write as _;
    let (read, write) = nix::unistd::pipe().context("making a pipe")?;
    let thread = std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        let mut magic = Vec::new();
        let _ = trace_common::fxt::write::encode(&trace_common::fxt::Record::Magic, &mut magic);
        out.write_all(&magic)?;
        trace_hosts::Remapper::new(
            trace_hosts::MachineIds::local(),
            trace_hosts::ClockMap::constant(-offset_ns),
            None,
        )
        .copy(File::from(read), out)?;
        Ok(())
    });
    Ok((write, thread))
}
