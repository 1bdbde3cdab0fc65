//! Decoding FXT bytes into [`Record`]s, and the per-provider state needed to
//! interpret them.
//!
//! [`decode`] decodes the one record at the start of a byte slice; [`Reader`]
//! iterates over every record of a slice. Neither ever panics nor reads out
//! of bounds, whatever the input. Strings and payloads are borrowed from the
//! input; argument lists are owned.
//!
//! What the reader does with imperfect data (format reference §4.4, §8.3):
//!
//! - Records are framed by their size field (`[4..15]`, or `[4..35]` for a
//!   large record). A trailing partial word, or a record whose size runs past
//!   the end of the data, gives one [`ReadErrorKind::Truncated`] error and
//!   ends the iteration.
//! - A size of 0 gives a [`ReadErrorKind::ZeroSize`] error; reading goes on
//!   with the next word.
//! - A well-framed record whose content is malformed (invalid UTF-8, a
//!   string, koid or argument running past the record's end, an argument of
//!   size 0, an initialization record with 0 ticks per second) gives an
//!   error for that record; reading goes on with the next record.
//! - Record types 10–14, unknown metadata, trace info, event, scheduling and
//!   large record types, and large blob formats other than 0 and 1, decode as
//!   [`Record::Unknown`] holding the whole record — not an error.
//! - Arguments of unknown types are skipped by their size and left out of
//!   the argument list; words after the known content of a record or an
//!   argument (such as the legacy scope word of instant events) are ignored.
//! - Reserved bits are ignored.
//!
//! [`TraceState`] keeps the per-provider string and thread tables and tick
//! rates (§4.2, §4.3) and resolves references against them.

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::iter::FusedIterator;

use super::wire::{self, arg_type, get, metadata_type, record_type, sched_type};
use super::{Arg, ArgValue, EventKind, LargeBlob, Record, StringRef, ThreadRef};

/// What is wrong with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The data ends inside a record: a partial header word, or a size that
    /// runs past the end of the data.
    Truncated,
    /// The record's size field is 0.
    ZeroSize,
    /// A part of the record runs past the end given by the record's size.
    Overrun {
        /// The part that does not fit.
        what: &'static str,
    },
    /// A string is not valid UTF-8.
    InvalidUtf8 {
        /// Which string.
        what: &'static str,
    },
    /// An argument's size field is 0.
    ZeroArgSize,
    /// A value that is not allowed (such as 0 ticks per second).
    InvalidValue {
        /// Which value.
        what: &'static str,
    },
}

impl fmt::Display for ReadErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadErrorKind::Truncated => f.write_str("record truncated by the end of the data"),
            ReadErrorKind::ZeroSize => f.write_str("record with size 0"),
            ReadErrorKind::Overrun { what } => {
                write!(f, "{what} runs past the end of the record")
            }
            ReadErrorKind::InvalidUtf8 { what } => write!(f, "{what} is not valid UTF-8"),
            ReadErrorKind::ZeroArgSize => f.write_str("argument with size 0"),
            ReadErrorKind::InvalidValue { what } => write!(f, "invalid {what}"),
        }
    }
}

impl core::error::Error for ReadErrorKind {}

/// A malformed record and where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// Byte offset of the record in the data given to the [`Reader`].
    pub offset: usize,
    /// What is wrong.
    pub kind: ReadErrorKind,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte offset {:#x}: {}", self.offset, self.kind)
    }
}

impl core::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.kind)
    }
}

type Result<T> = core::result::Result<T, ReadErrorKind>;

/// Whether `bytes` starts with the little-endian magic number record.
pub fn starts_with_magic(bytes: &[u8]) -> bool {
    bytes.first_chunk::<8>() == Some(&wire::MAGIC.to_le_bytes())
}

/// The scope of an instant event: the legacy word some writers (Fuchsia's
/// C engine, trace-provider's `instant!(process, ...)`) put after the
/// arguments. `record` is the decoded record and `raw` its bytes; `None`
/// for anything else than an instant, and for an instant without the word
/// (thread scope).
pub fn instant_scope(record: &Record<'_>, raw: &[u8]) -> Option<InstantScope> {
    if !matches!(
        record,
        Record::Event {
            kind: EventKind::Instant,
            ..
        }
    ) {
        return None;
    }
    let (_, len) = frame(raw).ok()?;
    let plain = super::write::encoded_len(record).ok()?;
    if len != plain + 8 {
        return None;
    }
    let word = raw.get(plain..len)?.first_chunk::<8>()?;
    match u64::from_le_bytes(*word) {
        1 => Some(InstantScope::Process),
        2 => Some(InstantScope::Global),
        _ => None,
    }
}

/// The scope of an instant event wider than its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstantScope {
    /// The whole process.
    Process,
    /// The whole system.
    Global,
}

/// Decodes the record at the start of `bytes`; returns it and its length in
/// bytes. Bytes after the record are not looked at.
pub fn decode(bytes: &[u8]) -> Result<(Record<'_>, usize)> {
    let (header, len) = frame(bytes)?;
    let rec = bytes.get(..len).ok_or(ReadErrorKind::Truncated)?;
    Ok((decode_record(header, rec)?, len))
}

/// The header and the length in bytes of the record at the start of `bytes`.
fn frame(bytes: &[u8]) -> Result<(u64, usize)> {
    let header = bytes
        .first_chunk::<8>()
        .map(|b| u64::from_le_bytes(*b))
        .ok_or(ReadErrorKind::Truncated)?;
    let size = wire::record_size_words(header);
    if size == 0 {
        return Err(ReadErrorKind::ZeroSize);
    }
    let len = usize::try_from(size)
        .ok()
        .and_then(|s| s.checked_mul(8))
        .ok_or(ReadErrorKind::Truncated)?;
    if len > bytes.len() {
        return Err(ReadErrorKind::Truncated);
    }
    Ok((header, len))
}

/// Iterates over the records of a byte slice, yielding each with its byte
/// offset, or an error (see the [module documentation](self) for what
/// happens after one). Never panics; always terminates.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Reader<'a> {
    /// A reader over `data`, starting at its first byte.
    pub fn new(data: &'a [u8]) -> Self {
        Reader {
            data,
            pos: 0,
            done: false,
        }
    }

    /// Byte offset of the next record to be read.
    pub fn offset(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = core::result::Result<(usize, Record<'a>), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let offset = self.pos;
        let rest = match self.data.get(offset..) {
            Some(rest) if !rest.is_empty() => rest,
            _ => {
                self.done = true;
                return None;
            }
        };
        let err = |kind| Some(Err(ReadError { offset, kind }));
        match frame(rest) {
            Ok((header, len)) => {
                self.pos = offset.saturating_add(len);
                match rest.get(..len) {
                    Some(rec) => match decode_record(header, rec) {
                        Ok(record) => Some(Ok((offset, record))),
                        Err(kind) => err(kind),
                    },
                    None => {
                        self.done = true;
                        err(ReadErrorKind::Truncated)
                    }
                }
            }
            Err(ReadErrorKind::ZeroSize) => {
                // Skip the zero-size header word and go on.
                self.pos = offset.saturating_add(8);
                err(ReadErrorKind::ZeroSize)
            }
            Err(kind) => {
                self.done = true;
                err(kind)
            }
        }
    }
}

impl FusedIterator for Reader<'_> {}

/// A read position inside one record.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn word(&mut self, what: &'static str) -> Result<u64> {
        let w = self
            .data
            .get(self.pos..)
            .and_then(|r| r.first_chunk::<8>())
            .map(|b| u64::from_le_bytes(*b))
            .ok_or(ReadErrorKind::Overrun { what })?;
        self.pos += 8;
        Ok(w)
    }

    /// A stream of `len` bytes (plus its padding).
    fn bytes(&mut self, len: u64, what: &'static str) -> Result<&'a [u8]> {
        let overrun = ReadErrorKind::Overrun { what };
        let len = usize::try_from(len).map_err(|_| overrun)?;
        let padded = len.checked_add(7).ok_or(overrun)? & !7;
        let end = self.pos.checked_add(padded).ok_or(overrun)?;
        let stream = self
            .data
            .get(self.pos..end)
            .and_then(|s| s.get(..len))
            .ok_or(overrun)?;
        self.pos = end;
        Ok(stream)
    }

    fn str(&mut self, len: u64, what: &'static str) -> Result<&'a str> {
        core::str::from_utf8(self.bytes(len, what)?)
            .map_err(|_| ReadErrorKind::InvalidUtf8 { what })
    }

    fn string_ref(&mut self, r: u64, what: &'static str) -> Result<StringRef<'a>> {
        let r = (r & 0xFFFF) as u16;
        Ok(if r & wire::STRING_REF_INLINE != 0 {
            let len = r & wire::STRING_REF_LEN_MASK;
            if len == 0 {
                StringRef::Empty
            } else {
                StringRef::Inline(Cow::Borrowed(self.str(u64::from(len), what)?))
            }
        } else if r == 0 {
            StringRef::Empty
        } else {
            StringRef::Index(r)
        })
    }

    fn thread_ref(&mut self, r: u64) -> Result<ThreadRef> {
        let r = (r & 0xFF) as u8;
        Ok(if r == wire::THREAD_REF_INLINE {
            ThreadRef::Inline {
                process: self.word("process koid")?,
                thread: self.word("thread koid")?,
            }
        } else {
            ThreadRef::Index(r)
        })
    }

    fn args(&mut self, count: u64) -> Result<Cow<'a, [Arg<'a>]>> {
        // Each argument takes a word at least: a count is not trusted past
        // the words left.
        let left = (self.data.len().saturating_sub(self.pos) / 8) as u64;
        let mut args = Vec::with_capacity(count.min(wire::MAX_ARGS as u64).min(left) as usize);
        for _ in 0..count {
            let start = self.pos;
            let header = self.word("argument")?;
            let size = get(header, 4, 15) as usize;
            if size == 0 {
                return Err(ReadErrorKind::ZeroArgSize);
            }
            let end = start + size * 8;
            let data = self
                .data
                .get(start..end)
                .ok_or(ReadErrorKind::Overrun { what: "argument" })?;
            let mut a = Cursor { data, pos: 8 };
            if let Some(arg) = a.arg(header)? {
                args.push(arg);
            }
            self.pos = end;
        }
        Ok(Cow::Owned(args))
    }

    /// Decodes one argument whose header has been read; `None` for an
    /// argument type this reader does not know.
    fn arg(&mut self, header: u64) -> Result<Option<Arg<'a>>> {
        let ty = get(header, 0, 3) as u8;
        if ty > arg_type::BLOB {
            return Ok(None);
        }
        let name = self.string_ref(get(header, 16, 31), "argument name")?;
        let bits = get(header, 32, 63);
        let value = match ty {
            arg_type::NULL => ArgValue::Null,
            arg_type::INT32 => ArgValue::Int32(bits as u32 as i32),
            arg_type::UINT32 => ArgValue::Uint32(bits as u32),
            arg_type::INT64 => ArgValue::Int64(self.word("argument value")? as i64),
            arg_type::UINT64 => ArgValue::Uint64(self.word("argument value")?),
            arg_type::DOUBLE => ArgValue::Double(f64::from_bits(self.word("argument value")?)),
            arg_type::STRING => ArgValue::String(self.string_ref(bits, "argument value")?),
            arg_type::POINTER => ArgValue::Pointer(self.word("argument value")?),
            arg_type::KOID => ArgValue::Koid(self.word("argument value")?),
            arg_type::BOOL => ArgValue::Bool(bits & 1 != 0),
            _ => ArgValue::Blob(Cow::Borrowed(self.bytes(bits, "argument blob")?)),
        };
        Ok(Some(Arg { name, value }))
    }
}

fn unknown(rtype: u8, rec: &[u8]) -> Record<'_> {
    Record::Unknown {
        record_type: rtype,
        bytes: Cow::Borrowed(rec),
    }
}

/// Decodes a framed record: `rec` is the whole record, header included.
fn decode_record(h: u64, rec: &[u8]) -> Result<Record<'_>> {
    let rtype = get(h, 0, 3) as u8;
    let mut c = Cursor { data: rec, pos: 8 };
    let size_words = rec.len() / 8;
    Ok(match rtype {
        record_type::METADATA => {
            let id = get(h, 20, 51) as u32;
            match get(h, 16, 19) as u8 {
                metadata_type::PROVIDER_INFO => Record::ProviderInfo {
                    id,
                    name: Cow::Borrowed(c.str(get(h, 52, 59), "provider name")?),
                },
                metadata_type::PROVIDER_SECTION => Record::ProviderSection { id },
                metadata_type::PROVIDER_EVENT => Record::ProviderEvent {
                    id,
                    event: get(h, 52, 55) as u8,
                },
                metadata_type::TRACE_INFO => {
                    let info_type = get(h, 20, 23) as u8;
                    let data = get(h, 24, 63);
                    if info_type == wire::trace_info_type::MAGIC_NUMBER && data == wire::MAGIC_VALUE
                    {
                        Record::Magic
                    } else if size_words == 1 {
                        Record::TraceInfo { info_type, data }
                    } else {
                        unknown(rtype, rec)
                    }
                }
                _ => unknown(rtype, rec),
            }
        }
        record_type::INITIALIZATION => {
            let ticks_per_second = c.word("ticks per second")?;
            if ticks_per_second == 0 {
                return Err(ReadErrorKind::InvalidValue {
                    what: "ticks per second (0)",
                });
            }
            Record::Initialization { ticks_per_second }
        }
        record_type::STRING => Record::String {
            index: get(h, 16, 30) as u16,
            value: Cow::Borrowed(c.str(get(h, 32, 46), "string")?),
        },
        record_type::THREAD => Record::Thread {
            index: get(h, 16, 23) as u8,
            process: c.word("process koid")?,
            thread: c.word("thread koid")?,
        },
        record_type::EVENT => {
            let ty = get(h, 16, 19) as u8;
            if ty > wire::event_type::FLOW_END {
                return Ok(unknown(rtype, rec));
            }
            let ts = c.word("timestamp")?;
            let thread = c.thread_ref(get(h, 24, 31))?;
            let category = c.string_ref(get(h, 32, 47), "category")?;
            let name = c.string_ref(get(h, 48, 63), "name")?;
            let args = c.args(get(h, 20, 23))?;
            let extra = match EventKind::from_parts(ty, 0).and_then(EventKind::extra_word) {
                Some(_) => c.word("event data")?,
                None => 0,
            };
            let kind = EventKind::from_parts(ty, extra)
                .ok_or(ReadErrorKind::InvalidValue { what: "event type" })?;
            Record::Event {
                ts,
                thread,
                category,
                name,
                args,
                kind,
            }
        }
        record_type::BLOB => {
            let name = c.string_ref(get(h, 16, 31), "blob name")?;
            let payload = c.bytes(get(h, 32, 46), "blob payload")?;
            Record::Blob {
                name,
                blob_type: get(h, 48, 55) as u8,
                payload: Cow::Borrowed(payload),
            }
        }
        record_type::USERSPACE_OBJECT => {
            let pointer = c.word("pointer")?;
            let process = match get(h, 16, 23) as u8 {
                wire::THREAD_REF_INLINE => ThreadRef::Inline {
                    process: c.word("process koid")?,
                    thread: 0,
                },
                i => ThreadRef::Index(i),
            };
            let name = c.string_ref(get(h, 24, 39), "name")?;
            let args = c.args(get(h, 40, 43))?;
            Record::UserspaceObject {
                pointer,
                process,
                name,
                args,
            }
        }
        record_type::KERNEL_OBJECT => {
            let koid = c.word("koid")?;
            let name = c.string_ref(get(h, 24, 39), "name")?;
            let args = c.args(get(h, 40, 43))?;
            Record::KernelObject {
                koid,
                obj_type: get(h, 16, 23) as u8,
                name,
                args,
            }
        }
        record_type::SCHEDULING => match get(h, 60, 63) as u8 {
            sched_type::LEGACY_CONTEXT_SWITCH => {
                let ts = c.word("timestamp")?;
                let outgoing_thread = c.thread_ref(get(h, 28, 35))?;
                let incoming_thread = c.thread_ref(get(h, 36, 43))?;
                Record::LegacyContextSwitch {
                    ts,
                    cpu: get(h, 16, 23) as u8,
                    outgoing_state: get(h, 24, 27) as u8,
                    outgoing_thread,
                    incoming_thread,
                    outgoing_priority: get(h, 44, 51) as u8,
                    incoming_priority: get(h, 52, 59) as u8,
                }
            }
            sched_type::CONTEXT_SWITCH => {
                let ts = c.word("timestamp")?;
                let outgoing_tid = c.word("outgoing thread koid")?;
                let incoming_tid = c.word("incoming thread koid")?;
                let args = c.args(get(h, 16, 19))?;
                Record::ContextSwitch {
                    ts,
                    cpu: get(h, 20, 35) as u16,
                    outgoing_state: get(h, 36, 39) as u8,
                    outgoing_tid,
                    incoming_tid,
                    args,
                }
            }
            sched_type::THREAD_WAKEUP => {
                let ts = c.word("timestamp")?;
                let tid = c.word("thread koid")?;
                let args = c.args(get(h, 16, 19))?;
                Record::ThreadWakeup {
                    ts,
                    cpu: get(h, 20, 35) as u16,
                    tid,
                    args,
                }
            }
            _ => unknown(rtype, rec),
        },
        record_type::LOG => {
            let ts = c.word("timestamp")?;
            let thread = c.thread_ref(get(h, 32, 39))?;
            let message = c.str(get(h, 16, 30), "log message")?;
            Record::Log {
                ts,
                thread,
                message: Cow::Borrowed(message),
            }
        }
        record_type::LARGE => {
            if get(h, 36, 39) as u8 != wire::large_type::BLOB {
                return Ok(unknown(rtype, rec));
            }
            match get(h, 40, 43) as u8 {
                wire::large_blob_format::EVENT => {
                    let f = c.word("blob format header")?;
                    let category = c.string_ref(get(f, 0, 15), "category")?;
                    let name = c.string_ref(get(f, 16, 31), "name")?;
                    let ts = c.word("timestamp")?;
                    let thread = c.thread_ref(get(f, 36, 43))?;
                    let args = c.args(get(f, 32, 35))?;
                    let len = c.word("blob size")?;
                    let payload = c.bytes(len, "blob payload")?;
                    Record::LargeBlob(LargeBlob::Event {
                        category,
                        name,
                        ts,
                        thread,
                        args,
                        payload: Cow::Borrowed(payload),
                    })
                }
                wire::large_blob_format::ATTACHMENT => {
                    let f = c.word("blob format header")?;
                    let category = c.string_ref(get(f, 0, 15), "category")?;
                    let name = c.string_ref(get(f, 16, 31), "name")?;
                    let len = c.word("blob size")?;
                    let payload = c.bytes(len, "blob payload")?;
                    Record::LargeBlob(LargeBlob::Attachment {
                        category,
                        name,
                        payload: Cow::Borrowed(payload),
                    })
                }
                _ => unknown(rtype, rec),
            }
        }
        _ => unknown(rtype, rec),
    })
}

/// The tables of one provider (§4.2): its name, tick rate, string table and
/// thread table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderTables {
    name: Option<String>,
    ticks_per_second: u64,
    strings: BTreeMap<u16, String>,
    threads: BTreeMap<u8, (u64, u64)>,
}

/// The state of a provider nothing is known about yet.
static EMPTY_PROVIDER: ProviderTables = ProviderTables::new(None);

impl ProviderTables {
    /// Empty tables at 10⁹ ticks per second.
    const fn new(name: Option<String>) -> Self {
        ProviderTables {
            name,
            ticks_per_second: wire::DEFAULT_TICKS_PER_SECOND,
            strings: BTreeMap::new(),
            threads: BTreeMap::new(),
        }
    }

    /// The name from the provider info record; `None` for the implicit
    /// provider 0 and for a provider only seen in a provider section record.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Ticks per second from the last initialization record, else 10⁹.
    pub fn ticks_per_second(&self) -> u64 {
        self.ticks_per_second
    }

    /// The string at `index` of the string table.
    pub fn string(&self, index: u16) -> Option<&str> {
        self.strings.get(&index).map(String::as_str)
    }

    /// The (process koid, thread koid) at `index` of the thread table.
    pub fn thread(&self, index: u8) -> Option<(u64, u64)> {
        self.threads.get(&index).copied()
    }
}

/// What a reader knows at a point of a trace: the tables of every provider
/// seen so far and which provider is current (§4.2, §4.3). Feed it every
/// record in file order with [`TraceState::apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceState {
    providers: BTreeMap<u32, ProviderTables>,
    current: u32,
}

impl Default for TraceState {
    fn default() -> Self {
        Self::new()
    }
}

impl TraceState {
    /// The state at the start of a trace: the implicit provider 0, with
    /// empty tables and 10⁹ ticks per second, is current.
    pub fn new() -> Self {
        let mut providers = BTreeMap::new();
        providers.insert(0, ProviderTables::new(None));
        TraceState {
            providers,
            current: 0,
        }
    }

    /// Updates the state with `record`:
    ///
    /// - provider info: fresh, empty tables for that id (replacing any
    ///   earlier ones), made current;
    /// - provider section: that provider made current, keeping its tables
    ///   (an id never declared gets empty tables);
    /// - initialization, string and thread records: update the current
    ///   provider (index 0 and 0 ticks per second are ignored);
    /// - anything else: no change.
    pub fn apply(&mut self, record: &Record<'_>) {
        match record {
            Record::ProviderInfo { id, name } => {
                self.providers
                    .insert(*id, ProviderTables::new(Some(String::from(&**name))));
                self.current = *id;
            }
            Record::ProviderSection { id } => {
                self.providers
                    .entry(*id)
                    .or_insert_with(|| ProviderTables::new(None));
                self.current = *id;
            }
            Record::Initialization { ticks_per_second } if *ticks_per_second != 0 => {
                self.current_mut().ticks_per_second = *ticks_per_second;
            }
            Record::String { index, value } if *index != 0 => {
                self.current_mut()
                    .strings
                    .insert(*index, String::from(&**value));
            }
            Record::Thread {
                index,
                process,
                thread,
            } if *index != 0 => {
                self.current_mut()
                    .threads
                    .insert(*index, (*process, *thread));
            }
            _ => {}
        }
    }

    fn current_mut(&mut self) -> &mut ProviderTables {
        self.providers
            .entry(self.current)
            .or_insert_with(|| ProviderTables::new(None))
    }

    /// The tables of the current provider.
    pub fn current(&self) -> &ProviderTables {
        self.providers.get(&self.current).unwrap_or(&EMPTY_PROVIDER)
    }

    /// The tables of provider `id`, if it has been seen.
    pub fn provider(&self, id: u32) -> Option<&ProviderTables> {
        self.providers.get(&id)
    }

    /// The current provider's id and name (`None` if it had no provider
    /// info record).
    pub fn current_provider(&self) -> (u32, Option<&str>) {
        (self.current, self.current().name())
    }

    /// The text of a string ref: `""` for [`StringRef::Empty`], the text of an
    /// inline string, or the current provider's table entry for an index
    /// (`None` if the index is not in the table).
    pub fn string<'s>(&'s self, r: &'s StringRef<'_>) -> Option<&'s str> {
        match r {
            StringRef::Empty => Some(""),
            StringRef::Inline(s) => Some(s),
            StringRef::Index(i) => self.current().string(*i),
        }
    }

    /// The (process koid, thread koid) of a thread ref: the inline koids, or
    /// the current provider's table entry for an index (`None` if the index
    /// is not in the table).
    pub fn thread(&self, r: ThreadRef) -> Option<(u64, u64)> {
        match r {
            ThreadRef::Inline { process, thread } => Some((process, thread)),
            ThreadRef::Index(i) => self.current().thread(i),
        }
    }

    /// The value of the first argument among `args` whose name resolves to
    /// `name`.
    pub fn arg<'r, 'a>(&self, args: &'r [Arg<'a>], name: &str) -> Option<&'r ArgValue<'a>> {
        args.iter()
            .find(|a| self.string(&a.name) == Some(name))
            .map(|a| &a.value)
    }

    /// The owning process of a thread kernel object record: its `"process"`
    /// koid argument.
    pub fn process_of_thread(&self, args: &[Arg<'_>]) -> Option<u64> {
        match self.arg(args, "process") {
            Some(ArgValue::Koid(k)) => Some(*k),
            _ => None,
        }
    }

    /// The current provider's ticks per second.
    pub fn ticks_per_second(&self) -> u64 {
        self.current().ticks_per_second
    }

    /// `ticks` of the current provider in nanoseconds, computed with 128-bit
    /// arithmetic and saturating at `u64::MAX`.
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        let ns = u128::from(ticks) * 1_000_000_000;
        ns.checked_div(u128::from(self.ticks_per_second()))
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(u64::MAX)
    }
}
