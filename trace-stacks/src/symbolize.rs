//! Function names from blazesym, cached per (file, offset) and per kernel address.
//!
//! blazesym's `Symbolizer` keeps what it parsed of each file (ELF symbol tables, DWARF, kallsyms)
//! in caches that are not `Send`. So that a [`StackResolver`](crate::StackResolver) can move
//! between threads, the symbolizer lives on a thread of its own, started at the first name not in
//! the caches here; a name found (or not found) once is answered from these caches without it.
//!
//! Both are bounded. blazesym's caches never shrink, so the symbolizer is counted by what it
//! was given to read ([`SymbolSource::cost`]): before it reads a file that would take it past
//! its share of the memory limit, it is ended and a fresh one started, which reads again only
//! the files still sampled. The names cached here are dropped together when they pass theirs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

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

/// What one cached name takes besides its bytes (key, hash table slot, string header).
const NAME_OVERHEAD: u64 = 64;

/// A question for the symbolizer thread.
enum Request {
    /// Names of file offsets in an ELF file, from its debug information too if `debug`.
    Elf {
        path: PathBuf,
        offsets: Vec<u64>,
        debug: bool,
    },
    /// Names of kernel addresses.
    Kernel { addrs: Vec<u64> },
}

impl Request {
    fn len(&self) -> usize {
        match self {
            Request::Elf { offsets, .. } => offsets.len(),
            Request::Kernel { addrs } => addrs.len(),
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

/// The symbolizer thread: answers requests until the channel closes.
fn serve(requests: Receiver<Request>, replies: Sender<Reply>) {
    let mut symbolizer = new_symbolizer();
    while let Ok(request) = requests.recv() {
        let len = request.len();
        let reply = match catch_unwind(AssertUnwindSafe(|| answer(&symbolizer, &request))) {
            Ok(reply) => reply,
            Err(_) => {
                log::debug!("the symbolizer panicked; starting afresh");
                symbolizer = new_symbolizer();
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
    /// The most the symbolizer and the names cached may hold together (bytes, estimated).
    limit: u64,
    /// The files the running symbolizer has read, and what they cost it.
    loaded: HashMap<FileId, u64>,
    /// Whether it has read kallsyms.
    kernel_loaded: bool,
    /// What the names cached take.
    names_held: u64,
    /// How many times a symbolizer was ended to stay within the limit.
    restarts: u64,
}

impl Symbols {
    /// Names looked up within `limit` bytes: half for the symbolizer, an eighth for the names
    /// cached.
    pub(crate) fn new(limit: u64) -> Self {
        Symbols {
            worker: None,
            no_worker: false,
            user: HashMap::default(),
            kernel: HashMap::default(),
            limit,
            loaded: HashMap::default(),
            kernel_loaded: false,
            names_held: 0,
            restarts: 0,
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
        if !self.loaded.contains_key(&file) {
            self.make_room(source.cost);
            self.loaded.insert(file, source.cost);
        }
        let names = self.ask(Request::Elf {
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
        if !missing.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            if !self.kernel_loaded {
                self.make_room(KALLSYMS_COST);
                self.kernel_loaded = true;
            }
            let names = self.ask(Request::Kernel {
                addrs: missing.clone(),
            });
            let found: Vec<(u64, Option<String>)> = missing.into_iter().zip(names).collect();
            self.keep_names(&found);
            self.kernel.extend(found);
        }
        addrs
            .iter()
            .map(|a| match self.kernel.get(a) {
                Some(Some(name)) => name.clone(),
                _ => UNKNOWN.to_owned(),
            })
            .collect()
    }

    /// What the symbolizer and the names cached hold now (estimated), in bytes.
    pub(crate) fn held(&self) -> u64 {
        self.symbolizer_held() + self.names_held
    }

    /// How many times the symbolizer was ended to stay within the limit.
    pub(crate) fn restarts(&self) -> u64 {
        self.restarts
    }

    fn symbolizer_held(&self) -> u64 {
        let kallsyms = if self.kernel_loaded { KALLSYMS_COST } else { 0 };
        self.loaded.values().sum::<u64>() + kallsyms
    }

    /// Ends the symbolizer if reading `cost` more would take it past its share of the limit
    /// (a file larger than the share alone is still read, by a symbolizer that holds nothing
    /// else).
    fn make_room(&mut self, cost: u64) {
        let held = self.symbolizer_held();
        if held == 0 || held.saturating_add(cost) <= self.limit / 2 {
            return;
        }
        log::debug!(
            "symbolizer: {} files read ({held} bytes), {cost} more would pass its {} bytes: \
             starting afresh",
            self.loaded.len(),
            self.limit / 2
        );
        self.worker = None;
        self.loaded.clear();
        self.kernel_loaded = false;
        self.restarts += 1;
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
                vec![None; len]
            }
        }
    }
}
