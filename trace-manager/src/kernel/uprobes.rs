//! Dynamic probes (`--uprobe`): where a probe goes, resolved before the
//! recording starts so that a mistake is one clear error, not an empty
//! trace.
//!
//! A probe is written `BINARY:SYMBOL`, `BINARY:0xOFFSET`, or `SYMBOL` with a
//! process to attach to (the binary is then `/proc/PID/exe`). `BINARY` is a
//! path, or with a process a library it has mapped named by the start of its
//! file name (`libc` for `libc.so.6`), or a program on `PATH`. Symbols come
//! from the ELF symbol tables (`.symtab`, then `.dynsym`) and match either
//! their raw name or their demangled Rust (`crate::module::function`, without
//! the hash) or C++ (`ns::function`, without the parameters) name.

use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSymbol, SymbolKind};

use crate::procfs;

/// Where one probe goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedProbe {
    /// The probe as the user wrote it.
    pub spec: String,
    /// The ELF file holding the function, as named.
    pub binary: PathBuf,
    /// That file, open: what the probe is attached to.
    pub file: ProgramFile,
    /// Where in it.
    pub location: ProbeLocation,
    /// The name its durations get: the symbol as given, or
    /// `binary+0xoffset`.
    pub name: String,
    /// The processes to place it in; empty: every process that maps the
    /// file.
    pub pids: Vec<u32>,
}

/// A program file probes were resolved in, opened then (with the client's
/// rights, see [`crate::creds`]) and kept open until they are attached:
/// they are attached through this descriptor ([`ProgramFile::attach_path`]),
/// so a file put at its path afterwards is not the one probed. Two are
/// equal when they are the same file (device and inode).
#[derive(Clone, Debug)]
pub struct ProgramFile {
    file: Arc<std::fs::File>,
    id: (u64, u64),
}

impl ProgramFile {
    /// A path that names exactly this open file: `/proc/self/fd/N`, a link
    /// the kernel follows to the file itself (whatever its name now), as
    /// `perf_event_open` does with a uprobe's path and aya when it reads
    /// the symbols.
    pub fn attach_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    /// Its device and inode.
    pub fn id(&self) -> (u64, u64) {
        self.id
    }
}

impl PartialEq for ProgramFile {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for ProgramFile {}

/// A place in an ELF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeLocation {
    /// A symbol, by its name in the file (mangled).
    Symbol(String),
    /// A file offset.
    Offset(u64),
}

/// Why a probe cannot be placed.
#[derive(Debug, thiserror::Error)]
pub enum UprobeError {
    /// The text is not a probe.
    #[error("--uprobe {spec:?}: {why}")]
    Syntax {
        /// The probe as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// The binary cannot be found or read.
    #[error("--uprobe {spec:?}: cannot read {path}: {source}")]
    Binary {
        /// The probe as given.
        spec: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The binary is not an ELF file this can read.
    #[error("--uprobe {spec:?}: {path} is not a readable ELF file: {why}")]
    NotElf {
        /// The probe as given.
        spec: String,
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        why: String,
    },
    /// No function of that name.
    #[error("--uprobe {spec:?}: no function `{symbol}` in {path}{hint}")]
    NoSymbol {
        /// The probe as given.
        spec: String,
        /// The symbol asked for.
        symbol: String,
        /// The file searched.
        path: PathBuf,
        /// Why it may be missing.
        hint: &'static str,
    },
}

/// Resolves `spec`; `pid` is the process given with `-p`, if any.
pub fn resolve(spec: &str, pid: Option<u32>) -> Result<ResolvedProbe, UprobeError> {
    let syntax = |why: &str| UprobeError::Syntax {
        spec: spec.to_owned(),
        why: why.to_owned(),
    };
    let (binary, what) = match split_binary(spec) {
        Some((b, w)) => (Some(b), w),
        None => (None, spec),
    };
    if what.is_empty() {
        return Err(syntax("no function or offset after the binary"));
    }
    let path = match binary {
        Some(b) => find_binary(b, pid).map_err(|source| UprobeError::Binary {
            spec: spec.to_owned(),
            path: PathBuf::from(b),
            source,
        })?,
        None => {
            let pid = pid
                .ok_or_else(|| syntax("a bare function needs -p PID (or write BINARY:FUNCTION)"))?;
            procfs::exe(pid).map_err(|source| UprobeError::Binary {
                spec: spec.to_owned(),
                path: procfs::exe_link(pid),
                source,
            })?
        }
    };
    let (program, data) = read_program(&path).map_err(|source| UprobeError::Binary {
        spec: spec.to_owned(),
        path: path.clone(),
        source,
    })?;
    let file = object::File::parse(&*data).map_err(|e| UprobeError::NotElf {
        spec: spec.to_owned(),
        path: path.clone(),
        why: e.to_string(),
    })?;
    if let Some(hex) = what.strip_prefix("0x") {
        let offset = u64::from_str_radix(hex, 16).map_err(|_| syntax("bad hexadecimal offset"))?;
        let base = path.file_name().unwrap_or_default().to_string_lossy();
        return Ok(ResolvedProbe {
            spec: spec.to_owned(),
            binary: path.clone(),
            file: program,
            location: ProbeLocation::Offset(offset),
            name: format!("{base}+{offset:#x}"),
            pids: Vec::new(),
        });
    }
    let found = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.address() != 0)
        .find_map(|s| {
            let raw = s.name().ok()?;
            matches(raw, what).then(|| raw.to_owned())
        });
    match found {
        Some(mangled) => Ok(ResolvedProbe {
            spec: spec.to_owned(),
            binary: path,
            file: program,
            location: ProbeLocation::Symbol(mangled),
            name: what.to_owned(),
            pids: Vec::new(),
        }),
        None => Err(UprobeError::NoSymbol {
            spec: spec.to_owned(),
            symbol: what.to_owned(),
            hint: if file.symbols().next().is_none() {
                " (it has no symbol table: stripped? only exported functions can be found)"
            } else {
                ""
            },
            path,
        }),
    }
}

/// Resolves `spec` in each process of `pids` (in every process when
/// empty): a probe found in several (the same file and place) is placed in
/// each of them, and a process whose programs lack it is passed over, as
/// long as one has it. Returns one probe per distinct place.
pub fn resolve_in(spec: &str, pids: &[u32]) -> Result<Vec<ResolvedProbe>, UprobeError> {
    if pids.is_empty() {
        return resolve(spec, None).map(|p| vec![p]);
    }
    per_process(
        pids,
        |pid| resolve(spec, Some(pid)).map(|p| vec![p]),
        |p| (p.file.id(), p.location.clone()),
        |p| &mut p.pids,
    )
}

/// What `resolve(pid)` finds in each of `pids` (not empty), places found in
/// several processes (the same `key`) merged into one whose `pids` lists
/// them; the first error when nothing is found anywhere.
pub(crate) fn per_process<T, K: PartialEq, E: std::fmt::Display>(
    pids: &[u32],
    resolve: impl Fn(u32) -> Result<Vec<T>, E>,
    key: impl Fn(&T) -> K,
    pids_of: impl Fn(&mut T) -> &mut Vec<u32>,
) -> Result<Vec<T>, E> {
    let mut found: Vec<T> = Vec::new();
    let mut first_error = None;
    for &pid in pids {
        match resolve(pid) {
            Ok(places) => {
                for mut place in places {
                    let k = key(&place);
                    match found.iter_mut().find(|f| key(f) == k) {
                        Some(known) => pids_of(known).push(pid),
                        None => {
                            *pids_of(&mut place) = vec![pid];
                            found.push(place);
                        }
                    }
                }
            }
            Err(e) => {
                log::info!("{e} (process {pid})");
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if found.is_empty() => Err(e),
        _ => Ok(found),
    }
}

/// The path of a line of `/proc/PID/maps`: everything after the fifth
/// field (paths may hold spaces), without the ` (deleted)` of a file
/// removed since it was mapped; `None` for an anonymous mapping.
pub(crate) fn maps_path(line: &str) -> Option<&str> {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace)?..];
    }
    let path = rest.trim();
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    (!path.is_empty()).then_some(path)
}

/// Splits `BINARY:REST` at the first `:` that is not part of a `::`.
fn split_binary(spec: &str) -> Option<(&str, &str)> {
    let b = spec.as_bytes();
    (0..b.len()).find_map(|i| {
        let single = b[i] == b':' && b.get(i + 1) != Some(&b':') && (i == 0 || b[i - 1] != b':');
        single.then(|| (&spec[..i], &spec[i + 1..]))
    })
}

/// Whether symbol `raw` is the function the user named `wanted`.
fn matches(raw: &str, wanted: &str) -> bool {
    if raw == wanted {
        return true;
    }
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        // `{:#}` leaves out the hash.
        if format!("{d:#}") == wanted {
            return true;
        }
    }
    if let Ok(sym) = cpp_demangle::Symbol::new(raw)
        && let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default())
    {
        let without_params = d.split('(').next().unwrap_or(&d);
        if d == wanted || without_params == wanted {
            return true;
        }
    }
    false
}

/// The file `name` stands for: a path, a library mapped by `pid`, or a
/// program on `PATH`; a `NotFound` error saying so when none is. A path is
/// returned as it is, whether it exists or not: opening it says why it
/// cannot be read, as it would say it to the client.
pub(crate) fn find_binary(name: &str, pid: Option<u32>) -> std::io::Result<PathBuf> {
    lookup_binary(name, pid).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file, program on PATH, or library mapped by the -p process",
        )
    })
}

/// [`find_binary`]'s search.
fn lookup_binary(name: &str, pid: Option<u32>) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    if let Some(pid) = pid
        && let Ok(maps) = procfs::maps(pid)
    {
        let found = maps.lines().filter_map(maps_path).map(Path::new).find(|p| {
            p.file_name().and_then(|f| f.to_str()).is_some_and(|f| {
                f == name
                    || f.strip_prefix(name)
                        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
            })
        });
        if let Some(p) = found {
            // Through the process's root, which is where the path is valid.
            return Some(procfs::via_root(pid, p));
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The largest program file probes are looked up in.
const MAX_PROGRAM_BYTES: u64 = 2 << 30;

/// The program file `path`, open, and its bytes: a regular file (not a
/// device or a FIFO, which could make the reader wait or read forever) of
/// at most [`MAX_PROGRAM_BYTES`].
pub(crate) fn read_program(path: &std::path::Path) -> std::io::Result<(ProgramFile, Vec<u8>)> {
    use std::io::Read as _;
    // O_NONBLOCK: opening a FIFO does not wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > MAX_PROGRAM_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("larger than {} GiB", MAX_PROGRAM_BYTES >> 30),
        ));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    (&file).take(MAX_PROGRAM_BYTES).read_to_end(&mut data)?;
    let program = ProgramFile {
        file: Arc::new(file),
        id: (meta.dev(), meta.ino()),
    };
    Ok((program, data))
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_regular_files_are_read_as_programs() {
        let zero = read_program(Path::new("/dev/zero")).unwrap_err();
        assert!(zero.to_string().contains("not a regular file"), "{zero}");
        let fifo = std::env::temp_dir().join(format!("trace-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Returns at once (no writer is waited for), refused.
        assert!(read_program(&fifo).is_err());
        std::fs::remove_file(&fifo).unwrap();
        assert!(
            !read_program(Path::new("/proc/self/exe"))
                .unwrap()
                .1
                .is_empty()
        );
    }

    #[test]
    fn probes_are_attached_through_the_file_they_were_resolved_in() {
        let dir = std::env::temp_dir().join(format!("trace-uprobe-fd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prog = dir.join("prog");
        std::fs::copy(std::env::current_exe().unwrap(), &prog).unwrap();
        let probe = resolve(&format!("{}:0x1000", prog.display()), None).unwrap();
        let (first, _) = read_program(&prog).unwrap();
        assert_eq!(probe.file, first);
        // Another file put at the path: the probe still names the first.
        let moved = dir.join("prog.old");
        std::fs::rename(&prog, &moved).unwrap();
        std::fs::write(&prog, b"not the program").unwrap();
        let (second, _) = read_program(&prog).unwrap();
        assert_ne!(probe.file, second);
        let via = probe.file.attach_path();
        assert!(via.starts_with("/proc/self/fd"), "{}", via.display());
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(&via).unwrap();
        assert_eq!((m.dev(), m.ino()), probe.file.id());
        assert_eq!(std::fs::read(&via).unwrap(), std::fs::read(&moved).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    #[test]
    fn maps_lines_give_whole_paths() {
        let line = "7f1c2e000000-7f1c2e022000 r--p 00000000 fe:01 1234   /opt/my app/lib.so";
        assert_eq!(maps_path(line), Some("/opt/my app/lib.so"));
        let line = "55d0a000-55d0b000 r-xp 00001000 fe:01 99 /tmp/prog (deleted)";
        assert_eq!(maps_path(line), Some("/tmp/prog"));
        assert_eq!(maps_path("7ffd-7ffe rw-p 00000000 00:00 0"), None);
        assert_eq!(
            maps_path("7ffd-7ffe rw-p 00000000 00:00 0   [stack]"),
            Some("[stack]")
        );
        assert_eq!(maps_path(""), None);
    }

    #[test]
    fn splits_at_a_single_colon() {
        assert_eq!(split_binary("libc:malloc"), Some(("libc", "malloc")));
        assert_eq!(split_binary("/bin/x:ns::f"), Some(("/bin/x", "ns::f")));
        assert_eq!(split_binary("ns::f"), None);
        assert_eq!(split_binary("a:0x10"), Some(("a", "0x10")));
    }

    #[test]
    fn demangled_names_match() {
        assert!(matches("malloc", "malloc"));
        // Rust legacy mangling of `foo::bar`, with a hash.
        assert!(matches("_ZN3foo3bar17h0123456789abcdefE", "foo::bar"));
        // C++ `ns::f(int)`.
        assert!(matches("_ZN2ns1fEi", "ns::f"));
        assert!(!matches("_ZN2ns1fEi", "ns::g"));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = resolve("no_such_function_anywhere", None).unwrap_err();
        assert!(e.to_string().contains("needs -p"), "{e}");
        let e = resolve("/no/such/binary:main", None).unwrap_err();
        assert!(matches!(e, UprobeError::Binary { .. }), "{e}");
        let me = std::env::current_exe().unwrap();
        let e = resolve(&format!("{}:surely_not_a_function_xyz", me.display()), None).unwrap_err();
        assert!(matches!(e, UprobeError::NoSymbol { .. }), "{e}");
        let ok = resolve(&format!("{}:0x1000", me.display()), None).unwrap();
        assert_eq!(ok.location, ProbeLocation::Offset(0x1000));
    }
}
