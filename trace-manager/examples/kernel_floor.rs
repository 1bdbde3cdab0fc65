//! Runs a command with empty eBPF programs on some of the kernel
//! provider's hooks: the floor `cargo xtask bench` measures tracers above
//! (and programs doing one step there: `HOOK:clock`, `HOOK:ids`,
//! `HOOK:store`; see `trace_manager::kernel::floor::FLOOR_PROGRAMS`).
//!
//! `kernel_floor PROGRAM[,PROGRAM...] -- COMMAND [ARGS...]` (as root),
//! e.g. `kernel_floor sys_enter,sys_exit -- perf bench syscall basic`.

use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

fn main() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (hooks, command) = match args.iter().position(|a| a == "--") {
        Some(at) if at == 1 && at + 1 < args.len() => (&args[0], &args[at + 1..]),
        _ => bail!("usage: kernel_floor PROGRAM[,PROGRAM...] -- COMMAND [ARGS...]"),
    };
    let hooks: Vec<&str> = hooks.split(',').collect();
    let _floor = trace_manager::kernel::floor::attach(&hooks)
        .with_context(|| format!("attaching empty programs to {hooks:?}"))?;
    let status = Command::new(&command[0])
        .args(&command[1..])
        .status()
        .with_context(|| format!("running {command:?}"))?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}
