//! Bounded fuzzing of every decoder that reads what another process wrote:
//! the controller protocol (every request and reply kind), the provider
//! control messages and FIFO packets, and the FXT reader with
//! [`TraceState`] on mutated valid traces.
//!
//! Not cargo-fuzz: that needs a nightly toolchain and libFuzzer, and runs
//! until stopped. These loops run in `cargo test` (so in `cargo xtask
//! test`) on the stable toolchain, for a fixed time each (about 24 s of
//! CPU in all), on messages made valid and then mutated (bit flips, bytes
//! and lengths set to edge values, insertions, deletions, truncations,
//! splices of two messages), plus random bytes behind a valid header. Each
//! case must:
//!
//! - not panic;
//! - terminate (the FXT reader: at most one item per word);
//! - not allocate beyond what its input can hold: the most memory live
//!   during a decode is bounded by a multiple of the input's length plus a
//!   constant, which a count trusted before it is checked against the bytes
//!   left would exceed (measured with a counting allocator, per thread);
//! - decode to something that encodes back to the same bytes, when it
//!   decodes (the controller and provider messages).
//!
//! `FUZZ_SEED=N` repeats a run (the seed is printed, and a failure names
//! the case's own seed: `FUZZ_SEED=... FUZZ_CASES=1` repeats that case
//! alone); `FUZZ_SECONDS=S` sets each target's time (default: 8, 6, 10).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use trace_common::controller::{
    Envelope, FxtVersion, KernelCount, KernelStats, ProviderInfo, ProviderProgress, ProviderSpec,
    ProviderStats, Reply, Request, SessionInfo, SessionKind, SessionState, SnapshotResult,
    StackOptions, StartError, StartOptions, Status, StopError, StopResult, TraceConfig,
};
use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::{Record, ThreadRef};
use trace_common::provider::clock::ClockKind;
use trace_common::provider::control::{ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::{
    AlertName, FromManager, FromProvider, PACKET_BYTES, Packet, code,
};
use trace_common::provider::{BufferDisposition, BufferingMode};

// Allocation accounting -------------------------------------------------------

/// The system allocator, counting the bytes live on each thread.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let v = live.get() + delta;
        live.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// bookkeeping only touches const-initialized thread-locals (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: as the caller promised.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: as the caller promised.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: as the caller promised.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: as the caller promised.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What `f` returns, and the most bytes it had allocated at once (on this
/// thread, beyond what was live before).
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, peak.max(0) as usize)
}

/// Fails unless decoding `len` bytes took at most `per_byte` bytes of
/// memory per input byte, plus `fixed`.
fn check_bounded(what: &str, len: usize, peak: usize, per_byte: usize, fixed: usize) {
    assert!(
        peak <= len * per_byte + fixed,
        "{what}: decoding {len} bytes took {peak} bytes of memory at once (bound {})",
        len * per_byte + fixed
    );
}

// Random numbers --------------------------------------------------------------

/// splitmix64: small, seedable, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// In `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn u8(&mut self) -> u8 {
        self.next() as u8
    }
    fn u16(&mut self) -> u16 {
        self.next() as u16
    }
    fn u32(&mut self) -> u32 {
        self.next() as u32
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
    /// Text of up to `max` bytes: mostly short, ASCII or not.
    fn text(&mut self, max: usize) -> String {
        let n = match self.below(8) {
            0 => 0,
            1 => self.below(max + 1),
            _ => self.below(max.min(24) + 1),
        };
        let mut s = String::new();
        while s.len() < n {
            let c = match self.below(6) {
                0 => self.pick(&['é', 'β', '€', '😀', '\u{0}']),
                _ => (b'a' + self.below(26) as u8) as char,
            };
            if s.len() + c.len_utf8() > n {
                break;
            }
            s.push(c);
        }
        s
    }
    fn texts(&mut self, max_items: usize, max_len: usize) -> Vec<String> {
        let n = self.below(max_items + 1);
        (0..n).map(|_| self.text(max_len)).collect()
    }
}

/// The seed of case `i` of a run seeded with `seed`.
fn case_seed(seed: u64, i: u64) -> u64 {
    Rng(seed ^ i.wrapping_mul(0xA24B_AED4_963E_E407)).next()
}

/// Runs `case` with a fresh seed until `default_secs` (or `FUZZ_SECONDS`)
/// passed, or `FUZZ_CASES` cases ran; a failure names the seed that
/// repeats it.
fn fuzz(target: &str, default_secs: u64, case: impl Fn(&mut Rng)) {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let budget = Duration::from_secs(env("FUZZ_SECONDS").unwrap_or(default_secs));
    let max_cases = env("FUZZ_CASES").unwrap_or(u64::MAX);
    eprintln!("fuzz {target}: FUZZ_SEED={seed}, {} s", budget.as_secs());
    let start = Instant::now();
    let mut i = 0u64;
    while i < max_cases && start.elapsed() < budget {
        // The first case of a run with FUZZ_SEED=S is S's own.
        let s = if i == 0 { seed } else { case_seed(seed, i) };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| case(&mut Rng(s))));
        if let Err(e) = result {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!(
                "fuzz {target}: case {i} failed ({why}); repeat it with FUZZ_SEED={s} FUZZ_CASES=1 \
                 (the run: FUZZ_SEED={seed})"
            );
        }
        i += 1;
    }
    eprintln!(
        "fuzz {target}: {i} cases in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(i > 0, "no case ran");
}

// Mutations -------------------------------------------------------------------

/// Values lengths and counts are often wrong by.
const EDGE_U16: [u16; 10] = [0, 1, 2, 0x7F, 0x80, 0xFF, 1024, 1025, 4097, 0xFFFF];
const EDGE_U32: [u32; 6] = [0, 1, 0xFFFF, 0x1_0000, 0x7FFF_FFFF, 0xFFFF_FFFF];

/// Applies 1 to 8 random mutations to `data`; `other` is another valid
/// message to splice from.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(8) {
        let len = data.len();
        match rng.below(11) {
            0 if len > 0 => {
                let bit = rng.below(len * 8);
                data[bit / 8] ^= 1 << (bit % 8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                data[at] = rng.u8();
            }
            2 if len > 0 => {
                let at = rng.below(len);
                data[at] = rng.pick(&[0, 1, 0x7F, 0x80, 0xFF]);
            }
            3 if len >= 2 => {
                let at = rng.below(len - 1);
                data[at..at + 2].copy_from_slice(&rng.pick(&EDGE_U16).to_le_bytes());
            }
            4 if len >= 4 => {
                let at = rng.below(len - 3);
                data[at..at + 4].copy_from_slice(&rng.pick(&EDGE_U32).to_le_bytes());
            }
            5 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.u8()).collect();
                data.splice(at..at, bytes);
            }
            6 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(16));
                data.drain(at..at + n);
            }
            7 => data.truncate(rng.below(len + 1)),
            8 if len > 0 => {
                // A part of itself again (a list item twice, say).
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(64));
                let copy = data[at..at + n].to_vec();
                let to = rng.below(len + 1);
                data.splice(to..to, copy);
            }
            9 if !other.is_empty() => {
                // The head of one message and the tail of another.
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            _ => {
                // Bytes appended (trailing garbage).
                let n = 1 + rng.below(8);
                data.extend((0..n).map(|_| rng.u8()));
            }
        }
    }
}

// The controller protocol -----------------------------------------------------

fn mode(rng: &mut Rng) -> BufferingMode {
    rng.pick(&[
        BufferingMode::Oneshot,
        BufferingMode::Circular,
        BufferingMode::Streaming,
    ])
}

fn disposition(rng: &mut Rng) -> BufferDisposition {
    rng.pick(&[
        BufferDisposition::ClearEntire,
        BufferDisposition::ClearNondurable,
        BufferDisposition::Retain,
    ])
}

fn trace_config(rng: &mut Rng) -> TraceConfig {
    TraceConfig {
        categories: rng.texts(6, 40),
        buffer_size_megabytes_hint: rng.u32(),
        start_timeout_milliseconds: rng.next(),
        buffering_mode: mode(rng),
        provider_specs: (0..rng.below(3))
            .map(|_| ProviderSpec {
                name: rng.text(30),
                buffer_size_megabytes_hint: rng.u32(),
                categories: rng.texts(3, 20),
            })
            .collect(),
        version: FxtVersion {
            major: rng.u32(),
            minor: rng.u32(),
        },
        defer_transfer: rng.chance(2),
        kernel_buffer_bytes: rng.next(),
        kernel_buffering_mode: mode(rng),
        pids: if rng.chance(2) {
            None
        } else {
            Some((0..rng.below(5)).map(|_| rng.u32()).collect())
        },
        cgroups: rng.texts(3, 60),
        uprobes: rng.texts(3, 60),
        usdt: rng.texts(3, 60),
        tracepoints: rng.texts(3, 60),
        stacks: StackOptions {
            sample_hz: rng.u32(),
            offcpu_min_us: rng.next(),
            frame_pointers: rng.chance(2),
            stack_bytes: rng.u32(),
            probe_stacks: rng.texts(4, 12),
        },
        triggers: rng.texts(3, 40),
    }
}

fn provider_stats(rng: &mut Rng) -> ProviderStats {
    ProviderStats {
        id: rng.u32(),
        name: rng.text(100),
        pid: rng.u32() as i32,
        records_written: rng.next(),
        bytes_written: rng.next(),
        records_dropped: rng.next(),
        buffer_wrapped_count: rng.u32(),
        percentage_durable_buffer_used: rng.below(101) as u8,
        started: rng.chance(2),
        aborted: rng.chance(2),
    }
}

fn stop_result(rng: &mut Rng) -> StopResult {
    let provider_stats: Vec<_> = (0..rng.below(6)).map(|_| provider_stats(rng)).collect();
    StopResult {
        providers_total: (provider_stats.len() + rng.below(3)) as u32,
        provider_stats,
        kernel: KernelStats {
            events: rng.next(),
            dropped: rng.next(),
            dropped_per_cpu: (0..rng.below(4)).map(|_| (rng.u32(), rng.next())).collect(),
            malformed: rng.next(),
            counts: (0..rng.below(4))
                .map(|_| {
                    let fixed = &KernelCount::FIXED;
                    let kind = match rng.below(fixed.len() + 1) {
                        i if i < fixed.len() => fixed[i].clone(),
                        _ => KernelCount::Tracepoint(rng.text(20)),
                    };
                    (kind, rng.next())
                })
                .collect(),
            categories: rng.texts(4, 20),
        },
        records: rng.next(),
        bytes: rng.next(),
        traced_ns: rng.next(),
    }
}

fn request(rng: &mut Rng) -> Request {
    match rng.below(12) {
        0 => Request::GetProviders,
        1 => Request::GetKnownCategories,
        2 => Request::InitializeTracing(trace_config(rng)),
        3 => Request::StartTracing(StartOptions {
            buffer_disposition: disposition(rng),
            additional_categories: rng.texts(5, 30),
        }),
        4 => Request::StopTracing {
            write_results: rng.chance(2),
        },
        5 => Request::WatchAlert,
        6 => Request::TerminateTracing,
        7 => Request::Follow { pid: rng.u32() },
        8 => Request::GetStatus,
        9 => Request::Snapshot,
        10 => Request::GetSessions,
        _ => Request::GetProviderStats { offset: rng.u32() },
    }
}

fn reply(rng: &mut Rng) -> Reply {
    match rng.below(15) {
        0 => Reply::Providers(
            (0..rng.below(5))
                .map(|_| ProviderInfo {
                    id: rng.u32(),
                    name: rng.text(40),
                    pid: rng.u32() as i32,
                    state: rng.text(20),
                    categories: rng.texts(4, 20),
                })
                .collect(),
        ),
        1 => Reply::KnownCategories(
            (0..rng.below(6))
                .map(|_| (rng.text(20), rng.text(60)))
                .collect(),
        ),
        2 => Reply::Initialized,
        3 => Reply::StartResult(match rng.below(5) {
            0 => Ok(()),
            v => Err(StartError::from_value(v as u32).unwrap()),
        }),
        4 => Reply::StopResult(match rng.below(4) {
            0 => Err(StopError::from_value(1 + rng.below(3) as u32).unwrap()),
            _ => Ok(stop_result(rng)),
        }),
        5 => Reply::Alert {
            name: rng.text(14),
            provider: rng.text(40),
        },
        6 => Reply::Terminated(stop_result(rng)),
        7 => Reply::Followed,
        8 => Reply::Status(Status {
            state: SessionState::from_value(rng.below(8) as u32),
            elapsed_ns: rng.next(),
            kernel_events: rng.next(),
            bytes: rng.next(),
            dropped: rng.next(),
            kernel_fill_permille: rng.u16(),
            providers: rng.u32(),
            providers_started: rng.u32(),
            provider_progress: (0..rng.below(5))
                .map(|_| ProviderProgress {
                    name: rng.text(40),
                    fill_permille: rng.u16(),
                    dropped: rng.next(),
                    bytes_written: rng.next(),
                })
                .collect(),
        }),
        9 => Reply::StateChanged(SessionState::from_value(1 + rng.below(7) as u32).unwrap()),
        10 => {
            let stats: Vec<_> = (0..rng.below(5)).map(|_| provider_stats(rng)).collect();
            let offset = rng.below(100) as u32;
            Reply::ProviderStats {
                offset,
                total: offset + stats.len() as u32 + rng.below(3) as u32,
                stats,
            }
        }
        11 => Reply::Snapshot(SnapshotResult {
            bytes: rng.next(),
            records: rng.next(),
        }),
        12 => Reply::Sessions(
            (0..rng.below(4))
                .map(|_| SessionInfo {
                    kind: SessionKind::from_value(1 + rng.below(2) as u8).unwrap(),
                    owner_pid: rng.u32() as i32,
                    state: rng.text(20),
                    categories: rng.texts(4, 30),
                    elapsed_ns: rng.next(),
                    bytes: rng.next(),
                    dropped: rng.next(),
                    window_ns: rng.next(),
                })
                .collect(),
        ),
        _ => Reply::Failed {
            fatal: rng.chance(2),
            code: rng.u32(),
            message: rng.text(200),
        },
    }
}

/// A valid controller message: a request or a reply.
fn controller_message(rng: &mut Rng) -> Vec<u8> {
    let txid = rng.u32();
    if rng.chance(2) {
        let body = request(rng);
        Envelope { txid, body }.encode()
    } else {
        let body = reply(rng);
        Envelope { txid, body }.encode()
    }
    .expect("a generated message encodes")
}

/// Decodes `bytes` as a request and as a reply: within bounds, and what
/// decodes encodes back to `bytes`.
fn check_controller(bytes: &[u8]) {
    let (request, peak) = peak_of(|| Envelope::<Request>::decode(bytes));
    check_bounded("controller request", bytes.len(), peak, 32, 4096);
    if let Ok(m) = request {
        assert_eq!(
            m.encode().as_deref(),
            Ok(bytes),
            "{m:?} re-encodes otherwise"
        );
    }
    let (reply, peak) = peak_of(|| Envelope::<Reply>::decode(bytes));
    check_bounded("controller reply", bytes.len(), peak, 32, 4096);
    if let Ok(m) = reply {
        assert_eq!(
            m.encode().as_deref(),
            Ok(bytes),
            "{m:?} re-encodes otherwise"
        );
    }
}

#[test]
fn controller_messages() {
    fuzz("controller", 8, |rng| {
        let mut bytes = controller_message(rng);
        // The unmutated message decodes to what was encoded.
        check_controller(&bytes);
        if rng.chance(8) {
            // Random bytes behind a valid header of any kind.
            bytes.truncate(6);
            let kind = rng.pick(&[0x0101u16, 0x0103, 0x0104, 0x0108, 0x010A, 0x0181, 0x0182])
                + rng.below(12) as u16;
            bytes.extend_from_slice(&kind.to_le_bytes());
            let n = rng.below(200);
            bytes.extend((0..n).map(|_| rng.u8()));
        } else {
            let other = controller_message(rng);
            mutate(rng, &mut bytes, &other);
        }
        check_controller(&bytes);
    });
}

// The provider control messages and FIFO packets -------------------------------

fn provider_message(rng: &mut Rng) -> Vec<u8> {
    ProviderMessage::Register {
        // Never empty.
        name: format!("p{}", rng.text(99)),
        clock: rng.pick(&[ClockKind::Boottime, ClockKind::Tsc]),
        categories: rng.texts(8, 100),
    }
    .encode()
    .expect("a generated registration encodes")
}

fn manager_message(rng: &mut Rng) -> Vec<u8> {
    match rng.below(5) {
        0 => ManagerMessage::Registered {
            provider_id: rng.u32(),
            tracing_started: rng.chance(2),
        },
        1 => ManagerMessage::Initialize {
            mode: mode(rng),
            categories: rng.texts(8, 100),
        },
        2 => ManagerMessage::Start {
            disposition: disposition(rng),
            additional_categories: rng.texts(8, 100),
        },
        3 => ManagerMessage::Stop,
        _ => ManagerMessage::Terminate,
    }
    .encode()
    .expect("a generated message encodes")
}

fn check_provider_control(bytes: &[u8]) {
    let (m, peak) = peak_of(|| ProviderMessage::decode(bytes));
    check_bounded("provider message", bytes.len(), peak, 32, 4096);
    if let Ok(m) = m {
        assert_eq!(
            m.encode().as_deref(),
            Ok(bytes),
            "{m:?} re-encodes otherwise"
        );
    }
    let (m, peak) = peak_of(|| ManagerMessage::decode(bytes));
    check_bounded("manager message", bytes.len(), peak, 32, 4096);
    if let Ok(m) = m {
        assert_eq!(
            m.encode().as_deref(),
            Ok(bytes),
            "{m:?} re-encodes otherwise"
        );
    }
}

fn packet(rng: &mut Rng) -> [u8; PACKET_BYTES] {
    let p = match rng.below(6) {
        0 => FromProvider::Started { version: rng.u32() }.to_packet(),
        1 => FromProvider::SaveBuffer {
            wrapped_count: rng.u32(),
            durable_data_end: rng.next(),
        }
        .to_packet(),
        2 => FromProvider::Stopped.to_packet(),
        3 => match AlertName::new(&rng.text(14)) {
            Some(name) => FromProvider::Alert(name).to_packet(),
            None => FromProvider::Stopped.to_packet(),
        },
        4 => FromManager::BufferSaved {
            wrapped_count: rng.u32(),
            durable_data_end: rng.next(),
        }
        .to_packet(),
        _ => Packet {
            request: {
                let any = rng.u16();
                rng.pick(&[
                    code::STARTED,
                    code::SAVE_BUFFER,
                    code::STOPPED,
                    code::ALERT,
                    code::BUFFER_SAVED,
                    any,
                ])
            },
            data16: rng.u16(),
            data32: rng.u32(),
            data64: rng.next(),
        },
    };
    p.to_bytes()
}

fn check_packet(bytes: &[u8; PACKET_BYTES]) {
    let (parsed, peak) = peak_of(|| {
        let p = Packet::from_bytes(bytes);
        assert_eq!(&p.to_bytes(), bytes);
        (FromProvider::parse(&p), FromManager::parse(&p))
    });
    assert_eq!(peak, 0, "parsing a packet allocates");
    // What parses means the same once written again.
    if let Ok(m) = parsed.0 {
        assert_eq!(FromProvider::parse(&m.to_packet()), Ok(m));
    }
    if let Ok(m) = parsed.1 {
        assert_eq!(FromManager::parse(&m.to_packet()), Ok(m));
    }
}

#[test]
fn provider_messages_and_packets() {
    fuzz("provider control and FIFO", 6, |rng| {
        let (mut bytes, other) = if rng.chance(2) {
            (provider_message(rng), manager_message(rng))
        } else {
            (manager_message(rng), provider_message(rng))
        };
        check_provider_control(&bytes);
        mutate(rng, &mut bytes, &other);
        check_provider_control(&bytes);

        let mut p = packet(rng);
        check_packet(&p);
        for _ in 0..1 + rng.below(4) {
            match rng.below(3) {
                0 => {
                    let bit = rng.below(PACKET_BYTES * 8);
                    p[bit / 8] ^= 1 << (bit % 8);
                }
                1 => p[rng.below(PACKET_BYTES)] = rng.u8(),
                _ => {
                    let at = rng.below(PACKET_BYTES - 1);
                    p[at..at + 2].copy_from_slice(&rng.pick(&EDGE_U16).to_le_bytes());
                }
            }
        }
        check_packet(&p);
    });
}

// The FXT reader and TraceState -------------------------------------------------

/// Mutations that keep to words, as records are framed: headers of other
/// sizes and types, words inserted, removed or repeated.
fn mutate_words(rng: &mut Rng, data: &mut Vec<u8>) {
    let words = data.len() / 8;
    if words == 0 {
        return;
    }
    let at = rng.below(words) * 8;
    match rng.below(4) {
        0 => {
            // A header word's type and size bits set to anything.
            let mut w = u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
            w = (w & !0xFFFF) | u64::from(rng.u16());
            data[at..at + 8].copy_from_slice(&w.to_le_bytes());
        }
        1 => {
            data.drain(at..at + 8);
        }
        2 => {
            let copy = data[at..at + 8].to_vec();
            data.splice(at..at, copy);
        }
        _ => {
            let any = rng.next();
            let w = rng.pick(&[0u64, u64::MAX, 0x0010_4846_5846_5410, any]);
            data.splice(at..at, w.to_le_bytes());
        }
    }
}

/// Reads `data` to its end with a [`TraceState`], looking every reference
/// up: never panics, ends, stays within bounds.
fn check_fxt(data: &[u8]) {
    let ((), peak) = peak_of(|| {
        let mut state = TraceState::new();
        let mut items = 0usize;
        for item in Reader::new(data) {
            items += 1;
            assert!(items <= data.len() / 8 + 1, "the reader does not end");
            let Ok((offset, record)) = item else { continue };
            assert!(offset < data.len() && offset % 8 == 0);
            state.apply(&record);
            let thread = |state: &TraceState, t: &ThreadRef| state.thread(*t);
            match &record {
                Record::Event {
                    ts,
                    thread: t,
                    category,
                    name,
                    args,
                    ..
                } => {
                    let _ = state.ticks_to_ns(*ts);
                    let _ = thread(&state, t);
                    let _ = (state.string(category), state.string(name));
                    for a in args.iter() {
                        let _ = state.string(&a.name);
                    }
                }
                Record::LegacyContextSwitch {
                    outgoing_thread,
                    incoming_thread,
                    ..
                } => {
                    let _ = (
                        thread(&state, outgoing_thread),
                        thread(&state, incoming_thread),
                    );
                }
                Record::KernelObject { name, args, .. } => {
                    let _ = state.string(name);
                    for a in args.iter() {
                        let _ = state.string(&a.name);
                    }
                }
                _ => {}
            }
            let _ = state.current_provider();
        }
    });
    // Records borrow the input; tables grow by at most a few entries per
    // record, and every record is a word at least.
    check_bounded("FXT reader and state", data.len(), peak, 64, 16 * 1024);
}

/// Valid traces of `records` records made by the shared strategies, from
/// `seed`.
fn valid_trace(seed: u64, records: std::ops::Range<usize>) -> Vec<u8> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    let records = proptest::collection::vec(common::arb_record(), records)
        .new_tree(&mut runner)
        .expect("records")
        .current();
    common::encode_all(&records).0
}

/// Valid traces to start from, the same in every run: making one takes
/// milliseconds (a debug build of the strategies), mutating it microseconds.
fn trace_pool() -> &'static [Vec<u8>] {
    static POOL: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| (0..64).map(|i| valid_trace(i, 1..24)).collect())
}

#[test]
fn fxt_reader_and_state() {
    let pool = trace_pool();
    fuzz("FXT reader", 10, |rng| {
        // One to three valid traces one after the other (still valid),
        // now and then a fresh one.
        let mut data = Vec::new();
        for _ in 0..1 + rng.below(3) {
            if rng.chance(32) {
                data.extend(valid_trace(rng.next(), 1..8));
            } else {
                data.extend_from_slice(&pool[rng.below(pool.len())]);
            }
        }
        if rng.chance(16) {
            check_fxt(&data);
        }
        let other = pool[rng.below(pool.len())].clone();
        for _ in 0..1 + rng.below(4) {
            if rng.chance(2) {
                mutate_words(rng, &mut data);
            } else {
                mutate(rng, &mut data, &other);
            }
        }
        check_fxt(&data);
        if let Err(e) = common::check_reader(&data) {
            panic!("{e}");
        }
    });
}

/// The accounting catches what it is there for: a count trusted before it
/// is checked.
#[test]
fn a_trusted_count_would_be_caught() {
    let input = [0u8; 20];
    let ((), peak) = peak_of(|| {
        let v: Vec<String> = Vec::with_capacity(1024);
        drop(v);
    });
    assert!(peak > input.len() * 32 + 4096, "{peak}");
    let ((), peak) = peak_of(|| {});
    assert_eq!(peak, 0);
}
