//! Kernel lock waits: the `lock:contention_begin..lock:contention_end`
//! pair `kernel:lock` selects becomes `kernel:lock` slices named by the
//! kind of lock and what it is (`mutex cgroup_mutex`, `rwsem write
//! 0xffff…`): a kernel data symbol when the lock is a static one.

use std::sync::OnceLock;

use crate::kernel::tracepoints::Decoded;

/// The tracepoint pair `kernel:lock` adds to a recording's selection.
pub const LOCK_CONTENTION_PAIR: &str = "lock:contention_begin..lock:contention_end";

/// The kernel's data symbols (`/proc/kallsyms` types d, D, b, B), by
/// address; empty when it cannot be read or shows no addresses.
fn data_symbols() -> &'static [(u64, Box<str>)] {
    static SYMBOLS: OnceLock<Vec<(u64, Box<str>)>> = OnceLock::new();
    SYMBOLS.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let mut symbols: Vec<(u64, Box<str>)> = text
            .lines()
            .filter_map(|line| {
                let mut f = line.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                (addr != 0 && matches!(kind, "d" | "D" | "b" | "B")).then(|| (addr, name.into()))
            })
            .collect();
        symbols.sort_unstable();
        symbols
    })
}

/// The data symbol `addr` lies in (within 4 KiB of its start), as
/// `name` or `name+0xOFF`.
fn symbol_of(addr: u64, symbols: &[(u64, Box<str>)]) -> Option<String> {
    let i = symbols
        .partition_point(|(a, _)| *a <= addr)
        .checked_sub(1)?;
    let (start, name) = &symbols[i];
    match addr - start {
        0 => Some(name.to_string()),
        off if off < 4096 => Some(format!("{name}+{off:#x}")),
        _ => None,
    }
}

/// What kind of lock `flags` (the tracepoint's `LCB_F_*`, decoded as
/// `SPIN|READ` text or a number) says it is.
fn kind(flags: &str) -> &'static str {
    let has = |f: &str| flags.split('|').any(|p| p.trim() == f);
    if has("MUTEX") {
        "mutex"
    } else if has("RT") {
        "rtmutex"
    } else if has("PERCPU") {
        if has("WRITE") {
            "percpu-rwsem write"
        } else {
            "percpu-rwsem read"
        }
    } else if has("SPIN") {
        if has("READ") {
            "rwlock read"
        } else if has("WRITE") {
            "rwlock write"
        } else {
            "spinlock"
        }
    } else if has("READ") {
        "rwsem read"
    } else if has("WRITE") {
        "rwsem write"
    } else {
        "lock"
    }
}

/// The name of a lock wait whose entry's fields are `args`: its kind and
/// the lock's symbol or address.
pub(super) fn lock_wait_name(args: &[(String, Decoded)]) -> String {
    let field = |name: &str| args.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let flags = match field("flags") {
        Some(Decoded::Text(t)) => t.clone(),
        _ => String::new(),
    };
    let addr = match field("lock_addr") {
        Some(Decoded::Pointer(a) | Decoded::U64(a)) => Some(*a),
        _ => None,
    };
    let what = match addr {
        Some(a) => symbol_of(a, data_symbols()).unwrap_or_else(|| format!("{a:#x}")),
        None => "?".to_owned(),
    };
    format!("{} {what}", kind(&flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_are_named_by_kind_and_symbol() {
        assert_eq!(kind("MUTEX"), "mutex");
        assert_eq!(kind("SPIN"), "spinlock");
        assert_eq!(kind("SPIN|WRITE"), "rwlock write");
        assert_eq!(kind("WRITE"), "rwsem write");
        assert_eq!(kind("READ"), "rwsem read");
        assert_eq!(kind("PERCPU|WRITE"), "percpu-rwsem write");
        assert_eq!(kind(""), "lock");
        let symbols: Vec<(u64, Box<str>)> = vec![
            (0x1000, "cgroup_mutex".into()),
            (0x3000, "rtnl_mutex".into()),
        ];
        assert_eq!(symbol_of(0x1000, &symbols).as_deref(), Some("cgroup_mutex"));
        assert_eq!(
            symbol_of(0x1010, &symbols).as_deref(),
            Some("cgroup_mutex+0x10")
        );
        assert_eq!(symbol_of(0x2800, &symbols), None);
        assert_eq!(symbol_of(0x10, &symbols), None);
        let args = vec![
            (
                "lock_addr".to_owned(),
                Decoded::Pointer(0xffff_8881_0000_0000),
            ),
            ("flags".to_owned(), Decoded::Text("WRITE".into())),
        ];
        assert_eq!(lock_wait_name(&args), "rwsem write 0xffff888100000000");
    }
}
