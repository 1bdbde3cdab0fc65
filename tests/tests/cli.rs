//! End-to-end: the parts of `trace-cli` around recording — the category
//! list, suggestions for mistyped categories, shell completions, the manual
//! page, and a delayed start.

use std::process::Command;

use tests::{parse, require_root, trace_cli};
use trace_common::fxt::{ArgValue, StringRef};

fn tmp(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn cli(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(trace_cli()).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn categories_lists_every_kernel_category_with_what_it_records() {
    let (ok, out, err) = cli(&["categories"]);
    assert!(ok, "{err}");
    for (name, description) in trace_common::category::KERNEL_CATEGORIES {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing from:\n{out}"));
        assert!(line.contains(description), "{line}");
    }
    assert!(out.contains("usdt") && out.contains("uprobe"), "{out}");
}

#[test]
fn a_mistyped_category_gets_a_suggestion() {
    let out_file = tmp("typo.fxt");
    let out = out_file.to_str().unwrap();
    // A kernel category that does not exist: an error naming the one meant,
    // before anything is recorded.
    let (ok, _, err) = cli(&["record", "-c", "kernel:shed", "-d", "1", "-o", out]);
    assert!(!ok);
    assert!(err.contains("did you mean \"kernel:sched\""), "{err}");
    assert!(!err.contains("recording"), "{err}");
    // Nothing close: the list of categories.
    let (ok, _, err) = cli(&["record", "-c", "kernel:zzzzzz", "-d", "1", "-o", out]);
    assert!(!ok);
    assert!(err.contains("known: kernel:sched"), "{err}");
}

#[test]
fn a_kernel_category_without_its_prefix_is_a_warning() {
    require_root();
    let out_file = tmp("bare.fxt");
    let (ok, _, err) = cli(&[
        "record",
        "-c",
        "syscall,kernel:proc",
        "-d",
        "0.2",
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("\"syscall\" is not a kernel category")
            && err.contains("did you mean \"kernel:syscall\""),
        "{err}"
    );
}

#[test]
fn completions_and_manual_page_come_from_the_command_definitions() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (ok, out, err) = cli(&["completions", shell]);
        assert!(ok, "{shell}: {err}");
        for word in ["record", "usdt", "start-delay", "categories"] {
            assert!(out.contains(word), "{shell} completions lack {word}");
        }
    }
    let (ok, out, err) = cli(&["man"]);
    assert!(ok, "{err}");
    for page in [
        "trace-cli",
        "trace-cli-record",
        "trace-cli-dump",
        "trace-cli-categories",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!(".TH {page} "))),
            "no page {page}"
        );
    }
    assert!(out.contains("start\\-delay") || out.contains("start-delay"));
    let (ok, _, _) = cli(&["completions", "tcsh"]);
    assert!(!ok, "an unknown shell is refused");
}

#[test]
fn a_delayed_start_records_only_what_follows_it() {
    require_root();
    let file = tmp("delayed.fxt");
    let started = std::time::Instant::now();
    let (ok, out, err) = cli(&[
        "record",
        "-c",
        "kernel:proc",
        "--start-delay",
        "0.6",
        "-o",
        file.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "sleep 0.1; /bin/echo early; sleep 1.2; /bin/true",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("early"), "stdout {out:?}, stderr {err}");
    assert!(err.contains("recording starts in 0.6 s"), "{err}");
    assert!(started.elapsed().as_secs_f64() >= 1.3);
    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    let execs: Vec<String> = trace
        .events
        .iter()
        .filter(|e| e.name == "exec")
        .filter_map(|e| match e.args.get("filename") {
            Some(ArgValue::String(StringRef::Inline(f))) => Some(f.to_string()),
            _ => None,
        })
        .collect();
    // The exec during the wait is not recorded; the one after it is, since
    // the command is followed from the start on.
    assert!(execs.iter().any(|f| f == "/bin/true"), "{execs:?}");
    assert!(!execs.iter().any(|f| f == "/bin/echo"), "{execs:?}");
    // Bad values are refused before anything happens.
    let (ok, _, err) = cli(&["record", "--start-delay=-1", "-o", "/dev/null"]);
    assert!(!ok && err.contains("start delay"), "{err}");
}

#[test]
fn progress_is_shown_on_a_terminal_only() {
    require_root();
    let file = tmp("progress.fxt");
    let record = format!(
        "{} record -c kernel:sched -d 1.2 -o {}",
        trace_cli().display(),
        file.display()
    );
    // `script` runs it on a pseudo-terminal.
    let Ok(out) = Command::new("script")
        .args(["-qec", &record, "/dev/null"])
        .output()
    else {
        eprintln!("no `script` here: the terminal case was not checked");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("kernel events")
            && text.contains("MiB written")
            && text.contains("kernel buffers"),
        "no progress line on a terminal: {text}"
    );
    assert!(text.contains(" dropped -> "), "no summary: {text}");
    // Not a terminal: the summary alone.
    let (ok, _, err) = cli(&["record", "-c", "kernel:sched", "-d", "0.6", "-o"]
        .into_iter()
        .chain([file.to_str().unwrap()])
        .collect::<Vec<_>>());
    assert!(ok, "{err}");
    assert!(!err.contains("MiB written"), "{err}");
}

#[test]
fn a_trace_streams_to_standard_output_while_recording() {
    use std::io::Read as _;
    require_root();
    let mut rec = Command::new(trace_cli())
        .args([
            "record",
            "-c",
            "kernel:sched,kernel:syscall,kernel:proc",
            "-d",
            "3",
        ])
        .args(["-o", "-", "--", "sh", "-c"])
        .arg("echo from-the-command; for i in 1 2 3 4 5 6 7 8 9; do sleep 0.2; done")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = rec.stdout.take().unwrap();
    let mut data = vec![0u8; 4096];
    let n = stdout.read(&mut data).unwrap();
    assert!(n > 0);
    // The first records arrive while the recorder still runs.
    assert!(
        rec.try_wait().unwrap().is_none(),
        "nothing came before the end"
    );
    data.truncate(n);
    stdout.read_to_end(&mut data).unwrap();
    let out = rec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The command's own output went to standard error, not into the trace.
    assert!(stderr.contains("from-the-command"), "{stderr}");
    assert!(
        tests::no_ring_drops(&stderr) && stderr.contains(" -> standard output"),
        "{stderr}"
    );
    let trace = tests::parse_bytes(&data);
    assert!(trace.starts_with_magic);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    assert!(!trace.switches.is_empty());
    assert!(trace.events.iter().any(|e| e.category == "kernel:syscall"));
    // And `dump -` reads it back from a pipe.
    let mut dump = Command::new(trace_cli())
        .args(["dump", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Written from a thread: `dump` prints as it reads.
    let mut stdin = dump.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &data));
    let dumped = dump.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(dumped.status.success());
    assert!(String::from_utf8_lossy(&dumped.stdout).contains("context_switch"));
}
