//! System call names and arguments, for the `kernel:syscall` durations.
//!
//! Names come from the system call table of the architecture the recorder
//! runs on (the `syscalls` crate: x86-64 and arm64 numbering among others).
//! Argument names and types come from the running kernel's
//! `syscalls:sys_enter_<name>` tracepoint formats when tracefs has them
//! (kernels built with `CONFIG_FTRACE_SYSCALLS`): `write` gets `fd`, `buf`
//! and `count`, pointers are written as pointers and `int`s as signed 32-bit
//! values. Without them all six argument registers are written as `arg0` to
//! `arg5`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use trace_common::fxt::ArgValue;
use trace_common::kernel::SYSCALL_ARGS;

use crate::kernel::format::parse_format;
use crate::kernel::tracefs;

/// How an argument register is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// An address.
    Pointer,
    /// A signed 32-bit integer (`int`, `pid_t`, ...).
    I32,
    /// A signed 64-bit integer (`long`, `loff_t`, ...).
    I64,
    /// An unsigned 32-bit integer (`unsigned int`, `uid_t`, ...).
    U32,
    /// An unsigned 64-bit integer (`size_t`, `unsigned long`, anything else).
    U64,
}

impl ArgKind {
    /// The kind of an argument declared with C type `c_type`.
    pub fn of_c_type(c_type: &str) -> ArgKind {
        if c_type.contains('*') {
            return ArgKind::Pointer;
        }
        let t = c_type
            .trim()
            .trim_start_matches("const ")
            .trim_start_matches("__user ")
            .trim();
        match t {
            "int" | "signed int" | "pid_t" | "clockid_t" | "key_t" | "timer_t" | "mqd_t"
            | "rwf_t" | "s32" | "__s32" | "int32_t" | "key_serial_t" => ArgKind::I32,
            "long" | "long int" | "signed long" | "long long" | "loff_t" | "off_t" | "ssize_t"
            | "time_t" | "s64" | "__s64" | "int64_t" => ArgKind::I64,
            "unsigned int" | "unsigned" | "u32" | "__u32" | "uint32_t" | "uid_t" | "gid_t"
            | "old_uid_t" | "old_gid_t" | "qid_t" | "umode_t" | "mode_t" | "unsigned short"
            | "u16" | "unsigned char" | "u8" => ArgKind::U32,
            _ => ArgKind::U64,
        }
    }

    /// The FXT value of register contents `raw` read as this kind.
    pub fn value(self, raw: u64) -> ArgValue<'static> {
        match self {
            ArgKind::Pointer => ArgValue::Pointer(raw),
            ArgKind::I32 => ArgValue::Int32(raw as u32 as i32),
            ArgKind::I64 => ArgValue::Int64(raw as i64),
            ArgKind::U32 => ArgValue::Uint32(raw as u32),
            ArgKind::U64 => ArgValue::Uint64(raw),
        }
    }
}

/// One argument of a system call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    /// Its name in the kernel's declaration (`fd`, `buf`), or `argN`.
    pub name: String,
    /// How it is written.
    pub kind: ArgKind,
}

/// Whether system call `nr` makes a task (`clone`, `clone3`, `fork`,
/// `vfork`): the new task returns from it, 0, without having entered it.
pub fn creates_task(nr: i64) -> bool {
    usize::try_from(nr)
        .ok()
        .and_then(syscalls::Sysno::new)
        .is_some_and(|s| matches!(s.name(), "clone" | "clone3" | "fork" | "vfork"))
}

/// Whether system call `nr` ends its task (`exit`, `exit_group`): it never
/// returns.
pub(crate) fn ends_task(nr: i64) -> bool {
    usize::try_from(nr)
        .ok()
        .and_then(syscalls::Sysno::new)
        .is_some_and(|s| matches!(s.name(), "exit" | "exit_group"))
}

/// What the trace says about one system call number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallInfo {
    /// Its name (`write`), or `syscall_<nr>` for a number the table lacks.
    pub name: String,
    /// Its arguments, in register order.
    pub args: Vec<ArgSpec>,
}

/// The system call table, filled in as numbers are seen.
pub struct SyscallTable {
    /// tracefs, for the per-call argument formats; `None` when unavailable.
    tracefs: Option<PathBuf>,
    known: HashMap<i64, Rc<SyscallInfo>>,
}

impl SyscallTable {
    /// A table reading argument formats from the mounted tracefs, if any.
    pub fn new() -> Self {
        SyscallTable {
            tracefs: tracefs::mounted_root(),
            known: HashMap::new(),
        }
    }

    /// A table that names arguments `arg0`..`arg5` (no tracefs).
    pub fn without_formats() -> Self {
        SyscallTable {
            tracefs: None,
            known: HashMap::new(),
        }
    }

    /// Name and arguments of system call `nr`.
    pub fn get(&mut self, nr: i64) -> Rc<SyscallInfo> {
        if let Some(info) = self.known.get(&nr) {
            return info.clone();
        }
        let info = Rc::new(self.describe(nr));
        self.known.insert(nr, info.clone());
        info
    }

    fn describe(&self, nr: i64) -> SyscallInfo {
        let name = usize::try_from(nr)
            .ok()
            .and_then(syscalls::Sysno::new)
            .map(|s| s.name().to_owned());
        let args = name
            .as_deref()
            .and_then(|n| self.formatted_args(n))
            .unwrap_or_else(raw_args);
        SyscallInfo {
            name: name.unwrap_or_else(|| format!("syscall_{nr}")),
            args,
        }
    }

    /// The arguments the tracepoint `syscalls:sys_enter_<name>` declares.
    fn formatted_args(&self, name: &str) -> Option<Vec<ArgSpec>> {
        let root = self.tracefs.as_ref()?;
        let path = tracefs::format_path(root, "syscalls", &format!("sys_enter_{name}"));
        let text = std::fs::read_to_string(path).ok()?;
        let format = parse_format(&text).ok()?;
        let args: Vec<ArgSpec> = format
            .fields
            .iter()
            .filter(|f| !f.name.starts_with("common_") && f.name != "__syscall_nr")
            .take(SYSCALL_ARGS)
            .map(|f| ArgSpec {
                name: f.name.clone(),
                kind: ArgKind::of_c_type(&f.c_type),
            })
            .collect();
        Some(args)
    }
}

impl Default for SyscallTable {
    fn default() -> Self {
        Self::new()
    }
}

/// All six registers, as unsigned integers named `arg0`..`arg5`.
fn raw_args() -> Vec<ArgSpec> {
    (0..SYSCALL_ARGS)
        .map(|i| ArgSpec {
            name: format!("arg{i}"),
            kind: ArgKind::U64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_c_library() {
        let mut t = SyscallTable::without_formats();
        for (nr, name) in [
            (libc::SYS_getpid, "getpid"),
            (libc::SYS_write, "write"),
            (libc::SYS_openat, "openat"),
            (libc::SYS_nanosleep, "nanosleep"),
            (libc::SYS_clock_nanosleep, "clock_nanosleep"),
            (libc::SYS_exit_group, "exit_group"),
        ] {
            assert_eq!(t.get(nr).name, name);
        }
        assert_eq!(t.get(100_000).name, "syscall_100000");
        assert_eq!(t.get(-1).name, "syscall_-1");
        assert_eq!(t.get(libc::SYS_getpid).args.len(), SYSCALL_ARGS);
    }

    #[test]
    fn both_tables_are_there() {
        assert_eq!(syscalls::x86_64::Sysno::new(39).unwrap().name(), "getpid");
        assert_eq!(syscalls::aarch64::Sysno::new(172).unwrap().name(), "getpid");
        assert_eq!(syscalls::aarch64::Sysno::new(64).unwrap().name(), "write");
    }

    #[test]
    fn c_types_map_to_kinds() {
        assert_eq!(ArgKind::of_c_type("const char *"), ArgKind::Pointer);
        assert_eq!(ArgKind::of_c_type("struct stat __user *"), ArgKind::Pointer);
        assert_eq!(ArgKind::of_c_type("int"), ArgKind::I32);
        assert_eq!(ArgKind::of_c_type("unsigned int"), ArgKind::U32);
        assert_eq!(ArgKind::of_c_type("size_t"), ArgKind::U64);
        assert_eq!(ArgKind::of_c_type("loff_t"), ArgKind::I64);
        assert_eq!(ArgKind::I32.value(0xffff_ff9c), ArgValue::Int32(-100));
        assert_eq!(ArgKind::I32.value(u64::MAX - 99), ArgValue::Int32(-100));
    }

    #[test]
    fn formats_name_the_arguments_when_tracefs_has_them() {
        let mut t = SyscallTable::new();
        if t.tracefs.is_none() {
            eprintln!("tracefs is not mounted here; skipped");
            return;
        }
        let root = t.tracefs.clone().unwrap();
        if !tracefs::format_path(&root, "syscalls", "sys_enter_write").exists() {
            eprintln!("this kernel has no syscalls:* tracepoints; skipped");
            return;
        }
        let write = t.get(libc::SYS_write);
        let names: Vec<_> = write.args.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["fd", "buf", "count"]);
        assert_eq!(write.args[1].kind, ArgKind::Pointer);
        assert!(t.get(libc::SYS_getpid).args.is_empty());
    }
}
