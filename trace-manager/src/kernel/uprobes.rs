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

use std::collections::HashMap;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

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
    /// `perf_event_open` does with a uprobe's path.
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
    /// A symbol: its name in the file (mangled) and where it is in the
    /// file.
    Symbol {
        /// The name in the symbol table.
        mangled: String,
        /// Its file offset.
        offset: u64,
    },
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
    resolve_with(spec, pid, &mut Lookups::default())
}

/// What one spec found in each program file it was looked up in, by device
/// and inode: a file many processes map is read and searched once.
#[derive(Default)]
struct Lookups(HashMap<(u64, u64), Lookup>);

/// What a spec found in one program file.
#[derive(Clone)]
enum Lookup {
    /// A function: its name in the file and its file offset.
    Found { mangled: String, offset: u64 },
    /// No such function; why it may be missing.
    Missing { hint: &'static str },
    /// Not an ELF file this can read.
    NotElf { why: String },
    /// The spec is a file offset, and the file an ELF file.
    Offset,
}

/// [`resolve`], remembering what each file held in `lookups`.
fn resolve_with(
    spec: &str,
    pid: Option<u32>,
    lookups: &mut Lookups,
) -> Result<ResolvedProbe, UprobeError> {
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
    let offset = match what.strip_prefix("0x") {
        Some(hex) => {
            Some(u64::from_str_radix(hex, 16).map_err(|_| syntax("bad hexadecimal offset"))?)
        }
        None => None,
    };
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
    let binary_error = |source| UprobeError::Binary {
        spec: spec.to_owned(),
        path: path.clone(),
        source,
    };
    let (program, len) = open_program(&path).map_err(binary_error)?;
    let lookup = match lookups.0.get(&program.id) {
        Some(known) => known.clone(),
        None => {
            let data = program.read(len).map_err(binary_error)?;
            let lookup = look_up(&data, what, offset.is_some());
            lookups.0.insert(program.id, lookup.clone());
            lookup
        }
    };
    let probe = |location, name| ResolvedProbe {
        spec: spec.to_owned(),
        binary: path.clone(),
        file: program.clone(),
        location,
        name,
        pids: Vec::new(),
    };
    match lookup {
        Lookup::NotElf { why } => Err(UprobeError::NotElf {
            spec: spec.to_owned(),
            path: path.clone(),
            why,
        }),
        Lookup::Offset => {
            let offset = offset.unwrap_or_default();
            let base = path.file_name().unwrap_or_default().to_string_lossy();
            let name = format!("{base}+{offset:#x}");
            Ok(probe(ProbeLocation::Offset(offset), name))
        }
        Lookup::Found { mangled, offset } => Ok(probe(
            ProbeLocation::Symbol { mangled, offset },
            what.to_owned(),
        )),
        Lookup::Missing { hint } => Err(UprobeError::NoSymbol {
            spec: spec.to_owned(),
            symbol: what.to_owned(),
            hint,
            path: path.clone(),
        }),
    }
}

/// Searches the ELF file `data` for the function `what` (or only checks
/// that it is an ELF file when the spec is an `offset`).
fn look_up(data: &[u8], what: &str, offset: bool) -> Lookup {
    let file = match object::File::parse(data) {
        Ok(file) => file,
        Err(e) => return Lookup::NotElf { why: e.to_string() },
    };
    if offset {
        return Lookup::Offset;
    }
    let found = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.address() != 0)
        .find_map(|s| {
            let raw = s.name().ok()?;
            if !matches(raw, what) {
                return None;
            }
            Some(Lookup::Found {
                mangled: raw.to_owned(),
                offset: file_offset(&file, &s)?,
            })
        });
    found.unwrap_or(Lookup::Missing {
        hint: if file.symbols().next().is_none() {
            " (it has no symbol table: stripped? only exported functions can be found)"
        } else {
            ""
        },
    })
}

/// Where symbol `sym` of `file` is in the file, which is what a uprobe is
/// placed at: its address made relative to its section's place in the
/// file, for executables and shared objects (whose symbols are virtual
/// addresses); the address itself for relocatable objects.
fn file_offset(file: &object::File<'_>, sym: &object::Symbol<'_, '_>) -> Option<u64> {
    if !matches!(
        file.kind(),
        object::ObjectKind::Dynamic | object::ObjectKind::Executable
    ) {
        return Some(sym.address());
    }
    let section = file.section_by_index(sym.section_index()?).ok()?;
    let (start, _) = section.file_range()?;
    Some(sym.address() - section.address() + start)
}

/// Resolves `spec` in each process of `pids` (in every process when
/// empty): a probe found in several (the same file and place) is placed in
/// each of them, and a process whose programs lack it is passed over, as
/// long as one has it. Returns one probe per distinct place.
pub fn resolve_in(spec: &str, pids: &[u32]) -> Result<Vec<ResolvedProbe>, UprobeError> {
    if pids.is_empty() {
        return resolve(spec, None).map(|p| vec![p]);
    }
    let mut pids = pids.to_vec();
    pids.sort_unstable();
    pids.dedup();
    let lookups = std::cell::RefCell::new(Lookups::default());
    per_process(
        &pids,
        |pid| resolve_with(spec, Some(pid), &mut lookups.borrow_mut()).map(|p| vec![p]),
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
    let (program, len) = open_program(path)?;
    let data = program.read(len)?;
    Ok((program, data))
}

/// The program file `path`, open, and its length: a regular file of at
/// most [`MAX_PROGRAM_BYTES`].
fn open_program(path: &std::path::Path) -> std::io::Result<(ProgramFile, u64)> {
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
    let program = ProgramFile {
        file: Arc::new(file),
        id: (meta.dev(), meta.ino()),
    };
    Ok((program, meta.len()))
}

impl ProgramFile {
    /// The file's bytes, `len` of them at most (its length when opened).
    fn read(&self, len: u64) -> std::io::Result<Vec<u8>> {
        use std::io::{Read as _, Seek as _};
        let mut file = &*self.file;
        file.rewind()?;
        let mut data = Vec::with_capacity(len as usize);
        file.take(len.min(MAX_PROGRAM_BYTES))
            .read_to_end(&mut data)?;
        Ok(data)
    }
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

    /// A function of this test program, to find by name.
    #[inline(never)]
    #[unsafe(no_mangle)]
    extern "C" fn uprobe_offset_probe_target() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn a_symbol_resolves_to_where_it_is_in_the_file() {
        let me = std::env::current_exe().unwrap();
        let probe = resolve(
            &format!("{}:uprobe_offset_probe_target", me.display()),
            None,
        )
        .unwrap();
        let ProbeLocation::Symbol { mangled, offset } = probe.location else {
            panic!("{:?}", probe.location);
        };
        assert_eq!(mangled, "uprobe_offset_probe_target");
        // Where the running function is, as a file offset: its address in
        // the mapping of this program that holds it, from that mapping's
        // file offset.
        let addr = uprobe_offset_probe_target as *const () as usize as u64;
        assert_eq!(uprobe_offset_probe_target(), 7);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let expected = maps
            .lines()
            .find_map(|line| {
                let mut fields = line.split_whitespace();
                let (start, end) = fields.next()?.split_once('-')?;
                let start = u64::from_str_radix(start, 16).ok()?;
                let end = u64::from_str_radix(end, 16).ok()?;
                let file_offset = u64::from_str_radix(fields.nth(1)?, 16).ok()?;
                (start..end)
                    .contains(&addr)
                    .then(|| addr - start + file_offset)
            })
            .unwrap();
        assert_eq!(offset, expected);
    }

    #[test]
    fn a_process_named_twice_is_resolved_once() {
        let me = std::process::id();
        let exe = std::env::current_exe().unwrap();
        let spec = format!("{}:uprobe_offset_probe_target", exe.display());
        let probes = resolve_in(&spec, &[me, me, me]).unwrap();
        assert_eq!(probes.len(), 1);
        assert_eq!(probes[0].pids, vec![me]);
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
