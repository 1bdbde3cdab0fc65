//! `cargo xtask structure`: checks of the code's shape that no compiler
//! makes, run by `cargo xtask test`.
//!
//! - **Facade.** `trace-cli` names only what `trace-manager` exports at
//!   its root (`trace_manager::Item`), never a path into one of its
//!   modules.
//! - **File sizes.** No Rust source file is over [`MAX_LINES`] lines
//!   unless `xtask/structure/long-files.txt` lists it with the reason it
//!   holds together.
//! - **No import circles.** Within a crate, no module uses another that
//!   (through others) uses it back. Modules are files; a module's own
//!   ancestors and descendants are not counted (a child using what its
//!   parent shares, a parent routing to its children), and neither are
//!   tests nor imports made for documentation links.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::ebpf::workspace_root;

/// The longest a source file may be without a reason.
const MAX_LINES: usize = 800;

/// The crates checked for circles: every crate's `src`.
const CRATES: &[&str] = &[
    "trace-analysis",
    "trace-cli",
    "trace-common",
    "trace-ebpf",
    "trace-ebpf-build",
    "trace-manager",
    "trace-perfetto",
    "trace-provider",
    "trace-provider-c",
    "trace-split",
    "trace-sql",
    "trace-stacks",
    "xtask",
];

/// Runs every check; fails with all that is wrong.
pub fn structure() -> Result<()> {
    let root = workspace_root();
    let mut problems = Vec::new();
    facade(&root, &mut problems)?;
    sizes(&root, &mut problems)?;
    for krate in CRATES {
        circles(&root.join(krate).join("src"), krate, &mut problems)?;
    }
    if problems.is_empty() {
        eprintln!("xtask: structure: facade, file sizes and module circles are as they should be");
        return Ok(());
    }
    for p in &problems {
        eprintln!("structure: {p}");
    }
    bail!("{} structure problem(s), listed above", problems.len())
}

/// Every `.rs` file under `dir`, `target` left out.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(_) => continue,
        };
        for e in entries {
            let e = e?;
            let p = e.path();
            let name = e.file_name();
            if e.file_type()?.is_dir() {
                if name != "target" && !name.to_string_lossy().starts_with('.') {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn facade(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    // The manager's modules, as its lib.rs declares them.
    let lib = std::fs::read_to_string(root.join("trace-manager/src/lib.rs"))?;
    let modules: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').trim())
        .collect();
    for file in rust_files(&root.join("trace-cli/src"))? {
        let text = std::fs::read_to_string(&file)?;
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("trace_manager::") {
                let after = &rest[at + "trace_manager::".len()..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let deeper = modules.contains(name.as_str());
                let group_with_path = after.starts_with('{') && {
                    let group = after.split('}').next().unwrap_or("");
                    group
                        .split([',', '{', ' ', '\n'])
                        .any(|part| modules.contains(part.split("::").next().unwrap_or("")))
                };
                if deeper || group_with_path {
                    problems.push(format!(
                        "{}:{}: trace-cli reaches into trace-manager's modules \
                         (`{}`): use what trace_manager exports at its root",
                        rel(root, &file),
                        n + 1,
                        line.trim()
                    ));
                    break;
                }
                rest = &after[name.len()..];
            }
        }
    }
    Ok(())
}

fn sizes(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let allowed_file = root.join("xtask/structure/long-files.txt");
    let allowed_text = std::fs::read_to_string(&allowed_file)
        .with_context(|| format!("reading {}", allowed_file.display()))?;
    let mut allowed = BTreeSet::new();
    for line in allowed_text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((path, reason)) = line.split_once(':') else {
            problems.push(format!(
                "long-files.txt: `{line}` gives no reason after `:`"
            ));
            continue;
        };
        if reason.trim().is_empty() {
            problems.push(format!("long-files.txt: {path} gives no reason"));
        }
        allowed.insert(path.trim().to_owned());
    }
    let mut seen = BTreeSet::new();
    for krate in CRATES.iter().chain(&["tests"]) {
        for file in rust_files(&root.join(krate))? {
            let lines = std::fs::read_to_string(&file)?.lines().count();
            let name = rel(root, &file);
            if lines > MAX_LINES {
                seen.insert(name.clone());
                if !allowed.contains(&name) {
                    problems.push(format!(
                        "{name}: {lines} lines, over {MAX_LINES}: split it by role, or \
                         list it in xtask/structure/long-files.txt with why it holds together"
                    ));
                }
            }
        }
    }
    for stale in allowed.difference(&seen) {
        problems.push(format!(
            "long-files.txt lists {stale}, which is not over {MAX_LINES} lines (any more)"
        ));
    }
    Ok(())
}

/// The module path of `file` under `src` (`a::b` for `src/a/b.rs` or
/// `src/a/b/mod.rs`; empty for the crate root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn circles(src: &Path, krate: &str, problems: &mut Vec<String>) -> Result<()> {
    let files = rust_files(src)?;
    // Only files under src/bin are separate crates: leave them out.
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| !f.strip_prefix(src).is_ok_and(|r| r.starts_with("bin")))
        .collect();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &files {
        let me = module_of(src, file);
        let text = std::fs::read_to_string(file)?;
        for path in paths_used(&strip_tests(&text)) {
            let Some(target) = resolve(&me, &path, &modules) else {
                continue;
            };
            let related = target.starts_with(&me) || me.starts_with(&target);
            if !related {
                edges.entry(me.clone()).or_default().insert(target);
            }
        }
    }
    // Each circle once: from its smallest module, through modules greater
    // than it.
    let mut reported = BTreeSet::new();
    for start in &modules {
        if let Some(cycle) = cycle_from(start, &edges) {
            let mut key = cycle.clone();
            key.sort();
            if reported.insert(key) {
                let names: Vec<String> = cycle
                    .iter()
                    .map(|m| {
                        if m.is_empty() {
                            "crate".to_owned()
                        } else {
                            m.join("::")
                        }
                    })
                    .collect();
                problems.push(format!(
                    "{krate}: import circle {} -> {}",
                    names.join(" -> "),
                    names[0]
                ));
            }
        }
    }
    Ok(())
}

/// A path from `start` back to itself, if any (depth first).
fn cycle_from(
    start: &Vec<String>,
    edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
) -> Option<Vec<Vec<String>>> {
    let mut path = vec![start.clone()];
    let mut seen = BTreeSet::new();
    fn dfs(
        path: &mut Vec<Vec<String>>,
        seen: &mut BTreeSet<Vec<String>>,
        start: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    ) -> bool {
        let here = path.last().cloned().unwrap_or_default();
        for next in edges.get(&here).into_iter().flatten() {
            if next == start {
                return true;
            }
            if next > start && seen.insert(next.clone()) {
                path.push(next.clone());
                if dfs(path, seen, start, edges) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    dfs(&mut path, &mut seen, start, edges).then_some(path)
}

/// `text` without its `#[cfg(test)]` modules (a test may use what it
/// likes) and `#[cfg(doc)]` imports (for links in documentation only).
fn strip_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" || line.trim() == "#[cfg(doc)]" {
            // Skip the item that follows: to its closing brace at the same
            // indentation, or its `;`.
            let Some(item) = lines.next() else { break };
            if item.trim_end().ends_with(';') {
                continue;
            }
            let indent = item.len() - item.trim_start().len();
            for l in lines.by_ref() {
                let i = l.len() - l.trim_start().len();
                if i == indent && l.trim_start().starts_with('}') {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every path starting `crate::`, `super::` or `self::` in `text`, use
/// groups (`a::{b, c::d}`) expanded.
fn paths_used(text: &str) -> Vec<Vec<String>> {
    // Comments say things, they use nothing.
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let word_start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let head = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|h| word_start && bytes[i..].starts_with(h.as_bytes()));
        if let Some(h) = head {
            let (paths, len) = parse_path(&code[i..]);
            out.extend(paths);
            i += len.max(h.len());
        } else {
            i += 1;
        }
    }
    out
}

/// The paths of one (possibly grouped) path at the start of `s`, and the
/// bytes it spans.
fn parse_path(s: &str) -> (Vec<Vec<String>>, usize) {
    let mut prefix: Vec<String> = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i > start {
            prefix.push(s[start..i].to_owned());
        }
        if s[i..].starts_with("::") {
            i += 2;
            if s[i..].starts_with('{') {
                // A group: split at top-level commas.
                let mut depth = 0;
                let mut j = i;
                let mut part_start = i + 1;
                let mut paths = Vec::new();
                while j < b.len() {
                    match b[j] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                let part = s[part_start..j].trim();
                                if !part.is_empty() {
                                    paths.push(part.to_owned());
                                }
                                j += 1;
                                break;
                            }
                        }
                        b',' if depth == 1 => {
                            paths.push(s[part_start..j].trim().to_owned());
                            part_start = j + 1;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let mut out = Vec::new();
                for p in paths {
                    let (inner, _) = parse_path(&p);
                    for mut q in inner {
                        let mut full = prefix.clone();
                        full.append(&mut q);
                        out.push(full);
                    }
                }
                return (out, j);
            }
            continue;
        }
        break;
    }
    (vec![prefix], i)
}

/// The module a path used from module `me` lands in: its longest prefix
/// that names a module of the crate.
fn resolve(me: &[String], path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut base: Vec<String> = Vec::new();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => rest = &path[1..],
        Some("self") => {
            base = me.to_vec();
            rest = &path[1..];
        }
        Some("super") => {
            base = me.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    let mut best = None;
    let mut cur = base.clone();
    if modules.contains(&cur) {
        best = Some(cur.clone());
    }
    for seg in rest {
        cur.push(seg.clone());
        if modules.contains(&cur) {
            best = Some(cur.clone());
        }
    }
    best
}

fn rel(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Vec<String> {
        if s.is_empty() {
            return Vec::new();
        }
        s.split("::").map(str::to_owned).collect()
    }

    #[test]
    fn use_groups_are_expanded_and_resolved_to_modules() {
        let paths = paths_used(
            "use crate::a::{b::Thing, c, d::{e, f::G}};\nlet x = super::h::run(); // crate::z::no",
        );
        let got: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
        assert_eq!(
            got,
            [
                "crate::a::b::Thing",
                "crate::a::c",
                "crate::a::d::e",
                "crate::a::d::f::G",
                "super::h::run"
            ]
        );
        let modules: BTreeSet<Vec<String>> = ["", "a", "a::b", "a::d", "a::d::f", "x", "h"]
            .iter()
            .map(|s| m(s))
            .collect();
        assert_eq!(resolve(&m("x"), &paths[0], &modules), Some(m("a::b")));
        assert_eq!(resolve(&m("x"), &paths[1], &modules), Some(m("a")));
        assert_eq!(resolve(&m("x"), &paths[4], &modules), Some(m("h")));
    }

    #[test]
    fn a_circle_is_found_once_and_parents_do_not_count() {
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        edges.entry(m("a")).or_default().insert(m("b"));
        edges.entry(m("b")).or_default().insert(m("c"));
        edges.entry(m("c")).or_default().insert(m("a"));
        edges.entry(m("d")).or_default().insert(m("a"));
        assert_eq!(
            cycle_from(&m("a"), &edges),
            Some(vec![m("a"), m("b"), m("c")])
        );
        assert_eq!(cycle_from(&m("d"), &edges), None);
    }

    #[test]
    fn test_modules_are_left_out() {
        let text =
            "use crate::a::X;\n#[cfg(test)]\nmod tests {\n    use crate::b::Y;\n}\nfn f() {}\n";
        let got = paths_used(&strip_tests(text));
        assert_eq!(got, vec![m("crate::a::X")]);
    }
}
