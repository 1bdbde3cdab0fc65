//! `trace-cli categories`: what `-c` can select, and a suggestion when a
//! category is mistyped.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use trace_common::category::KERNEL_CATEGORIES;

/// Arguments of `trace-cli categories` (none).
#[derive(Args)]
pub struct CategoriesArgs {}

pub fn run(_args: CategoriesArgs) -> Result<ExitCode> {
    let width = KERNEL_CATEGORIES
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    println!("Kernel categories (select with -c; globs such as kernel:* work):");
    for (name, description) in KERNEL_CATEGORIES {
        println!("  {name:<width$}  {description}");
    }
    let declared = declared_by_providers();
    if !declared.is_empty() {
        println!();
        println!("Categories registered providers declared (from the trace manager daemon):");
        for name in declared {
            println!("  {name}");
        }
    }
    println!();
    println!("Probes record into their own categories: `uprobe` (--uprobe) and `usdt` (--usdt).");
    println!(
        "Any other category is passed to userspace providers, which name their own \
         (`trace-cli providers` lists the programs waiting to be traced)."
    );
    Ok(ExitCode::SUCCESS)
}

/// The categories providers registered with a running daemon declared;
/// none without a daemon.
fn declared_by_providers() -> Vec<String> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    runtime.block_on(async {
        let path = trace_manager::socket_path();
        let mut ctl = match trace_manager::Controller::connect(&path) {
            Ok(ctl) => ctl,
            // A daemon runs, but not for this user: say so, since the
            // list then lacks what its providers declared.
            Err(e @ trace_manager::ClientError::Refused { .. }) => {
                eprintln!("trace-cli: categories providers declared are not listed: {e}");
                return Vec::new();
            }
            Err(_) => return Vec::new(),
        };
        let reply = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            ctl.call(trace_common::controller::Request::GetKnownCategories, None),
        )
        .await;
        match reply {
            Ok(Ok(trace_common::controller::Reply::KnownCategories(list))) => list
                .into_iter()
                .map(|(name, _)| name)
                .filter(|n| !KERNEL_CATEGORIES.iter().any(|(k, _)| k == n))
                .collect(),
            _ => Vec::new(),
        }
    })
}

/// The known kernel category closest to `typed` (a mistyped name, with or
/// without its `kernel:` prefix), if one is close enough to be meant.
pub fn suggest(typed: &str) -> Option<&'static str> {
    let bare = |s: &str| -> String {
        s.trim_start_matches("kernel")
            .trim_start_matches([':', '-', '_', '.'])
            .to_ascii_lowercase()
    };
    let typed_bare = bare(typed);
    KERNEL_CATEGORIES
        .iter()
        .map(|(name, _)| {
            let d = strsim::levenshtein(&typed.to_ascii_lowercase(), name)
                .min(strsim::levenshtein(&typed_bare, &bare(name)));
            (d, *name)
        })
        .filter(|&(d, name)| d <= 2.max(bare(name).len() / 3))
        .min()
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_the_category_meant() {
        assert_eq!(suggest("kernel:shed"), Some("kernel:sched"));
        assert_eq!(suggest("kernal:sched"), Some("kernel:sched"));
        assert_eq!(suggest("kernel:syscalls"), Some("kernel:syscall"));
        assert_eq!(suggest("sched"), Some("kernel:sched"));
        assert_eq!(suggest("kernel-irq"), Some("kernel:irq"));
        assert_eq!(suggest("kernel:memory"), None);
        assert_eq!(suggest("net"), None);
        assert_eq!(suggest("app"), None);
    }
}
