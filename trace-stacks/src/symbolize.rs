//! Function names from blazesym, cached per (file, offset) and per kernel address.
//!
//! blazesym's `Symbolizer` keeps what it parsed of each file (ELF symbol tables, DWARF, kallsyms)
//! in caches that are not `Send`. So that a [`StackResolver`](crate::StackResolver) can move
//! between threads, the symbolizer lives on a thread of its own, started at the first name not in
//! the caches here; a name found (or not found) once is answered from these caches without it.
//!
//! Both are bounded. blazesym's caches never shrink, so each file (and kallsyms) gets a
//! `Symbolizer` of its own on that thread, counted by what it was given to read
//! ([`SymbolSource::cost`]): before one more is read past the symbolizers' share of the memory
//! limit, the least recently used are dropped, and read again if sampled again. The names cached
//! here are dropped together when they pass theirs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use blazesym::MaybeDefault;
use blazesym::symbolize::source::{Elf, Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use foldhash::HashMap;

use crate::elf::SymbolSource;
use crate::files::FileId;

/// The function name of an address nothing is known of.
pub(crate) const UNKNOWN: &str = "[unknown]";

/// What the symbolizer holds of `/proc/kallsyms` once read (its names and index).
const KALLSYMS_COST: u64 = 16 << 20;

/// How long a symbolizer asked stays read, whatever the limit (a few batches of samples).
pub(crate) const KEEP_RECENT: Duration = Duration::from_secs(10);

/// What one cached name takes besides its bytes (key, hash table slot, string header).
const NAME_OVERHEAD: u64 = 64;

/// What one symbolizer of the thread reads: a file, or kallsyms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Origin {
    File(FileId),
    Kernel,
}

/// A question for the symbolizer thread.
enum Request {
    /// Names of file offsets in an ELF file, from its debug information too if `debug`.
    Elf {
        file: FileId,
        path: PathBuf,
        offsets: Vec<u64>,
        debug: bool,
    },
    /// Names of kernel addresses.
    Kernel { addrs: Vec<u64> },
    /// Drop what was read of a source (no reply).
    Drop(Origin),
}

impl Request {
    fn len(&self) -> usize {
        match self {
            Request::Elf { offsets, .. } => offsets.len(),
            Request::Kernel { addrs } => addrs.len(),
            Request::Drop(_) => 0,
        }
    }
}

/// One name per address asked, `None` where there is none.
type Reply = Vec<Option<String>>;

/// The symbolizer thread and its two channels.
struct Worker {
    requests: Option<Sender<Request>>,
    replies: Receiver<Reply>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn start() -> std::io::Result<Self> {
        let (requests, requests_rx) = channel::<Request>();
        let (replies_tx, replies) = channel::<Reply>();
        let thread = std::thread::Builder::new()
            .name("trace-stacks-sym".into())
            .spawn(move || serve(requests_rx, replies_tx))?;
        Ok(Worker {
            requests: Some(requests),
            replies,
            thread: Some(thread),
        })
    }

    /// Tells the thread something that needs no answer.
    fn tell(&mut self, request: Request) {
        if let Some(requests) = self.requests.as_ref() {
            let _ = requests.send(request);
        }
    }

    /// Asks and waits; `None` if the thread is gone.
    fn ask(&mut self, request: Request) -> Option<Reply> {
        self.requests.as_ref()?.send(request).ok()?;
        self.replies.recv().ok()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the request channel ends the thread's loop.
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A symbolizer that demangles, reads DWARF where a file (or its debug link) has it and ELF
/// symbols elsewhere, and neither looks for line numbers nor checks files for changes (every
/// path it is given is a descriptor held open).
fn new_symbolizer() -> Symbolizer {
    Symbolizer::builder()
        .enable_auto_reload(false)
        .enable_code_info(false)
        .enable_inlined_fns(false)
        .enable_demangling(true)
        .build()
}

/// The symbolizer thread: answers requests until the channel closes, with a symbolizer per
/// source.
fn serve(requests: Receiver<Request>, replies: Sender<Reply>) {
    let mut symbolizers: HashMap<Origin, Symbolizer> = HashMap::default();
    while let Ok(request) = requests.recv() {
        let source = match &request {
            Request::Drop(source) => {
                symbolizers.remove(source);
                continue;
            }
            Request::Elf { file, .. } => Origin::File(*file),
            Request::Kernel { .. } => Origin::Kernel,
        };
        let len = request.len();
        let symbolizer = symbolizers.entry(source).or_insert_with(new_symbolizer);
        let reply = match catch_unwind(AssertUnwindSafe(|| answer(symbolizer, &request))) {
            Ok(reply) => reply,
            Err(_) => {
                log::debug!("the symbolizer panicked; starting afresh");
                symbolizers.remove(&source);
                vec![None; len]
            }
        };
        if replies.send(reply).is_err() {
            break;
        }
    }
}

fn answer(symbolizer: &Symbolizer, request: &Request) -> Reply {
    let (source, input, what) = match request {
        Request::Elf {
            path,
            offsets,
            debug,
            ..
        } => (
            Source::Elf(Elf {
                debug_syms: *debug,
                ..Elf::new(path.clone())
            }),
            Input::FileOffset(offsets.as_slice()),
            path.to_string_lossy().into_owned(),
        ),
        Request::Kernel { addrs } => (
            Source::Kernel(Kernel {
                // kallsyms only: a vmlinux found on disk may not be the running kernel's.
                vmlinux: MaybeDefault::None,
                debug_syms: false,
                ..Kernel::default()
            }),
            Input::AbsAddr(addrs.as_slice()),
            "kernel".to_owned(),
        ),
        Request::Drop(_) => return Vec::new(),
    };
    let len = request.len();
    match symbolizer.symbolize(&source, input) {
        Ok(symbols) if symbols.len() == len => symbols
            .into_iter()
            .map(|s| match s {
                Symbolized::Sym(sym) if !sym.name.is_empty() => Some(sym.name.into_owned()),
                _ => None,
            })
            .collect(),
        Ok(symbols) => {
            log::debug!("{what}: {} names for {len} addresses", symbols.len());
            vec![None; len]
        }
        Err(e) => {
            log::debug!("{what}: {e}");
            vec![None; len]
        }
    }
}

/// Names found so far, and the symbolizer thread that finds the others.
pub(crate) struct Symbols {
    worker: Option<Worker>,
    /// The thread could not be started: names not cached stay unknown.
    no_worker: bool,
    user: HashMap<(FileId, u64), Option<String>>,
    kernel: HashMap<u64, Option<String>>,
    /// The most the symbolizers and the names cached may hold together (bytes, estimated).
    limit: u64,
    /// What the thread's symbolizers have read: what each costs, and when it was last asked
    /// (a count of questions, and the time).
    loaded: HashMap<Origin, (u64, u64, Instant)>,
    /// A symbolizer asked within this long is not dropped: the files in use are read once,
    /// not once per batch of samples.
    pub(crate) keep_recent: Duration,
    /// Questions asked so far.
    asked: u64,
    /// What the names cached take.
    names_held: u64,
    /// How many symbolizers were dropped to stay within the limit.
    dropped: u64,
}

impl Symbols {
    /// Names looked up within `limit` bytes: half for the symbolizers, an eighth for the names
    /// cached.
    pub(crate) fn new(limit: u64) -> Self {
        Symbols {
            worker: None,
            no_worker: false,
            user: HashMap::default(),
            kernel: HashMap::default(),
            limit,
            loaded: HashMap::default(),
            keep_recent: KEEP_RECENT,
            asked: 0,
            names_held: 0,
            dropped: 0,
        }
    }

    /// The cached name of `offset` in `file`: `None` if not asked yet, `Some(None)` if it has
    /// none.
    pub(crate) fn cached_user(&self, file: FileId, offset: u64) -> Option<Option<&str>> {
        self.user.get(&(file, offset)).map(Option::as_deref)
    }

    /// Looks up the names of `offsets` (sorted) in `file` (read through `path`, as `source`
    /// says), caches them and returns them, one per distinct offset.
    pub(crate) fn look_up_user(
        &mut self,
        file: FileId,
        path: PathBuf,
        source: SymbolSource,
        mut offsets: Vec<u64>,
    ) -> Vec<(u64, Option<String>)> {
        offsets.dedup();
        self.use_origin(Origin::File(file), source.cost);
        let names = self.ask(Request::Elf {
            file,
            path,
            offsets: offsets.clone(),
            debug: source.debug,
        });
        let found: Vec<(u64, Option<String>)> = offsets.into_iter().zip(names).collect();
        self.keep_names(&found);
        for (offset, name) in &found {
            self.user.insert((file, *offset), name.clone());
        }
        found
    }

    /// The names of kernel addresses, cached.
    pub(crate) fn kernel(&mut self, addrs: &[u64]) -> Vec<String> {
        let mut missing: Vec<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.kernel.contains_key(a))
            .collect();
        let mut found = Vec::new();
        if !missing.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            self.use_origin(Origin::Kernel, KALLSYMS_COST);
            let names = self.ask(Request::Kernel {
                addrs: missing.clone(),
            });
            found = missing.into_iter().zip(names).collect();
            self.keep_names(&found);
            self.kernel.extend(found.iter().cloned());
        }
        // Answered from what was found now too: keeping it may have emptied the cache.
        let now: HashMap<u64, Option<String>> = found.into_iter().collect();
        addrs
            .iter()
            .map(|a| match now.get(a).or_else(|| self.kernel.get(a)) {
                Some(Some(name)) => name.clone(),
                _ => UNKNOWN.to_owned(),
            })
            .collect()
    }

    /// What the symbolizers and the names cached hold now (estimated), in bytes.
    pub(crate) fn held(&self) -> u64 {
        self.symbolizers_held() + self.names_held
    }

    /// How many symbolizers were dropped to stay within the limit.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    fn symbolizers_held(&self) -> u64 {
        self.loaded.values().map(|&(cost, _, _)| cost).sum()
    }

    /// Marks `origin` as about to be asked; when it was not read yet, first drops the least
    /// recently asked symbolizers (not those asked within `keep_recent`) until reading its
    /// `cost` stays within the symbolizers' share of the limit. What the files in use need is
    /// read whatever it takes: one larger than the share, or several asked together.
    fn use_origin(&mut self, origin: Origin, cost: u64) {
        self.asked += 1;
        let now = Instant::now();
        if let Some(entry) = self.loaded.get_mut(&origin) {
            entry.1 = self.asked;
            entry.2 = now;
            return;
        }
        let share = self.limit / 2;
        while self.symbolizers_held().saturating_add(cost) > share {
            let Some((&oldest, _)) = self
                .loaded
                .iter()
                .filter(|(_, (_, _, at))| now.duration_since(*at) >= self.keep_recent)
                .min_by_key(|(_, (_, last, _))| *last)
            else {
                break;
            };
            self.loaded.remove(&oldest);
            self.dropped += 1;
            if let Some(worker) = self.worker.as_mut() {
                worker.tell(Request::Drop(oldest));
            }
        }
        self.loaded.insert(origin, (cost, self.asked, now));
    }

    /// Counts names about to be cached, dropping every name cached first if they would pass
    /// their share of the limit (they are looked up again when needed).
    fn keep_names(&mut self, found: &[(u64, Option<String>)]) {
        let bytes: u64 = found
            .iter()
            .map(|(_, name)| NAME_OVERHEAD + name.as_ref().map_or(0, |n| n.len() as u64))
            .sum();
        if self.names_held.saturating_add(bytes) > self.limit / 8 {
            self.user.clear();
            self.kernel.clear();
            self.user.shrink_to_fit();
            self.kernel.shrink_to_fit();
            self.names_held = 0;
        }
        self.names_held += bytes;
    }

    /// Asks the symbolizer thread, starting it if needed; one answer per address, `None` for
    /// every address if the thread cannot answer.
    fn ask(&mut self, request: Request) -> Reply {
        let len = request.len();
        if self.worker.is_none() && !self.no_worker {
            match Worker::start() {
                Ok(worker) => self.worker = Some(worker),
                Err(e) => {
                    log::debug!("symbolizer thread: {e}");
                    self.no_worker = true;
                }
            }
        }
        let reply = self.worker.as_mut().and_then(|w| w.ask(request));
        match reply {
            Some(names) if names.len() == len => names,
            _ => {
                // The thread is gone: the next question starts another.
                self.worker = None;
                self.loaded.clear();
                vec![None; len]
            }
        }
    }
}
