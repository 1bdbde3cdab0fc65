//! End-to-end: the SQL tables, `trace-cli query` and `trace-cli export
//! --parquet`, on recordings of `sql_workload` made with the real kernel
//! provider (as root) and a real userspace provider.
//!
//! The workload's figures are known: 1000 `getppid`, 10 `openat` failing
//! with ENOENT, 10 sleeps, 100 `step` durations each enclosing an `inner`
//! one, 5 instants, 10 counter values 0..9, 3 async spans, 300 ms of CPU
//! in `sql_spin`, 4 MiB written to disk. Every table is queried through
//! `trace-cli query --format json` over the trace file; the same queries
//! over its Parquet export give the same answers, and pyarrow (a second
//! reader) reads the export to the same figures. Three recordings
//! exported with different hosts into one directory are queried as one.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tests::{bin_dir, query, require_root, temp_dir, trace_cli};

/// One recording of the workload.
struct Recording {
    file: PathBuf,
    pid: u64,
    tid: u64,
}

/// Records `sql_workload` with `categories` into `dir/name.fxt`.
fn record(dir: &Path, name: &str, categories: &str) -> Recording {
    let file = dir.join(format!("{name}.fxt"));
    let output = Command::new(trace_cli())
        .args(["record", "-c", categories, "--sample-hz", "499", "-o"])
        .arg(&file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_sql_workload"))
        .arg(dir.join(format!("{name}-block.bin")))
        .env("TRACE_MANAGER_SOCKET", dir.join(format!("{name}.sock")))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "trace-cli record failed:\n{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let v: HashMap<&str, u64> = stdout
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect();
    assert_eq!(
        v.get("enabled"),
        Some(&1),
        "the workload's provider was never enabled: {stdout}\n{stderr}"
    );
    assert!(stdout.contains("done"), "{stdout}");
    Recording {
        file,
        pid: v["pid"],
        tid: v["tid"],
    }
}

/// The single value of a query of one row and one column.
fn value(path: &Path, sql: &str) -> Value {
    let rows = query(path, sql);
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    assert_eq!(rows[0].len(), 1, "{sql}: {rows:?}");
    rows[0].values().next().unwrap().clone()
}

fn int(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `trace-cli export FILES --parquet DIR ARGS`.
fn export(files: &[&Path], dir: &Path, args: &[&str]) {
    let output = Command::new(trace_cli())
        .arg("export")
        .args(files)
        .arg("--parquet")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "export failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The Python of the tests' virtual environment, with pyarrow
/// (`cargo xtask setup` makes it).
fn python() -> PathBuf {
    let python = bin_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .join("pyenv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} with pyarrow is missing: run `cargo xtask setup` (`cargo xtask test` runs it)",
        python.display()
    );
    python
}

/// The figure queries: what each table must say of the workload, checked
/// on the trace file and again on its export.
fn figure_queries(r: &Recording) -> Vec<(&'static str, String)> {
    let (pid, tid) = (r.pid, r.tid);
    vec![
        (
            "getppid",
            format!("SELECT count(*) AS n FROM syscalls WHERE name = 'getppid' AND pid = {pid} AND tid = {tid}"),
        ),
        (
            "failed opens",
            format!(
                "SELECT errno, errno_num, count(*) AS n, min(ret) AS ret FROM syscalls \
                 WHERE pid = {pid} AND name = 'openat' AND errno IS NOT NULL \
                 AND arg(args, 'flags') = '0' \
                 AND ts > (SELECT max(ts) FROM syscalls WHERE pid = {pid} AND name = 'getppid') \
                 GROUP BY errno, errno_num"
            ),
        ),
        (
            "steps",
            format!(
                "SELECT count(*) AS n, min(depth) AS d0, max(depth) AS d1, \
                 count(parent_id) AS parents FROM slices \
                 WHERE pid = {pid} AND category = 'app' AND name = 'step' AND provider = 'sql-app'"
            ),
        ),
        (
            "inner in step",
            format!(
                "SELECT count(*) AS n FROM slices i JOIN slices s \
                 ON i.parent_id = s.id AND i.trace_id = s.trace_id \
                 WHERE i.pid = {pid} AND i.name = 'inner' AND s.name = 'step' \
                 AND i.depth = s.depth + 1 AND i.tid = s.tid \
                 AND i.ts >= s.ts AND i.ts + i.dur <= s.ts + s.dur \
                 AND arg(i.args, 'seq') = arg(s.args, 'seq')"
            ),
        ),
        (
            "parents consistent",
            "SELECT count(*) AS n FROM slices c LEFT JOIN slices p \
             ON c.parent_id = p.id AND c.trace_id = p.trace_id \
             WHERE (c.parent_id IS NOT NULL AND (p.id IS NULL OR c.depth <> p.depth + 1 OR c.tid <> p.tid)) \
             OR ((c.depth = 0) <> (c.parent_id IS NULL))"
                .to_owned(),
        ),
        (
            "marks",
            format!(
                "SELECT count(*) AS n, min(arg(args, 'seq')) AS first, max(scope) AS scope FROM instants \
                 WHERE pid = {pid} AND tid = {tid} AND name = 'mark' AND provider = 'sql-app'"
            ),
        ),
        (
            "queue",
            format!(
                "SELECT count(*) AS n, min(value) AS lo, max(value) AS hi, sum(value) AS total \
                 FROM counters WHERE pid = {pid} AND name = 'queue' AND series = 'depth'"
            ),
        ),
        (
            "requests",
            format!(
                "SELECT count(*) AS n, count(DISTINCT async_id) AS ids, \
                 min(dur) >= 1000000 AS long_enough, bool_or(unfinished) AS unfinished \
                 FROM async_spans WHERE pid = {pid} AND name = 'request'"
            ),
        ),
        (
            "sleeps",
            format!(
                "SELECT count(*) >= 10 AS enough FROM context_switches \
                 WHERE prev_tid = {tid} AND prev_pid = {pid} AND prev_state = 'S'"
            ),
        ),
        (
            "switched in",
            format!(
                "SELECT count(*) >= 10 AS enough FROM context_switches WHERE next_tid = {tid}"
            ),
        ),
        (
            "wakeups",
            format!("SELECT count(*) >= 10 AS enough, min(pid) = {pid} AS ours FROM wakeups WHERE tid = {tid}"),
        ),
        (
            "block writes",
            "SELECT sum(bytes) >= 4194304 AS enough, min(latency) > 0 AS timed, \
             bool_and(device <> '') AS named FROM block_requests WHERE op = 'write' AND error = 0"
                .to_owned(),
        ),
        (
            "samples",
            format!(
                "SELECT count(*) >= 30 AS enough, count(leaf) >= 30 AS leaves, \
                 sum(CASE WHEN array_length(stack) > 1 THEN 1 ELSE 0 END) >= 30 AS deep FROM samples \
                 WHERE pid = {pid} AND timebase = 'cpu-clock'"
            ),
        ),
        (
            "spin frames",
            format!(
                "SELECT count(DISTINCT ts) >= 30 AS enough FROM \
                 (SELECT ts, unnest(stack) AS frame FROM samples WHERE pid = {pid} AND timebase = 'cpu-clock') \
                 WHERE frame['function'] LIKE '%sql_spin%' AND frame['mapping'] LIKE '%sql_workload%'"
            ),
        ),
        (
            "process",
            format!("SELECT name FROM processes WHERE pid = {pid}"),
        ),
        (
            "thread",
            format!("SELECT name, pid FROM threads WHERE tid = {tid}"),
        ),
        (
            "provider losses",
            "SELECT count(*) AS n FROM losses WHERE provider = 'sql-app'".to_owned(),
        ),
        (
            "one trace",
            "SELECT count(DISTINCT trace_id) AS n FROM slices".to_owned(),
        ),
    ]
}

/// The answers each figure query must give.
fn expected(r: &Recording) -> HashMap<&'static str, Value> {
    use serde_json::json;
    HashMap::from([
        ("getppid", json!([{"n": 1000}])),
        (
            "failed opens",
            json!([{"errno": "ENOENT", "errno_num": 2, "n": 10, "ret": -2}]),
        ),
        ("steps", json!([{"n": 100, "d0": 0, "d1": 0, "parents": 0}])),
        ("inner in step", json!([{"n": 100}])),
        ("parents consistent", json!([{"n": 0}])),
        ("marks", json!([{"n": 5, "first": "0", "scope": "thread"}])),
        (
            "queue",
            json!([{"n": 10, "lo": 0.0, "hi": 9.0, "total": 45.0}]),
        ),
        (
            "requests",
            json!([{"n": 3, "ids": 3, "long_enough": true, "unfinished": false}]),
        ),
        ("sleeps", json!([{"enough": true}])),
        ("switched in", json!([{"enough": true}])),
        ("wakeups", json!([{"enough": true, "ours": true}])),
        (
            "block writes",
            json!([{"enough": true, "timed": true, "named": true}]),
        ),
        (
            "samples",
            json!([{"enough": true, "leaves": true, "deep": true}]),
        ),
        ("spin frames", json!([{"enough": true}])),
        ("process", json!([{"name": "sql_workload"}])),
        ("thread", json!([{"name": "sql_workload", "pid": r.pid}])),
        ("provider losses", json!([{"n": 0}])),
        ("one trace", json!([{"n": 1}])),
    ])
}

/// Runs every figure query on `path`; returns the answers by name.
fn figures(path: &Path, r: &Recording) -> HashMap<&'static str, Value> {
    figure_queries(r)
        .into_iter()
        .map(|(name, sql)| {
            (
                name,
                Value::Array(query(path, &sql).into_iter().map(Value::Object).collect()),
            )
        })
        .collect()
}

/// Every table and its rows.
fn row_counts(path: &Path) -> HashMap<String, i64> {
    let tables = [
        "processes",
        "threads",
        "slices",
        "instants",
        "counters",
        "async_spans",
        "context_switches",
        "wakeups",
        "syscalls",
        "block_requests",
        "samples",
        "losses",
    ];
    tables
        .iter()
        .map(|t| {
            (
                t.to_string(),
                int(&value(path, &format!("SELECT count(*) FROM {t}"))),
            )
        })
        .collect()
}

#[test]
fn every_table_of_a_known_workload_via_file_export_and_pyarrow() {
    require_root();
    let dir = temp_dir("sql-workload");
    let r = record(
        &dir,
        "workload",
        "kernel:sched,kernel:proc,kernel:syscall,kernel:block,kernel:profile,app",
    );

    // The trace file.
    let from_file = figures(&r.file, &r);
    for (name, want) in expected(&r) {
        assert_eq!(from_file[name], want, "{name} on the trace file");
    }
    let counts = row_counts(&r.file);
    for (table, n) in &counts {
        if table != "losses" {
            assert!(*n > 0, "{table} has no rows");
        }
    }
    // Every syscall is a slice too.
    assert_eq!(
        int(&value(
            &r.file,
            "SELECT count(*) FROM syscalls s JOIN slices l ON s.id = l.id \
             WHERE l.category = 'kernel:syscall' AND l.name = s.name AND l.ts = s.ts"
        )),
        counts["syscalls"]
    );
    // The columns trace_id and host: computed from the file, and its name.
    let ids = query(&r.file, "SELECT DISTINCT trace_id, host FROM syscalls");
    assert_eq!(ids.len(), 1);
    assert_eq!(ids[0]["host"], "workload");
    let trace_id = ids[0]["trace_id"].as_str().unwrap().to_owned();
    assert_eq!(trace_id.len(), 16);

    // Its Parquet export: the same answers from the engine.
    let export_dir = dir.join("export");
    export(&[&r.file], &export_dir, &["--host", "box-1"]);
    let from_export = figures(&export_dir, &r);
    for (name, want) in &from_file {
        assert_eq!(&from_export[name], want, "{name} on the export");
    }
    assert_eq!(row_counts(&export_dir), counts);
    assert_eq!(
        query(&export_dir, "SELECT DISTINCT trace_id, host FROM samples"),
        [serde_json::json!({"trace_id": trace_id, "host": "box-1"})
            .as_object()
            .unwrap()
            .clone()]
    );
    for table in counts.keys() {
        let file = export_dir.join(table).join(format!("{trace_id}.parquet"));
        assert!(file.is_file(), "{}", file.display());
    }

    // From standard input: the same rows, with the trace id it must be
    // given.
    let piped = |args: &[&str]| {
        Command::new(trace_cli())
            .args(["export", "-", "--parquet"])
            .arg(dir.join("piped"))
            .args(args)
            .stdin(std::fs::File::open(&r.file).unwrap())
            .output()
            .unwrap()
    };
    let refused = piped(&[]);
    assert!(!refused.status.success());
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("--trace-id"), "{text}");
    let out = piped(&["--trace-id", "piped-1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(row_counts(&dir.join("piped")), counts);
    assert_eq!(
        query(
            &dir.join("piped"),
            "SELECT DISTINCT trace_id, host FROM threads"
        ),
        [serde_json::json!({"trace_id": "piped-1", "host": "stdin"})
            .as_object()
            .unwrap()
            .clone()]
    );

    // And from pyarrow.
    let script = r#"
import json, sys
import pyarrow.dataset as ds
root, pid, tables = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
out = {"rows": {t: ds.dataset(f"{root}/{t}", format="parquet").count_rows() for t in tables}}
calls = ds.dataset(f"{root}/syscalls", format="parquet").to_table().to_pylist()
ours = [c for c in calls if c["pid"] == pid]
out["getppid"] = sum(1 for c in ours if c["name"] == "getppid")
last = max(c["ts"] for c in ours if c["name"] == "getppid")
out["enoent"] = sum(1 for c in ours if c["name"] == "openat" and c["ts"] > last
                    and c["errno"] == "ENOENT" and json.loads(c["args"]).get("flags") == 0)
samples = ds.dataset(f"{root}/samples", format="parquet").to_table().to_pylist()
out["spin"] = sum(1 for s in samples if s["pid"] == pid and s["timebase"] == "cpu-clock"
                  and any("sql_spin" in f["function"] for f in s["stack"]))
blocks = ds.dataset(f"{root}/block_requests", format="parquet").to_table().to_pylist()
out["written"] = sum(b["bytes"] or 0 for b in blocks if b["op"] == "write" and b["error"] == 0)
out["hosts"] = sorted(set(ds.dataset(f"{root}/slices", format="parquet").to_table().column("host").to_pylist()))
print(json.dumps(out))
"#;
    let tables: Vec<&str> = counts.keys().map(String::as_str).collect();
    let output = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(&export_dir)
        .arg(r.pid.to_string())
        .arg(tables.join(","))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "pyarrow failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let py: Value = serde_json::from_slice(&output.stdout).unwrap();
    for (table, n) in &counts {
        assert_eq!(py["rows"][table], *n, "{table} rows read by pyarrow");
    }
    assert_eq!(py["getppid"], 1000);
    assert_eq!(py["enoent"], 10);
    assert!(int(&py["spin"]) >= 30, "{py}");
    assert!(int(&py["written"]) >= 4 << 20, "{py}");
    assert_eq!(
        int(&py["written"]),
        int(&value(
            &export_dir,
            "SELECT sum(bytes) FROM block_requests WHERE op = 'write' AND error = 0"
        ))
    );
    assert_eq!(py["hosts"], serde_json::json!(["box-1"]));
}

#[test]
fn the_prompt_reads_statements_and_commands_from_standard_input() {
    require_root();
    let dir = temp_dir("sql-prompt");
    let file = dir.join("small.fxt");
    let output = Command::new(trace_cli())
        .args(["record", "-c", "kernel:sched,kernel:syscall", "-o"])
        .arg(&file)
        .args(["--", "sleep", "0.1"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let run = |input: &str, format: &str| {
        let mut child = Command::new(trace_cli())
            .arg("query")
            .arg(&file)
            .args(["--format", format])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(
        ".tables\n.schema syscalls\nSELECT count(*) > 0 AS n\n  FROM threads\n  WHERE name = 'sleep';\n\
         SELECT 'a;b' AS s; SELECT 1 + 1 AS two;\n.quit\nSELECT 'not run';\n",
        "csv",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    // `.tables`: every table.
    assert_eq!(lines[0], "processes");
    assert!(lines.contains(&"context_switches") && lines.contains(&"samples"));
    // `.schema syscalls`.
    assert!(
        stdout.contains("syscalls:\n  trace_id Utf8 NOT NULL\n"),
        "{stdout}"
    );
    assert!(stdout.contains("  errno Utf8\n"), "{stdout}");
    // The statements, in order, each with its header; nothing after `.quit`.
    let tail: Vec<&str> = lines.iter().rev().take(6).rev().copied().collect();
    assert_eq!(tail, ["n", "true", "s", "a;b", "two", "2"], "{stdout}");
    assert!(!stdout.contains("not run"));

    // A failing statement is reported, the next still runs, and a script
    // with a failure exits with an error.
    let out = run("SELECT nope FROM slices;\nSELECT 3 AS three;\n", "json");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nope"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "[{\"three\":3}]"
    );

    // The table format.
    let out = Command::new(trace_cli())
        .arg("query")
        .arg(&file)
        .arg("SELECT DISTINCT name FROM threads WHERE name = 'sleep'")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "+-------+\n| name  |\n+-------+\n| sleep |\n+-------+\n"
    );
}

#[test]
fn a_fleet_of_exports_is_queried_as_one() {
    require_root();
    let dir = temp_dir("sql-fleet");
    let fleet = dir.join("fleet");
    let mut recordings = Vec::new();
    for host in ["web-1", "web-2", "db-1"] {
        let r = record(&dir, host, "kernel:proc,kernel:syscall,app");
        // The file's name is not the host: --host is.
        let renamed = dir.join(format!("trace-{}.fxt", recordings.len()));
        std::fs::rename(&r.file, &renamed).unwrap();
        export(&[&renamed], &fleet, &["--host", host]);
        recordings.push((host, r.pid));
    }
    // Exporting one trace again replaces its files.
    export(&[&dir.join("trace-0.fxt")], &fleet, &["--host", "web-1"]);
    let rows = query(
        &fleet,
        "SELECT s.host, count(*) AS calls, count(DISTINCT s.trace_id) AS traces \
         FROM syscalls s JOIN processes p ON s.pid = p.pid AND s.trace_id = p.trace_id \
         WHERE p.name = 'sql_workload' AND s.name = 'getppid' \
         GROUP BY s.host ORDER BY s.host",
    );
    assert_eq!(
        rows,
        ["db-1", "web-1", "web-2"]
            .iter()
            .map(
                |h| serde_json::json!({"host": h, "calls": 1000, "traces": 1})
                    .as_object()
                    .unwrap()
                    .clone()
            )
            .collect::<Vec<_>>()
    );
    for (host, pid) in recordings {
        assert_eq!(
            int(&value(
                &fleet,
                &format!(
                    "SELECT count(*) FROM syscalls WHERE host = '{host}' AND pid = {pid} \
                     AND errno = 'ENOENT' AND arg(args, 'flags') = '0'"
                )
            )),
            10,
            "{host}"
        );
    }
    // One file per table and trace.
    assert_eq!(
        std::fs::read_dir(fleet.join("syscalls")).unwrap().count(),
        3
    );
    // A directory holding exports in folders of their own reads the same.
    let nested = dir.join("nested");
    std::fs::create_dir_all(nested.join("a")).unwrap();
    std::fs::rename(&fleet, nested.join("a/fleet")).unwrap();
    assert_eq!(
        int(&value(&nested, "SELECT count(DISTINCT host) FROM slices")),
        3
    );
}

/// Where a documented query runs: a trace file, or an export directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    File,
    Export,
}

/// Whether `sql` holds nothing but white space and `--` comments.
fn blank(sql: &str) -> bool {
    sql.lines()
        .all(|l| l.split("--").next().unwrap_or("").trim().is_empty())
}

/// The statements of `text`, split at `;` (the examples quote no `;`).
fn statements(text: &str) -> Vec<String> {
    text.split(';')
        .filter(|s| !blank(s))
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Every SQL example of a Markdown text: the statements of ```sql blocks;
/// in shell blocks, the SQL given to `trace-cli query PATH` (run on an
/// export when PATH ends with `/`) and the statements typed at a `sql>`
/// prompt; and inline code that is a whole `SELECT`.
fn sql_examples(markdown: &str) -> Vec<(String, Target)> {
    let mut found = Vec::new();
    let mut fence: Option<String> = None;
    let mut block = String::new();
    for line in markdown.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("```") {
            match fence.take() {
                None => {
                    fence = Some(rest.trim().to_owned());
                    block.clear();
                }
                Some(lang) => match lang.as_str() {
                    "sql" => {
                        found.extend(statements(&block).into_iter().map(|s| (s, Target::File)))
                    }
                    "sh" => found.extend(shell_examples(&block)),
                    _ => {}
                },
            }
            continue;
        }
        if fence.is_some() {
            block.push_str(line);
            block.push('\n');
            continue;
        }
        for (i, code) in line.split('`').enumerate() {
            if i % 2 == 1 && code.starts_with("SELECT ") {
                found.push((code.to_owned(), Target::File));
            }
        }
    }
    found
}

/// The SQL of the `trace-cli query` commands and `sql>` prompts of a
/// shell block.
fn shell_examples(block: &str) -> Vec<(String, Target)> {
    let mut found = Vec::new();
    let mut rest = block;
    while let Some(at) = rest.find("trace-cli query ") {
        let after = &rest[at + "trace-cli query ".len()..];
        let path = after.split_whitespace().next().unwrap_or("");
        let target = if path.ends_with('/') {
            Target::Export
        } else {
            Target::File
        };
        let line_end = after.find('\n').unwrap_or(after.len());
        let quote = after[..line_end].find(['"', '\'']);
        rest = &after[line_end.min(after.len())..];
        let Some(q) = quote else {
            continue;
        };
        let mark = after[q..].chars().next().unwrap_or('"');
        let body = &after[q + 1..];
        let Some(end) = body.find(mark) else {
            continue;
        };
        found.push((body[..end].to_owned(), target));
        rest = &body[end + 1..];
    }
    let mut typed = String::new();
    for line in block.lines() {
        let line = line.trim_start();
        if let Some(s) = line.strip_prefix("sql> ") {
            if !s.starts_with('.') {
                typed.push_str(s);
                typed.push('\n');
            }
        } else if let Some(s) = line.strip_prefix("-> ") {
            typed.push_str(s);
            typed.push('\n');
        }
    }
    found.extend(statements(&typed).into_iter().map(|s| (s, Target::File)));
    found
}

/// The examples of the documentation that holds SQL.
fn documented_examples() -> Vec<(String, String, Target)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    for (doc, least) in [("docs/SQL.md", 11), ("README.md", 3)] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let examples = sql_examples(&text);
        assert!(
            examples.len() >= least,
            "{doc}: only {} SQL examples found: {examples:?}",
            examples.len()
        );
        all.extend(examples.into_iter().map(|(s, t)| (doc.to_owned(), s, t)));
    }
    all
}

#[test]
fn the_documented_examples_are_found() {
    let examples = documented_examples();
    let sql: Vec<&str> = examples.iter().map(|(_, s, _)| s.as_str()).collect();
    assert!(
        sql.iter().any(|s| s.contains("Scheduling latency")),
        "{sql:#?}"
    );
    assert!(
        sql.iter()
            .any(|s| s.starts_with("SELECT errno, count(*) FROM syscalls\n")),
        "{sql:#?}"
    );
    assert!(
        examples
            .iter()
            .any(|(d, s, t)| d == "README.md" && *t == Target::Export && s.contains("ENOENT")),
        "{examples:#?}"
    );
    assert!(
        !sql.iter().any(|s| s.contains("read_parquet")),
        "DuckDB's are not ours"
    );
}

#[test]
fn every_sql_example_in_the_docs_runs_on_a_recording() {
    require_root();
    let dir = temp_dir("sql-docs");
    let r = record(
        &dir,
        "docs",
        "kernel:sched,kernel:proc,kernel:syscall,kernel:block,kernel:profile,kernel:lock,app",
    );
    let fleet = dir.join("fleet");
    export(&[&r.file], &fleet, &["--host", "web-1"]);
    let examples = documented_examples();
    for (doc, sql, target) in &examples {
        let path = match target {
            Target::File => &r.file,
            Target::Export => &fleet,
        };
        let rows = query(path, sql);
        // The workload makes rows for every example but those of losses
        // (a recording may lose nothing).
        if !sql.contains("losses") {
            assert!(!rows.is_empty(), "{doc}: no rows from {sql}");
        }
    }
}
