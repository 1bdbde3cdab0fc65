//! Tests on real processes: this test process's own stacks, a child that exits, the kernel.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::process::Command;
use std::time::{Duration, Instant};

use object::{Object, ObjectSymbol};

use crate::{ResolvedFrame, StackResolver, UserRegs};

/// Bytes of stack copied, as the sampler's largest copy.
const STACK_COPY: usize = 16 * 1024;

/// The registers here, read at this instruction.
macro_rules! capture_regs {
    () => {{
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: copies rip, rsp and rbp into three locals; reads and writes no memory and
        // leaves the stack and flags as they are.
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
        UserRegs { ip, sp, bp }
    }};
}

/// Up to `len` bytes of this process's memory from `sp`, as the sampler copies a stack (fewer at
/// the top of the stack's mapping).
fn copy_stack(sp: u64, len: usize) -> Vec<u8> {
    let mem = File::open("/proc/self/mem").unwrap();
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

/// A stack sampled in this process.
struct Sample {
    regs: UserRegs,
    stack: Vec<u8>,
}

impl Sample {
    fn here(regs: UserRegs) -> Self {
        Sample {
            regs,
            stack: copy_stack(regs.sp, STACK_COPY),
        }
    }
}

#[inline(never)]
fn chain_outer_a() -> Sample {
    let sample = chain_middle_b();
    // Work after the call, so it stays a call (not a tail jump).
    black_box(&sample);
    sample
}

#[inline(never)]
fn chain_middle_b() -> Sample {
    let sample = chain_leaf_c();
    black_box(&sample);
    sample
}

#[inline(never)]
fn chain_leaf_c() -> Sample {
    Sample::here(capture_regs!())
}

/// Unwinds and names `sample` of this process.
fn resolve(resolver: &mut StackResolver, sample: &Sample) -> Vec<ResolvedFrame> {
    let pid = std::process::id();
    let mut addrs = Vec::new();
    resolver.unwind_user(pid, sample.regs, &sample.stack, 128, &mut addrs);
    resolver.symbolize_user(pid, &addrs)
}

fn names(frames: &[ResolvedFrame]) -> Vec<&str> {
    frames.iter().map(|f| f.function.as_str()).collect()
}

/// The index of the first frame after `from` whose name contains `name`.
fn position_after(frames: &[ResolvedFrame], from: usize, name: &str) -> Option<usize> {
    frames
        .iter()
        .skip(from)
        .position(|f| f.function.contains(name))
        .map(|i| i + from)
}

/// Checks that `names` appear in this order (not necessarily next to each other).
fn assert_in_order(frames: &[ResolvedFrame], wanted: &[&str]) {
    let mut at = 0;
    for name in wanted {
        match position_after(frames, at, name) {
            Some(i) => at = i + 1,
            None => panic!("{name} not found in order in {:#?}", names(frames)),
        }
    }
}

#[test]
fn names_a_function_of_this_binary_demangled() {
    let mut resolver = StackResolver::new();
    let addr = chain_leaf_c as *const () as u64;
    let frames = resolver.symbolize_user(std::process::id(), &[addr, addr + 1]);
    assert_eq!(frames.len(), 2);
    for frame in &frames {
        assert!(frame.function.contains("chain_leaf_c"), "{frame:#?}");
        assert!(
            !frame.function.starts_with("_ZN"),
            "not demangled: {frame:#?}"
        );
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(frame.mapping.path, exe.to_string_lossy());
        assert!(frame.mapping.build_id.is_some());
        assert_eq!(
            frame.rel_pc,
            frame.addr - frame.mapping.start + frame.mapping.file_offset
        );
    }
}

#[test]
fn unwinds_this_process_through_a_chain_of_calls() {
    let sample = chain_outer_a();
    let mut resolver = StackResolver::new();
    let frames = resolve(&mut resolver, &sample);
    assert_eq!(frames[0].addr, sample.regs.ip);
    assert!(
        frames[0].function.contains("chain_leaf_c"),
        "{:#?}",
        names(&frames)
    );
    assert_in_order(
        &frames,
        &["chain_leaf_c", "chain_middle_b", "chain_outer_a"],
    );
    // And on to the test harness.
    assert!(frames.len() > 4, "{:#?}", names(&frames));

    // A few frames only.
    let mut addrs = Vec::new();
    resolver.unwind_user(
        std::process::id(),
        sample.regs,
        &sample.stack,
        2,
        &mut addrs,
    );
    assert_eq!(addrs.len(), 2);
}

#[test]
fn unwinds_with_the_unwind_tables_when_there_is_no_frame_pointer() {
    // Without a frame pointer, only `.eh_frame` can find the callers. (Rust builds x86-64 code
    // without frame pointers unless told to: with `-C force-frame-pointers` the leaf's unwind
    // rule itself would read rbp.)
    let sample = chain_outer_a();
    let regs = UserRegs {
        bp: 0,
        ..sample.regs
    };
    let mut resolver = StackResolver::new();
    let frames = resolve(
        &mut resolver,
        &Sample {
            regs,
            stack: sample.stack,
        },
    );
    assert_in_order(
        &frames,
        &["chain_leaf_c", "chain_middle_b", "chain_outer_a"],
    );
}

thread_local! {
    static IN_QSORT: RefCell<Option<Sample>> = const { RefCell::new(None) };
}

/// A comparator for libc's `qsort` that samples its own stack the first time it is called.
extern "C" fn compare_and_sample(_: *const c_void, _: *const c_void) -> c_int {
    if IN_QSORT.with(|s| s.borrow().is_none()) {
        let sample = Sample::here(capture_regs!());
        IN_QSORT.with(|s| *s.borrow_mut() = Some(sample));
    }
    0
}

#[inline(never)]
fn sort_with_libc_qsort() -> Sample {
    IN_QSORT.with(|s| s.borrow_mut().take());
    let mut items = [5u32, 3, 9, 1, 7, 2, 8, 6];
    let compare: unsafe extern "C" fn(*const c_void, *const c_void) -> c_int = compare_and_sample;
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
    let sample = IN_QSORT.with(|s| s.borrow_mut().take()).unwrap();
    black_box(&items);
    sample
}

#[test]
fn unwinds_through_libc_which_has_no_frame_pointers() {
    let sample = sort_with_libc_qsort();
    let mut resolver = StackResolver::new();
    let frames = resolve(&mut resolver, &sample);
    let all = names(&frames);
    assert!(
        frames[0].function.contains("compare_and_sample"),
        "{all:#?}"
    );
    let libc_frames: Vec<&ResolvedFrame> = frames
        .iter()
        .skip(1)
        .take_while(|f| !f.function.contains("sort_with_libc_qsort"))
        .collect();
    assert!(
        !libc_frames.is_empty()
            && libc_frames
                .iter()
                .all(|f| f.mapping.path.contains("libc.so")),
        "{all:#?}"
    );
    assert!(
        libc_frames.iter().any(|f| f.function.contains("qsort")),
        "{all:#?}"
    );
    assert_in_order(
        &frames,
        &[
            "compare_and_sample",
            "qsort",
            "sort_with_libc_qsort",
            "unwinds_through_libc_which_has_no_frame_pointers",
        ],
    );

    // Frame pointers alone lose the way in libc.
    let mut fp_only = crate::process::ProcessUnwinder::new();
    std::mem::swap(
        &mut fp_only,
        &mut resolver
            .processes
            .get_mut(&std::process::id())
            .unwrap()
            .unwinder,
    );
    let fp_frames = resolve(&mut resolver, &sample);
    assert!(
        position_after(&fp_frames, 1, "sort_with_libc_qsort").is_none(),
        "{:#?}",
        names(&fp_frames)
    );
}

/// The address of `symbol` in this process's mapping of the shared library `library`.
fn address_in_library(resolver: &mut StackResolver, library: &str, addr: u64) -> u64 {
    let ours = resolver
        .mappings(std::process::id())
        .into_iter()
        .find(|m| m.path.contains(library) && (m.start..m.end).contains(&addr))
        .unwrap();
    addr - ours.start + ours.file_offset
}

#[test]
fn names_addresses_of_a_process_that_exited() {
    let mut child = Command::new("/usr/bin/sleep").arg("0.2").spawn().unwrap();
    let pid = child.id();
    // The dynamic loader maps libc after exec.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .contains("libc.so")
    {
        assert!(Instant::now() < deadline, "libc never mapped");
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut resolver = StackResolver::new();
    resolver.observe(pid);
    assert!(child.wait().unwrap().success());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());

    // clock_nanosleep's file offset in libc, from this process's mapping of the same file.
    let offset = address_in_library(
        &mut resolver,
        "libc.so",
        libc::clock_nanosleep as *const () as u64 + 1,
    );
    let theirs = resolver
        .mappings(pid)
        .into_iter()
        .find(|m| {
            m.path.contains("libc.so")
                && (m.file_offset..m.file_offset + (m.end - m.start)).contains(&offset)
        })
        .unwrap();
    let addr = theirs.start + (offset - theirs.file_offset);
    let frames = resolver.symbolize_user(pid, &[addr]);
    assert!(frames[0].function.contains("nanosleep"), "{frames:#?}");
    assert!(frames[0].mapping.build_id.is_some());
    assert_eq!(frames[0].rel_pc, offset);

    // Its stacks still unwind: a frame, as far as the registers go.
    let mut addrs = Vec::new();
    let regs = UserRegs {
        ip: addr,
        sp: 0x1000,
        bp: 0,
    };
    resolver.unwind_user(pid, regs, &[0; 64], 16, &mut addrs);
    assert_eq!(addrs[0], addr);
}

#[test]
fn finds_a_library_loaded_after_the_first_look() {
    let pid = std::process::id();
    let mut resolver = StackResolver::new();
    resolver.observe(pid);
    let before = resolver.mappings(pid);
    // SAFETY: libm is glibc's own maths library, loaded with its initializers only; the name is
    // a C string.
    let handle = unsafe { libc::dlopen(c"libm.so.6".as_ptr(), libc::RTLD_NOW) };
    assert!(!handle.is_null());
    // SAFETY: `handle` is the library just opened (and never closed), the name a C string.
    let cos = unsafe { libc::dlsym(handle, c"cos".as_ptr()) } as u64;
    assert_ne!(cos, 0);
    if before.iter().any(|m| (m.start..m.end).contains(&cos)) {
        eprintln!("libm was loaded already: nothing to find");
    }
    std::thread::sleep(crate::process::REREAD_MIN);
    let frames = resolver.symbolize_user(pid, &[cos + 1]);
    assert!(frames[0].function.contains("cos"), "{frames:#?}");
    assert!(frames[0].mapping.path.contains("libm.so"), "{frames:#?}");
}

#[test]
fn names_the_vdso() {
    let mut resolver = StackResolver::new();
    let pid = std::process::id();
    let Some(vdso) = resolver
        .mappings(pid)
        .into_iter()
        .find(|m| m.path == "[vdso]")
    else {
        panic!("no [vdso] mapping");
    };
    // The vDSO's own symbol table says where clock_gettime is.
    let mut image = vec![0; (vdso.end - vdso.start) as usize];
    File::open("/proc/self/mem")
        .unwrap()
        .read_exact_at(&mut image, vdso.start)
        .unwrap();
    let elf = object::File::parse(&*image).unwrap();
    let symbol = elf
        .dynamic_symbols()
        .find(|s| s.name() == Ok("__vdso_clock_gettime"))
        .unwrap();
    let frames = resolver.symbolize_user(pid, &[vdso.start + symbol.address() + 2]);
    assert!(frames[0].function.contains("clock_gettime"), "{frames:#?}");
    assert_eq!(frames[0].mapping.path, "[vdso]");
    assert!(frames[0].mapping.build_id.is_some());
}

#[test]
fn names_kernel_addresses_from_kallsyms() {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let Some(addr) = kallsyms.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let addr = u64::from_str_radix(fields.next()?, 16).ok()?;
        let _kind = fields.next()?;
        (fields.next()? == "ksys_read" && fields.next().is_none()).then_some(addr)
    }) else {
        panic!("no ksys_read in /proc/kallsyms");
    };
    if addr == 0 {
        eprintln!("kallsyms hides addresses (not root, or kptr_restrict): skipped");
        return;
    }
    let mut resolver = StackResolver::new();
    for _ in 0..2 {
        let frames = resolver.symbolize_kernel(&[addr, addr + 4]);
        assert_eq!(names(&frames), ["ksys_read", "ksys_read"]);
        assert_eq!(frames[0].mapping.path, StackResolver::KERNEL_PATH);
        assert_eq!((frames[1].addr, frames[1].rel_pc), (addr + 4, addr + 4));
    }
    let frames = resolver.symbolize_kernel(&[1]);
    assert_eq!(frames[0].function, "[unknown]");
}

/// A reproducible stream of garbage.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn garbage_and_vanished_processes_give_unknown_frames() {
    let mut resolver = StackResolver::new();
    let mut state = 0x9e37_79b9_7f4a_7c15;
    let own = chain_leaf_c as *const () as u64;
    for pid in [std::process::id(), u32::MAX, 0] {
        for round in 0..200 {
            let mut stack: Vec<u8> = (0..8192).map(|_| xorshift(&mut state) as u8).collect();
            if round % 2 == 0 {
                // Plausible return addresses among the garbage.
                for slot in stack.chunks_exact_mut(64) {
                    slot[..8].copy_from_slice(&(own + (xorshift(&mut state) % 64)).to_le_bytes());
                }
            }
            let regs = UserRegs {
                ip: if round % 3 == 0 {
                    own
                } else {
                    xorshift(&mut state)
                },
                sp: xorshift(&mut state),
                bp: xorshift(&mut state),
            };
            let mut addrs = Vec::new();
            resolver.unwind_user(pid, regs, &stack[..round * 40 % 8192], 64, &mut addrs);
            assert!(!addrs.is_empty() && addrs.len() <= 64);
            assert_eq!(addrs[0], regs.ip);
            for frame in resolver.symbolize_user(pid, &addrs) {
                assert!(!frame.function.is_empty());
            }
        }
    }
    let frames = resolver.symbolize_user(u32::MAX, &[0x1234]);
    assert_eq!(frames[0].function, "[unknown]");
    assert_eq!(frames[0].mapping.path, StackResolver::UNMAPPED_PATH);
    assert!(resolver.symbolize_kernel(&[]).is_empty());
    let mut addrs = Vec::new();
    resolver.unwind_user(0, UserRegs::default(), &[], 0, &mut addrs);
    assert!(addrs.is_empty());
}

#[test]
fn forgetting_a_process_reads_it_again() {
    let mut resolver = StackResolver::new();
    let pid = std::process::id();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let has_exe = |mappings: Vec<std::sync::Arc<crate::MappingInfo>>| {
        mappings.iter().any(|m| m.path == exe.to_string_lossy())
    };
    assert!(has_exe(resolver.mappings(pid)));
    resolver.forget(pid);
    assert!(!resolver.processes.contains_key(&pid));
    assert!(has_exe(resolver.mappings(pid)));
}

#[test]
fn the_resolver_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<StackResolver>();
    let mut resolver = StackResolver::new();
    let addr = chain_leaf_c as *const () as u64;
    let name = std::thread::spawn(move || {
        resolver.symbolize_user(std::process::id(), &[addr])[0]
            .function
            .clone()
    })
    .join()
    .unwrap();
    assert!(name.contains("chain_leaf_c"));
}

/// Builds `dir/mini`: a C program whose `hidden_worker` (static, so in no
/// dynamic symbol table) calls `pause()`, linked at fixed addresses,
/// stripped of every symbol table; with `debugdata`, given a
/// `.gnu_debugdata` section (the xz-compressed symbol table some
/// distributions ship, "MiniDebugInfo"), made as they make it. Returns the
/// function's address.
fn build_stripped_program(dir: &std::path::Path, debugdata: bool) -> (std::path::PathBuf, u64) {
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let src = dir.join("mini.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\n\
         static void __attribute__((noinline)) hidden_worker(void) { pause(); }\n\
         int main(void) { hidden_worker(); return 0; }\n",
    )
    .unwrap();
    let full = dir.join("mini.full");
    run(Command::new("cc")
        .args(["-O1", "-g", "-no-pie", "-o"])
        .arg(&full)
        .arg(&src));
    let data = std::fs::read(&full).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let addr = file
        .symbols()
        .find(|s| s.name() == Ok("hidden_worker"))
        .expect("no hidden_worker symbol")
        .address();
    let prog = dir.join("mini");
    std::fs::copy(&full, &prog).unwrap();
    run(Command::new("strip").arg("--strip-all").arg(&prog));
    if debugdata {
        // The function symbols only, as Fedora's find-debuginfo keeps them.
        let mini = dir.join("mini.debug");
        run(Command::new("objcopy")
            .args([
                "--only-keep-debug",
                "--strip-debug",
                "--keep-symbol=hidden_worker",
            ])
            .arg(&full)
            .arg(&mini));
        run(Command::new("xz").arg("-f").arg(&mini));
        let mut xz = mini.into_os_string();
        xz.push(".xz");
        let mut section = std::ffi::OsString::from(".gnu_debugdata=");
        section.push(&xz);
        run(Command::new("objcopy")
            .arg("--add-section")
            .arg(section)
            .arg(&prog));
    }
    (prog, addr)
}

/// The name of `addr` in a run of `program`, as a sample there would be named.
fn name_in_running(program: &std::path::Path, addr: u64) -> String {
    let mut child = Command::new(program).spawn().unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .contains("libc.so")
    {
        assert!(Instant::now() < deadline, "libc never mapped");
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut resolver = StackResolver::new();
    let frames = resolver.symbolize_user(pid, &[addr + 1]);
    let _ = child.kill();
    let _ = child.wait();
    frames[0].function.clone()
}

#[test]
fn names_a_stripped_programs_functions_from_its_gnu_debugdata() {
    let dir = std::env::temp_dir().join(format!("trace-stacks-mini-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (with, addr) = build_stripped_program(&dir, true);
    assert_eq!(name_in_running(&with, addr), "hidden_worker");
    // Without the section, nothing names it.
    let bare = dir.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let (without, addr) = build_stripped_program(&bare, false);
    assert_eq!(name_in_running(&without, addr), "[unknown]");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_resolver_past_its_memory_limit_drops_what_it_read_and_names_as_before() {
    let sample = chain_outer_a();
    let mut unlimited = StackResolver::new();
    let wanted = resolve(&mut unlimited, &sample);
    assert_in_order(
        &wanted,
        &["chain_leaf_c", "chain_middle_b", "chain_outer_a"],
    );
    assert!(
        wanted.iter().any(|f| f.mapping.path.contains("libc.so")),
        "no libc frame: {:#?}",
        names(&wanted)
    );
    assert_eq!(unlimited.symbols_dropped(), 0);
    assert!(unlimited.memory_held() > 0);

    // One byte: every file read drops what was read of the one before.
    let mut tight = StackResolver::with_memory_limit(1).keep_recent(Duration::ZERO);
    for round in 0..3 {
        let frames = resolve(&mut tight, &sample);
        assert_eq!(names(&frames), names(&wanted), "round {round}");
    }
    assert!(
        tight.symbols_dropped() >= 2,
        "{} dropped",
        tight.symbols_dropped()
    );
    // What it holds is one file's symbols (the largest) and the unwind tables, never the sum.
    assert!(
        tight.memory_held() <= unlimited.memory_held(),
        "{} > {}",
        tight.memory_held(),
        unlimited.memory_held()
    );
    // Files named within the last 10 s stay read: nothing is dropped while they are in use.
    let mut recent = StackResolver::with_memory_limit(1);
    for _ in 0..3 {
        resolve(&mut recent, &sample);
    }
    assert_eq!(recent.symbols_dropped(), 0);
}

#[test]
fn trimming_lets_go_of_exited_processes_files_and_keeps_the_living() {
    // A limit of one byte: the unwind tables are always past their share.
    let mut resolver = StackResolver::with_memory_limit(1);
    let sample = chain_outer_a();
    let before = names(&resolve(&mut resolver, &sample))
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !resolver
        .mappings(pid)
        .iter()
        .any(|m| m.path.ends_with("/sleep"))
    {
        assert!(Instant::now() < deadline, "sleep never mapped");
        resolver.forget(pid);
        std::thread::sleep(Duration::from_millis(2));
    }
    let held = resolver.memory_held();
    // Alive: nothing goes.
    assert_eq!(resolver.trim(), 0);
    child.kill().unwrap();
    child.wait().unwrap();
    // Exited, but within the grace: its samples may still be on their way.
    assert_eq!(resolver.trim(), 0);
    assert!(
        resolver
            .mappings(pid)
            .iter()
            .any(|m| m.path.ends_with("/sleep"))
    );
    std::thread::sleep(StackResolver::EXITED_GRACE + Duration::from_millis(100));
    let released = resolver.trim();
    assert!(released > 0, "nothing let go of");
    assert_eq!(resolver.memory_held(), held - released);
    // Its mappings are gone (it cannot be read again), and this process's stacks still resolve
    // through the files it shared with the child (libc).
    assert!(resolver.mappings(pid).is_empty());
    assert_eq!(names(&resolve(&mut resolver, &sample)), before);
}
