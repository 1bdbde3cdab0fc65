//! Resolving `-e` specs against tracefs: the catalog of tracepoints, globs,
//! pairs, suggestions for unknown names, each event's fields and the
//! configuration its program gets.

use std::fs;
use std::path::Path;

use trace_common::category::glob_matches;
use trace_common::kernel::tracepoint::{
    DATA_MAX, LOC_RELATIVE, LOCS_MAX, STRINGS_MAX, TracepointConfig,
};

use super::field::{Field, FieldKind, Place};
use super::{Pair, Role, Selection, Tracepoint, TracepointError, filter, print_fmt};
use crate::kernel::format::{FormatError, parse_format};
use crate::kernel::tracefs::format_path;

/// Every tracepoint under tracefs `root`, as `(group, event)`, sorted.
pub fn catalog(root: &Path) -> Result<Vec<(String, String)>, TracepointError> {
    let dir = root.join("events");
    let fail = |source| TracepointError::Catalog {
        path: dir.clone(),
        source,
    };
    let mut out = Vec::new();
    for group in fs::read_dir(&dir).map_err(fail)? {
        let group = group.map_err(fail)?;
        if !group.file_type().map_err(fail)?.is_dir() {
            continue;
        }
        let Ok(events) = fs::read_dir(group.path()) else {
            continue;
        };
        let gname = group.file_name().to_string_lossy().into_owned();
        // ftrace's own records (`ftrace:function`, `ftrace:print`) are no
        // tracepoints a program can be attached to.
        if gname == "ftrace" {
            continue;
        }
        for event in events.flatten() {
            if event.path().join("format").is_file() {
                out.push((
                    gname.clone(),
                    event.file_name().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads and classifies the fields of `group:event`.
pub fn fields(root: &Path, group: &str, event: &str) -> Result<(u32, Vec<Field>), TracepointError> {
    let name = format!("{group}:{event}");
    let path = format_path(root, group, event);
    let text = fs::read_to_string(&path).map_err(|e| TracepointError::Format {
        name: name.clone(),
        reason: format!("{}: {e}", path.display()),
    })?;
    let format = parse_format(&text).map_err(|e: FormatError| TracepointError::Format {
        name: name.clone(),
        reason: e.to_string(),
    })?;
    let id = format.id.ok_or_else(|| TracepointError::Format {
        name: name.clone(),
        reason: "no ID line".into(),
    })?;
    let mut names = print_fmt::field_names(&format.print_fmt);
    let pointers = print_fmt::pointer_fields(&format.print_fmt);
    let fields = format
        .fields
        .into_iter()
        .map(|f| {
            let n = names.remove(&f.name);
            let mut field = Field::new(group, f, n);
            if pointers.contains(&field.format.name)
                && matches!(field.kind, FieldKind::Int { size: 8, .. })
            {
                field.kind = FieldKind::Pointer;
            }
            field
        })
        .collect();
    Ok((id, fields))
}

/// One item of a spec, resolved.
enum Item {
    One(Vec<(String, String)>),
    Pair((String, String), (String, String)),
}

/// Splits a spec into its items and filter.
fn split_spec(spec: &str) -> Result<(Vec<&str>, Option<&str>), TracepointError> {
    let bad = |reason: &str| TracepointError::Spec {
        spec: spec.to_owned(),
        reason: reason.to_owned(),
    };
    let (items, filter) = match spec.find(" if ") {
        Some(at) => (&spec[..at], Some(spec[at + 4..].trim())),
        None => (spec, None),
    };
    let items: Vec<&str> = items.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(bad(
            "an empty event name (expected GROUP:EVENT[,GROUP:EVENT…][ if FILTER])",
        ));
    }
    if filter == Some("") {
        return Err(bad("`if` without a filter"));
    }
    Ok((items, filter))
}

/// Names close to `name` (`group:event`) among `all`.
fn close_names(name: &str, all: &[(String, String)]) -> Vec<String> {
    let (_, event) = name.split_once(':').unwrap_or(("", name));
    // The event under another group first.
    let same_event: Vec<String> = all
        .iter()
        .filter(|(_, e)| glob_matches(event, e))
        .map(|(g, e)| format!("{g}:{e}"))
        .take(3)
        .collect();
    if !same_event.is_empty() && !event.contains('*') {
        return same_event;
    }
    // The closest by edits, if close enough to be a typo.
    let typed = name.to_ascii_lowercase();
    let scored: Vec<(usize, String)> = all
        .iter()
        .map(|(g, e)| {
            let full = format!("{g}:{e}");
            let d = strsim::levenshtein(&typed, &full);
            (d, full)
        })
        .filter(|(d, _)| *d <= 2.max(typed.len() / 5))
        .collect();
    let best = scored.iter().map(|s| s.0).min().unwrap_or(0);
    let mut close: Vec<String> = scored
        .into_iter()
        .filter(|(d, _)| *d == best)
        .map(|(_, n)| n)
        .collect();
    close.sort();
    close.truncate(3);
    close
}

fn resolve_item(spec: &str, item: &str, all: &[(String, String)]) -> Result<Item, TracepointError> {
    let one = |name: &str, glob: bool| -> Result<Vec<(String, String)>, TracepointError> {
        let Some((g, e)) = name.split_once(':') else {
            return Err(TracepointError::Unknown {
                spec: spec.to_owned(),
                name: format!("{name} (expected GROUP:EVENT)"),
                suggestions: close_names(name, all),
            });
        };
        let found: Vec<(String, String)> = all
            .iter()
            .filter(|(ag, ae)| {
                if glob {
                    glob_one(g, ag) && glob_one(e, ae)
                } else {
                    ag == g && ae == e
                }
            })
            .cloned()
            .collect();
        if found.is_empty() {
            return Err(TracepointError::Unknown {
                spec: spec.to_owned(),
                name: name.to_owned(),
                suggestions: close_names(name, all),
            });
        }
        Ok(found)
    };
    match item.split_once("..") {
        Some((entry, exit)) => {
            if [entry, exit].iter().any(|s| s.contains(['*', '?'])) {
                return Err(TracepointError::Spec {
                    spec: spec.to_owned(),
                    reason: format!("`{item}`: a pair names two events exactly, without globs"),
                });
            }
            let entry = one(entry.trim(), false)?.remove(0);
            let exit = one(exit.trim(), false)?.remove(0);
            if entry == exit {
                return Err(TracepointError::Spec {
                    spec: spec.to_owned(),
                    reason: format!("`{item}`: a pair needs two different events"),
                });
            }
            Ok(Item::Pair(entry, exit))
        }
        None => Ok(Item::One(one(item, true)?)),
    }
}

/// `glob_matches` with `?` for one character.
fn glob_one(pattern: &str, text: &str) -> bool {
    if !pattern.contains('?') {
        return glob_matches(pattern, text);
    }
    fn rec(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => rec(&p[1..], t) || (!t.is_empty() && rec(p, &t[1..])),
            (Some(b'?'), Some(_)) => rec(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => rec(&p[1..], &t[1..]),
            _ => false,
        }
    }
    rec(pattern.as_bytes(), text.as_bytes())
}

/// The name of the durations of pair `entry..exit`: their common words,
/// without `enter`/`entry`/`exit`/`start`/`end`/`begin`
/// (`softirq_entry..softirq_exit` → `softirq`,
/// `sys_enter_openat..sys_exit_openat` → `sys_openat`).
fn pair_name(entry: &str, exit: &str) -> String {
    const MARKS: &[&str] = &["enter", "entry", "exit", "start", "end", "begin", "done"];
    let strip = |s: &str| -> String {
        s.split('_')
            .filter(|w| !MARKS.contains(w))
            .collect::<Vec<_>>()
            .join("_")
    };
    let (a, b) = (strip(entry), strip(exit));
    if a == b && !a.is_empty() {
        a
    } else {
        format!("{entry}..{exit}")
    }
}

/// Resolves `specs` against the tracepoints under tracefs `root`.
pub fn select(root: &Path, specs: &[String]) -> Result<Selection, TracepointError> {
    let mut sel = Selection::default();
    if specs.is_empty() {
        return Ok(sel);
    }
    let all = catalog(root)?;
    // Filter per id, as written, and which spec selected it.
    for spec in specs {
        let (items, filter) = split_spec(spec)?;
        let expr = filter
            .map(|f| {
                filter::parse(f).map_err(|e| TracepointError::Spec {
                    spec: spec.clone(),
                    reason: format!("filter: {e}"),
                })
            })
            .transpose()?;
        for item in items {
            let named = !item.contains(['*', '?']);
            let (events, pair) = match resolve_item(spec, item, &all)? {
                Item::One(events) => (events, None),
                Item::Pair(entry, exit) => {
                    let n = sel.pairs.len();
                    sel.pairs.push(Pair {
                        name: pair_name(&entry.1, &exit.1),
                        entry: 0,
                        exit: 0,
                    });
                    (vec![entry, exit], Some(n))
                }
            };
            for (i, (group, event)) in events.into_iter().enumerate() {
                let role = match pair {
                    None => Role::Instant,
                    Some(n) if i == 0 => Role::Entry(n),
                    Some(n) => Role::Exit(n),
                };
                // For a pair, the filter is the entry's.
                let filter = if matches!(role, Role::Exit(_)) {
                    None
                } else {
                    filter.zip(expr.as_ref())
                };
                add(root, &mut sel, spec, (&group, &event, named), role, filter)?;
            }
        }
    }
    Ok(sel)
}

fn add(
    root: &Path,
    sel: &mut Selection,
    spec: &str,
    (group, event, named): (&str, &str, bool),
    role: Role,
    filter: Option<(&str, &filter::Expr)>,
) -> Result<(), TracepointError> {
    let (id, fields) = fields(root, group, event)?;
    let name = format!("{group}:{event}");
    if let Some(&i) = sel.by_id.get(&id) {
        let old = &mut sel.tracepoints[i];
        old.named |= named;
        if old.role != role {
            return Err(TracepointError::Conflict {
                name,
                reason: "alone and in a pair, or in two pairs".into(),
            });
        }
        let new = filter.map(|(f, _)| f.to_owned());
        if old.filter != new {
            if old.filter.is_some() && new.is_some() {
                return Err(TracepointError::Conflict {
                    name,
                    reason: format!(
                        "with the filters {:?} and {:?}",
                        old.filter.as_deref().unwrap_or(""),
                        new.as_deref().unwrap_or("")
                    ),
                });
            }
            // Selected once without a filter: every event is wanted.
            old.filter = None;
            old.config.n_insns = 0;
        }
        return Ok(());
    }
    let mut config = TracepointConfig::default();
    let fixed = fields
        .iter()
        .map(|f| f.format.offset + f.format.size)
        .max()
        .unwrap_or(0);
    if fixed as usize >= DATA_MAX {
        return Err(TracepointError::Format {
            name,
            reason: format!(
                "its record's fixed part is {fixed} bytes; at most {} are copied",
                DATA_MAX - 1
            ),
        });
    }
    config.fixed_len = fixed as u16;
    for f in &fields {
        let place = match f.kind {
            FieldKind::Text(p) | FieldKind::Array { place: p, .. } => p,
            FieldKind::Bytes if f.format.is_data_loc() => Place::DataLoc,
            FieldKind::Bytes if f.format.is_rel_loc() => Place::RelLoc,
            _ => Place::Inline,
        };
        if place != Place::Inline && usize::from(config.n_locs) < LOCS_MAX {
            let rel = if place == Place::RelLoc {
                LOC_RELATIVE
            } else {
                0
            };
            config.locs[usize::from(config.n_locs)] = f.format.offset as u16 | rel;
            config.n_locs += 1;
        }
        if f.kind == FieldKind::UserString && usize::from(config.n_strings) < STRINGS_MAX {
            config.strings[usize::from(config.n_strings)] = f.format.offset as u16;
            config.n_strings += 1;
        }
    }
    if let Some((_, expr)) = filter {
        let insns = filter::compile(expr, &fields).map_err(|e| TracepointError::Filter {
            spec: spec.to_owned(),
            name: name.clone(),
            reason: e.message,
        })?;
        config.n_insns = insns.len() as u8;
        config.insns[..insns.len()].copy_from_slice(&insns);
    }
    match role {
        Role::Entry(n) => sel.pairs[n].entry = id,
        Role::Exit(n) => sel.pairs[n].exit = id,
        Role::Instant => {}
    }
    sel.by_id.insert(id, sel.tracepoints.len());
    sel.tracepoints.push(Tracepoint {
        group: group.to_owned(),
        event: event.to_owned(),
        id,
        fields,
        config,
        role,
        filter: filter.map(|(f, _)| f.to_owned()),
        named,
    });
    Ok(())
}
