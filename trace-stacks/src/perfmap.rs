//! Perf maps (`/tmp/perf-PID.map`): the names a JIT compiler gives the code it wrote into
//! anonymous memory, one `START SIZE NAME` line per function (hexadecimal, `0x` optional), as
//! Node (`--perf-basic-prof`), Java with a perf map agent, Python 3.12 on (`-X perf`) and others
//! write them for perf.
//!
//! The file is opened through the process's own root (so a process in a container is found,
//! under its own pid in its namespace) while the process lives, and kept open; it is read again
//! from where the last reading stopped whenever it grew, since compilers append to it as they
//! compile. A later line for the same address wins (code is recompiled in place).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most bytes read from one map (a process that compiles forever stops being read here).
const MAX_BYTES: u64 = 256 << 20;
/// A map is looked at again at most this often.
const RECHECK: Duration = Duration::from_millis(10);

/// One process's perf map, as far as it was read.
#[derive(Debug)]
pub(crate) struct PerfMap {
    file: File,
    /// Bytes read so far.
    read: u64,
    /// An incomplete last line, kept until its end comes.
    partial: Vec<u8>,
    /// `(start, end, name)`, sorted by start once [`PerfMap::sorted`].
    entries: Vec<(u64, u64, Arc<str>)>,
    sorted: bool,
    checked: Instant,
}

impl PerfMap {
    /// Opens the perf map of process `pid`, if it has one.
    pub(crate) fn open(pid: u32) -> Option<Self> {
        let own = namespace_pid(pid).unwrap_or(pid);
        let file = File::open(format!("/proc/{pid}/root/tmp/perf-{own}.map"))
            .or_else(|_| File::open(format!("/tmp/perf-{pid}.map")))
            .ok()?;
        let mut map = PerfMap {
            file,
            read: 0,
            partial: Vec::new(),
            entries: Vec::new(),
            sorted: true,
            checked: Instant::now(),
        };
        map.read_more();
        Some(map)
    }

    /// Reads what was appended since the last reading, unless it was looked at within the
    /// last [`RECHECK`].
    pub(crate) fn refresh(&mut self) {
        if self.checked.elapsed() >= RECHECK {
            self.read_more();
        }
    }

    fn read_more(&mut self) {
        self.checked = Instant::now();
        let Ok(len) = self.file.metadata().map(|m| m.len()) else {
            return;
        };
        if len <= self.read || self.read >= MAX_BYTES {
            return;
        }
        let want = (len.min(MAX_BYTES) - self.read) as usize;
        let mut bytes = std::mem::take(&mut self.partial);
        let start = bytes.len();
        bytes.resize(start + want, 0);
        let got = self
            .file
            .seek(SeekFrom::Start(self.read))
            .and_then(|_| self.file.read(&mut bytes[start..]));
        let Ok(got) = got else {
            return;
        };
        bytes.truncate(start + got);
        self.read += got as u64;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.partial = bytes.split_off(complete);
        for line in bytes.split(|&b| b == b'\n') {
            if let Some(entry) = parse_line(&String::from_utf8_lossy(line)) {
                self.entries.push(entry);
                self.sorted = false;
            }
        }
    }

    /// The name of the function at `addr`.
    pub(crate) fn lookup(&mut self, addr: u64) -> Option<Arc<str>> {
        if !self.sorted {
            // Stable: among entries at one start, the later (newer) stays last.
            self.entries.sort_by_key(|e| e.0);
            self.sorted = true;
        }
        let i = self.entries.partition_point(|e| e.0 <= addr);
        // The newest entry starting at or below `addr` that holds it.
        self.entries[..i]
            .iter()
            .rev()
            .take(64)
            .find(|e| addr < e.1)
            .map(|e| Arc::clone(&e.2))
    }
}

/// `START SIZE NAME` (hexadecimal, `0x` optional; the name may hold spaces).
fn parse_line(line: &str) -> Option<(u64, u64, Arc<str>)> {
    let mut parts = line.trim_end().splitn(3, ' ');
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let start = hex(parts.next()?)?;
    let size = hex(parts.next()?)?;
    let name = parts.next()?.trim();
    if name.is_empty() || size == 0 {
        return None;
    }
    Some((start, start.checked_add(size)?, Arc::from(name)))
}

/// Process `pid`'s id in its own PID namespace (the last of `NSpid` in its status).
fn namespace_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn parses_lines() {
        assert_eq!(
            parse_line("7f01a2b3c000 40 LazyCompile:*hot /app/x.js:3:13"),
            Some((
                0x7f01a2b3c000,
                0x7f01a2b3c040,
                Arc::from("LazyCompile:*hot /app/x.js:3:13")
            ))
        );
        assert_eq!(
            parse_line("0x1000 0x10 py::f:/x.py"),
            Some((0x1000, 0x1010, Arc::from("py::f:/x.py")))
        );
        assert_eq!(parse_line("zz 10 f"), None);
        assert_eq!(parse_line("1000 0 f"), None);
        assert_eq!(parse_line("1000 10"), None);
    }

    #[test]
    fn reads_what_is_appended_and_the_newest_wins() {
        let pid = std::process::id();
        let path = format!("/tmp/perf-{pid}.map");
        let mut f = File::create(&path).unwrap();
        writeln!(f, "1000 100 first").unwrap();
        write!(f, "2000 10 sec").unwrap();
        f.flush().unwrap();
        let mut map = PerfMap::open(pid).unwrap();
        assert_eq!(map.lookup(0x1010).as_deref(), Some("first"));
        assert_eq!(map.lookup(0x2000), None, "a line is read once whole");
        writeln!(f, "ond").unwrap();
        writeln!(f, "1000 20 recompiled").unwrap();
        f.flush().unwrap();
        map.read_more();
        assert_eq!(map.lookup(0x2005).as_deref(), Some("second"));
        assert_eq!(map.lookup(0x1010).as_deref(), Some("recompiled"));
        assert_eq!(map.lookup(0x1050).as_deref(), Some("first"));
        assert_eq!(map.lookup(0x3000), None);
        std::fs::remove_file(&path).unwrap();
    }
}
