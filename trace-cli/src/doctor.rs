//! `trace-cli doctor`: what this kernel and machine allow, one line per
//! check with what to do when something is missing, then which categories
//! and options therefore work.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use trace_manager::{Examination, FindingStatus};

/// Arguments of `trace-cli doctor`.
#[derive(Args)]
pub struct DoctorArgs {
    /// Also list every eBPF program with what the verifier said of it and
    /// how many instructions it walked.
    #[arg(long)]
    programs: bool,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    let exam = trace_manager::examine_machine();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&exam))?);
    } else {
        print_text(&exam, args.programs);
    }
    // Exit status 1 when nothing at all can be recorded.
    let records = exam.abilities.iter().any(|a| a.works != Some(false));
    Ok(if records {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_text(exam: &Examination, programs: bool) {
    println!("What this machine allows (kernel {}):", exam.kernel_release);
    let width = exam
        .findings
        .iter()
        .map(|f| f.check.len())
        .max()
        .unwrap_or(0);
    for f in &exam.findings {
        println!("  {:<8} {:<width$}  {}", f.status.word(), f.check, f.detail);
        if let Some(fix) = &f.fix
            && f.status != FindingStatus::Ok
        {
            println!("  {:<8} {:<width$}  to do: {fix}", "", "");
        }
    }
    if programs && !exam.programs.is_empty() {
        println!();
        println!("eBPF programs (instructions the verifier walked):");
        for p in &exam.programs {
            let outcome = match (&p.refused, p.verified_instructions) {
                (Some(why), _) => format!("refused: {why}"),
                (None, Some(n)) => format!("{n}"),
                (None, None) => "loaded".to_owned(),
            };
            println!(
                "  {:<10} {:<28} {:<28} {outcome}",
                p.kind, p.program, p.serves
            );
        }
    }
    println!();
    println!("What works here:");
    let width = exam
        .abilities
        .iter()
        .map(|a| a.what.len())
        .max()
        .unwrap_or(0);
    for a in &exam.abilities {
        let word = match a.works {
            Some(true) => "yes",
            Some(false) => "no",
            None => "?",
        };
        if a.note.is_empty() {
            println!("  {word:<4} {}", a.what);
        } else {
            println!("  {word:<4} {:<width$}  {}", a.what, a.note);
        }
    }
}

fn to_json(exam: &Examination) -> serde_json::Value {
    json!({
        "kernel_release": exam.kernel_release,
        "findings": exam.findings.iter().map(|f| json!({
            "check": f.check,
            "status": f.status.word(),
            "detail": f.detail,
            "fix": f.fix,
        })).collect::<Vec<_>>(),
        "programs": exam.programs.iter().map(|p| json!({
            "program": p.program,
            "kind": p.kind,
            "serves": p.serves,
            "verified_instructions": p.verified_instructions,
            "refused": p.refused,
        })).collect::<Vec<_>>(),
        "abilities": exam.abilities.iter().map(|a| json!({
            "what": a.what,
            "works": a.works,
            "note": a.note,
        })).collect::<Vec<_>>(),
    })
}
