//! A stream written into a series of files, each standing alone.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{FlowFilter, RecordReader, SplitError, StreamState, WholeFile};

/// When a file is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// It would grow past this many bytes.
    Bytes(u64),
    /// It was opened this long ago.
    Time(Duration),
}

/// `256M`, `64K`, `1G`, `1000` (bytes) or `60s`, `5m`, `1h`, `500ms`.
pub fn parse_limit(s: &str) -> Result<Limit, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?}: expected a size (256M) or a time (60s)"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(format!("{s:?}: must be more than zero"));
    }
    let bytes = |m: f64| Ok(Limit::Bytes((n * m) as u64));
    let time = |m: f64| {
        Duration::try_from_secs_f64(n * m)
            .map(Limit::Time)
            .map_err(|e| format!("{s:?}: {e}"))
    };
    match unit.to_ascii_lowercase().as_str() {
        "" | "b" => bytes(1.0),
        "k" | "kb" | "kib" => bytes(1024.0),
        "m" | "mb" | "mib" => bytes(1024.0 * 1024.0),
        "g" | "gb" | "gib" => bytes(1024.0 * 1024.0 * 1024.0),
        "ms" => time(0.001),
        "s" => time(1.0),
        "min" => time(60.0),
        "h" => time(3600.0),
        other => Err(format!(
            "{s:?}: unknown unit {other:?} (sizes: K, M, G; times: ms, s, min, h)"
        )),
    }
}

/// How a stream is cut into files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// The files are named after it: `trace.fxt` gives `trace-0001.fxt`,
    /// `trace-0002.fxt`...
    pub base: PathBuf,
    /// When a file is full.
    pub limit: Limit,
    /// Files kept at most; the oldest are deleted.
    pub max_files: Option<usize>,
}

/// What a rotation wrote.
#[derive(Debug, Default)]
pub struct RotationSummary {
    /// The files kept, oldest first.
    pub files: Vec<PathBuf>,
    /// The files deleted to keep at most `max_files`, oldest first.
    pub deleted: Vec<PathBuf>,
    /// Bytes of the stream read.
    pub stream_bytes: u64,
    /// Bytes written into all files (with what each file repeats).
    pub written_bytes: u64,
    /// Why the stream was not read to its end, if it was not.
    pub error: Option<SplitError>,
    /// Flow steps and ends left out because their flow began in an earlier
    /// file (a reader of the file alone could not draw them).
    pub flows_cut: u64,
}

/// The file being written.
struct Current {
    out: WholeFile,
    path: PathBuf,
    bytes: u64,
    /// Records of the stream in it (what it repeats not counted).
    records: u64,
    opened: Instant,
    /// It has its name: made without one, it gets it once its first
    /// record is written, so that a file of the rotation is never empty
    /// (however the process ends).
    named: bool,
}

/// Writes a stream into files by [`Rotation`].
pub struct Rotator {
    rotation: Rotation,
    state: StreamState,
    /// The flows begun in the current file.
    flows: FlowFilter,
    current: Option<Current>,
    next_number: u32,
    files: VecDeque<PathBuf>,
    summary: RotationSummary,
}

/// The `n`th file of a rotation over `base`.
pub fn numbered(base: &Path, n: u32) -> PathBuf {
    let stem = base
        .file_stem()
        .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
    let name = match base.extension() {
        Some(ext) => format!("{stem}-{n:04}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{n:04}"),
    };
    base.with_file_name(name)
}

impl Rotator {
    /// A rotation that has written nothing yet (its first file is created
    /// with its first record).
    pub fn new(rotation: Rotation) -> Self {
        Rotator {
            rotation,
            state: StreamState::new(),
            flows: FlowFilter::new(),
            current: None,
            next_number: 1,
            files: VecDeque::new(),
            summary: RotationSummary::default(),
        }
    }

    /// The path of the file being written, if any.
    pub fn current_path(&self) -> Option<&Path> {
        self.current.as_ref().map(|c| c.path.as_path())
    }

    fn io(what: &'static str, path: &Path, source: std::io::Error) -> SplitError {
        SplitError::File {
            what,
            path: path.to_owned(),
            source,
        }
    }

    /// Opens the next file and writes `preamble` into it.
    fn open(&mut self, preamble: &[u8]) -> Result<(), SplitError> {
        let path = numbered(&self.rotation.base, self.next_number);
        self.next_number += 1;
        let (file, named) = create_unnamed(&path).map_err(|e| Self::io("creating", &path, e))?;
        let mut out = WholeFile::new(file, 1 << 20);
        // Out at once, with the first record after it: a file that cannot
        // hold even this is not left behind.
        if let Err(e) = out.write_all(preamble).and_then(|()| out.flush()) {
            drop(out);
            if named {
                let _ = std::fs::remove_file(&path);
            }
            return Err(Self::io("writing", &path, e));
        }
        self.summary.written_bytes += preamble.len() as u64;
        self.flows = FlowFilter::new();
        self.files.push_back(path.clone());
        self.current = Some(Current {
            out,
            path,
            bytes: preamble.len() as u64,
            records: 0,
            opened: Instant::now(),
            named,
        });
        if let Some(max) = self.rotation.max_files {
            while self.files.len() > max.max(1) {
                if let Some(old) = self.files.pop_front() {
                    std::fs::remove_file(&old).map_err(|e| Self::io("removing", &old, e))?;
                    self.summary.deleted.push(old);
                }
            }
        }
        Ok(())
    }

    /// Ends the current file: the durations open are ended in it, and it is
    /// written out.
    fn close(&mut self) -> Result<(), SplitError> {
        let ends = self.state.close_open();
        if let Some(mut c) = self.current.take() {
            c.out
                .write_all(&ends)
                .and_then(|()| c.out.flush())
                .map_err(|e| Self::io("writing", &c.path, e))?;
            self.summary.written_bytes += ends.len() as u64;
        }
        Ok(())
    }

    /// Writes the next record of the stream, into a new file when the
    /// current one is full.
    pub fn write_record(&mut self, record: &[u8]) -> Result<(), SplitError> {
        let len = record.len() as u64;
        let full = self.current.as_ref().is_some_and(|c| {
            c.records > 0
                && match self.rotation.limit {
                    Limit::Bytes(max) => c.bytes + len > max,
                    Limit::Time(d) => c.opened.elapsed() >= d,
                }
        });
        if full {
            self.close()?;
            let preamble = self.state.preamble();
            self.open(&preamble)?;
        } else if self.current.is_none() {
            // The stream's own start.
            self.open(&[])?;
        }
        // A flow is drawn from its begin: one that began in an earlier file
        // has nothing to start from in this one.
        if !self.flows.keep(self.state.provider(), record) {
            self.summary.flows_cut += 1;
            self.summary.stream_bytes += len;
            return Ok(());
        }
        let Some(c) = self.current.as_mut() else {
            return Ok(());
        };
        c.out
            .write_all(record)
            .map_err(|e| Self::io("writing", &c.path, e))?;
        c.bytes += len;
        c.records += 1;
        if c.records == 1 {
            // A file's first record goes out at once, as its preamble did,
            // and then the file gets its name; a file left empty is not
            // left behind.
            if let Err(e) = c.out.flush() {
                let path = c.path.clone();
                if c.out.is_empty() {
                    let named = c.named;
                    self.current = None;
                    self.files.retain(|f| *f != path);
                    if named {
                        let _ = std::fs::remove_file(&path);
                    }
                }
                return Err(Self::io("writing", &path, e));
            }
            if !c.named {
                give_name(c.out.file(), &c.path).map_err(|e| Self::io("naming", &c.path, e))?;
                c.named = true;
            }
        }
        self.summary.stream_bytes += len;
        self.summary.written_bytes += len;
        self.state.observe(record);
        Ok(())
    }

    /// Writes out the last file and says what was written.
    pub fn finish(mut self) -> Result<RotationSummary, SplitError> {
        if let Some(mut c) = self.current.take() {
            c.out.flush().map_err(|e| Self::io("writing", &c.path, e))?;
        }
        self.summary.files = self.files.into();
        Ok(self.summary)
    }

    /// Reads `stream` to its end into the files. What was written is kept
    /// and listed also when reading or writing fails (the failure is in
    /// [`RotationSummary::error`]).
    pub fn copy_from(mut self, stream: impl Read) -> RotationSummary {
        let mut reader = RecordReader::new(stream);
        let error = loop {
            match reader.next_record() {
                Ok(Some(record)) => {
                    if let Err(e) = self.write_record(record) {
                        break Some(e);
                    }
                }
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        let files = self.files.clone();
        let mut summary = match self.finish() {
            Ok(s) => s,
            Err(e) => RotationSummary {
                files: files.into(),
                error: Some(e),
                ..Default::default()
            },
        };
        if summary.error.is_none() {
            summary.error = error;
        }
        summary
    }
}

/// A new file for `path` without a name yet (`O_TMPFILE` in its folder:
/// nothing is left if the process ends before [`give_name`]), or, where
/// the file system cannot make one, `path` itself, emptied; and whether it
/// is named.
fn create_unnamed(path: &Path) -> std::io::Result<(File, bool)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Naming goes through /proc.
    if Path::new("/proc/self/fd").is_dir()
        && let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o666)
            .open(dir)
    {
        return Ok((file, false));
    }
    File::create(path).map(|f| (f, true))
}

/// Gives `file`, made by [`create_unnamed`] without a name, the name
/// `path` (a file of that name, left by an earlier run, is replaced).
fn give_name(file: &File, path: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::ffi::OsStrExt as _;
    let invalid = |_| std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let from =
        std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(invalid)?;
    let to = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(invalid)?;
    let link = || {
        // SAFETY: two NUL-terminated paths that outlive the call.
        let r = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    match link() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path)?;
            link()
        }
        other => other,
    }
}
