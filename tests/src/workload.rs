//! What the stack-sampling test programs (`stack_spin`, `stack_spin_c`,
//! `offcpu_pipe`, `stack_callers`) share: their flags, the CPU clocks, the
//! start handshake, the `key=value` lines they print, and the two spinning
//! threads of `stack_spin` and its C twin; and pinning a thread to a CPU,
//! which other test programs share.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// Iterations of the spin loop per call of the chain (or of `spin_d`): a
/// fraction of a millisecond, so the CPU-time check between calls is rare.
pub const SPIN_BATCH: u64 = 1 << 18;

/// Flags parsed from a command line: `--NAME VALUE` (or `--NAME=VALUE`)
/// numbers and bare `--NAME` switches.
#[derive(Debug)]
pub struct Flags {
    numbers: HashMap<&'static str, u64>,
    given: Vec<&'static str>,
}

impl Flags {
    /// Parses `args` (without the program name): the numbers in `numbers`
    /// (name and default) and the switches in `switches`, names without the
    /// leading `--`. An unknown flag, a missing value or one that is no
    /// number is an error saying which.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        numbers: &[(&'static str, u64)],
        switches: &[&'static str],
    ) -> Result<Flags, String> {
        let mut flags = Flags {
            numbers: numbers.iter().copied().collect(),
            given: Vec::new(),
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let Some(flag) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}"));
            };
            let (name, inline) = match flag.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (flag, None),
            };
            if let Some(&switch) = switches.iter().find(|&&s| s == name) {
                if inline.is_some() {
                    return Err(format!("--{name} takes no value"));
                }
                flags.given.push(switch);
                continue;
            }
            let Some(&(number, _)) = numbers.iter().find(|(n, _)| *n == name) else {
                return Err(format!("unknown flag --{name}"));
            };
            let value = inline
                .or_else(|| args.next())
                .ok_or_else(|| format!("--{name} needs a value"))?;
            let value = value
                .parse()
                .map_err(|_| format!("--{name}: {value:?} is not a whole number"))?;
            flags.numbers.insert(number, value);
            flags.given.push(number);
        }
        Ok(flags)
    }

    /// The value of number `name`: the one given, or its default.
    pub fn number(&self, name: &str) -> u64 {
        self.numbers[name]
    }

    /// Whether `name` (a switch or a number) was on the command line.
    pub fn given(&self, name: &str) -> bool {
        self.given.contains(&name)
    }
}

/// Parses the program's own command line with [`Flags::parse`]; on a
/// mistake prints it and `usage` to standard error and exits with status 2.
pub fn flags_or_exit(
    numbers: &[(&'static str, u64)],
    switches: &[&'static str],
    usage: &str,
) -> Flags {
    Flags::parse(std::env::args().skip(1), numbers, switches)
        .unwrap_or_else(|e| usage_exit(&e, usage))
}

/// Prints `mistake` and the usage line `usage` to standard error and exits
/// with status 2.
fn usage_exit(mistake: &str, usage: &str) -> ! {
    let program = std::env::args().next().unwrap_or_default();
    let program = program.rsplit('/').next().unwrap_or_default();
    eprintln!("{mistake}\nusage: {program} {usage}");
    std::process::exit(2)
}

/// The `key=value` fields of `line` whose value is a whole number, e.g. of
/// `chain_cpu_ns=300000000 pid=42`.
pub fn numbers(line: &str) -> HashMap<&str, u64> {
    line.split_whitespace()
        .filter_map(|field| field.split_once('='))
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect()
}

/// The calling thread's id.
pub fn gettid() -> u64 {
    // SAFETY: gettid has no preconditions.
    (unsafe { libc::gettid() }) as u64
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock})");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the calling thread has used, in nanoseconds
/// (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time the whole process has used, ended threads included, in
/// nanoseconds (CLOCK_PROCESS_CPUTIME_ID).
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The start handshake of `--wait-stdin`: prints `pid=P`, then waits for a
/// line (or the end) on standard input.
pub fn announce_and_wait() {
    println!("pid={}", std::process::id());
    std::io::stdout().flush().expect("writing standard output");
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .expect("reading standard input");
}

/// How much one spinning thread of `stack_spin` burns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    /// Until the thread has used this many milliseconds of CPU time.
    CpuMs(u64),
    /// Exactly this many calls of [`SPIN_BATCH`] iterations: a fixed amount
    /// of work, whatever it costs.
    Batches(u64),
}

/// The command line of `stack_spin` and `stack_spin_c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinArgs {
    /// What the thread named `chain` burns in `spin_a` → `spin_b` → `spin_c`.
    pub chain: Amount,
    /// What the thread named `direct` burns in `spin_d`.
    pub direct: Amount,
    /// Whether to print `pid=P` and wait for a line on standard input before
    /// spinning.
    pub wait_stdin: bool,
}

/// The usage line of `stack_spin` and `stack_spin_c`.
pub const SPIN_USAGE: &str = "[--chain-ms N] [--direct-ms M] [--chain-batches N] \
                              [--direct-batches M] [--wait-stdin]";

impl SpinArgs {
    /// Parses the flags (without the program name): `--chain-ms` (default
    /// 300) and `--direct-ms` (default 100), or `--chain-batches` and
    /// `--direct-batches` in their place, and `--wait-stdin`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<SpinArgs, String> {
        let flags = Flags::parse(args, &SPIN_NUMBERS, &["wait-stdin"])?;
        SpinArgs::from_flags(&flags)
    }

    /// Parses the program's own command line; exits on a mistake.
    pub fn from_command_line() -> SpinArgs {
        let flags = flags_or_exit(&SPIN_NUMBERS, &["wait-stdin"], SPIN_USAGE);
        SpinArgs::from_flags(&flags).unwrap_or_else(|e| usage_exit(&e, SPIN_USAGE))
    }

    fn from_flags(flags: &Flags) -> Result<SpinArgs, String> {
        let amount = |thread: &str| {
            let (ms, batches) = (format!("{thread}-ms"), format!("{thread}-batches"));
            match (flags.given(&ms), flags.given(&batches)) {
                (true, true) => Err(format!("--{ms} and --{batches} exclude each other")),
                (_, true) => Ok(Amount::Batches(flags.number(&batches))),
                _ => Ok(Amount::CpuMs(flags.number(&ms))),
            }
        };
        Ok(SpinArgs {
            chain: amount("chain")?,
            direct: amount("direct")?,
            wait_stdin: flags.given("wait-stdin"),
        })
    }
}

const SPIN_NUMBERS: [(&str, u64); 4] = [
    ("chain-ms", 300),
    ("direct-ms", 100),
    ("chain-batches", 0),
    ("direct-batches", 0),
];

/// What `stack_spin` measured: its last line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinReport {
    /// CPU time the `chain` thread used while spinning.
    pub chain_cpu_ns: u64,
    /// CPU time the `direct` thread used while spinning.
    pub direct_cpu_ns: u64,
    /// The `chain` thread's id.
    pub chain_tid: u64,
    /// The `direct` thread's id.
    pub direct_tid: u64,
    /// The process id.
    pub pid: u64,
    /// Wall time from the start of the spinning to the end of both threads.
    pub wall_ns: u64,
    /// CPU time of the whole process at the end, from its start.
    pub process_cpu_ns: u64,
}

impl std::fmt::Display for SpinReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chain_cpu_ns={} direct_cpu_ns={} chain_tid={} direct_tid={} pid={} wall_ns={} \
             process_cpu_ns={}",
            self.chain_cpu_ns,
            self.direct_cpu_ns,
            self.chain_tid,
            self.direct_tid,
            self.pid,
            self.wall_ns,
            self.process_cpu_ns
        )
    }
}

impl SpinReport {
    /// Parses the line [`SpinReport`]'s `Display` writes.
    pub fn parse(line: &str) -> Option<SpinReport> {
        let n = numbers(line);
        Some(SpinReport {
            chain_cpu_ns: *n.get("chain_cpu_ns")?,
            direct_cpu_ns: *n.get("direct_cpu_ns")?,
            chain_tid: *n.get("chain_tid")?,
            direct_tid: *n.get("direct_tid")?,
            pid: *n.get("pid")?,
            wall_ns: *n.get("wall_ns")?,
            process_cpu_ns: *n.get("process_cpu_ns")?,
        })
    }
}

/// Runs `stack_spin`: a thread named `chain` calling `chain(SPIN_BATCH)`
/// and one named `direct` calling `direct(SPIN_BATCH)`, each until its
/// [`Amount`] is burnt, both started together (after the `--wait-stdin`
/// handshake); returns what they measured.
pub fn spin<C, D>(args: SpinArgs, chain: C, direct: D) -> SpinReport
where
    C: Fn(u64) -> u64 + Send + 'static,
    D: Fn(u64) -> u64 + Send + 'static,
{
    // The threads exist (their ids too) before the handshake, so that a
    // recorder attaching to the pid sees them from the start.
    let start = Arc::new(Barrier::new(3));
    let thread = |name: &str, amount: Amount, f: Box<dyn Fn(u64) -> u64 + Send>| {
        let start = Arc::clone(&start);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || spin_thread(&*f, amount, &start))
            .expect("starting a thread")
    };
    let chain_thread = thread("chain", args.chain, Box::new(chain));
    let direct_thread = thread("direct", args.direct, Box::new(direct));
    if args.wait_stdin {
        announce_and_wait();
    }
    start.wait();
    let began = Instant::now();
    let (chain_cpu_ns, chain_tid) = chain_thread.join().expect("the chain thread");
    let (direct_cpu_ns, direct_tid) = direct_thread.join().expect("the direct thread");
    SpinReport {
        chain_cpu_ns,
        direct_cpu_ns,
        chain_tid,
        direct_tid,
        pid: u64::from(std::process::id()),
        wall_ns: began.elapsed().as_nanos() as u64,
        process_cpu_ns: process_cpu_ns(),
    }
}

/// The body of one spinning thread: waits for the start, then calls `f`
/// until `amount` is burnt; returns the CPU time it used from the start and
/// its thread id.
#[inline(never)]
fn spin_thread(f: &dyn Fn(u64) -> u64, amount: Amount, start: &Barrier) -> (u64, u64) {
    start.wait();
    let from = thread_cpu_ns();
    let mut sink = 0u64;
    match amount {
        Amount::CpuMs(ms) => {
            let until = from + ms * 1_000_000;
            while thread_cpu_ns() < until {
                sink ^= f(SPIN_BATCH);
            }
        }
        Amount::Batches(n) => {
            for _ in 0..n {
                sink ^= f(SPIN_BATCH);
            }
        }
    }
    std::hint::black_box(sink);
    (thread_cpu_ns() - from, gettid())
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it
    // (a CPU past the set's size is ignored).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size given.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn flags_take_numbers_switches_and_defaults() {
        let parse = |s: &str| Flags::parse(args(s), &[("rounds", 3), ("delay-ms", 200)], &["wait"]);
        let f = parse("--rounds 5 --wait").unwrap();
        assert_eq!((f.number("rounds"), f.number("delay-ms")), (5, 200));
        assert!(f.given("wait") && f.given("rounds") && !f.given("delay-ms"));
        let f = parse("--delay-ms=7").unwrap();
        assert_eq!(f.number("delay-ms"), 7);
        assert!(!f.given("wait"));
        assert_eq!(parse("--nope 1").unwrap_err(), "unknown flag --nope");
        assert_eq!(parse("--rounds").unwrap_err(), "--rounds needs a value");
        assert!(
            parse("--rounds x")
                .unwrap_err()
                .contains("not a whole number")
        );
        assert!(
            parse("--rounds -1")
                .unwrap_err()
                .contains("not a whole number")
        );
        assert!(parse("5").unwrap_err().contains("unexpected argument"));
        assert_eq!(parse("--wait=1").unwrap_err(), "--wait takes no value");
    }

    #[test]
    fn spin_arguments_choose_cpu_time_or_batches_per_thread() {
        assert_eq!(
            SpinArgs::parse(args("")).unwrap(),
            SpinArgs {
                chain: Amount::CpuMs(300),
                direct: Amount::CpuMs(100),
                wait_stdin: false
            }
        );
        assert_eq!(
            SpinArgs::parse(args("--chain-ms 40 --direct-batches 9 --wait-stdin")).unwrap(),
            SpinArgs {
                chain: Amount::CpuMs(40),
                direct: Amount::Batches(9),
                wait_stdin: true
            }
        );
        assert!(
            SpinArgs::parse(args("--chain-ms 1 --chain-batches 2"))
                .unwrap_err()
                .contains("exclude each other")
        );
    }

    #[test]
    fn reports_print_and_parse_back() {
        let r = SpinReport {
            chain_cpu_ns: 1,
            direct_cpu_ns: 2,
            chain_tid: 3,
            direct_tid: 4,
            pid: 5,
            wall_ns: 6,
            process_cpu_ns: 7,
        };
        let line = r.to_string();
        assert!(line.starts_with("chain_cpu_ns=1 direct_cpu_ns=2 chain_tid=3 direct_tid=4 pid=5"));
        assert_eq!(SpinReport::parse(&line), Some(r));
        assert_eq!(SpinReport::parse("pid=5"), None);
        assert_eq!(
            numbers("a=1 b=x c=3 d"),
            HashMap::from([("a", 1), ("c", 3)])
        );
    }

    #[test]
    fn a_spinning_thread_burns_what_it_is_told() {
        let spin_args = SpinArgs {
            chain: Amount::CpuMs(20),
            direct: Amount::Batches(2),
            wait_stdin: false,
        };
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = Arc::clone(&calls);
        let r = spin(spin_args, std::hint::black_box, move |n| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            n
        });
        assert!(r.chain_cpu_ns >= 20_000_000, "{r}");
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 2);
        assert_ne!(r.chain_tid, r.direct_tid);
        assert!(r.process_cpu_ns >= r.chain_cpu_ns);
    }
}
