//! `trace-cli events`: the kernel tracepoints `record -e` can select, with
//! the fields each records.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;
use trace_common::category::glob_matches;
use trace_manager::{
    FieldKind, TracepointError, TracepointField, tracefs_root, tracepoint_catalog,
    tracepoint_fields,
};

/// Arguments of `trace-cli events`.
#[derive(Args)]
pub struct EventsArgs {
    /// Only the tracepoints this `GROUP:EVENT` glob matches (`sched:*`,
    /// `*:*openat*`); all when absent.
    glob: Option<String>,
    /// Names only, without the fields.
    #[arg(short = 'n', long)]
    names_only: bool,
}

pub fn run(args: EventsArgs) -> Result<ExitCode> {
    let root = tracefs_root()
        .context("listing tracepoints needs tracefs (and usually root to read it)")?;
    let all = tracepoint_catalog(&root)?;
    let pattern = args.glob.as_deref().unwrap_or("*:*");
    let pattern = if pattern.contains(':') {
        pattern.to_owned()
    } else {
        // A bare name or glob matches events of any group.
        format!("*:{pattern}")
    };
    let mut shown = 0usize;
    for (group, event) in &all {
        let name = format!("{group}:{event}");
        if !glob_matches(&pattern, &name) {
            continue;
        }
        shown += 1;
        if args.names_only {
            println!("{name}");
            continue;
        }
        match tracepoint_fields(&root, group, event) {
            Ok((_, fields)) => {
                let list: Vec<String> = fields
                    .iter()
                    .filter(|f| !f.name().starts_with("common_"))
                    .map(|f| format!("{} {}", f.name(), describe(f)))
                    .collect();
                println!("{name}\n    {}", list.join(", "));
            }
            Err(TracepointError::Format { reason, .. }) => {
                println!("{name}\n    (format unreadable: {reason})");
            }
            Err(e) => return Err(e.into()),
        }
    }
    if shown == 0 {
        eprintln!("trace-cli: no tracepoint matches {pattern}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// How a field is recorded, as `(C type; how)`.
fn describe(f: &TracepointField) -> String {
    let how = match &f.kind {
        FieldKind::Int { size, signed } => {
            format!("{}{}", if *signed { "i" } else { "u" }, 8 * size)
        }
        FieldKind::Bool => "bool".into(),
        FieldKind::Text(_) => "text".into(),
        FieldKind::Pointer => "pointer".into(),
        FieldKind::UserString => "text read from the process".into(),
        FieldKind::Array { elem, signed, .. } => {
            format!("list of {}{}", if *signed { "i" } else { "u" }, 8 * elem)
        }
        FieldKind::Bytes => "hex".into(),
    };
    let named = match &f.names {
        Some(n) if n.is_flags() => ", flag names",
        Some(_) => ", value names",
        None => "",
    };
    format!("({}: {how}{named})", f.format.c_type)
}
