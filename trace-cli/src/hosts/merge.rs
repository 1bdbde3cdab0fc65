//! The merged trace: the machines declared, then the recording machine's
//! trace, then each remote machine's, rewritten onto one timeline.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use trace_hosts::{ClockMap, Machine, MachineIds, RemapSummary, Remapper, write_declarations};

/// One machine's part.
pub struct Part<'a> {
    /// The machine as declared.
    pub machine: Machine,
    /// Its trace.
    pub spool: &'a Path,
}

/// Writes the merged trace of `parts` (the recording machine's first) to
/// `out`, declaring each machine at `at_ns`; what each part gave.
pub fn write(parts: &[Part<'_>], at_ns: u64, out: &mut dyn Write) -> Result<Vec<RemapSummary>> {
    let machines: Vec<Machine> = parts.iter().map(|p| p.machine.clone()).collect();
    let mut head = Vec::new();
    write_declarations(&machines, at_ns, &mut head).context("declaring the machines")?;
    out.write_all(&head)?;
    let mut summaries = Vec::new();
    for p in parts {
        let m = &p.machine;
        let file = std::fs::File::open(p.spool)
            .with_context(|| format!("cannot read {}", p.spool.display()))?;
        let (ids, clock) = if m.index == 0 {
            (MachineIds::local(), ClockMap::default())
        } else {
            (m.ids(), ClockMap::new(m.clock.clone()))
        };
        let summary = Remapper::new(ids, clock, Some(&m.name))
            .copy(std::io::BufReader::with_capacity(1 << 20, file), &mut *out)
            .with_context(|| format!("writing {}'s trace", m.name))?;
        summaries.push(summary);
    }
    out.flush()?;
    Ok(summaries)
}
