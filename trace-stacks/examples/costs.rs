//! Measures what each step of `trace_stacks::StackResolver` costs, on this process's own stack.
//!
//! `cargo run --release -p trace-stacks --example costs`: samples its own stack at the bottom of
//! a chain of 30 distinct functions called from libc's `qsort`, copies 8 KiB from the stack
//! pointer as the sampler does, and times observing, unwinding and symbolizing it, cold and
//! warm.

#[cfg(target_arch = "x86_64")]
fn main() {
    measure::main();
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("the stack is sampled with x86-64 instructions: nothing to measure here");
}

#[cfg(target_arch = "x86_64")]
mod measure {
    use std::cell::RefCell;
    use std::ffi::{c_int, c_void};
    use std::fs::File;
    use std::hint::black_box;
    use std::os::unix::fs::FileExt;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use trace_stacks::{StackResolver, UserRegs};

    /// Bytes of stack copied, as the sampler's usual copy.
    const STACK_COPY: usize = 8 * 1024;
    /// Repetitions of a warm measurement.
    const WARM: u32 = 10_000;

    struct Sample {
        regs: UserRegs,
        stack: Vec<u8>,
    }

    /// Copies `len` bytes of this process's memory from `sp` (fewer at the top of the stack).
    fn copy_stack(sp: u64, len: usize) -> Vec<u8> {
        let mem = File::open("/proc/self/mem").expect("/proc/self/mem");
        let mut bytes = vec![0; len];
        let mut copied = 0;
        while copied < len {
            match mem.read_at(&mut bytes[copied..], sp + copied as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => copied += n,
            }
        }
        bytes.truncate(copied);
        bytes
    }

    thread_local! {
        static SAMPLE: RefCell<Option<Sample>> = const { RefCell::new(None) };
    }

    /// Samples the stack here, the first time.
    #[inline(never)]
    fn leaf() {
        if SAMPLE.with(|s| s.borrow().is_some()) {
            return;
        }
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: copies rip, rsp and rbp into three locals; reads and writes no memory and leaves
        // the stack and flags as they are.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        let sample = Sample {
            regs: UserRegs { ip, sp, bp },
            stack: copy_stack(sp, STACK_COPY),
        };
        SAMPLE.with(|s| *s.borrow_mut() = Some(sample));
    }

    /// Distinct functions calling each other, each with a frame of its own.
    macro_rules! chain {
        ($($name:ident -> $next:ident;)*) => {$(
            #[inline(never)]
            fn $name() {
                let pad = black_box([0u8; 96]);
                $next();
                black_box(&pad);
            }
        )*};
    }

    chain! {
        f01 -> f02; f02 -> f03; f03 -> f04; f04 -> f05; f05 -> f06; f06 -> f07; f07 -> f08;
        f08 -> f09; f09 -> f10; f10 -> f11; f11 -> f12; f12 -> f13; f13 -> f14; f14 -> f15;
        f15 -> f16; f16 -> f17; f17 -> f18; f18 -> f19; f19 -> f20; f20 -> f21; f21 -> f22;
        f22 -> f23; f23 -> f24; f24 -> f25; f25 -> f26; f26 -> f27; f27 -> f28; f28 -> f29;
        f29 -> f30; f30 -> leaf;
    }

    /// A comparator for libc's `qsort` that runs the chain.
    extern "C" fn compare(_: *const c_void, _: *const c_void) -> c_int {
        f01();
        0
    }

    /// Samples under libc's `qsort` (code without frame pointers) and 30 functions.
    fn sample() -> Sample {
        let mut items = [3u32, 1, 2, 5, 4];
        let compare: unsafe extern "C" fn(*const c_void, *const c_void) -> c_int = compare;
        // SAFETY: `items` is an array of `items.len()` elements of `size_of::<u32>()` bytes each,
        // valid for the call, and the comparator dereferences neither pointer.
        unsafe {
            libc::qsort(
                items.as_mut_ptr().cast(),
                items.len(),
                size_of::<u32>(),
                Some(compare),
            );
        }
        SAMPLE.with(|s| s.borrow_mut().take()).expect("sampled")
    }

    fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
        let start = Instant::now();
        let value = f();
        (value, start.elapsed())
    }

    fn per(total: Duration, n: u32) -> String {
        format!("{:.2} µs", total.as_secs_f64() * 1e6 / f64::from(n))
    }

    /// Observes a running Debian program and names an address in each of its files, cold.
    fn other_program(path: &str, args: &[&str]) {
        let Ok(mut child) = Command::new(path).args(args).spawn() else {
            println!("{path}: not run");
            return;
        };
        // Until the dynamic loader is done.
        std::thread::sleep(Duration::from_millis(100));
        let pid = child.id();
        let mut resolver = StackResolver::new();
        let ((), observe) = time(|| resolver.observe(pid));
        let mappings = resolver.mappings(pid);
        let addrs: Vec<u64> = mappings
            .iter()
            .map(|m| m.start + (m.end - m.start) / 2)
            .collect();
        let (frames, cold) = time(|| resolver.symbolize_user(pid, &addrs));
        let named = frames.iter().filter(|f| f.function != "[unknown]").count();
        println!(
            "{path}: first observe {} ({} mappings); symbolize one address in each, cold: {} \
             ({named} named)",
            per(observe, 1),
            mappings.len(),
            per(cold, 1),
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    pub fn main() {
        let pid = std::process::id();
        let sample = sample();

        let mut resolver = StackResolver::new();
        let ((), first_observe) = time(|| resolver.observe(pid));
        let ((), known_observe) = time(|| {
            for _ in 0..WARM {
                resolver.observe(black_box(pid));
            }
        });

        let mut addrs = Vec::new();
        let ((), cold_unwind) =
            time(|| resolver.unwind_user(pid, sample.regs, &sample.stack, 128, &mut addrs));
        let frames = addrs.len();
        let ((), warm_unwind) = time(|| {
            for _ in 0..WARM {
                addrs.clear();
                resolver.unwind_user(pid, sample.regs, &sample.stack, 128, &mut addrs);
            }
        });

        let (resolved, cold_symbols) = time(|| resolver.symbolize_user(pid, &addrs));
        let ((), warm_symbols) = time(|| {
            for _ in 0..WARM {
                black_box(resolver.symbolize_user(pid, &addrs));
            }
        });

        let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let kernel_addr = kallsyms
            .lines()
            .find(|l| l.ends_with(" ksys_read"))
            .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok());

        println!(
            "stack: {} bytes copied, {frames} frames unwound",
            sample.stack.len()
        );
        for frame in &resolved {
            println!(
                "  {:#x} {} ({})",
                frame.addr, frame.function, frame.mapping.path
            );
        }
        println!(
            "first observe: {} ({} mappings)",
            per(first_observe, 1),
            resolver.mappings(pid).len()
        );
        println!("observe, known: {}", per(known_observe, WARM));
        println!("unwind, cold rule cache: {}", per(cold_unwind, 1));
        println!("unwind, warm: {}", per(warm_unwind, WARM));
        println!("symbolize {frames} frames, cold: {}", per(cold_symbols, 1));
        println!(
            "symbolize {frames} frames, cached: {}",
            per(warm_symbols, WARM)
        );
        other_program("/usr/bin/python3", &["-c", "import time; time.sleep(0.5)"]);
        if let Some(addr) = kernel_addr.filter(|&a| a != 0) {
            let (frames, cold) = time(|| resolver.symbolize_kernel(&[addr]));
            let ((), warm) = time(|| {
                for _ in 0..WARM {
                    black_box(resolver.symbolize_kernel(&[addr]));
                }
            });
            println!(
                "symbolize_kernel ({}): cold {}, cached {}",
                frames[0].function,
                per(cold, 1),
                per(warm, WARM)
            );
        }
    }
}
