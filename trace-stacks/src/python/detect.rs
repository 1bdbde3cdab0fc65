//! Finding the interpreter a process runs: a mapped ELF file (the `python3.X` program, or a
//! `libpython3.X.so` it loads) that exports `_PyRuntime`, its version from the `Py_Version`
//! it exports (3.11 on) or, before that, from its file name.

use std::fs::File;

use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use crate::maps::{self, Kind, MapsEntry};

use super::layout::{self, Layout};

/// What a process runs, as far as Python goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Interpreter {
    /// No interpreter is mapped (or the process could not be read).
    None,
    /// An interpreter whose frames are read.
    Readable {
        /// `major.minor.micro`.
        version: String,
        /// The file it is in.
        path: String,
        /// The address of `_PyRuntime` in the process.
        runtime: u64,
        /// Its layout.
        layout: &'static Layout,
    },
    /// An interpreter of a version with no layout here.
    Unreadable {
        /// `major.minor[.micro]`, as far as known.
        version: String,
        /// The file it is in.
        path: String,
    },
}

/// The interpreter process `pid` runs.
pub(super) fn find(pid: u32) -> Interpreter {
    let Ok(entries) = maps::read(pid) else {
        return Interpreter::None;
    };
    for entry in &entries {
        if entry.kind() != Kind::File {
            continue;
        }
        let name = entry.path.rsplit('/').next().unwrap_or_default();
        if !name.contains("python") {
            continue;
        }
        match examine(pid, entry, name) {
            Ok(Some(found)) => return found,
            Ok(None) => {}
            Err(e) => log::debug!("process {pid}: {}: {e}", entry.path),
        }
    }
    Interpreter::None
}

/// The interpreter in the file `entry` maps, if it holds one.
fn examine(pid: u32, entry: &MapsEntry, name: &str) -> Result<Option<Interpreter>, String> {
    let file = open(pid, entry).map_err(|e| e.to_string())?;
    let cache = ReadCache::new(&file);
    let obj = object::File::parse(&cache).map_err(|e| e.to_string())?;
    let mut runtime = None;
    let mut py_version = None;
    for sym in obj.dynamic_symbols().filter(|s| s.is_definition()) {
        match sym.name() {
            Ok("_PyRuntime") => runtime = Some(sym.address()),
            Ok("Py_Version") => py_version = Some(sym.address()),
            _ => {}
        }
    }
    let Some(runtime) = runtime else {
        return Ok(None);
    };
    let path = entry.path.clone();
    let version = py_version.and_then(|at| read_u32(&obj, at));
    let (major, minor, version) = match version {
        Some(v) => {
            let (major, minor, micro) = ((v >> 24) as u8, (v >> 16) as u8, (v >> 8) as u8);
            (major, minor, format!("{major}.{minor}.{micro}"))
        }
        None => match version_in_name(name) {
            Some((major, minor)) => (major, minor, format!("{major}.{minor}")),
            None => (0, 0, "unknown".to_owned()),
        },
    };
    let Some(layout) = layout::for_version(major, minor) else {
        return Ok(Some(Interpreter::Unreadable { version, path }));
    };
    // Where the file is loaded: the executable segment holding the mapping's offset.
    let bias = obj
        .segments()
        .find_map(|seg| {
            let (offset, size) = seg.file_range();
            (offset <= entry.offset && entry.offset < offset + size).then(|| {
                entry
                    .start
                    .wrapping_sub(seg.address() + (entry.offset - offset))
            })
        })
        .ok_or("no segment holds the mapping")?;
    Ok(Some(Interpreter::Readable {
        version,
        path,
        runtime: runtime.wrapping_add(bias),
        layout,
    }))
}

/// The 4 bytes at address `at` of the file's sections.
fn read_u32<'data, R: object::ReadRef<'data>>(
    obj: &object::File<'data, R>,
    at: u64,
) -> Option<u32> {
    let section = obj
        .sections()
        .find(|s| s.address() <= at && at + 4 <= s.address() + s.size())?;
    let bytes = section.data_range(at, 4).ok()??;
    Some(u32::from_ne_bytes(bytes.try_into().ok()?))
}

/// `(3, 10)` of `python3.10`, `libpython3.10.so.1.0`.
fn version_in_name(name: &str) -> Option<(u8, u8)> {
    let rest = &name[name.find("python")? + "python".len()..];
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The file `entry` maps, through the process's own view of it.
fn open(pid: u32, entry: &MapsEntry) -> std::io::Result<File> {
    File::open(format!(
        "/proc/{pid}/map_files/{:x}-{:x}",
        entry.start, entry.end
    ))
    .or_else(|_| File::open(format!("/proc/{pid}/root{}", entry.path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_in_names() {
        assert_eq!(version_in_name("python3.10"), Some((3, 10)));
        assert_eq!(version_in_name("libpython3.12.so.1.0"), Some((3, 12)));
        assert_eq!(version_in_name("python3"), None);
        assert_eq!(version_in_name("pythonista"), None);
    }

    #[test]
    fn this_process_runs_no_python() {
        assert_eq!(find(std::process::id()), Interpreter::None);
    }

    /// Debian's interpreter (a program, not PIE) and, where there is one, a build with
    /// `libpython` (PIE): `_PyRuntime` is where the interpreter itself says it is.
    #[test]
    fn finds_the_runtime_where_the_interpreter_says() {
        use std::io::BufRead;
        let mut pythons = vec!["/usr/bin/python3.11".to_owned()];
        if let Ok(home) = std::env::var("HOME") {
            let pyenv = format!("{home}/.pyenv/versions");
            for v in std::fs::read_dir(pyenv).into_iter().flatten().flatten() {
                let bin = v.path().join("bin/python3.11");
                if bin.exists() {
                    pythons.push(bin.display().to_string());
                }
            }
        }
        for python in pythons {
            let mut child = std::process::Command::new(&python)
                .args([
                    "-c",
                    "import ctypes, sys; \
                     print(ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, '_PyRuntime')), \
                     flush=True); sys.stdin.read()",
                ])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{python}: {e}"));
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            let said: u64 = line.trim().parse().unwrap();
            let found = find(child.id());
            drop(child.stdin.take());
            child.wait().unwrap();
            match found {
                Interpreter::Readable {
                    version, runtime, ..
                } => {
                    assert!(version.starts_with("3.11."), "{python}: {version}");
                    assert_eq!(runtime, said, "{python}");
                }
                other => panic!("{python}: {other:?}"),
            }
        }
    }
}
