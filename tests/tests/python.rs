//! End-to-end: Python frames in stacks, with Debian's `/usr/bin/python3.11`
//! (built without frame pointers) and the real kernel provider, as root.
//!
//! - `hot_path.py`: ≥ 90% of `inner`'s CPU samples carry
//!   `inner ← middle ← outer ← <module>` with the script's path and the
//!   lines marked in it; `zlib.compress`'s C frames sit leafward of the
//!   `compress` frame that called them; `list.sort`'s C frames sit between
//!   the key function it calls back and the `resort` frame that called it.
//! - `sleeper.py`: the off-CPU stacks of `time.sleep` name `nap`.
//! - `threads.py`: each of two threads has its own function's frames.
//! - `brief.py`: a function first sampled in the process's last 50 ms is
//!   named, although the process has exited by the time the samples are
//!   written.
//! - `layout_check.py`: the 3.11 offsets in use match the running
//!   interpreter's structures, field by field.
//! - `waker.py`: the waker stacks of a pipe's reader name the Python
//!   function that wrote to it.
//! - `sleeper.py` with `--stacks syscall`: every `clock_nanosleep` stack is
//!   in `nap`, at its lines.
//! - An interpreter of another version (Debian's, its `Py_Version` changed
//!   to 3.99) is named in a warning and counted once, its stacks native.
//! - Without `bpf_loop` every program loads and stacks stay native.
//! - `export --pprof` read back by `protoc`'s Python code: the same stacks
//!   and totals as `flamegraph --folded`.
//!
//! Every file passes `trace-cli check`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use tests::{require_root, samples, temp_dir, trace_cli};
use trace_perfetto::DecodedSample;

/// Debian's interpreter.
const PYTHON: &str = "/usr/bin/python3.11";

/// A workload script's path.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// The lines of `path` marked `# MARK name`, by name.
fn marks(path: &Path) -> HashMap<String, Vec<u64>> {
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    for (i, line) in std::fs::read_to_string(path).unwrap().lines().enumerate() {
        if let Some((_, name)) = line.split_once("# MARK ") {
            out.entry(name.trim().to_owned())
                .or_default()
                .push(i as u64 + 1);
        }
    }
    out
}

/// `trace-cli record ARGS -o DIR/trace.fxt -- python3.11 SCRIPT SCRIPT_ARGS`,
/// checked; the file and what `record` printed.
fn record(dir: &Path, args: &[&str], name: &str, script_args: &[&str]) -> (PathBuf, String) {
    let out = dir.join("trace.fxt");
    let mut command = vec![PYTHON.into(), script(name).into_os_string()];
    command.extend(script_args.iter().map(std::ffi::OsString::from));
    let output = tests::record_checked(&out, args, &command);
    (out, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A Python frame as the trace names it: `function (file.py:LINE)` in a
/// mapping named by the file's path.
#[derive(Debug, PartialEq, Eq)]
struct PyFrame {
    function: String,
    path: String,
    line: u64,
}

/// Frame `f` as a Python frame, if it is one.
fn python_frame(f: &trace_perfetto::DecodedFrame) -> Option<PyFrame> {
    let (function, rest) = f.function.rsplit_once(" (")?;
    let (_, line) = rest.strip_suffix(')')?.rsplit_once(':')?;
    Some(PyFrame {
        function: function.to_owned(),
        path: f.mapping_path.clone(),
        line: line.parse().ok()?,
    })
}

/// The Python frames of `s`, leaf first, with their places among all its
/// frames.
fn python_frames(s: &DecodedSample) -> Vec<(usize, PyFrame)> {
    s.frames
        .iter()
        .enumerate()
        .filter_map(|(i, f)| python_frame(f).map(|p| (i, p)))
        .collect()
}

fn show(s: &DecodedSample) -> String {
    s.frames
        .iter()
        .map(|f| f.function.as_str())
        .collect::<Vec<_>>()
        .join(" <- ")
}

#[test]
fn python_functions_files_and_lines_in_cpu_stacks() {
    require_root();
    let dir = temp_dir("python-hot-path");
    let path = script("hot_path.py");
    let marks = marks(&path);
    let (file, stderr) = record(
        &dir,
        &["-c", "kernel:profile", "--sample-hz", "499"],
        "hot_path.py",
        &["1.5"],
    );
    assert!(
        stderr.contains("stacks with Python frames"),
        "the summary counts Python stacks:\n{stderr}"
    );
    let path_str = path.to_str().unwrap();
    let all = samples(&file);
    let python: Vec<&DecodedSample> = all
        .iter()
        .filter(|s| s.timebase == "cpu-clock" && !python_frames(s).is_empty())
        .collect();
    assert!(
        python.len() >= 300,
        "{} samples with Python frames",
        python.len()
    );

    // inner ← middle ← outer ← <module>, at the marked lines.
    let in_inner: Vec<&&DecodedSample> = python
        .iter()
        .filter(|s| python_frames(s)[0].1.function == "inner")
        .collect();
    assert!(in_inner.len() >= 100, "{} samples in inner", in_inner.len());
    let whole = |s: &DecodedSample| {
        let frames: Vec<PyFrame> = python_frames(s).into_iter().map(|(_, f)| f).collect();
        let at = |name: &str| marks[name].clone();
        frames.len() == 4
            && frames.iter().all(|f| f.path == path_str)
            && frames[0].function == "inner"
            && at("inner").contains(&frames[0].line)
            && frames[1].function == "middle"
            && at("middle") == [frames[1].line]
            && frames[2].function == "outer"
            && at("outer-middle") == [frames[2].line]
            && frames[3].function == "<module>"
            && at("module") == [frames[3].line]
    };
    let good = in_inner.iter().filter(|s| whole(s)).count();
    let bad: Vec<String> = in_inner
        .iter()
        .filter(|s| !whole(s))
        .take(3)
        .map(|s| show(s))
        .collect();
    assert!(
        good * 10 >= in_inner.len() * 9,
        "{good} of {} samples in inner carry its whole chain; others: {bad:#?}",
        in_inner.len()
    );
    // The Python frames replace the interpreter's loop, in its place: the
    // native frames outward of `<module>` are the interpreter's start.
    let sample = in_inner.iter().find(|s| whole(s)).unwrap();
    let names: Vec<&str> = sample.frames.iter().map(|f| f.function.as_str()).collect();
    let module = names
        .iter()
        .position(|n| n.starts_with("<module> ("))
        .unwrap();
    assert!(
        names[module + 1..].contains(&"Py_RunMain"),
        "the interpreter's start lies outward of <module>: {names:?}"
    );
    assert!(
        !names.contains(&"_PyEval_EvalFrameDefault"),
        "the evaluation loop is replaced by the frames it ran: {names:?}"
    );

    // compress ← outer ← <module>, with zlib's C frames leafward of it.
    let in_compress: Vec<&&DecodedSample> = python
        .iter()
        .filter(|s| python_frames(s)[0].1.function == "compress")
        .collect();

    assert!(
        in_compress.len() >= 20,
        "{} samples in compress",
        in_compress.len()
    );
    let through_zlib = in_compress
        .iter()
        .filter(|s| {
            let py = python_frames(s);
            let (at, top) = &py[0];
            let zlib_before = s.frames[..*at]
                .iter()
                .any(|f| f.mapping_path.contains("libz.so") || f.function.contains("deflate"));
            marks["compress"] == [top.line]
                && zlib_before
                && py.len() == 3
                && py[1].1.function == "outer"
                && marks["outer-compress"] == [py[1].1.line]
        })
        .count();
    assert!(
        through_zlib * 10 >= in_compress.len() * 9,
        "{through_zlib} of {} samples in compress run zlib's C code leafward of it: {:#?}",
        in_compress.len(),
        in_compress
            .iter()
            .take(3)
            .map(|s| show(s))
            .collect::<Vec<_>>()
    );
    // weight ← [list.sort's C frames] ← resort ← outer ← <module>.
    let in_weight: Vec<&&DecodedSample> = python
        .iter()
        .filter(|s| python_frames(s)[0].1.function == "weight")
        .collect();
    assert!(
        in_weight.len() >= 10,
        "{} samples in weight",
        in_weight.len()
    );
    let called_back = in_weight
        .iter()
        .filter(|s| {
            let py = python_frames(s);
            py.len() == 4
                && marks["weight"] == [py[0].1.line]
                && py[1].1.function == "resort"
                && marks["resort"] == [py[1].1.line]
                && py[1].0 > py[0].0 + 1
                && py[2].1.function == "outer"
                && marks["outer-resort"] == [py[2].1.line]
                && py[3].1.function == "<module>"
        })
        .count();
    assert!(
        called_back * 10 >= in_weight.len() * 9,
        "{called_back} of {} samples in weight read weight <- C <- resort <- outer: {:#?}",
        in_weight.len(),
        in_weight
            .iter()
            .take(3)
            .map(|s| show(s))
            .collect::<Vec<_>>()
    );
}

#[test]
fn system_call_stacks_name_the_python_function() {
    require_root();
    let dir = temp_dir("python-syscall-stacks");
    let (file, _) = record(
        &dir,
        &["-c", "kernel:syscall", "--stacks", "syscall"],
        "sleeper.py",
        &[],
    );
    let all = samples(&file);
    let sleeps: Vec<&DecodedSample> = all
        .iter()
        .filter(|s| s.timebase == "syscall:clock_nanosleep")
        .collect();
    assert!(
        sleeps.len() >= 20,
        "{} clock_nanosleep stacks",
        sleeps.len()
    );
    let path = script("sleeper.py");
    let marks = marks(&path);
    let mut in_nap = 0;
    for s in &sleeps {
        let py: Vec<(String, u64)> = python_frames(s)
            .into_iter()
            .map(|(_, f)| (f.function, f.line))
            .collect();
        let names: Vec<&str> = py.iter().map(|(f, _)| f.as_str()).collect();
        if names == ["nap", "main", "<module>"] {
            assert_eq!(py[0].1, marks["nap"][0], "{}", show(s));
            assert_eq!(py[1].1, marks["main"][0], "{}", show(s));
            assert_eq!(py[2].1, marks["module"][0], "{}", show(s));
            in_nap += 1;
        } else {
            // The first sleep, at the module's level, may come before the
            // recorder found the interpreter.
            assert!(
                names.is_empty() || (names == ["<module>"] && py[0].1 == marks["warmup"][0]),
                "{}",
                show(s)
            );
        }
    }
    assert_eq!(
        in_nap,
        20,
        "{:#?}",
        sleeps.iter().map(|s| show(s)).collect::<Vec<_>>()
    );
}

#[test]
fn off_cpu_stacks_of_time_sleep_name_the_python_function() {
    require_root();
    let dir = temp_dir("python-offcpu");
    let path = script("sleeper.py");
    let marks = marks(&path);
    let (file, _) = record(&dir, &["-c", "kernel:offcpu"], "sleeper.py", &[]);
    let all = samples(&file);
    let naps: Vec<&DecodedSample> = all
        .iter()
        .filter(|s| s.timebase == "off-cpu")
        .filter(|s| {
            python_frames(s)
                .first()
                .is_some_and(|(_, f)| f.function == "nap" && marks["nap"] == [f.line])
        })
        .collect();
    assert!(
        naps.len() >= 15,
        "{} off-CPU stacks in nap of 20 sleeps: {:#?}",
        naps.len(),
        all.iter()
            .filter(|s| s.timebase == "off-cpu")
            .take(3)
            .map(show)
            .collect::<Vec<_>>()
    );
    for s in &naps {
        let py: Vec<String> = python_frames(s)
            .into_iter()
            .map(|(_, f)| f.function)
            .collect();
        assert_eq!(py, ["nap", "main", "<module>"], "{}", show(s));
        // Blocked in the kernel below the Python frame: the sleep's
        // system call is leafward of it.
        assert!(
            s.frames.iter().any(|f| f.function.contains("nanosleep")),
            "{}",
            show(s)
        );
        let weight = s.timebase_count.unwrap_or(0);
        assert!(
            (20_000_000..1_000_000_000).contains(&weight),
            "a 30 ms sleep weighs {weight} ns"
        );
    }
}

#[test]
fn two_python_threads_each_get_their_own_frames() {
    require_root();
    let dir = temp_dir("python-threads");
    let (file, _) = record(
        &dir,
        &["-c", "kernel:profile", "--sample-hz", "499"],
        "threads.py",
        &["0.8"],
    );
    let all = samples(&file);
    let mut by_thread: HashMap<u32, HashSet<String>> = HashMap::new();
    for s in all.iter().filter(|s| s.timebase == "cpu-clock") {
        for (_, f) in python_frames(s) {
            if f.function.starts_with("worker_") {
                by_thread.entry(s.tid).or_default().insert(f.function);
            }
        }
    }
    let a: Vec<u32> = by_thread
        .iter()
        .filter(|(_, f)| f.contains("worker_a"))
        .map(|(t, _)| *t)
        .collect();
    let b: Vec<u32> = by_thread
        .iter()
        .filter(|(_, f)| f.contains("worker_b"))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!((a.len(), b.len()), (1, 1), "{by_thread:?}");
    assert_ne!(a[0], b[0], "{by_thread:?}");
    for functions in by_thread.values() {
        assert_eq!(
            functions.len(),
            1,
            "a thread with both workers: {by_thread:?}"
        );
    }
}

#[test]
fn a_function_sampled_just_before_the_process_exits_is_named() {
    require_root();
    let dir = temp_dir("python-brief");
    let (file, _) = record(
        &dir,
        &["-c", "kernel:profile", "--sample-hz", "999"],
        "brief.py",
        &[],
    );
    let all = samples(&file);
    let python: Vec<&DecodedSample> = all
        .iter()
        .filter(|s| s.timebase == "cpu-clock" && !python_frames(s).is_empty())
        .collect();
    let late = python
        .iter()
        .filter(|s| python_frames(s).iter().any(|(_, f)| f.function == "late"))
        .count();
    let unnamed = python
        .iter()
        .filter(|s| {
            python_frames(s).is_empty()
                || s.frames.iter().any(|f| f.function.starts_with("[python]"))
        })
        .count();
    assert!(late >= 10, "{late} samples in late");
    assert_eq!(unnamed, 0, "frames whose code was not read");
}

#[test]
fn the_offsets_in_use_match_the_running_interpreter() {
    let l = trace_stacks::python::layout::PYTHON_3_11;
    let args = [
        (
            "runtime_interpreters_head",
            l.runtime_interpreters_head as u32,
        ),
        ("interp_threads_head", l.interp_threads_head),
        ("thread_next", l.thread_next),
        ("thread_native_id", l.thread_native_id),
        ("thread_cframe", l.thread_cframe.unwrap()),
        ("current_frame", l.current_frame),
        ("frame_code", l.frame_code),
        ("frame_previous", l.frame_previous),
        ("frame_instr", l.frame_instr),
        ("frame_is_entry", l.frame_is_entry.unwrap()),
        ("frame_owner", l.frame_owner),
        ("code_firstlineno", l.code_firstlineno),
        ("code_filename", l.code_filename),
        ("code_qualname", l.code_qualname),
        ("code_linetable", l.code_linetable),
        ("code_units", l.code_units),
        ("unicode_length", l.unicode_length),
        ("unicode_state", l.unicode_state),
        ("unicode_ascii_data", l.unicode_ascii_data),
        ("unicode_compact_data", l.unicode_compact_data),
        ("bytes_size", l.bytes_size),
        ("bytes_data", l.bytes_data),
    ];
    let out = Command::new(PYTHON)
        .arg(script("layout_check.py"))
        .args(args.iter().map(|(k, v)| format!("{k}={v}")))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checked: Vec<&str> = stdout.lines().collect();
    assert!(checked.iter().all(|l| l.starts_with("ok ")), "{stdout}");
    // `thread_cframe` and `current_frame` are checked together.
    assert_eq!(
        checked.len(),
        args.len() - 1,
        "every field checked:\n{stdout}"
    );
}

#[test]
fn without_bpf_loop_every_program_loads_and_stacks_stay_native() {
    // A kernel older than 5.17 has no `bpf_loop`: the manager takes its
    // calls out, as it does here when told to.
    require_root();
    let dir = temp_dir("python-without-bpf-loop");
    let out = dir.join("trace.fxt");
    let output = Command::new(trace_cli())
        .env("TRACE_EBPF_WITHOUT_BPF_LOOP", "1")
        .args([
            "record",
            "-c",
            "kernel:profile,kernel:offcpu,kernel:syscall",
        ])
        .args(["--stacks", "syscall", "-o"])
        .arg(&out)
        .arg("--")
        .arg(PYTHON)
        .arg(script("hot_path.py"))
        .arg("0.5")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let all = samples(&out);
    assert!(all.len() >= 100, "{} samples", all.len());
    assert!(
        all.iter().all(|s| python_frames(s).is_empty()),
        "no Python frames without bpf_loop"
    );
    assert!(
        all.iter().any(|s| s
            .frames
            .iter()
            .any(|f| f.function == "_PyEval_EvalFrameDefault")),
        "the interpreter's native frames"
    );
}

#[test]
fn pprof_profiles_read_back_with_the_flame_graphs_totals() {
    require_root();
    let dir = temp_dir("python-pprof");
    // protoc's own Python code for the schema reads the files.
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("pprof");
    let generated = dir.join("generated");
    std::fs::create_dir_all(&generated).unwrap();
    let protoc = Command::new("protoc")
        .arg("-I")
        .arg(&schema)
        .arg(format!("--python_out={}", generated.display()))
        .arg("profile.proto")
        .output()
        .unwrap();
    assert!(
        protoc.status.success(),
        "{}",
        String::from_utf8_lossy(&protoc.stderr)
    );
    for (name, timebase, flag, args) in [
        ("hot_path.py", "cpu-clock", None, &["0.6"][..]),
        ("sleeper.py", "off-cpu", Some("--offcpu"), &[][..]),
    ] {
        let run = dir.join(timebase);
        std::fs::create_dir_all(&run).unwrap();
        let (file, _) = record(
            &run,
            &["-c", "kernel:profile,kernel:offcpu", "--sample-hz", "499"],
            name,
            args,
        );
        let out = run.join("pprof");
        let export = Command::new(trace_cli())
            .args(["export", "--pprof"])
            .arg(&out)
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            export.status.success(),
            "{}",
            String::from_utf8_lossy(&export.stderr)
        );
        let read = Command::new("/usr/bin/python3")
            .arg(schema.join("fold.py"))
            .arg(&generated)
            .arg(out.join(format!("{timebase}.pb.gz")))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&read.stdout);
        assert!(
            read.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&read.stderr)
        );
        let mut flamegraph = Command::new(trace_cli());
        flamegraph.args(["flamegraph", "--folded"]);
        if let Some(flag) = flag {
            flamegraph.arg(flag);
        }
        let folded = flamegraph.arg(&file).output().unwrap();
        assert!(folded.status.success());
        let mut want: Vec<&str> = std::str::from_utf8(&folded.stdout)
            .unwrap()
            .lines()
            .collect();
        let mut got: Vec<&str> = text.lines().filter(|l| !l.starts_with("line ")).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert!(!want.is_empty(), "{timebase}: {want:?}");
        assert_eq!(
            got, want,
            "{timebase}: pprof and flamegraph --folded differ"
        );
        if timebase == "cpu-clock" {
            // Python frames carry their file and line.
            let path = script("hot_path.py");
            let inner_line = text
                .lines()
                .filter_map(|l| l.strip_prefix("line "))
                .map(|l| l.split('\t').collect::<Vec<_>>())
                .find(|f| f[0].starts_with("middle ("))
                .unwrap_or_else(|| panic!("no line of middle: {text}"));
            assert_eq!(inner_line[1], path.to_str().unwrap());
            assert_eq!(
                inner_line[2].parse::<u64>().unwrap(),
                marks(&path)["middle"][0]
            );
        }
    }
}

#[test]
fn waker_stacks_name_the_python_function_that_woke() {
    require_root();
    let dir = temp_dir("python-waker");
    let path = script("waker.py");
    let marks = marks(&path);
    let (file, _) = record(&dir, &["-c", "kernel:offcpu"], "waker.py", &[]);
    let all = samples(&file);
    let wakers: Vec<&DecodedSample> = all
        .iter()
        .filter(|s| s.timebase == "wakeup")
        .filter(|s| {
            python_frames(s)
                .first()
                .is_some_and(|(_, f)| f.function == "wake")
        })
        .collect();
    assert!(
        wakers.len() >= 8,
        "{} of 10 wake-ups from wake: {:#?}",
        wakers.len(),
        all.iter()
            .filter(|s| s.timebase == "wakeup")
            .take(3)
            .map(show)
            .collect::<Vec<_>>()
    );
    for s in &wakers {
        let py: Vec<(String, u64)> = python_frames(s)
            .into_iter()
            .map(|(_, f)| (f.function, f.line))
            .collect();
        assert_eq!(
            py,
            [
                ("wake".to_owned(), marks["wake"][0]),
                ("<module>".to_owned(), marks["module"][0])
            ],
            "{}",
            show(s)
        );
    }
}

/// The file offset of symbol `name` of the ELF file `path`, from `readelf`.
fn symbol_file_offset(path: &Path, name: &str) -> u64 {
    let text = |args: &[&str]| {
        let out = Command::new("readelf")
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    let symbols = text(&["-Ws"]);
    let fields: Vec<&str> = symbols
        .lines()
        .find(|l| l.split_whitespace().last() == Some(name))
        .unwrap_or_else(|| panic!("no {name}"))
        .split_whitespace()
        .collect();
    let (vaddr, section) = (hex(fields[1]), fields[6]);
    let sections = text(&["-WS"]);
    let line = sections
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("[{section:>2}]")))
        .unwrap_or_else(|| panic!("no section {section}"));
    let f: Vec<&str> = line.split(']').nth(1).unwrap().split_whitespace().collect();
    let (addr, offset) = (hex(f[2]), hex(f[3]));
    vaddr - addr + offset
}

#[test]
fn an_interpreter_of_another_version_is_named_not_misread() {
    // Debian's interpreter, its `Py_Version` changed to 3.99: a version
    // without a layout, found and reported, its stacks left native.
    require_root();
    let dir = temp_dir("python-other-version");
    let copy = dir.join("python3.99");
    tests::copy_program(PYTHON, &copy);
    let at = symbol_file_offset(&copy, "Py_Version");
    let mut bytes = std::fs::read(&copy).unwrap();
    let at = at as usize;
    let version = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!(version >> 16, 0x030b, "Py_Version {version:#x}");
    bytes[at..at + 4].copy_from_slice(&0x0363_00f0u32.to_le_bytes());
    std::fs::write(&copy, &bytes).unwrap();
    let out = dir.join("trace.fxt");
    let output = tests::record_checked(
        &out,
        &["-c", "kernel:profile", "--sample-hz", "499"],
        &[
            copy.as_os_str(),
            script("hot_path.py").as_os_str(),
            std::ffi::OsStr::new("0.5"),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("1 processes running an unreadable Python"),
        "{stderr}"
    );
    assert!(
        stderr.contains("runs Python 3.99.0") && stderr.contains("cannot be read"),
        "{stderr}"
    );
    let all = samples(&out);
    assert!(all.len() >= 100, "{} samples", all.len());
    assert!(all.iter().all(|s| python_frames(s).is_empty()));
}
