//! The file-order pass, as Perfetto's `FuchsiaTraceTokenizer` makes it.
//!
//! Records are framed by the 12-bit size field of their header, whatever
//! their type. Metadata, initialization, string, thread, kernel object and
//! blob records take effect at once; events and scheduling records are
//! resolved against the current provider's tables (as they are *now*, in
//! file order) and handed on as [`Item`]s, which the parser then sees in
//! timestamp order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Read};

use trace_common::fxt::read::{decode, instant_scope};
use trace_common::fxt::stream::{MAX_RECORD, RecordStream, StreamErrorKind};
use trace_common::fxt::wire;
use trace_common::fxt::{Arg, ArgValue, EventKind, LargeBlob, Record, StringRef, ThreadRef};
use trace_perfetto::{BLOB_TYPE_PERFETTO, SampleReader};

use super::findings::{Findings, Kind};
use super::items::makes_thread_row;
pub use super::items::{Body, Item, Sym, Value};
use super::order::ItemOrder;

/// The strings of a check, each stored once.
#[derive(Debug, Default)]
pub struct Symbols {
    names: Vec<String>,
    index: HashMap<String, Sym>,
}

impl Symbols {
    /// The symbol of `s`.
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.index.get(s) {
            return sym;
        }
        let sym = Sym(u32::try_from(self.names.len()).unwrap_or(u32::MAX));
        self.names.push(s.to_owned());
        self.index.insert(s.to_owned(), sym);
        sym
    }

    /// The text of `sym`.
    pub fn get(&self, sym: Sym) -> &str {
        self.names.get(sym.0 as usize).map_or("", String::as_str)
    }
}

/// Counts of what the importer takes and what it leaves.
#[derive(Debug, Default)]
pub struct Counts {
    /// Records read, all kinds.
    pub records: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Imported, by what they become.
    pub imported: HashMap<&'static str, u64>,
    /// Ignored by the importer, by kind.
    pub ignored: HashMap<&'static str, u64>,
    /// Dropped on a violation.
    pub dropped: u64,
}

impl Counts {
    fn import(&mut self, what: &'static str) {
        *self.imported.entry(what).or_default() += 1;
    }
    fn ignore(&mut self, what: &'static str) {
        *self.ignored.entry(what).or_default() += 1;
    }
}

/// One provider's tables as the importer keeps them.
#[derive(Debug)]
struct Provider {
    name: String,
    ticks_per_second: u64,
    initialized: bool,
    warned_uninitialized: bool,
    strings: HashMap<u16, Sym>,
    threads: HashMap<u8, (u64, u64)>,
}

impl Provider {
    fn new(name: String) -> Self {
        Provider {
            name,
            ticks_per_second: wire::DEFAULT_TICKS_PER_SECOND,
            initialized: false,
            warned_uninitialized: false,
            strings: HashMap::new(),
            threads: HashMap::new(),
        }
    }
}

/// Everything the file-order pass learnt.
#[derive(Debug, Default)]
pub struct Tokenized {
    /// Events and scheduling records, to be read back in time order.
    pub items: ItemOrder,
    /// Why an item could not be put aside, if one could not.
    spill_error: Option<io::Error>,
    /// Threads some instant, duration or flow event names.
    pub event_threads: HashSet<u64>,
    pub symbols: Symbols,
    /// The process of each thread, from thread kernel object records (the
    /// last one wins, as in the importer, whatever its place in time).
    pub thread_pid: HashMap<u64, u64>,
    /// Every thread kernel object record, in file order: (offset, thread,
    /// the process it names, if it names one).
    pub thread_objects: Vec<(u64, u64, Option<u64>)>,
    /// Names of threads and processes, for examples.
    pub thread_names: HashMap<u64, String>,
    pub process_names: HashMap<u64, String>,
    /// When each thread was created, from `fork` / `thread_create`
    /// instants (`kernel:proc`, as trace-cli records them).
    pub created: HashMap<u64, i64>,
    pub counts: Counts,
    /// Providers declared, in order: (id, name).
    pub providers: Vec<(u32, String)>,
    /// Bytes of embedded Perfetto packets (blob type 3).
    pub perfetto_bytes: u64,
    /// Stack samples in those packets, by timebase.
    pub samples: BTreeMap<String, u64>,
    /// Whether framing broke, so the rest of the file is not imported.
    pub fatal: bool,
}

/// The `ticks` of a provider at `ticks_per_second` in ns, as Perfetto's
/// `TicksToNs` computes it: `None` where it gives -1.
pub fn ticks_to_ns(ticks: u64, ticks_per_second: u64) -> Option<i64> {
    if ticks_per_second == 0 {
        return None;
    }
    const NS: u64 = 1_000_000_000;
    let hi = ticks >> 32;
    let lo = ticks & 0xFFFF_FFFF;
    let per = (NS << 32) / ticks_per_second;
    let result_hi = hi.checked_mul(per)?;
    let result_lo = lo * NS / ticks_per_second;
    let sum = result_hi.wrapping_add(result_lo);
    i64::try_from(sum).ok()
}

/// Reads the FXT stream `input` as the importer's tokenizer does,
/// recording what it finds; an error is one of reading `input` or of
/// writing the items out to be sorted.
pub fn tokenize(input: impl Read, findings: &mut Findings) -> io::Result<Tokenized> {
    let mut t = Tokenizer {
        out: Tokenized::default(),
        providers: HashMap::new(),
        current: Some(0),
        findings,
        provider_events: Vec::new(),
        drop_counters: std::collections::HashSet::new(),
        perfetto: SampleReader::new(),
    };
    t.providers.insert(0, Provider::new(String::new()));
    t.run(input)?;
    for (offset, id, event) in std::mem::take(&mut t.provider_events) {
        if t.drop_counters.contains(&id) {
            continue;
        }
        let name = t
            .providers
            .get(&id)
            .map_or_else(|| format!("#{id}"), |p| format!("{:?}", p.name));
        t.findings.add(Kind::ProviderEventIgnored, offset, None, || {
            format!("provider {name}: event {event} (0 = buffer overflow), and no `dropped*` counter shows it")
        });
    }
    Ok(t.out)
}

struct Tokenizer<'f> {
    out: Tokenized,
    providers: HashMap<u32, Provider>,
    current: Option<u32>,
    findings: &'f mut Findings,
    /// Provider event records: (offset, provider, event).
    provider_events: Vec<(u64, u32, u8)>,
    /// Providers that write a counter whose name starts with `dropped`
    /// (how trace-cli shows drops where Perfetto can see them).
    drop_counters: std::collections::HashSet<u32>,
    /// The Perfetto packets of every blob of type 3, read in file order as
    /// the importer's protobuf reader reads them.
    perfetto: SampleReader,
}

/// A record dropped for a reason the caller reports.
struct Dropped;

impl Tokenizer<'_> {
    fn run(&mut self, input: impl Read) -> io::Result<()> {
        const MAGIC: [u8; 8] = wire::MAGIC.to_le_bytes();
        let mut records = RecordStream::new(input);
        let mut first = true;
        while let Some(next) = records.next_record() {
            let (pos, rec) = match next {
                Ok(found) => found,
                Err(e) => {
                    let offset = e.offset;
                    match e.kind {
                        StreamErrorKind::Read(e) => return Err(e),
                        StreamErrorKind::ZeroSize if !first => {
                            self.findings.add(Kind::ZeroSize, offset, None, || {
                                "the rest of the file is not imported".into()
                            });
                        }
                        StreamErrorKind::Truncated { bytes } if !first => {
                            self.findings.add(Kind::Truncated, offset, None, || {
                                format!("{bytes} bytes at the end do not make a whole record")
                            });
                        }
                        StreamErrorKind::TooLarge { bytes } if !first => {
                            self.findings.add(Kind::Malformed, offset, None, || {
                                format!(
                                    "a record of {bytes} bytes, beyond the {} MiB check reads; \
                                     the rest of the file is not checked",
                                    MAX_RECORD >> 20
                                )
                            });
                        }
                        _ => self.not_fxt(),
                    }
                    self.out.fatal = true;
                    return Ok(());
                }
            };
            if first {
                if rec.get(..8) != Some(&MAGIC[..]) {
                    self.not_fxt();
                    return Ok(());
                }
                first = false;
            }
            let header = u64::from_le_bytes(rec[..8].try_into().unwrap_or_default());
            if (header & 0xF) as u8 == wire::record_type::LARGE {
                let words12 = (header >> 4) & 0xFFF;
                let words = rec.len() as u64 / 8;
                if words != words12 {
                    self.findings.add(Kind::LargeRecordDesync, pos, None, || {
                        format!("large record of {words} words; Perfetto reads {words12}")
                    });
                }
            }
            self.out.counts.records += 1;
            self.out.counts.bytes += rec.len() as u64;
            self.record(pos, header, rec);
            if let Some(e) = self.out.spill_error.take() {
                return Err(e);
            }
        }
        if first {
            self.not_fxt();
        }
        Ok(())
    }

    fn not_fxt(&mut self) {
        self.findings.add(Kind::NotFxt, 0, None, || {
            "the first 8 bytes are not the FXT magic number record".into()
        });
        self.out.fatal = true;
    }

    fn provider(&mut self) -> Option<&mut Provider> {
        self.current.and_then(|id| self.providers.get_mut(&id))
    }

    /// Puts `item` aside for the parser.
    fn item(&mut self, item: Item) {
        if self.out.spill_error.is_some() {
            return;
        }
        if let Err(e) = self.out.items.push(item) {
            self.out.spill_error = Some(e);
        }
    }

    fn record(&mut self, offset: u64, header: u64, rec: &[u8]) {
        let rtype = (header & 0xF) as u8;
        if rtype != wire::record_type::METADATA && self.provider().is_none() {
            self.out.counts.dropped += 1;
            self.findings
                .add(Kind::UndeclaredProvider, offset, None, || {
                    "record after a provider section of a provider with no provider info record"
                        .into()
                });
            return;
        }
        // An initialization record is read raw: 0 ticks per second is
        // accepted by the importer (and then drops every event).
        if rtype == wire::record_type::INITIALIZATION {
            let tps = rec
                .get(8..16)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
            match tps {
                Some(tps) => {
                    if tps == 0 {
                        self.findings
                            .add(Kind::ZeroTicksPerSecond, offset, None, || {
                                "ticks per second 0".into()
                            });
                    }
                    if let Some(p) = self.provider() {
                        p.ticks_per_second = tps;
                        p.initialized = true;
                    }
                }
                None => self.malformed(offset, "initialization record without its word".into()),
            }
            return;
        }
        if rtype == wire::record_type::LARGE {
            self.out.counts.ignore("large records");
            return;
        }
        let record = match decode(rec) {
            Ok((record, _)) => record,
            Err(e) => {
                self.malformed(offset, e.to_string());
                return;
            }
        };
        match record {
            Record::Magic | Record::TraceInfo { .. } => {}
            Record::ProviderInfo { id, name } => {
                self.providers.insert(id, Provider::new(name.to_string()));
                self.current = Some(id);
                self.out.providers.push((id, name.to_string()));
            }
            Record::ProviderSection { id } => {
                self.current = self.providers.contains_key(&id).then_some(id);
            }
            Record::ProviderEvent { id, event } => {
                self.out.counts.ignore("provider events");
                self.provider_events.push((offset, id, event));
            }
            Record::Initialization { .. } => {}
            Record::String { index, value } => {
                if index != 0 {
                    let sym = self.out.symbols.intern(&value);
                    if let Some(p) = self.provider() {
                        p.strings.insert(index, sym);
                    }
                }
            }
            Record::Thread {
                index,
                process,
                thread,
            } => {
                if index != 0
                    && let Some(p) = self.provider()
                {
                    p.threads.insert(index, (process, thread));
                }
            }
            Record::Event { .. } => {
                if self.event(offset, &record, rec).is_err() {
                    self.out.counts.dropped += 1;
                }
            }
            Record::Blob {
                blob_type, payload, ..
            } => {
                if blob_type == BLOB_TYPE_PERFETTO {
                    self.out.perfetto_bytes += payload.len() as u64;
                    self.out.counts.import("Perfetto packet blobs");
                    let (samples, problems) = self.perfetto.feed(&payload);
                    for s in samples {
                        *self.out.samples.entry(s.timebase).or_default() += 1;
                    }
                    for e in problems {
                        self.findings
                            .add(Kind::BadPerfettoPacket, offset, None, || e.to_string());
                    }
                } else {
                    self.out.counts.ignore("blobs (not type 3)");
                }
            }
            Record::LargeBlob(LargeBlob::Event { .. } | LargeBlob::Attachment { .. }) => {
                self.out.counts.ignore("large records");
            }
            Record::UserspaceObject { .. } => self.out.counts.ignore("userspace objects"),
            Record::Log { .. } => {
                self.out.counts.ignore("log records");
                self.findings
                    .add(Kind::LogIgnored, offset, None, String::new);
            }
            Record::KernelObject { .. } => {
                if self.kernel_object(offset, &record).is_err() {
                    self.out.counts.dropped += 1;
                }
            }
            Record::ContextSwitch { .. }
            | Record::ThreadWakeup { .. }
            | Record::LegacyContextSwitch { .. } => {
                if self.scheduling(offset, &record).is_err() {
                    self.out.counts.dropped += 1;
                }
            }
            Record::Unknown { record_type, .. } => {
                self.out.counts.ignore(match record_type {
                    wire::record_type::EVENT => "events of unknown types",
                    wire::record_type::SCHEDULING => "scheduling records of unknown types",
                    wire::record_type::METADATA => "metadata of unknown types",
                    _ => "records of unknown types",
                });
            }
        }
    }

    fn malformed(&mut self, offset: u64, why: String) {
        self.out.counts.dropped += 1;
        self.findings.add(Kind::Malformed, offset, None, || why);
    }

    /// A string reference resolved as the importer does: index 0 and inline
    /// strings are always fine.
    fn string(&mut self, offset: u64, r: &StringRef<'_>) -> Result<Sym, Dropped> {
        match r {
            StringRef::Empty => Ok(self.out.symbols.intern("")),
            StringRef::Inline(s) => Ok(self.out.symbols.intern(s)),
            StringRef::Index(i) => match self.provider().and_then(|p| p.strings.get(i).copied()) {
                Some(sym) => Ok(sym),
                None => {
                    let i = *i;
                    self.findings.add(Kind::InvalidStringRef, offset, None, || {
                        format!("string index {i} is not defined in this provider")
                    });
                    Err(Dropped)
                }
            },
        }
    }

    /// A thread reference: an undefined index reads as (0, 0).
    fn thread(&mut self, offset: u64, ts: Option<i64>, r: ThreadRef) -> (u64, u64) {
        let pair = match r {
            ThreadRef::Inline { process, thread } => (process, thread),
            ThreadRef::Index(i) => match self.provider().and_then(|p| p.threads.get(&i).copied()) {
                Some(pair) => pair,
                None => {
                    self.findings.add(Kind::UndefinedThreadRef, offset, ts, || {
                        format!("thread index {i} is not defined in this provider")
                    });
                    (0, 0)
                }
            },
        };
        for koid in [pair.0, pair.1] {
            self.koid(offset, ts, koid);
        }
        pair
    }

    fn koid(&mut self, offset: u64, ts: Option<i64>, koid: u64) {
        if koid > u64::from(u32::MAX) {
            self.findings.add(Kind::KoidTruncated, offset, ts, || {
                format!("koid {koid:#x} is read as {:#x}", koid as u32)
            });
        }
    }

    /// A timestamp of the current provider in ns, or the finding.
    fn ts(&mut self, offset: u64, ticks: u64) -> Result<i64, Dropped> {
        let Some(p) = self.provider() else {
            return Err(Dropped);
        };
        let tps = p.ticks_per_second;
        let warn = !p.initialized && !p.warned_uninitialized;
        if warn {
            p.warned_uninitialized = true;
        }
        let name = p.name.clone();
        if warn {
            self.findings.add(Kind::NoInitialization, offset, None, || {
                format!("provider {name:?} has events before any initialization record")
            });
        }
        match ticks_to_ns(ticks, tps) {
            Some(ns) => Ok(ns),
            None => {
                self.findings
                    .add(Kind::TimestampOverflow, offset, None, || {
                        format!("{ticks} ticks at {tps} ticks per second")
                    });
                Err(Dropped)
            }
        }
    }

    /// Arguments of an event or scheduling record: every name and string
    /// value must resolve, or the record is dropped.
    fn args(&mut self, offset: u64, args: &[Arg<'_>]) -> Result<Vec<(Sym, Value)>, Dropped> {
        let mut out = Vec::with_capacity(args.len());
        for a in args {
            let name = self.string(offset, &a.name)?;
            let value = match &a.value {
                ArgValue::Int32(v) => Value::Number(f64::from(*v)),
                ArgValue::Uint32(v) => Value::Number(f64::from(*v)),
                ArgValue::Int64(v) => Value::Number(*v as f64),
                ArgValue::Uint64(v) => Value::Number(*v as f64),
                ArgValue::Double(v) => Value::Number(*v),
                ArgValue::Koid(k) => Value::Koid(*k),
                ArgValue::String(s) => {
                    self.string(offset, s)?;
                    Value::Other
                }
                _ => Value::Other,
            };
            out.push((name, value));
        }
        Ok(out)
    }

    fn event(&mut self, offset: u64, record: &Record<'_>, rec: &[u8]) -> Result<(), Dropped> {
        let Record::Event {
            ts,
            thread,
            category,
            name,
            args,
            kind,
        } = record
        else {
            return Ok(());
        };
        let ts = self.ts(offset, *ts)?;
        let (pid, tid) = self.thread(offset, Some(ts), *thread);
        let category = self.string(offset, category)?;
        let name = self.string(offset, name)?;
        let args = self.args(offset, args)?;
        let end_ts = match kind {
            EventKind::DurationComplete { end_ts } => {
                let tps = self.provider().map_or(0, |p| p.ticks_per_second);
                ticks_to_ns(*end_ts, tps)
            }
            _ => None,
        };
        if let Some(scope) = instant_scope(record, rec) {
            self.findings
                .add(Kind::InstantScopeIgnored, offset, Some(ts), || {
                    format!("{scope:?}-scoped instant on thread {tid}")
                });
        }
        self.out.counts.import(match kind {
            EventKind::Instant => "instants",
            EventKind::Counter { .. } => "counter events",
            EventKind::DurationBegin => "duration begins",
            EventKind::DurationEnd => "duration ends",
            EventKind::DurationComplete { .. } => "complete durations",
            EventKind::AsyncBegin { .. } => "async begins",
            EventKind::AsyncInstant { .. } => "async instants",
            EventKind::AsyncEnd { .. } => "async ends",
            EventKind::FlowBegin { .. }
            | EventKind::FlowStep { .. }
            | EventKind::FlowEnd { .. } => "flow events",
        });
        if matches!(kind, EventKind::Counter { .. })
            && self.out.symbols.get(name).starts_with("dropped")
            && let Some(id) = self.current
        {
            self.drop_counters.insert(id);
        }
        // Thread creation, as trace-cli's kernel:proc instants say it.
        if *kind == EventKind::Instant {
            let name_s = self.out.symbols.get(name);
            let key = match name_s {
                "thread_create" => Some("tid"),
                "fork" => Some("child_pid"),
                _ => None,
            };
            if let Some(key) = key
                && self.out.symbols.get(category) == trace_common::category::KERNEL_PROC
                && let Some(child) = args.iter().find_map(|(n, v)| match v {
                    Value::Koid(k) if self.out.symbols.get(*n) == key => Some(*k),
                    _ => None,
                })
            {
                self.out.created.entry(child).or_insert(ts);
            }
        }
        if makes_thread_row(*kind) {
            self.out.event_threads.insert(tid);
        }
        self.item(Item {
            ts,
            offset,
            body: Body::Event {
                kind: *kind,
                pid,
                tid,
                category,
                name,
                args,
                end_ts,
            },
        });
        Ok(())
    }

    fn kernel_object(&mut self, offset: u64, record: &Record<'_>) -> Result<(), Dropped> {
        let Record::KernelObject {
            koid,
            obj_type,
            name,
            args,
        } = record
        else {
            return Ok(());
        };
        let name = self.string(offset, name)?;
        let name = self.out.symbols.get(name).to_owned();
        match *obj_type {
            trace_common::fxt::obj_type::PROCESS => {
                self.koid(offset, None, *koid);
                self.out.counts.import("process names");
                self.out.process_names.insert(*koid, name);
            }
            trace_common::fxt::obj_type::THREAD => {
                self.koid(offset, None, *koid);
                let mut pid = None;
                for a in args.iter() {
                    // Argument names that do not resolve are counted but do
                    // not drop the record.
                    let Ok(n) = self.string(offset, &a.name) else {
                        continue;
                    };
                    if self.out.symbols.get(n) == "process" {
                        match a.value {
                            ArgValue::Koid(k) => pid = Some(k),
                            _ => {
                                let koid = *koid;
                                self.findings.add(Kind::InvalidArgType, offset, None, || {
                                    format!("thread {koid}: \"process\" is not a koid")
                                });
                                return Err(Dropped);
                            }
                        }
                    }
                }
                if pid.is_none() {
                    let koid = *koid;
                    self.findings
                        .add(Kind::ThreadWithoutProcess, offset, None, || {
                            format!("thread {koid} ({name:?})")
                        });
                }
                self.out.thread_objects.push((offset, *koid, pid));
                let pid = pid.unwrap_or(0);
                self.koid(offset, None, pid);
                self.out.counts.import("thread names");
                self.out.thread_pid.insert(*koid, pid);
                self.out.thread_names.insert(*koid, name);
            }
            _ => self.out.counts.ignore("kernel objects of other types"),
        }
        Ok(())
    }

    /// Finds the Int32 argument `name` among `args`; a wrong type drops the
    /// record.
    fn weight(
        &mut self,
        offset: u64,
        ts: i64,
        args: &[Arg<'_>],
        name: &str,
    ) -> Result<i32, Dropped> {
        for a in args {
            let n = self.string(offset, &a.name)?;
            if self.out.symbols.get(n) != name {
                continue;
            }
            return match a.value {
                ArgValue::Int32(v) => Ok(v),
                _ => {
                    let name = name.to_owned();
                    self.findings
                        .add(Kind::InvalidArgType, offset, Some(ts), || {
                            format!("\"{name}\" is not an Int32")
                        });
                    Err(Dropped)
                }
            };
        }
        Ok(0)
    }

    fn scheduling(&mut self, offset: u64, record: &Record<'_>) -> Result<(), Dropped> {
        let (ts, body) = match record {
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_thread,
                incoming_thread,
                outgoing_priority,
                incoming_priority,
                ..
            } => {
                let ts = self.ts(offset, *ts)?;
                let outgoing = self.thread(offset, Some(ts), *outgoing_thread);
                let incoming = self.thread(offset, Some(ts), *incoming_thread);
                self.out.counts.import("context switches");
                (
                    ts,
                    Body::LegacySwitch {
                        cpu: u32::from(*cpu),
                        outgoing,
                        incoming,
                        outgoing_priority: *outgoing_priority,
                        incoming_priority: *incoming_priority,
                    },
                )
            }
            Record::ContextSwitch {
                ts,
                cpu,
                outgoing_tid,
                incoming_tid,
                args,
                ..
            } => {
                let ts = self.ts(offset, *ts)?;
                self.args(offset, args)?;
                let incoming_weight = self.weight(offset, ts, args, "incoming_weight")?;
                let outgoing_weight = self.weight(offset, ts, args, "outgoing_weight")?;
                self.koid(offset, Some(ts), *outgoing_tid);
                self.koid(offset, Some(ts), *incoming_tid);
                self.out.counts.import("context switches");
                (
                    ts,
                    Body::Switch {
                        cpu: u32::from(*cpu),
                        outgoing_tid: *outgoing_tid,
                        incoming_tid: *incoming_tid,
                        outgoing_weight,
                        incoming_weight,
                    },
                )
            }
            Record::ThreadWakeup { ts, tid, args, .. } => {
                let ts = self.ts(offset, *ts)?;
                self.args(offset, args)?;
                let weight = self.weight(offset, ts, args, "weight")?;
                let mut waker = None;
                for a in args.iter() {
                    let n = self.string(offset, &a.name)?;
                    if self.out.symbols.get(n) != "waker" {
                        continue;
                    }
                    match a.value {
                        ArgValue::Koid(k) => waker = Some(k),
                        _ => {
                            self.findings
                                .add(Kind::InvalidArgType, offset, Some(ts), || {
                                    "\"waker\" is not a koid".into()
                                });
                            return Err(Dropped);
                        }
                    }
                }
                self.koid(offset, Some(ts), *tid);
                self.out.counts.import("wake-ups");
                (
                    ts,
                    Body::Wakeup {
                        tid: *tid,
                        weight,
                        waker,
                    },
                )
            }
            _ => return Ok(()),
        };
        self.item(Item { ts, offset, body });
        Ok(())
    }
}
