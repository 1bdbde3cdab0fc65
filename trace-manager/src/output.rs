//! The merged FXT output stream.
//!
//! [`FxtStream`] writes the magic number record first and then whole records,
//! never anything between them. [`StringTable`] interns the strings of one
//! provider: the first use writes a string record, later uses refer to it by
//! index; when the table is full, strings are written inline.

use std::collections::HashMap;
use std::io::Write;

use thiserror::Error;
use trace_common::fxt::wire::MAX_STRING_INDEX;
use trace_common::fxt::write::{EncodeError, encode};
use trace_common::fxt::{Record, StringRef};

/// Why writing the output failed.
#[derive(Debug, Error)]
pub enum OutputError {
    /// The output file or pipe refused the bytes.
    #[error("writing the trace output failed: {0}")]
    Io(#[from] std::io::Error),
    /// A record could not be encoded (a bug in the caller, not in the data).
    #[error("encoding a record failed: {0}")]
    Encode(#[from] EncodeError),
}

/// A stream of FXT records into `W`, starting with the magic number record.
pub struct FxtStream<W: Write> {
    out: W,
    buf: Vec<u8>,
    bytes: u64,
    records: u64,
    /// The provider whose records follow (the last provider info or
    /// section record written): a reader resolves string and thread
    /// references in its tables.
    current_provider: Option<u32>,
}

impl<W: Write> FxtStream<W> {
    /// Starts a stream on `out` by writing the magic number record.
    pub fn new(out: W) -> Result<Self, OutputError> {
        let mut s = FxtStream {
            out,
            buf: Vec::with_capacity(256),
            bytes: 0,
            records: 0,
            current_provider: None,
        };
        s.write(&Record::Magic)?;
        Ok(s)
    }

    /// Appends one record, in one `write_all` call: the writer sees record
    /// boundaries at its calls (the manager's output relies on it to never
    /// end in half a record).
    pub fn write(&mut self, record: &Record<'_>) -> Result<(), OutputError> {
        if let Record::ProviderInfo { id, .. } | Record::ProviderSection { id } = record {
            self.current_provider = Some(*id);
        }
        self.buf.clear();
        let n = encode(record, &mut self.buf)?;
        self.out.write_all(&self.buf)?;
        self.bytes += n as u64;
        self.records += 1;
        Ok(())
    }

    /// Makes provider `id` (already introduced by its provider info record)
    /// the one whose records follow, writing a provider section record if
    /// another provider's records came last.
    pub fn enter_provider(&mut self, id: u32) -> Result<(), OutputError> {
        if self.current_provider == Some(id) {
            return Ok(());
        }
        self.write(&Record::ProviderSection { id })
    }

    /// Appends bytes that already hold whole, validated records (never
    /// provider info or section records), in one `write_all` call.
    pub fn write_raw(&mut self, bytes: &[u8], records: u64) -> Result<(), OutputError> {
        self.out.write_all(bytes)?;
        self.bytes += bytes.len() as u64;
        self.records += records;
        Ok(())
    }

    /// Appends whole records of another stream (provider records a flight
    /// recorder collected, with their provider info and section records):
    /// which provider is current is unknown after them, so the next
    /// [`FxtStream::enter_provider`] writes a section record.
    pub fn write_foreign(&mut self, bytes: &[u8], records: u64) -> Result<(), OutputError> {
        self.out.write_all(bytes)?;
        self.bytes += bytes.len() as u64;
        self.records += records;
        self.current_provider = None;
        Ok(())
    }

    /// Bytes written so far, the magic number record included.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Records written so far, the magic number record included.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Hands what is buffered to the underlying writer (a reader at the
    /// other end of a pipe sees whole records up to here).
    pub fn flush(&mut self) -> Result<(), OutputError> {
        Ok(self.out.flush()?)
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> Result<W, OutputError> {
        self.out.flush()?;
        Ok(self.out)
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The underlying writer, to act on it between records.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// The underlying writer, without flushing it (after a failure, say).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// One provider's sections in the output: the first begins with its
/// provider info record and the initialization record (timestamps in
/// nanoseconds), every later one with a provider section record. Every
/// provider's records, the kernel's and userspace providers', start their
/// sections here.
#[derive(Clone, Debug)]
pub struct ProviderSections {
    id: u32,
    name: String,
    introduced: bool,
}

impl ProviderSections {
    /// The provider's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Provider `id`, named `name`, not yet in the output.
    pub fn new(id: u32, name: &str) -> Self {
        ProviderSections {
            id,
            name: name.to_owned(),
            introduced: false,
        }
    }

    /// The provider's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Begins a section of the provider's records: its provider info and
    /// initialization records the first time, else a provider section
    /// record.
    pub fn begin<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        if self.introduced {
            return out.write(&Record::ProviderSection { id: self.id });
        }
        self.introduced = true;
        out.write(&Record::ProviderInfo {
            id: self.id,
            name: self.name.as_str().into(),
        })?;
        out.write(&Record::Initialization {
            ticks_per_second: 1_000_000_000,
        })
    }
}

/// The string table of one provider in the output.
#[derive(Default)]
pub struct StringTable {
    /// Hashed with foldhash: every event looks its strings up here, and
    /// the keys are the recorder's own names, not an attacker's.
    indexes: HashMap<String, u16, foldhash::fast::RandomState>,
    next: u16,
}

impl StringTable {
    /// An empty table.
    pub fn new() -> Self {
        StringTable {
            indexes: HashMap::default(),
            next: 1,
        }
    }

    /// A reference to `s`, writing its string record to `stream` the first time.
    ///
    /// Once all 32 767 indexes are used, new strings are returned inline.
    pub fn intern<'s, W: Write>(
        &mut self,
        stream: &mut FxtStream<W>,
        s: &'s str,
    ) -> Result<StringRef<'s>, OutputError> {
        if s.is_empty() {
            return Ok(StringRef::Empty);
        }
        if let Some(&i) = self.indexes.get(s) {
            return Ok(StringRef::Index(i));
        }
        if self.next > MAX_STRING_INDEX || s.len() > usize::from(MAX_STRING_INDEX) {
            return Ok(StringRef::inline(s));
        }
        let index = self.next;
        stream.write(&Record::String {
            index,
            value: s.into(),
        })?;
        self.next += 1;
        self.indexes.insert(s.to_owned(), index);
        Ok(StringRef::Index(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::fxt::read::Reader;

    #[test]
    fn stream_starts_with_magic_and_interns_once() {
        let mut s = FxtStream::new(Vec::new()).unwrap();
        let mut t = StringTable::new();
        let a = t.intern(&mut s, "sched").unwrap();
        let b = t.intern(&mut s, "sched").unwrap();
        let e = t.intern(&mut s, "").unwrap();
        assert_eq!(a, StringRef::Index(1));
        assert_eq!(b, StringRef::Index(1));
        assert_eq!(e, StringRef::Empty);
        assert_eq!(s.records(), 2);
        let bytes = s.finish().unwrap();
        assert_eq!(
            &bytes[..8],
            &[0x10, 0x00, 0x04, 0x46, 0x78, 0x54, 0x16, 0x00]
        );
        let recs: Vec<_> = Reader::new(&bytes).map(|r| r.unwrap().1).collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(
            recs[1],
            Record::String {
                index: 1,
                value: "sched".into()
            }
        );
    }

    #[test]
    fn entering_a_provider_writes_a_section_only_when_another_came_last() {
        let mut s = FxtStream::new(Vec::new()).unwrap();
        s.write(&Record::ProviderInfo {
            id: 1,
            name: "kernel".into(),
        })
        .unwrap();
        s.enter_provider(1).unwrap();
        assert_eq!(s.records(), 2);
        s.write(&Record::ProviderSection { id: 2 }).unwrap();
        s.enter_provider(1).unwrap();
        s.enter_provider(1).unwrap();
        assert_eq!(s.records(), 4);
        let bytes = s.finish().unwrap();
        let last = trace_common::fxt::read::Reader::new(&bytes)
            .last()
            .unwrap()
            .unwrap()
            .1;
        assert_eq!(last, Record::ProviderSection { id: 1 });
    }

    #[test]
    fn full_table_falls_back_to_inline() {
        let mut s = FxtStream::new(std::io::sink()).unwrap();
        let mut t = StringTable::new();
        t.next = MAX_STRING_INDEX;
        assert_eq!(
            t.intern(&mut s, "last").unwrap(),
            StringRef::Index(MAX_STRING_INDEX)
        );
        assert_eq!(
            t.intern(&mut s, "overflow").unwrap(),
            StringRef::inline("overflow")
        );
        assert_eq!(
            t.intern(&mut s, "last").unwrap(),
            StringRef::Index(MAX_STRING_INDEX)
        );
    }
}
