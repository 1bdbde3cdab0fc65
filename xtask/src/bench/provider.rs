//! `cargo xtask bench provider`: the userspace engine per event.

use std::process::Command;

use anyhow::{Context, Result};

use super::{Built, build_release};
use crate::run::run;

/// Runs the userspace provider engine's benchmark (`provider_bench`): ns per
/// event for each event kind with one and two writing threads, beside the
/// floor of reading the clock and copying the same bytes.
pub fn provider_bench(iterations: u64) -> Result<()> {
    let bin = build_release(Built::Bin("tests", "provider_bench"))?;
    run(Command::new(&bin)
        .arg("--iterations")
        .arg(iterations.to_string()))
    .with_context(|| format!("running the provider benchmark {}", bin.display()))
}
