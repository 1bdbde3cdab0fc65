//! What a reader knows at a point of an FXT stream, kept as the records that
//! told it, so that it can be told again at the start of another file.

use std::collections::{BTreeMap, HashMap};

use trace_common::fxt::read::decode;
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef};

/// Kernel and userspace object records kept per provider at most; past it
/// the oldest eighth is forgotten (a thread's name then reads as its koid
/// in a later file).
pub const MAX_OBJECTS: usize = 1 << 18;

/// Open durations kept per thread at most (Perfetto nests 255 deep).
const MAX_OPEN_PER_THREAD: usize = 256;

/// A kernel object record and the string records its references needed when
/// it was written.
#[derive(Clone, Debug)]
struct Object {
    strings: Vec<Vec<u8>>,
    record: Vec<u8>,
    /// When it was last written, to forget the oldest first.
    seq: u64,
}

/// One provider's part of the state.
#[derive(Clone, Debug, Default)]
struct Provider {
    /// Its provider info record; none for a provider only seen in a
    /// provider section record (and for the implicit provider 0).
    info: Option<Vec<u8>>,
    init: Option<Vec<u8>>,
    strings: BTreeMap<u16, Vec<u8>>,
    /// Thread records, with the koids they name.
    threads: BTreeMap<u8, (Vec<u8>, (u64, u64))>,
    /// Duration begins not yet ended, per thread (process, thread koids),
    /// innermost last, each with the string and thread records its
    /// references needed when it was written.
    open: BTreeMap<(u64, u64), Vec<Object>>,
    /// The latest timestamp of its events, in its ticks.
    latest_ts: u64,
}

impl Provider {
    fn koids(&self, thread: ThreadRef) -> Option<(u64, u64)> {
        match thread {
            ThreadRef::Index(i) => self.threads.get(&i).map(|(_, k)| *k),
            ThreadRef::Inline { process, thread } => Some((process, thread)),
        }
    }

    fn string_record(&self, r: &StringRef<'_>) -> Option<Vec<u8>> {
        match r {
            StringRef::Index(i) => self.strings.get(i).cloned(),
            _ => None,
        }
    }

    /// Writes the string and thread tables as they are.
    fn restore_tables(&self, out: &mut Vec<u8>) {
        for s in self.strings.values() {
            out.extend(s);
        }
        for (t, _) in self.threads.values() {
            out.extend(t);
        }
    }

    /// The string records `name` and `args` refer to (each once).
    fn strings_of(&self, refs: &[&StringRef<'_>], args: &[Arg<'_>]) -> Vec<Vec<u8>> {
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut add = |r: &StringRef<'_>| {
            if let Some(s) = self.string_record(r)
                && !strings.contains(&s)
            {
                strings.push(s);
            }
        };
        for r in refs {
            add(r);
        }
        for a in args {
            add(&a.name);
            if let ArgValue::String(v) = &a.value {
                add(v);
            }
        }
        strings
    }
}

/// The state of a stream at a point: every provider's declaration, tick
/// rate, string and thread tables, the names of kernel objects, the
/// durations still open, and the Perfetto packet sequences' interned data.
/// Feed it every record in stream order with [`StreamState::observe`].
#[derive(Clone, Debug)]
pub struct StreamState {
    providers: BTreeMap<u32, Provider>,
    current: u32,
    /// Kernel object records by type and koid, with the provider they were
    /// written in: names are global, their strings the provider's.
    objects: HashMap<(u8, u64), (u32, Object)>,
    samples: trace_perfetto::SequenceRestart,
    /// Object records seen, to order them.
    seq: u64,
    /// Records that did not decode (passed on all the same).
    undecodable: u64,
}

impl Default for StreamState {
    fn default() -> Self {
        Self::new()
    }
}

/// Encodes `record`; the records made here are small and always encode.
fn bytes_of(record: &Record<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    // Every record made here (metadata, an end event with one argument)
    // is well within the format's limits.
    let _ = encode(record, &mut out);
    out
}

impl StreamState {
    /// The state at the start of a stream.
    pub fn new() -> Self {
        let mut providers = BTreeMap::new();
        providers.insert(0, Provider::default());
        StreamState {
            providers,
            current: 0,
            objects: HashMap::new(),
            samples: trace_perfetto::SequenceRestart::new(),
            seq: 0,
            undecodable: 0,
        }
    }

    /// The provider the records seen last belong to.
    pub fn provider(&self) -> u32 {
        self.current
    }

    /// Records seen that could not be decoded.
    pub fn undecodable(&self) -> u64 {
        self.undecodable
    }

    fn current_mut(&mut self) -> &mut Provider {
        self.providers.entry(self.current).or_default()
    }

    /// Takes note of the next record of the stream (`bytes` holds exactly
    /// that record).
    pub fn observe(&mut self, bytes: &[u8]) {
        let Ok((record, _)) = decode(bytes) else {
            self.undecodable += 1;
            return;
        };
        match record {
            Record::ProviderInfo { id, .. } => {
                self.providers.insert(
                    id,
                    Provider {
                        info: Some(bytes.to_vec()),
                        ..Default::default()
                    },
                );
                self.current = id;
            }
            Record::ProviderSection { id } => {
                self.providers.entry(id).or_default();
                self.current = id;
            }
            Record::Initialization { ticks_per_second } if ticks_per_second != 0 => {
                self.current_mut().init = Some(bytes.to_vec());
            }
            Record::String { index, .. } if index != 0 => {
                self.current_mut().strings.insert(index, bytes.to_vec());
            }
            Record::Thread {
                index,
                process,
                thread,
            } if index != 0 => {
                self.current_mut()
                    .threads
                    .insert(index, (bytes.to_vec(), (process, thread)));
            }
            Record::KernelObject {
                koid,
                obj_type,
                ref name,
                ref args,
            } => {
                self.seq += 1;
                let seq = self.seq;
                let current = self.current;
                let strings = self.current_mut().strings_of(&[name], args);
                self.objects.insert(
                    (obj_type, koid),
                    (
                        current,
                        Object {
                            strings,
                            record: bytes.to_vec(),
                            seq,
                        },
                    ),
                );
                if self.objects.len() > MAX_OBJECTS {
                    let mut seqs: Vec<u64> = self.objects.values().map(|(_, o)| o.seq).collect();
                    seqs.sort_unstable();
                    let below = seqs[seqs.len() / 8];
                    self.objects.retain(|_, (_, o)| o.seq >= below);
                }
            }
            Record::Event {
                ts,
                thread,
                kind,
                ref category,
                ref name,
                ref args,
                ..
            } => {
                let p = self.current_mut();
                p.latest_ts = p.latest_ts.max(ts);
                if let EventKind::DurationComplete { end_ts } = kind {
                    p.latest_ts = p.latest_ts.max(end_ts);
                }
                let Some(koids) = p.koids(thread) else {
                    return;
                };
                match kind {
                    EventKind::DurationBegin => {
                        let mut strings = p.strings_of(&[category, name], args);
                        if let ThreadRef::Index(i) = thread
                            && let Some((t, _)) = p.threads.get(&i)
                        {
                            strings.push(t.clone());
                        }
                        let stack = p.open.entry(koids).or_default();
                        if stack.len() < MAX_OPEN_PER_THREAD {
                            stack.push(Object {
                                strings,
                                record: bytes.to_vec(),
                                seq: 0,
                            });
                        }
                    }
                    EventKind::DurationEnd => {
                        if let Some(stack) = p.open.get_mut(&koids) {
                            stack.pop();
                            if stack.is_empty() {
                                p.open.remove(&koids);
                            }
                        }
                    }
                    _ => {}
                }
            }
            Record::ContextSwitch { ts, .. }
            | Record::ThreadWakeup { ts, .. }
            | Record::LegacyContextSwitch { ts, .. }
            | Record::Log { ts, .. } => {
                let p = self.current_mut();
                p.latest_ts = p.latest_ts.max(ts);
            }
            Record::Blob {
                blob_type: trace_common::fxt::wire::blob_type::PERFETTO,
                ref payload,
                ..
            } => self.samples.observe(payload),
            _ => {}
        }
    }

    /// Records that end every duration still open, at the latest time of
    /// its provider, with an argument `cut: true`: what the file before a
    /// cut ends with, so that none of its slices is left unended. The
    /// state is unchanged (the next file begins them again).
    pub fn close_open(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut section = self.current;
        for (&id, p) in &self.providers {
            if p.open.is_empty() {
                continue;
            }
            if section != id {
                out.extend(bytes_of(&Record::ProviderSection { id }));
                section = id;
            }
            for stack in p.open.values() {
                for begin in stack.iter().rev() {
                    let Ok((
                        Record::Event {
                            ts,
                            thread,
                            category,
                            name,
                            ..
                        },
                        _,
                    )) = decode(&begin.record)
                    else {
                        continue;
                    };
                    // Its names as they were when it began.
                    for s in &begin.strings {
                        out.extend(s);
                    }
                    out.extend(bytes_of(&Record::Event {
                        ts: p.latest_ts.max(ts),
                        thread,
                        category,
                        name,
                        args: vec![Arg::new(StringRef::inline("cut"), ArgValue::Bool(true))].into(),
                        kind: EventKind::DurationEnd,
                    }));
                }
            }
            // The tables as they are (the file ends here, but a reader may
            // go on to a file appended to it).
            p.restore_tables(&mut out);
        }
        if section != self.current {
            out.extend(bytes_of(&Record::ProviderSection { id: self.current }));
        }
        out
    }

    /// The start of a file that continues the stream from this point and
    /// reads on its own: the magic number record, then per provider its
    /// declaration, tick rate, the object records with the strings they
    /// referred to, its string and thread tables and the durations open;
    /// then the packets that restart every Perfetto sequence; and last, the
    /// current provider made current again.
    pub fn preamble(&self) -> Vec<u8> {
        let mut out = bytes_of(&Record::Magic);
        let mut section = 0;
        let enter = |out: &mut Vec<u8>, section: &mut u32, id: u32| {
            if *section != id {
                out.extend(bytes_of(&Record::ProviderSection { id }));
                *section = id;
            }
        };
        // Every provider declared (its tables reset), in id order.
        for (&id, p) in &self.providers {
            match &p.info {
                Some(info) => {
                    out.extend(info);
                    section = id;
                }
                None if p.init.is_some() => enter(&mut out, &mut section, id),
                None => {}
            }
            if let Some(init) = &p.init {
                out.extend(init);
            }
        }
        // Names in the order they were given, each with its strings as
        // they were.
        let mut objects: Vec<&(u32, Object)> = self.objects.values().collect();
        objects.sort_unstable_by_key(|(_, o)| o.seq);
        for (id, o) in objects {
            enter(&mut out, &mut section, *id);
            for s in &o.strings {
                out.extend(s);
            }
            out.extend(&o.record);
        }
        // Each begin with its names as they were, then the tables as they
        // are.
        for (&id, p) in &self.providers {
            let has_tables = !p.strings.is_empty() || !p.threads.is_empty();
            if p.open.is_empty() && !has_tables {
                continue;
            }
            enter(&mut out, &mut section, id);
            for stack in p.open.values() {
                for begin in stack {
                    for s in &begin.strings {
                        out.extend(s);
                    }
                    out.extend(&begin.record);
                }
            }
            p.restore_tables(&mut out);
        }
        // Blob names are strings of the current provider; these are inline.
        for payload in self.samples.restart_payloads() {
            out.extend(bytes_of(&Record::Blob {
                name: StringRef::inline("perfetto"),
                blob_type: trace_common::fxt::wire::blob_type::PERFETTO,
                payload: payload.into(),
            }));
        }
        enter(&mut out, &mut section, self.current);
        out
    }
}
