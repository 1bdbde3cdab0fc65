//! A `--usdt` text resolved into probe sites: in a file, or in the files a
//! process maps; provider and name globs; the type list applied.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use trace_common::category::glob_matches;

use super::types::{apply_types, split_types};
use super::{Arch, UsdtError, UsdtSite, parse_args, read_notes};
use crate::procfs;

/// Resolves `spec` into its probe sites; `pid` is the process given with
/// `-p`, if any. Messages about arguments that cannot be read go to the log.
pub fn resolve(spec: &str, pid: Option<u32>) -> Result<Vec<UsdtSite>, UsdtError> {
    let syntax = |why: &str| UsdtError::Syntax {
        spec: spec.to_owned(),
        why: why.to_owned(),
    };
    let arch = Arch::host().ok_or_else(|| syntax("USDT arguments cannot be read on this CPU"))?;
    let (probe, types) = split_types(spec).map_err(|why| syntax(&why))?;
    let parts: Vec<&str> = probe.rsplitn(3, ':').collect();
    let (binary, provider, name) = match parts[..] {
        [name, provider, binary] => (Some(binary), provider, name),
        [name, provider] => (None, provider, name),
        _ => {
            return Err(syntax(
                "write BINARY:PROVIDER:NAME, or PROVIDER:NAME with -p",
            ));
        }
    };
    if provider.is_empty() || name.is_empty() {
        return Err(syntax("the provider and the probe name must not be empty"));
    }
    let candidates: Vec<PathBuf> = match binary {
        Some(b) => {
            vec![
                crate::kernel::uprobes::find_binary(b, pid).map_err(|source| {
                    UsdtError::Binary {
                        spec: spec.to_owned(),
                        path: PathBuf::from(b),
                        source,
                    }
                })?,
            ]
        }
        None => {
            let pid = pid.ok_or_else(|| {
                syntax("PROVIDER:NAME needs -p PID (or write BINARY:PROVIDER:NAME)")
            })?;
            mapped_files(pid).map_err(|source| UsdtError::Binary {
                spec: spec.to_owned(),
                path: procfs::maps_file(pid),
                source,
            })?
        }
    };
    let mut sites = Vec::new();
    let mut known = BTreeSet::new();
    for path in &candidates {
        let (file, data) = match crate::kernel::uprobes::read_program(path) {
            Ok(d) => d,
            Err(source) if binary.is_some() => {
                return Err(UsdtError::Binary {
                    spec: spec.to_owned(),
                    path: path.clone(),
                    source,
                });
            }
            Err(_) => continue,
        };
        let notes = match read_notes(&data) {
            Ok(n) => n,
            Err(why) if binary.is_some() => {
                return Err(UsdtError::NotElf {
                    spec: spec.to_owned(),
                    path: path.clone(),
                    why,
                });
            }
            Err(_) => continue,
        };
        for note in notes {
            known.insert(format!("{}:{}", note.provider, note.name));
            if !glob_matches(provider, &note.provider) || !glob_matches(name, &note.name) {
                continue;
            }
            let (mut spec_value, problems) = parse_args(&note.args, arch);
            apply_types(&mut spec_value, &types).map_err(|why| {
                syntax(&format!(
                    "{why} for {}:{} (its arguments: `{}`)",
                    note.provider, note.name, note.args
                ))
            })?;
            for p in problems {
                log::warn!(
                    "--usdt {spec}: {}:{} at {:#x} in {}: {p}; recorded as unreadable",
                    note.provider,
                    note.name,
                    note.offset,
                    path.display()
                );
            }
            sites.push(UsdtSite {
                spec: spec.to_owned(),
                binary: path.clone(),
                file: file.clone(),
                provider: note.provider,
                name: note.name,
                offset: note.offset,
                semaphore: note.semaphore,
                arg_text: note.args,
                spec_value,
                pids: Vec::new(),
            });
        }
    }
    if sites.is_empty() {
        let where_ = match binary {
            Some(_) => candidates[0].display().to_string(),
            None => format!(
                "the program of process {} or its libraries",
                pid.unwrap_or(0)
            ),
        };
        let known = if known.is_empty() {
            " (it has no USDT probes: no .note.stapsdt notes)".to_owned()
        } else {
            let list: Vec<String> = known.into_iter().collect();
            let shown = list.len().min(20);
            format!(
                " (it has {}{})",
                list[..shown].join(", "),
                if list.len() > shown { ", ..." } else { "" }
            )
        };
        return Err(UsdtError::NoProbe {
            spec: spec.to_owned(),
            provider: provider.to_owned(),
            name: name.to_owned(),
            where_,
            known,
        });
    }
    Ok(sites)
}

/// Resolves `spec` in each process of `pids` (in every process when
/// empty): a site found in several (the same file and offset) is placed in
/// each of them, and a process whose programs lack it is passed over, as
/// long as one has it.
pub fn resolve_in(spec: &str, pids: &[u32]) -> Result<Vec<UsdtSite>, UsdtError> {
    if pids.is_empty() {
        return resolve(spec, None);
    }
    crate::kernel::uprobes::per_process(
        pids,
        |pid| resolve(spec, Some(pid)),
        |s| (s.file.id(), s.offset),
        |s| &mut s.pids,
    )
}

/// The program of `pid` and every other file it maps, through its root.
fn mapped_files(pid: u32) -> std::io::Result<Vec<PathBuf>> {
    let exe = procfs::exe(pid)?;
    let maps = procfs::maps(pid)?;
    let mut files = vec![exe.clone()];
    for path in maps
        .lines()
        .filter_map(crate::kernel::uprobes::maps_path)
        .filter(|p| p.starts_with('/'))
        .map(Path::new)
    {
        if path != exe && !files.iter().any(|f| f == path) {
            files.push(path.to_path_buf());
        }
    }
    Ok(files
        .into_iter()
        .map(|p| procfs::via_root(pid, &p))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_is_wrong() {
        let e = resolve("app:tick", None).unwrap_err();
        assert!(e.to_string().contains("needs -p"), "{e}");
        let e = resolve("tick", None).unwrap_err();
        assert!(e.to_string().contains("BINARY:PROVIDER:NAME"), "{e}");
        let e = resolve("/no/such/binary:app:tick", None).unwrap_err();
        assert!(matches!(e, UsdtError::Binary { .. }), "{e}");
        let me = std::env::current_exe().unwrap();
        let e = resolve(&format!("{}:app:tick", me.display()), None).unwrap_err();
        assert!(e.to_string().contains("no .note.stapsdt"), "{e}");
    }
}
