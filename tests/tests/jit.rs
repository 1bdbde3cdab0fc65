//! End-to-end: JIT-compiled code named from the process's perf map. Node
//! (`--perf-basic-prof`) runs a hot JavaScript function; its CPU samples
//! name it, read from `/tmp/perf-PID.map` while Node runs.

use std::path::Path;
use std::process::Command;

use tests::{require_root, samples, temp_dir, trace_cli};

#[test]
fn a_hot_javascript_function_is_named_from_the_perf_map() {
    require_root();
    let dir = temp_dir("jit-node");
    let out = dir.join("trace.fxt");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("node/hot.js");
    let output = Command::new(trace_cli())
        .args(["record", "-c", "kernel:profile", "--sample-hz", "499", "-o"])
        .arg(&out)
        .args(["--", "node", "--perf-basic-prof"])
        .arg(&script)
        .arg("1")
        // Node may leave a V8 log (`isolate-*-v8.log`) where it runs.
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (ok, report) = tests::check(&out);
    assert!(ok, "{report}");
    let all = samples(&out);
    let node: Vec<_> = all.iter().filter(|s| s.timebase == "cpu-clock").collect();
    let hot = node
        .iter()
        .filter(|s| {
            s.frames.first().is_some_and(|f| {
                f.function.contains("crunchNumbers") && f.function.contains("hot.js")
            })
        })
        .count();
    // The function runs for most of a second at 499 Hz; Node's start
    // (about 50 ms) is the rest.
    assert!(
        hot >= 200 && hot * 2 >= node.len(),
        "{hot} of {} samples in crunchNumbers",
        node.len()
    );
    // Named in anonymous memory, where V8 put the code.
    let frame = node
        .iter()
        .flat_map(|s| s.frames.first())
        .find(|f| f.function.contains("crunchNumbers"))
        .unwrap();
    assert!(frame.mapping_path.starts_with("[anon"), "{frame:?}");
    // Node leaves its map behind.
    if let Some(s) = node.first() {
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", s.pid));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
