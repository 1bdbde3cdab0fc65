//! A file that always ends on a whole record, whatever fails.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

/// A regular file written in whole records: what is written is buffered
/// (each `write` must hold whole records) and goes out in units of whole
/// records; a unit the file system does not take whole (a full disk) is
/// cut back off (`ftruncate`), so the file ends where the last whole unit
/// did, and a reader never meets half a record.
///
/// ```
/// use std::io::Write;
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.fxt");
/// let mut out = trace_split::WholeFile::new(std::fs::File::create(&path).unwrap(), 1 << 20);
/// out.write_all(&0x0016_5478_4604_0010u64.to_le_bytes()).unwrap();
/// out.flush().unwrap();
/// assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
/// ```
#[derive(Debug)]
pub struct WholeFile {
    file: File,
    /// Whole records not yet written.
    buf: Vec<u8>,
    /// Bytes buffered before a unit goes out.
    capacity: usize,
    /// The file's length: where the last whole unit ended.
    len: u64,
    /// `write` calls so far whose bytes are in the file.
    kept: u64,
    /// `write` calls buffered and not yet written.
    buffered: u64,
}

impl WholeFile {
    /// Writes to `file` (empty, or written up to its current offset),
    /// `capacity` bytes at a time at most.
    pub fn new(mut file: File, capacity: usize) -> WholeFile {
        let len = file.stream_position().unwrap_or(0);
        WholeFile {
            file,
            buf: Vec::new(),
            capacity,
            len,
            kept: 0,
            buffered: 0,
        }
    }

    /// The file written to.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Bytes of whole records in the file now.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many `write` calls' bytes are in the file now (the first is
    /// often a preamble: a file with one holds nothing else).
    pub fn writes_kept(&self) -> u64 {
        self.kept
    }

    /// Writes out what is buffered as one unit; on failure the unit is cut
    /// back off and the buffer dropped.
    fn write_unit(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let unit = std::mem::take(&mut self.buf);
        let writes = std::mem::take(&mut self.buffered);
        match self.file.write_all(&unit) {
            Ok(()) => {
                self.len += unit.len() as u64;
                self.kept += writes;
                Ok(())
            }
            Err(e) => {
                // The offset may be anywhere past `len`: both go back.
                let len = self.len;
                if let Err(t) = self
                    .file
                    .set_len(len)
                    .and_then(|()| self.file.seek(SeekFrom::Start(len)).map(drop))
                {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{e} (and cutting the partly written record off failed: {t})"),
                    ));
                }
                Err(e)
            }
        }
    }
}

/// `buf` must hold whole records; it is buffered whole, or, when the unit
/// before it fails, not at all.
impl Write for WholeFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.buf.is_empty() && self.buf.len() + buf.len() > self.capacity {
            self.write_unit()?;
        }
        self.buf.extend_from_slice(buf);
        self.buffered += 1;
        if self.buf.len() >= self.capacity {
            self.write_unit()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_unit()?;
        self.file.flush()
    }
}

impl Drop for WholeFile {
    fn drop(&mut self) {
        let _ = self.write_unit();
    }
}
