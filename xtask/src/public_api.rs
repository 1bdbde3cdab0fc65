//! `cargo xtask public-api [--bless]`: the public items of the crates that
//! others build on, one line each, against a snapshot kept in
//! `xtask/public-api/CRATE.txt` (`cargo xtask test` checks it).
//!
//! The list is made from the nightly toolchain's rustdoc JSON
//! (`--output-format json`): every public module, re-export, type, field,
//! variant, constant, trait and function reachable from the crate's root,
//! with function signatures and inherent methods. A change to it is a
//! change to what clients see: it shows in review as a change to the
//! snapshot, made on purpose with `--bless`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::ebpf::{nightly, target_dir, workspace_root};
use crate::run::run;

/// The crates whose public items are kept in a snapshot.
const CRATES: &[&str] = &["trace-manager"];

/// Checks each crate's public items against its snapshot, or with `bless`
/// writes the snapshots.
pub fn public_api(bless: bool) -> Result<()> {
    let mut changed = Vec::new();
    for krate in CRATES {
        let now = items(krate)?;
        let path = snapshot_path(krate);
        if bless {
            std::fs::create_dir_all(path.parent().expect("a parent"))?;
            std::fs::write(&path, &now).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("xtask: wrote {}", path.display());
            continue;
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        if kept != now {
            let kept: BTreeSet<&str> = kept.lines().collect();
            let now: BTreeSet<&str> = now.lines().collect();
            for gone in kept.difference(&now) {
                eprintln!("{krate}: - {gone}");
            }
            for new in now.difference(&kept) {
                eprintln!("{krate}: + {new}");
            }
            changed.push(*krate);
        }
    }
    if !changed.is_empty() {
        bail!(
            "the public items of {} differ from xtask/public-api/ (above: - gone, + new); \
             if that is meant, run `cargo xtask public-api --bless`",
            changed.join(", ")
        );
    }
    Ok(())
}

fn snapshot_path(krate: &str) -> PathBuf {
    workspace_root()
        .join("xtask/public-api")
        .join(format!("{krate}.txt"))
}

/// The public items of `krate`, sorted, one per line.
fn items(krate: &str) -> Result<String> {
    let dir = target_dir().join("public-api");
    let mut cmd = nightly("cargo")?;
    cmd.current_dir(workspace_root())
        .args(["rustdoc", "-p", krate, "--lib", "--target-dir"])
        .arg(&dir)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"]);
    run(&mut cmd)?;
    let file = dir
        .join("doc")
        .join(format!("{}.json", krate.replace('-', "_")));
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let doc: Value = serde_json::from_str(&text).context("rustdoc JSON")?;
    let mut lines = BTreeSet::new();
    let root_id = doc["root"].to_string();
    let name = krate.replace('-', "_");
    walk(&doc, &root_id, &name, &mut lines, 0);
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    Ok(out)
}

/// Adds the item `id` at `path` (and what it holds) to `lines`.
fn walk(doc: &Value, id: &str, path: &str, lines: &mut BTreeSet<String>, depth: usize) {
    let Some(item) = doc["index"].get(id) else {
        return;
    };
    if depth > 16 || item["visibility"] != "public" {
        return;
    }
    let Some((kind, inner)) = item["inner"].as_object().and_then(|o| o.iter().next()) else {
        return;
    };
    match kind.as_str() {
        "module" => {
            lines.insert(format!("mod {path}"));
            for child in inner["items"].as_array().into_iter().flatten() {
                let cid = child.to_string();
                let cname = doc["index"][&cid]["name"].as_str().unwrap_or("_");
                walk(doc, &cid, &format!("{path}::{cname}"), lines, depth + 1);
            }
        }
        "use" => {
            // What it names, by its kind: where the item lives privately
            // is no part of the face.
            let name = inner["name"].as_str().unwrap_or("_");
            let kind = doc["index"]
                .get(inner["id"].to_string())
                .and_then(|target| target["inner"].as_object())
                .and_then(|o| o.keys().next().cloned())
                .unwrap_or_else(|| "external".to_owned());
            let at = path.rsplit_once("::").map_or(path, |(p, _)| p);
            lines.insert(format!("pub use {at}::{name} ({kind})"));
        }
        "struct" => {
            lines.insert(format!(
                "struct {path}{}",
                generics(&item["inner"]["struct"])
            ));
            if let Some(fields) = inner["kind"]["plain"]["fields"].as_array() {
                for f in fields {
                    field(doc, f, path, lines);
                }
            }
            if let Some(fields) = inner["kind"]["tuple"].as_array() {
                for f in fields.iter().filter(|f| !f.is_null()) {
                    field(doc, f, path, lines);
                }
            }
            methods(doc, inner, path, lines);
        }
        "enum" => {
            lines.insert(format!("enum {path}"));
            for v in inner["variants"].as_array().into_iter().flatten() {
                let name = doc["index"][&v.to_string()]["name"].as_str().unwrap_or("_");
                lines.insert(format!("variant {path}::{name}"));
            }
            methods(doc, inner, path, lines);
        }
        "trait" => {
            lines.insert(format!("trait {path}"));
            for m in inner["items"].as_array().into_iter().flatten() {
                let m = doc["index"][&m.to_string()].clone();
                let name = m["name"].as_str().unwrap_or("_");
                lines.insert(format!("trait item {path}::{name}"));
            }
        }
        "function" => {
            lines.insert(format!("fn {path}{}", signature(inner)));
        }
        "constant" | "static" => {
            let ty = render(&inner["type"]);
            lines.insert(format!("{kind} {path}: {ty}"));
        }
        "type_alias" => {
            lines.insert(format!("type {path} = {}", render(&inner["type"])));
        }
        "macro" | "proc_macro" => {
            lines.insert(format!("macro {path}"));
        }
        other => {
            lines.insert(format!("{other} {path}"));
        }
    }
}

fn field(doc: &Value, id: &Value, owner: &str, lines: &mut BTreeSet<String>) {
    let f = &doc["index"][&id.to_string()];
    if f["visibility"] != "public" {
        return;
    }
    let name = f["name"].as_str().unwrap_or("_");
    lines.insert(format!(
        "field {owner}::{name}: {}",
        render(&f["inner"]["struct_field"])
    ));
}

/// The public inherent methods of a struct or enum.
fn methods(doc: &Value, inner: &Value, owner: &str, lines: &mut BTreeSet<String>) {
    for imp in inner["impls"].as_array().into_iter().flatten() {
        let imp = &doc["index"][&imp.to_string()]["inner"]["impl"];
        if !imp["trait"].is_null() || imp["is_synthetic"] == true {
            continue;
        }
        for m in imp["items"].as_array().into_iter().flatten() {
            let m = &doc["index"][&m.to_string()];
            if m["visibility"] != "public" {
                continue;
            }
            let name = m["name"].as_str().unwrap_or("_");
            if let Some(f) = m["inner"].get("function") {
                lines.insert(format!("fn {owner}::{name}{}", signature(f)));
            } else if let Some(c) = m["inner"].get("assoc_const") {
                lines.insert(format!("const {owner}::{name}: {}", render(&c["type"])));
            }
        }
    }
}

fn generics(item: &Value) -> String {
    let params: Vec<String> = item["generics"]["params"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["kind"]["type"]["is_synthetic"] != true)
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    if params.is_empty() {
        String::new()
    } else {
        format!("<{}>", params.join(", "))
    }
}

/// `<generics>(arg: T, ...) -> R` of a function.
fn signature(f: &Value) -> String {
    let sig = &f["sig"];
    let args: Vec<String> = sig["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let name = a[0].as_str().unwrap_or("_");
            let ty = render(&a[1]);
            if name == "self" {
                match ty.as_str() {
                    "Self" => "self".to_owned(),
                    "&Self" => "&self".to_owned(),
                    "&mut Self" => "&mut self".to_owned(),
                    _ => format!("self: {ty}"),
                }
            } else {
                format!("{name}: {ty}")
            }
        })
        .collect();
    let out = if sig["output"].is_null() {
        String::new()
    } else {
        format!(" -> {}", render(&sig["output"]))
    };
    let asyncness = if f["header"]["is_async"] == true {
        " (async)"
    } else {
        ""
    };
    format!("{}({}){out}{asyncness}", generics(f), args.join(", "))
}

/// A type as Rust spells it, near enough.
fn render(t: &Value) -> String {
    let Some((kind, v)) = t.as_object().and_then(|o| o.iter().next()) else {
        return "_".into();
    };
    match kind.as_str() {
        "primitive" | "generic" => v.as_str().unwrap_or("_").to_owned(),
        "resolved_path" => {
            let path = v["path"].as_str().unwrap_or("_");
            format!("{path}{}", args(&v["args"]))
        }
        "borrowed_ref" => {
            let m = if v["is_mutable"] == true { "mut " } else { "" };
            let l = v["lifetime"]
                .as_str()
                .map(|l| format!("{l} "))
                .unwrap_or_default();
            format!("&{l}{m}{}", render(&v["type"]))
        }
        "slice" => format!("[{}]", render(v)),
        "array" => format!(
            "[{}; {}]",
            render(&v["type"]),
            v["len"].as_str().unwrap_or("_")
        ),
        "tuple" => {
            let parts: Vec<String> = v.as_array().into_iter().flatten().map(render).collect();
            format!("({})", parts.join(", "))
        }
        "raw_pointer" => {
            let m = if v["is_mutable"] == true {
                "mut"
            } else {
                "const"
            };
            format!("*{m} {}", render(&v["type"]))
        }
        "impl_trait" => format!("impl {}", bounds(v)),
        "dyn_trait" => {
            let traits: Vec<String> = v["traits"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    let p = &t["trait"];
                    format!("{}{}", p["path"].as_str().unwrap_or("_"), args(&p["args"]))
                })
                .collect();
            format!("dyn {}", traits.join(" + "))
        }
        "qualified_path" => format!(
            "<{}>::{}",
            render(&v["self_type"]),
            v["name"].as_str().unwrap_or("_")
        ),
        "function_pointer" => "fn(..)".into(),
        other => other.to_owned(),
    }
}

fn bounds(v: &Value) -> String {
    let parts: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| {
            let t = &b["trait_bound"]["trait"];
            t["path"]
                .as_str()
                .map(|p| format!("{p}{}", args(&t["args"])))
        })
        .collect();
    parts.join(" + ")
}

fn args(a: &Value) -> String {
    if let Some(ab) = a.get("angle_bracketed") {
        let mut parts: Vec<String> = ab["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| match x.as_object().and_then(|o| o.iter().next()) {
                Some((k, v)) if k == "type" => render(v),
                Some((k, v)) if k == "lifetime" => v.as_str().unwrap_or("'_").to_owned(),
                Some((k, v)) if k == "const" => v["expr"].as_str().unwrap_or("_").to_owned(),
                _ => "_".into(),
            })
            .collect();
        for c in ab["constraints"].as_array().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or("_");
            if let Some(ty) = c["binding"].get("equality").and_then(|e| e.get("type")) {
                parts.push(format!("{name} = {}", render(ty)));
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("<{}>", parts.join(", "))
        }
    } else if let Some(p) = a.get("parenthesized") {
        let inputs: Vec<String> = p["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(render)
            .collect();
        let out = if p["output"].is_null() {
            String::new()
        } else {
            format!(" -> {}", render(&p["output"]))
        };
        format!("({}){out}", inputs.join(", "))
    } else {
        String::new()
    }
}
