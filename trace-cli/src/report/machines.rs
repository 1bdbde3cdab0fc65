//! The machines of a trace recorded on several (`record --host`), as the
//! report selects, groups and names them.

use std::path::Path;

use anyhow::{Context, Result, bail};
use trace_analysis::report::{HostSelection, units};

/// The machines of the trace at `path`, if it was recorded on several
/// (`record --host`); none for one (or standard input, which is read once).
pub(super) fn machines(path: &Path) -> Result<Vec<trace_hosts::Machine>> {
    if path.as_os_str() == "-" {
        return Ok(Vec::new());
    }
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(trace_hosts::read_machines(std::io::BufReader::new(f)))
}

/// The machine named `name` among `machines`, those of the trace at
/// `path`; an error that names them when there is none of that name.
pub(super) fn host_selection(
    name: &str,
    machines: &[trace_hosts::Machine],
    path: &Path,
) -> Result<HostSelection> {
    if path.as_os_str() == "-" {
        bail!("--host reads the trace's machines first: give a file, not standard input");
    }
    let Some(m) = machines.iter().find(|m| m.name == name) else {
        if machines.is_empty() {
            bail!(
                "{} was recorded on one machine (without --host): there is no host {name:?}",
                path.display()
            );
        }
        let names: Vec<&str> = machines.iter().map(|m| m.name.as_str()).collect();
        bail!(
            "{} has no host {name:?}; its machines: {}",
            path.display(),
            names.join(", ")
        );
    };
    Ok(HostSelection {
        name: m.name.clone(),
        index: m.index,
        machines: machines.len() as u32,
    })
}

/// A line per machine of a trace recorded on several (`record --host`):
/// which CPUs and ids are its, and how well its clock is known.
pub(super) fn machines_of(file: &Path) -> Vec<String> {
    machines(file)
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let cpus = format!("CPUs {}-{}", m.cpu_base, m.cpu_base + m.cpus.max(1) - 1);
            if m.index == 0 {
                format!(
                    "machine {} (the recording one): {cpus}, pids as they are",
                    m.name
                )
            } else {
                let map = trace_hosts::ClockMap::new(m.clock.clone());
                format!(
                    "machine {} ({}): {cpus}, pids {}+N, clock mapped within {}",
                    m.name,
                    m.destination,
                    m.ids().pid_base(),
                    if map.is_empty() {
                        "(unknown)".to_owned()
                    } else {
                        units::duration(map.bound_ns())
                    }
                )
            }
        })
        .collect()
}
