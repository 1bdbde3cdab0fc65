//! `provider_bench [--iterations N | N] [--runs R] [--case NAME]`: what a
//! `trace-provider` macro costs per event, with one and with two writing
//! threads, next to the floor of reading the same timestamp source and
//! copying the same bytes. Run by `cargo xtask bench provider`.
//!
//! The engine gets a 64 MiB memfd over the provider's socket from a
//! stand-in for the trace manager in this process, which starts a trace in
//! circular mode (so a long loop never drops) with the category `bench`
//! enabled. Each case
//! runs R rounds (default 9); a round runs the case with one thread, then
//! with two, then its floor the same two ways, N iterations (default 3
//! million; 16 times that for the disabled cases) per thread each. Reported
//! are medians. With two threads each writes N events at once; the time per
//! event is the wall time over all 2N events, and the throughput ratio is the
//! median over rounds of events per second with two threads over events per
//! second with one.
//!
//! The main thread is pinned to CPU 0 (or `BENCH_CPU`) and the second writer
//! to CPU 1; they start together from a spinning barrier.
//!
//! `--case` runs only the cases whose label contains NAME, e.g. `(b)`.

use std::hint::black_box;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use trace_common::provider::buffer::{HEADER_BYTES, Header};
use trace_common::provider::control::{ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::{FromProvider, PACKET_BYTES, Packet};
use trace_common::provider::{BufferDisposition, BufferingMode};
use trace_provider::__private::{Callsite, event_type, write_event};

/// The engine's buffer.
const BUFFER_BYTES: usize = 64 << 20;
/// Each floor thread's destination buffer, as large as the engine's.
const FLOOR_BYTES: usize = BUFFER_BYTES;

/// Pins the calling thread to `cpu`; failure (fewer CPUs, a cpuset) is fine.
fn pin(cpu: usize) {
    let _ = tests::workload::pin(cpu);
}

/// The engine's timestamp source: the TSC on x86-64, else CLOCK_BOOTTIME.
#[inline(always)]
fn timestamp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no memory effects and exists on every x86-64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// A memfd mapped shared, as the manager hands a provider its buffer.
struct SharedBuffer {
    base: *mut u8,
    len: usize,
    fd: RawFd,
}

impl SharedBuffer {
    fn new(len: usize) -> Self {
        // SAFETY: plain syscalls on a file descriptor this function owns;
        // the mapping is checked before use, and MAP_POPULATE faults every
        // page in so that no run pays for page faults.
        unsafe {
            let fd = libc::memfd_create(c"provider-bench".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
            assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0, "ftruncate");
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            );
            assert_ne!(
                base,
                libc::MAP_FAILED,
                "mmap: {}",
                std::io::Error::last_os_error()
            );
            let words = std::slice::from_raw_parts_mut(base.cast::<u64>(), len / 8);
            prefault(words);
            SharedBuffer {
                base: base.cast(),
                len,
                fd,
            }
        }
    }
}

impl SharedBuffer {
    fn words(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is `len` bytes, page-aligned, and only ever
        // written through this exclusive borrow (floor buffers) or by the
        // engine (its own buffer, never borrowed this way).
        unsafe { std::slice::from_raw_parts_mut(self.base.cast(), self.len / 8) }
    }
}

impl Drop for SharedBuffer {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`, which nothing uses any
        // more (the engine is terminated first), and closes its memfd.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
            libc::close(self.fd);
        }
    }
}

/// A stand-in for the trace manager: hands the provider its buffer over the
/// registration socket and starts and stops the trace, as the manager does.
struct Manager {
    /// The connection of the provider.
    conn: RawFd,
    /// The manager's end of the provider's FIFO.
    fifo: RawFd,
}

impl Manager {
    /// Accepts the provider's connection on `listener` and its registration.
    fn accept(listener: RawFd) -> Manager {
        // SAFETY: accept on a listening socket this program owns.
        let conn = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        assert!(conn >= 0, "accept: {}", std::io::Error::last_os_error());
        let mut buf = vec![0u8; 16384];
        // SAFETY: receiving into a buffer we own.
        let n = unsafe { libc::recv(conn, buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert!(n > 0, "the provider registers");
        ProviderMessage::decode(&buf[..n as usize]).expect("a Register message");
        let mut m = Manager { conn, fifo: -1 };
        m.send(
            &ManagerMessage::Registered {
                provider_id: 1,
                tracing_started: false,
            },
            &[],
        );
        m
    }

    /// Sends `msg` with the descriptors `fds`.
    fn send(&mut self, msg: &ManagerMessage, fds: &[RawFd]) {
        let bytes = msg.encode().expect("the message encodes");
        let mut cmsg = [0u64; 8];
        // SAFETY: sendmsg from buffers we own; the control data is filled in
        // with the CMSG macros within its length.
        let n = unsafe {
            let mut iov = libc::iovec {
                iov_base: bytes.as_ptr() as *mut _,
                iov_len: bytes.len(),
            };
            let mut hdr: libc::msghdr = std::mem::zeroed();
            hdr.msg_iov = &mut iov;
            hdr.msg_iovlen = 1;
            if !fds.is_empty() {
                let data_len = std::mem::size_of_val(fds) as u32;
                hdr.msg_control = cmsg.as_mut_ptr().cast();
                hdr.msg_controllen = libc::CMSG_SPACE(data_len) as usize;
                let c = libc::CMSG_FIRSTHDR(&hdr);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(data_len) as usize;
                std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast(), fds.len());
            }
            libc::sendmsg(self.conn, &hdr, libc::MSG_NOSIGNAL)
        };
        assert_eq!(
            n,
            bytes.len() as isize,
            "sendmsg: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Hands the provider `buffer` and its FIFO for a trace in `mode` of
    /// `categories`.
    fn initialize(&mut self, buffer: &SharedBuffer, mode: BufferingMode, categories: Vec<String>) {
        let mut pair = [0; 2];
        // SAFETY: socketpair fills in the array we own.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
        self.fifo = pair[0];
        self.send(
            &ManagerMessage::Initialize { mode, categories },
            &[buffer.fd, pair[1]],
        );
        // SAFETY: the provider holds its own copy of its end now.
        unsafe { libc::close(pair[1]) };
    }

    /// Waits for the provider's next FIFO packet.
    /// The provider's next packet but the threads it announces (which a
    /// manager in another PID namespace maps; this one has nothing to do).
    fn packet(&mut self) -> FromProvider {
        loop {
            let mut p = [0u8; PACKET_BYTES];
            // SAFETY: receiving into a buffer we own.
            let n = unsafe { libc::recv(self.fifo, p.as_mut_ptr().cast(), p.len(), 0) };
            assert_eq!(n, PACKET_BYTES as isize, "a FIFO packet from the provider");
            let p = FromProvider::parse(&Packet::from_bytes(&p)).expect("a valid FIFO packet");
            if !matches!(p, FromProvider::NewThread { .. }) {
                return p;
            }
        }
    }

    /// Starts the trace; returns once the provider writes.
    fn start(&mut self) {
        self.send(
            &ManagerMessage::Start {
                disposition: BufferDisposition::ClearEntire,
                additional_categories: Vec::new(),
            },
            &[],
        );
        let p = self.packet();
        assert!(matches!(p, FromProvider::Started { .. }), "{p:?}");
    }

    /// Stops the trace; returns once every record is in the buffer.
    fn stop(&mut self) {
        self.send(&ManagerMessage::Stop, &[]);
        let p = self.packet();
        assert!(matches!(p, FromProvider::Stopped), "{p:?}");
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        // SAFETY: closing descriptors this program owns and no longer uses.
        unsafe {
            libc::close(self.conn);
            libc::close(self.fifo);
        }
    }
}

/// A listening registration socket at `path`.
fn listen(path: &Path) -> RawFd {
    let _ = std::fs::remove_file(path);
    // SAFETY: plain socket calls on a sockaddr_un we fill in.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let p = path.as_os_str().as_encoded_bytes();
        assert!(p.len() < addr.sun_path.len(), "a short socket path");
        for (i, &b) in p.iter().enumerate() {
            addr.sun_path[i] = b as libc::c_char;
        }
        let r = libc::bind(
            fd,
            &addr as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_un>() as u32,
        );
        assert_eq!(
            r,
            0,
            "bind {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::listen(fd, 1), 0, "listen");
        fd
    }
}

/// Writes to every page of `words` so that no run pays for page faults.
fn prefault(words: &mut [u64]) {
    for w in words.iter_mut().step_by(512) {
        // SAFETY: `w` is a valid, aligned, exclusive reference.
        unsafe { std::ptr::write_volatile(w, 0) };
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// `instant!` of a category the trace does not enable, one per loop
    /// iteration (the loop's own compare and branch included).
    Disabled,
    /// The same, four call sites per loop iteration (n events in n/4).
    Disabled4,
    /// `instant!` without arguments.
    Instant,
    /// `instant!` with two u64 arguments: one timestamp and two integer
    /// fields, the configuration LTTng-UST's figures are given for.
    Instant2,
    /// The engine alone: an instant without arguments written with a given
    /// timestamp instead of a clock read.
    EngineOnly,
    /// `duration!` with two u64 arguments, one scope per iteration.
    Duration,
    /// `counter!` with an id and one i64 argument.
    Counter,
    /// The bare loop of the disabled cases (one or four per iteration).
    FloorLoop,
    FloorLoop4,
    /// Timestamp reads and copies of an instant's 2 words.
    FloorInstant,
    /// Timestamp reads and copies of an instant's 6 words (two arguments).
    FloorInstant2,
    /// Two timestamp reads (begin and end) and copies of 7 words.
    FloorDuration,
    /// Timestamp reads and copies of a counter's 5 words.
    FloorCounter,
    /// Copies of an instant's 2 words, no timestamp read.
    FloorCopy,
}

impl Case {
    /// The floor measured next to this case.
    fn floor(self) -> Option<Case> {
        match self {
            Case::Disabled => Some(Case::FloorLoop),
            Case::Disabled4 => Some(Case::FloorLoop4),
            Case::Instant => Some(Case::FloorInstant),
            Case::Instant2 => Some(Case::FloorInstant2),
            Case::Duration => Some(Case::FloorDuration),
            Case::Counter => Some(Case::FloorCounter),
            Case::EngineOnly => Some(Case::FloorCopy),
            _ => None,
        }
    }
}

/// The floor loop: per iteration, `READS` timestamp reads (0, 1 or 2) and a
/// copy of a `W`-word record into `buf` at a moving, wrapping offset.
#[inline(never)]
fn floor<const W: usize, const READS: usize>(buf: &mut [u64], n: u64) {
    let mut pos = 0usize;
    for i in 0..n {
        let mut rec = [0u64; W];
        // Header, then the timestamp, then argument / trailer words.
        rec[0] = black_box(0x0004_0000_0011_0044 | (W as u64) << 4);
        rec[1] = if READS == 0 { i } else { timestamp() };
        for (k, w) in rec.iter_mut().enumerate().skip(2) {
            *w = i ^ k as u64;
        }
        if READS == 2 {
            rec[W - 1] = timestamp();
        }
        if pos + W > buf.len() {
            pos = 0;
        }
        buf[pos..pos + W].copy_from_slice(&rec);
        pos += W;
    }
    black_box(buf);
}

/// One thread's loop of `n` iterations of `case`.
#[inline(never)]
fn body(case: Case, n: u64, floor_buf: &mut [u64]) {
    match case {
        Case::Disabled => {
            for i in 0..n {
                trace_provider::instant!("off", "disabled");
                black_box(i);
            }
        }
        Case::Disabled4 => {
            for i in 0..n / 4 {
                trace_provider::instant!("off", "disabled-1");
                trace_provider::instant!("off", "disabled-2");
                trace_provider::instant!("off", "disabled-3");
                trace_provider::instant!("off", "disabled-4");
                black_box(i);
            }
        }
        Case::Instant => {
            for i in 0..n {
                trace_provider::instant!("bench", "instant");
                black_box(i);
            }
        }
        Case::Instant2 => {
            for i in 0..n {
                trace_provider::instant!("bench", "instant2", "a" => i, "b" => i ^ 7);
            }
        }
        Case::EngineOnly => {
            static SITE: Callsite = Callsite::new("bench", "engine");
            for i in 0..n {
                if SITE.enabled() {
                    write_event(&SITE, event_type::INSTANT, black_box(i), [], &[]);
                }
            }
        }
        Case::FloorLoop => {
            for i in 0..n {
                black_box(i);
            }
        }
        Case::FloorLoop4 => {
            for i in 0..n / 4 {
                black_box(i);
            }
        }
        Case::Duration => {
            for i in 0..n {
                trace_provider::duration!("bench", "duration", "a" => i, "b" => i ^ 7);
            }
        }
        Case::Counter => {
            for i in 0..n {
                trace_provider::counter!("bench", "counter", 1, "v" => i as i64);
            }
        }
        Case::FloorInstant => floor::<2, 1>(floor_buf, n),
        Case::FloorInstant2 => floor::<6, 1>(floor_buf, n),
        Case::FloorDuration => floor::<7, 2>(floor_buf, n),
        Case::FloorCounter => floor::<5, 1>(floor_buf, n),
        Case::FloorCopy => floor::<2, 0>(floor_buf, n),
    }
}

/// A barrier for two threads that spins instead of sleeping, so that both
/// leave it within a few hundred nanoseconds: waking a sleeping virtual CPU
/// can take milliseconds.
struct SpinBarrier {
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn new() -> Self {
        SpinBarrier {
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) == 1 {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
        } else {
            while self.generation.load(Ordering::Acquire) == generation {
                std::hint::spin_loop();
            }
        }
    }
}

/// A job for the second writer: run `case` `n` times after the barrier, send
/// back when it started and ended.
struct Job {
    case: Case,
    n: u64,
}

/// The second writing thread, kept for the whole bench so that the engine
/// registers it once.
struct Worker {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<(Instant, Instant)>,
    barrier: Arc<SpinBarrier>,
}

impl Worker {
    fn spawn() -> (Worker, std::thread::JoinHandle<()>) {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (done_tx, done) = mpsc::channel();
        let barrier = Arc::new(SpinBarrier::new());
        let b = barrier.clone();
        let handle = std::thread::Builder::new()
            .name("bench-writer-2".into())
            .spawn(move || {
                pin(1);
                let mut floor_buf = SharedBuffer::new(FLOOR_BYTES);
                for job in job_rx {
                    b.wait();
                    let t0 = Instant::now();
                    body(job.case, job.n, floor_buf.words());
                    let t1 = Instant::now();
                    if done_tx.send((t0, t1)).is_err() {
                        break;
                    }
                }
            })
            .expect("spawning the second writer");
        (
            Worker {
                jobs,
                done,
                barrier,
            },
            handle,
        )
    }
}

struct Bench {
    n: u64,
    floor_buf: SharedBuffer,
    worker: Worker,
}

impl Bench {
    /// Nanoseconds of wall time per event of `case` with `threads` writers.
    fn run(&mut self, case: Case, threads: usize, n: u64) -> f64 {
        if threads == 1 {
            let t0 = Instant::now();
            body(case, n, self.floor_buf.words());
            return t0.elapsed().as_nanos() as f64 / n as f64;
        }
        self.worker
            .jobs
            .send(Job { case, n })
            .expect("the second writer runs");
        self.worker.barrier.wait();
        let t0 = Instant::now();
        body(case, n, self.floor_buf.words());
        let t1 = Instant::now();
        let (w0, w1) = self.worker.done.recv().expect("the second writer answers");
        let wall = t1.max(w1).duration_since(t0.min(w0));
        wall.as_nanos() as f64 / (2 * n) as f64
    }

    /// `runs` rounds of `case` and its floor, each with one and with two
    /// threads, one after the other in every round so that the machine's
    /// drifts hit all four alike.
    fn measure(&mut self, case: Case, runs: usize) -> Measured {
        // A disabled check costs well under a nanosecond: run 16 times as
        // many so that a run lasts as long as the others.
        let n = if matches!(case, Case::Disabled | Case::Disabled4) {
            self.n * 16
        } else {
            self.n
        };
        // Warm up: interns the strings, registers the threads, warms caches.
        for threads in [1, 2] {
            self.run(case, threads, 100_000);
            if let Some(f) = case.floor() {
                self.run(f, threads, 100_000);
            }
        }
        let mut m = Measured::default();
        for _ in 0..runs {
            let one = self.run(case, 1, n);
            let two = self.run(case, 2, n);
            m.one.push(one);
            m.two.push(two);
            m.scaling.push(one / two);
            if let Some(f) = case.floor() {
                let one = self.run(f, 1, n);
                let two = self.run(f, 2, n);
                m.floor_one.push(one);
                m.floor_two.push(two);
                m.floor_scaling.push(one / two);
            }
        }
        m
    }
}

/// The samples of one case: ns per event, and per-round throughput ratios.
#[derive(Default)]
struct Measured {
    one: Vec<f64>,
    two: Vec<f64>,
    scaling: Vec<f64>,
    floor_one: Vec<f64>,
    floor_two: Vec<f64>,
    floor_scaling: Vec<f64>,
}

/// The median, `None` for no samples.
fn median_of(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| median(v.to_vec()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: provider_bench [--iterations N | N] [--runs R] \
         [--case disabled|instant|duration|counter]"
    );
    std::process::exit(2);
}

/// What the command line asks for.
struct Args {
    iterations: u64,
    runs: usize,
    /// Only the cases whose name contains this.
    case: Option<String>,
}

fn parse_args() -> Args {
    let mut iterations = 3_000_000u64;
    let mut runs = 9usize;
    let mut case = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        // A bare number is the iteration count (`provider_bench 2000000`).
        if let Ok(v) = a.parse() {
            iterations = v;
            continue;
        }
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (a, None),
        };
        let value = value.or_else(|| args.next()).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--iterations" | "-n" => iterations = value.parse().unwrap_or_else(|_| usage()),
            "--runs" => runs = value.parse().unwrap_or_else(|_| usage()),
            "--case" => case = Some(value),
            _ => usage(),
        }
    }
    if iterations < 4 || runs == 0 {
        usage();
    }
    // A multiple of 4, for the case with four events per loop iteration.
    Args {
        iterations: iterations / 4 * 4,
        runs,
        case,
    }
}

fn main() {
    let args = parse_args();
    let (n, runs) = (args.iterations, args.runs);
    pin(std::env::var("BENCH_CPU")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0));

    let socket = std::env::temp_dir().join(format!("provider-bench-{}.sock", std::process::id()));
    // SAFETY: no other thread runs yet.
    unsafe { std::env::set_var(trace_common::provider::SOCKET_ENV, &socket) };
    let listener = listen(&socket);
    let provider = trace_provider::init("provider-bench");
    let mut manager = Manager::accept(listener);
    let buffer = SharedBuffer::new(BUFFER_BYTES);
    manager.initialize(&buffer, BufferingMode::Circular, vec!["bench".to_owned()]);
    manager.start();
    assert!(trace_provider::category_enabled!("bench"));
    assert!(!trace_provider::category_enabled!("off"));

    let (worker, handle) = Worker::spawn();
    let floor_buf = SharedBuffer::new(FLOOR_BYTES);
    let mut bench = Bench {
        n,
        floor_buf,
        worker,
    };

    let clock = if cfg!(target_arch = "x86_64") {
        "rdtsc"
    } else {
        "clock_gettime(CLOCK_BOOTTIME)"
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average before: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "trace-provider engine: {n} iterations per thread per run, median of {runs} runs; \
         circular 64 MiB shared memfd; floor = {clock} + copy of the record's bytes"
    );
    println!(
        "{:<32} {:>7} {:>9} {:>9} {:>8} {:>10} {:>12}",
        "case", "threads", "ns/event", "floor ns", "x floor", "over floor", "2T/1T thrpt"
    );
    let cases = [
        ("(a) disabled instant", Case::Disabled),
        ("(a) disabled, 4 per loop iter", Case::Disabled4),
        ("(b) instant, no args [16 B]", Case::Instant),
        ("(c) duration, 2 u64 args [56 B]", Case::Duration),
        ("(d) counter, 1 i64 arg [40 B]", Case::Counter),
        ("(e) instant, 2 u64 args [48 B]", Case::Instant2),
        ("(f) (b) with no clock read", Case::EngineOnly),
    ];
    let mut floor_scaling = Vec::new();
    for (name, case) in cases {
        if args
            .case
            .as_ref()
            .is_some_and(|c| !name.contains(c.as_str()))
        {
            continue;
        }
        let m = bench.measure(case, runs);
        let (one, two) = (median(m.one.clone()), median(m.two.clone()));
        let (one_floor, two_floor) = (median_of(&m.floor_one), median_of(&m.floor_two));
        let fmt_floor = |f: Option<f64>| f.map_or("-".to_owned(), |f| format!("{f:.2}"));
        let fmt_ratio =
            |ns: f64, f: Option<f64>| f.map_or("-".to_owned(), |f| format!("{:.2}", ns / f));
        let fmt_over =
            |ns: f64, f: Option<f64>| f.map_or("-".to_owned(), |f| format!("{:+.2}", ns - f));
        println!(
            "{name:<32} {:>7} {one:>9.2} {:>9} {:>8} {:>10} {:>12}",
            1,
            fmt_floor(one_floor),
            fmt_ratio(one, one_floor),
            fmt_over(one, one_floor),
            ""
        );
        println!(
            "{:<32} {:>7} {two:>9.2} {:>9} {:>8} {:>10} {:>11.2}x",
            "",
            2,
            fmt_floor(two_floor),
            fmt_ratio(two, two_floor),
            fmt_over(two, two_floor),
            median(m.scaling.clone())
        );
        if let Some(f) = median_of(&m.floor_scaling) {
            floor_scaling.push(format!("{}: {f:.2}x", &name[..3]));
        }
    }

    manager.stop();
    // SAFETY: the mapping is BUFFER_BYTES long; the trace is stopped.
    let header = Header::read(unsafe { &*buffer.base.cast::<[u8; HEADER_BYTES]>() });
    // Unregistering terminates the trace: the provider lets go of the buffer.
    drop(provider);
    drop(manager);
    // SAFETY: closing and removing the socket this program made.
    unsafe { libc::close(listener) };
    let _ = std::fs::remove_file(&socket);
    drop(bench);
    handle.join().expect("the second writer exits");
    drop(buffer);
    println!(
        "floor 2T/1T throughput {}; engine dropped {} records, wrapped {} times",
        floor_scaling.join(", "),
        header.num_records_dropped,
        header.wrapped_count
    );
    println!(
        "floor of (a): the bare loop; of (b)-(e): {clock} reads and copies of the record's words; \
         of (f): the copies alone"
    );
    println!(
        "targets: enabled <= 15 ns/event, disabled <= 0.5 ns/event, 2 threads >= 1.8x throughput"
    );
}
