//! Tracefs event format files, and the [`KernelLayout`] built from them.
//!
//! A format file (`events/<group>/<name>/format`) lists every field of a
//! tracepoint's raw record with its C declaration, offset, size and
//! signedness, for the running kernel. The eBPF programs read fields at the
//! offsets found here, so no kernel's layout is compiled in.

use std::fmt;

use trace_common::kernel::{
    BlockRqLayout, FieldLoc, IrqHandlerEntryLayout, IrqHandlerExitLayout, KernelLayout,
    MAX_RECORD_BYTES, PageFaultLayout, PowerLayout, ProcessExecLayout, ProcessExitLayout,
    RssStatLayout, SYSCALL_ARGS, SchedSwitchLayout, SchedWakeupLayout, SignalDeliverLayout,
    SignalGenerateLayout, SoftirqLayout, SysEnterLayout, SysExitLayout, TaskNewtaskLayout,
    TaskRenameLayout, TracepointSpec,
};

/// One field line of a format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatField {
    /// Field name, e.g. `prev_comm`.
    pub name: String,
    /// The C type without the name, e.g. `char[16]`, `pid_t`,
    /// `__data_loc char[]`.
    pub c_type: String,
    /// Array length when the declaration is `name[N]` (`Some(0)` for
    /// `name[]`); `None` otherwise (a `__data_loc char[] name` included).
    pub array_len: Option<u32>,
    /// Byte offset in the record.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// Whether the type is signed.
    pub signed: bool,
}

impl FormatField {
    /// Whether the field is a `__data_loc` (offset/length word) string.
    pub fn is_data_loc(&self) -> bool {
        self.c_type.starts_with("__data_loc")
    }

    /// Whether the field is a `__rel_loc` (relative offset/length word) string.
    pub fn is_rel_loc(&self) -> bool {
        self.c_type.starts_with("__rel_loc")
    }

    /// Whether the field is a plain scalar: no array, no location word.
    pub fn is_scalar(&self) -> bool {
        self.array_len.is_none() && !self.c_type.contains('[')
    }
}

/// A parsed format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    /// The `name:` line.
    pub name: String,
    /// The `ID:` line (the tracepoint id), when present.
    pub id: Option<u32>,
    /// Every field, the `common_*` ones included, in file order.
    pub fields: Vec<FormatField>,
    /// The `print fmt:` line's text after the colon (empty when absent):
    /// how the kernel prints the event, with the names of symbolic and
    /// flag values.
    pub print_fmt: String,
}

impl EventFormat {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FormatField> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Why a format file could not be understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for FormatError {}

/// Parses the text of a tracefs format file.
pub fn parse_format(text: &str) -> Result<EventFormat, FormatError> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    let mut print_fmt = String::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let err = |reason: String| FormatError {
            line: i + 1,
            reason,
        };
        if let Some(rest) = line.strip_prefix("name:") {
            name = Some(rest.trim().to_owned());
        } else if let Some(rest) = line.strip_prefix("ID:") {
            id = Some(
                rest.trim()
                    .parse()
                    .map_err(|_| err(format!("bad ID {:?}", rest.trim())))?,
            );
        } else if line.starts_with("field:") {
            fields.push(parse_field_line(line).map_err(err)?);
        } else if let Some(rest) = line.strip_prefix("print fmt:") {
            print_fmt = rest.trim().to_owned();
            break;
        }
    }
    let name = name.ok_or(FormatError {
        line: 0,
        reason: "no `name:` line".into(),
    })?;
    Ok(EventFormat {
        name,
        id,
        fields,
        print_fmt,
    })
}

/// Parses `field:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;`.
fn parse_field_line(line: &str) -> Result<FormatField, String> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = None;
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once(':')
            .ok_or_else(|| format!("no `key:value` in {part:?}"))?;
        let number = || {
            value
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("bad {key} {value:?}"))
        };
        match key.trim() {
            "field" => decl = Some(value.trim()),
            "offset" => offset = Some(number()?),
            "size" => size = Some(number()?),
            "signed" => signed = Some(number()? != 0),
            _ => {} // Unknown attributes are ignored.
        }
    }
    let decl = decl.ok_or("no field declaration")?;
    let (c_type, name, array_len) = split_declaration(decl)?;
    Ok(FormatField {
        name,
        c_type,
        array_len,
        offset: offset.ok_or("no offset")?,
        size: size.ok_or("no size")?,
        signed: signed.unwrap_or(false),
    })
}

/// Splits `char prev_comm[16]` into (`char[16]`, `prev_comm`, `Some(16)`),
/// `__data_loc char[] child_comm` into (`__data_loc char[]`, `child_comm`,
/// `None`) and `pid_t pid` into (`pid_t`, `pid`, `None`).
fn split_declaration(decl: &str) -> Result<(String, String, Option<u32>), String> {
    let (ty, last) = decl
        .rsplit_once(char::is_whitespace)
        .ok_or_else(|| format!("no type in declaration {decl:?}"))?;
    let ty = ty.trim();
    let (name, array_len) = match last.split_once('[') {
        Some((name, dims)) => {
            let n = dims.trim_end_matches(']');
            let len = if n.is_empty() {
                0
            } else {
                n.parse()
                    .map_err(|_| format!("bad array length in {decl:?}"))?
            };
            (name, Some(len))
        }
        None => (last, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("bad field name in {decl:?}"));
    }
    let c_type = match array_len {
        Some(0) => format!("{ty}[]"),
        Some(n) => format!("{ty}[{n}]"),
        None => ty.to_owned(),
    };
    Ok((c_type, name.to_owned(), array_len))
}

/// What a program expects a field to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// An integer of 1, 2, 4 or 8 bytes.
    Int,
    /// A string: an inline `char[N]`, a `__data_loc` or a `__rel_loc`.
    Str,
    /// An array of at most [`SYSCALL_ARGS`] 8-byte integers, 8-aligned
    /// (`unsigned long args[6]`).
    Words,
}

/// Where `name` is in `format`, if it exists there with the expected shape
/// (and, for an integer or location word, at an offset that is a multiple of
/// its size); absent otherwise (a field of another shape is logged and
/// treated as absent, so a program never misreads it).
pub fn locate(format: &EventFormat, name: &str, want: Want) -> FieldLoc {
    let Some(field) = format.field(name) else {
        log::debug!(
            "tracepoint {}: no field `{name}` on this kernel",
            format.name
        );
        return FieldLoc::ABSENT;
    };
    let (Ok(offset), Ok(size)) = (u16::try_from(field.offset), u16::try_from(field.size)) else {
        log::warn!("tracepoint {}: field `{name}` out of range", format.name);
        return FieldLoc::ABSENT;
    };
    let loc = |flags| FieldLoc {
        offset,
        size,
        flags: FieldLoc::PRESENT | flags,
    };
    // The programs read integers and location words with aligned loads, so
    // they must sit at a multiple of their size, as C lays them out.
    let aligned = offset % size.max(1) == 0;
    let ok = match want {
        Want::Int if field.is_scalar() && matches!(size, 1 | 2 | 4 | 8) && aligned => {
            Some(loc(if field.signed { FieldLoc::SIGNED } else { 0 }))
        }
        Want::Str if field.is_data_loc() && size == 4 && aligned => Some(loc(FieldLoc::DATA_LOC)),
        Want::Str if field.is_rel_loc() && size == 4 && aligned => Some(loc(FieldLoc::REL_LOC)),
        Want::Str if field.array_len.is_some_and(|n| n > 0) && field.c_type.contains("char") => {
            Some(loc(0))
        }
        Want::Words
            if field.array_len.is_some_and(|n| n > 0)
                && !field.c_type.contains("char")
                && offset % 8 == 0
                && size % 8 == 0
                && (8..=8 * SYSCALL_ARGS as u16).contains(&size) =>
        {
            Some(loc(0))
        }
        _ => None,
    };
    ok.unwrap_or_else(|| {
        log::warn!(
            "tracepoint {}: field `{name}` is `{}` ({} bytes at offset {}), not the {want:?} \
             expected; ignored",
            format.name,
            field.c_type,
            field.size,
            field.offset
        );
        FieldLoc::ABSENT
    })
}

/// Fills the part of `layout` for the tracepoint `spec` from its format.
///
/// Returns `false` for a tracepoint this crate has no layout for.
pub fn fill_layout(layout: &mut KernelLayout, spec: &TracepointSpec, f: &EventFormat) -> bool {
    use Want::{Int, Str, Words};
    let wakeup = |f| {
        let mut l = SchedWakeupLayout {
            record_size: 0,
            comm: locate(f, "comm", Str),
            pid: locate(f, "pid", Int),
            prio: locate(f, "prio", Int),
            target_cpu: locate(f, "target_cpu", Int),
        };
        l.record_size = seal(
            f,
            &mut [&mut l.comm, &mut l.pid, &mut l.prio, &mut l.target_cpu],
        );
        l
    };
    match (spec.group, spec.event) {
        ("sched", "sched_switch") => {
            let mut l = SchedSwitchLayout {
                record_size: 0,
                prev_comm: locate(f, "prev_comm", Str),
                prev_pid: locate(f, "prev_pid", Int),
                prev_prio: locate(f, "prev_prio", Int),
                prev_state: locate(f, "prev_state", Int),
                next_comm: locate(f, "next_comm", Str),
                next_pid: locate(f, "next_pid", Int),
                next_prio: locate(f, "next_prio", Int),
            };
            l.record_size = seal(
                f,
                &mut [
                    &mut l.prev_comm,
                    &mut l.prev_pid,
                    &mut l.prev_prio,
                    &mut l.prev_state,
                    &mut l.next_comm,
                    &mut l.next_pid,
                    &mut l.next_prio,
                ],
            );
            layout.sched_switch = l;
        }
        // `sched_waking` (kernel:offcpu) is of `sched_wakeup`'s event class:
        // one layout serves both.
        ("sched", "sched_wakeup") | ("sched", "sched_waking") => layout.sched_wakeup = wakeup(f),
        ("sched", "sched_wakeup_new") => layout.sched_wakeup_new = wakeup(f),
        ("task", "task_newtask") => {
            let mut l = TaskNewtaskLayout {
                record_size: 0,
                pid: locate(f, "pid", Int),
                comm: locate(f, "comm", Str),
                clone_flags: locate(f, "clone_flags", Int),
            };
            l.record_size = seal(f, &mut [&mut l.pid, &mut l.comm, &mut l.clone_flags]);
            layout.task_newtask = l;
        }
        ("sched", "sched_process_exec") => {
            let mut l = ProcessExecLayout {
                record_size: 0,
                filename: locate(f, "filename", Str),
                pid: locate(f, "pid", Int),
                old_pid: locate(f, "old_pid", Int),
            };
            l.record_size = seal(f, &mut [&mut l.filename, &mut l.pid, &mut l.old_pid]);
            layout.process_exec = l;
        }
        ("sched", "sched_process_exit") => {
            let mut l = ProcessExitLayout {
                record_size: 0,
                comm: locate(f, "comm", Str),
                pid: locate(f, "pid", Int),
                prio: locate(f, "prio", Int),
                group_dead: locate(f, "group_dead", Int),
            };
            l.record_size = seal(
                f,
                &mut [&mut l.comm, &mut l.pid, &mut l.prio, &mut l.group_dead],
            );
            layout.process_exit = l;
        }
        ("raw_syscalls", "sys_enter") => {
            let mut l = SysEnterLayout {
                record_size: 0,
                id: locate(f, "id", Int),
                args: locate(f, "args", Words),
            };
            l.record_size = seal(f, &mut [&mut l.id, &mut l.args]);
            layout.sys_enter = l;
        }
        ("raw_syscalls", "sys_exit") => {
            let mut l = SysExitLayout {
                record_size: 0,
                id: locate(f, "id", Int),
                ret: locate(f, "ret", Int),
            };
            l.record_size = seal(f, &mut [&mut l.id, &mut l.ret]);
            layout.sys_exit = l;
        }
        ("irq", "irq_handler_entry") => {
            let mut l = IrqHandlerEntryLayout {
                record_size: 0,
                irq: locate(f, "irq", Int),
                name: locate(f, "name", Str),
            };
            l.record_size = seal(f, &mut [&mut l.irq, &mut l.name]);
            layout.irq_handler_entry = l;
        }
        ("irq", "irq_handler_exit") => {
            let mut l = IrqHandlerExitLayout {
                record_size: 0,
                irq: locate(f, "irq", Int),
                ret: locate(f, "ret", Int),
            };
            l.record_size = seal(f, &mut [&mut l.irq, &mut l.ret]);
            layout.irq_handler_exit = l;
        }
        ("signal", "signal_generate") => {
            let mut l = SignalGenerateLayout {
                record_size: 0,
                sig: locate(f, "sig", Int),
                pid: locate(f, "pid", Int),
                group: locate(f, "group", Int),
                result: locate(f, "result", Int),
            };
            l.record_size = seal(
                f,
                &mut [&mut l.sig, &mut l.pid, &mut l.group, &mut l.result],
            );
            layout.signal_generate = l;
        }
        ("signal", "signal_deliver") => {
            let mut l = SignalDeliverLayout {
                record_size: 0,
                sig: locate(f, "sig", Int),
                sa_handler: locate(f, "sa_handler", Int),
            };
            l.record_size = seal(f, &mut [&mut l.sig, &mut l.sa_handler]);
            layout.signal_deliver = l;
        }
        ("irq", event @ ("softirq_entry" | "softirq_exit")) => {
            let mut l = SoftirqLayout {
                record_size: 0,
                vec: locate(f, "vec", Int),
            };
            l.record_size = seal(f, &mut [&mut l.vec]);
            if event == "softirq_entry" {
                layout.softirq_entry = l;
            } else {
                layout.softirq_exit = l;
            }
        }
        ("block", event @ ("block_rq_issue" | "block_rq_complete" | "block_rq_requeue")) => {
            let issue = event == "block_rq_issue";
            let mut l = BlockRqLayout {
                record_size: 0,
                dev: locate(f, "dev", Int),
                sector: locate(f, "sector", Int),
                nr_sector: locate(f, "nr_sector", Int),
                bytes_or_error: locate(f, if issue { "bytes" } else { "error" }, Int),
                rwbs: locate(f, "rwbs", Str),
            };
            l.record_size = seal(
                f,
                &mut [
                    &mut l.dev,
                    &mut l.sector,
                    &mut l.nr_sector,
                    &mut l.bytes_or_error,
                    &mut l.rwbs,
                ],
            );
            match event {
                "block_rq_issue" => layout.block_rq_issue = l,
                "block_rq_complete" => layout.block_rq_complete = l,
                _ => layout.block_rq_requeue = l,
            }
        }
        ("exceptions", "page_fault_user") => {
            let mut l = PageFaultLayout {
                record_size: 0,
                address: locate(f, "address", Int),
                ip: locate(f, "ip", Int),
                error_code: locate(f, "error_code", Int),
            };
            l.record_size = seal(f, &mut [&mut l.address, &mut l.ip, &mut l.error_code]);
            layout.page_fault_user = l;
        }
        ("power", event @ ("cpu_idle" | "cpu_frequency")) => {
            let mut l = PowerLayout {
                record_size: 0,
                state: locate(f, "state", Int),
                cpu_id: locate(f, "cpu_id", Int),
            };
            l.record_size = seal(f, &mut [&mut l.state, &mut l.cpu_id]);
            if event == "cpu_idle" {
                layout.cpu_idle = l;
            } else {
                layout.cpu_frequency = l;
            }
        }
        ("kmem", "rss_stat") => {
            let mut l = RssStatLayout {
                record_size: 0,
                mm_id: locate(f, "mm_id", Int),
                curr: locate(f, "curr", Int),
                member: locate(f, "member", Int),
                size: locate(f, "size", Int),
            };
            l.record_size = seal(
                f,
                &mut [&mut l.mm_id, &mut l.curr, &mut l.member, &mut l.size],
            );
            layout.rss_stat = l;
        }
        ("task", "task_rename") => {
            let mut l = TaskRenameLayout {
                record_size: 0,
                pid: locate(f, "pid", Int),
                oldcomm: locate(f, "oldcomm", Str),
                newcomm: locate(f, "newcomm", Str),
            };
            l.record_size = seal(f, &mut [&mut l.pid, &mut l.oldcomm, &mut l.newcomm]);
            layout.task_rename = l;
        }
        _ => return false,
    }
    true
}

/// The number of record bytes a program must copy to read `fields`: the end
/// of the last present one. A field ending beyond [`MAX_RECORD_BYTES`] is
/// made absent (logged), as the programs copy no more.
fn seal(format: &EventFormat, fields: &mut [&mut FieldLoc]) -> u16 {
    let mut end = 0u16;
    for field in fields.iter_mut() {
        if !field.is_present() {
            continue;
        }
        let field_end = u32::from(field.offset) + u32::from(field.size);
        match u16::try_from(field_end) {
            Ok(e) if e <= MAX_RECORD_BYTES => end = end.max(e),
            _ => {
                log::warn!(
                    "tracepoint {}: a field at offset {} ends beyond the {MAX_RECORD_BYTES} \
                     bytes copied; ignored",
                    format.name,
                    field.offset
                );
                **field = FieldLoc::ABSENT;
            }
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::kernel::TRACEPOINTS;

    /// Captured from this project's development kernel (6.18).
    const SCHED_SWITCH: &str = include_str!("testdata/sched_switch.format");
    /// Captured from this project's development kernel (6.18), where the
    /// names are `__data_loc` strings.
    const SCHED_PROCESS_FORK: &str = include_str!("testdata/sched_process_fork.format");
    /// The same tracepoint as older kernels (before 6.x) describe it.
    const SCHED_PROCESS_FORK_OLD: &str = include_str!("testdata/sched_process_fork_old.format");
    /// Captured from this project's development kernel (6.18).
    const SYS_ENTER: &str = include_str!("testdata/sys_enter.format");
    /// Captured from this project's development kernel (6.18).
    const SYS_EXIT: &str = include_str!("testdata/sys_exit.format");
    /// Captured from this project's development kernel (6.18).
    const IRQ_HANDLER_ENTRY: &str = include_str!("testdata/irq_handler_entry.format");
    /// Captured from this project's development kernel (6.18).
    const IRQ_HANDLER_EXIT: &str = include_str!("testdata/irq_handler_exit.format");
    /// Captured from this project's development kernel (6.18).
    const SOFTIRQ_ENTRY: &str = include_str!("testdata/softirq_entry.format");

    fn spec(event: &str) -> &'static TracepointSpec {
        TRACEPOINTS.iter().find(|t| t.event == event).unwrap()
    }

    fn int(offset: u16, size: u16, signed: bool) -> FieldLoc {
        FieldLoc {
            offset,
            size,
            flags: FieldLoc::PRESENT | if signed { FieldLoc::SIGNED } else { 0 },
        }
    }

    fn inline_str(offset: u16, size: u16) -> FieldLoc {
        FieldLoc {
            offset,
            size,
            flags: FieldLoc::PRESENT,
        }
    }

    #[test]
    fn parses_sched_switch() {
        let f = parse_format(SCHED_SWITCH).unwrap();
        assert_eq!(f.name, "sched_switch");
        assert_eq!(f.id, Some(372));
        assert_eq!(f.fields.len(), 11);
        assert_eq!(
            f.field("prev_comm").unwrap(),
            &FormatField {
                name: "prev_comm".into(),
                c_type: "char[16]".into(),
                array_len: Some(16),
                offset: 8,
                size: 16,
                signed: false,
            }
        );
        assert_eq!(f.field("common_type").unwrap().c_type, "unsigned short");
        assert_eq!(f.field("prev_state").unwrap().c_type, "long");

        let mut layout = KernelLayout::default();
        assert!(fill_layout(&mut layout, spec("sched_switch"), &f));
        assert_eq!(
            layout.sched_switch,
            SchedSwitchLayout {
                record_size: 64,
                prev_comm: inline_str(8, 16),
                prev_pid: int(24, 4, true),
                prev_prio: int(28, 4, true),
                prev_state: int(32, 8, true),
                next_comm: inline_str(40, 16),
                next_pid: int(56, 4, true),
                next_prio: int(60, 4, true),
            }
        );
    }

    #[test]
    fn parses_data_loc_fork() {
        let f = parse_format(SCHED_PROCESS_FORK).unwrap();
        let child = f.field("child_comm").unwrap();
        assert!(child.is_data_loc());
        assert_eq!(child.c_type, "__data_loc char[]");
        assert_eq!(child.array_len, None);
        assert!(!child.is_scalar());
        assert_eq!(locate(&f, "parent_pid", Want::Int), int(12, 4, true));
        assert_eq!(locate(&f, "child_pid", Want::Int), int(20, 4, true));
        assert_eq!(
            locate(&f, "child_comm", Want::Str),
            FieldLoc {
                offset: 16,
                size: 4,
                flags: FieldLoc::PRESENT | FieldLoc::DATA_LOC,
            }
        );
    }

    #[test]
    fn parses_inline_fork_of_older_kernels() {
        let f = parse_format(SCHED_PROCESS_FORK_OLD).unwrap();
        assert_eq!(locate(&f, "parent_pid", Want::Int), int(24, 4, true));
        assert_eq!(locate(&f, "child_pid", Want::Int), int(44, 4, true));
        assert_eq!(locate(&f, "child_comm", Want::Str), inline_str(28, 16));
    }

    #[test]
    fn missing_and_misshapen_fields_are_absent() {
        // An exit tracepoint without `group_dead` (kernels before 6.9) and
        // with `prio` declared as a string: both absent, the rest present.
        let text = "name: sched_process_exit\nID: 9\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
            \tfield:char prio[4];\toffset:28;\tsize:4;\tsigned:0;\n\n\
            print fmt: \"comm=%s pid=%d\", REC->comm, REC->pid\n";
        let f = parse_format(text).unwrap();
        let mut layout = KernelLayout::default();
        assert!(fill_layout(&mut layout, spec("sched_process_exit"), &f));
        let l = layout.process_exit;
        assert_eq!(l.comm, inline_str(8, 16));
        assert_eq!(l.pid, int(24, 4, true));
        assert_eq!(l.prio, FieldLoc::ABSENT);
        assert_eq!(l.group_dead, FieldLoc::ABSENT);
        assert!(!l.group_dead.is_present());
        assert_eq!(l.record_size, 28);
    }

    #[test]
    fn fields_beyond_the_copied_bytes_are_absent() {
        let text = "name: task_rename\nformat:\n\
            \tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n\
            \tfield:char oldcomm[16];\toffset:240;\tsize:16;\tsigned:0;\n\
            \tfield:char newcomm[16];\toffset:256;\tsize:16;\tsigned:0;\n";
        let f = parse_format(text).unwrap();
        let mut layout = KernelLayout::default();
        assert!(fill_layout(&mut layout, spec("task_rename"), &f));
        let l = layout.task_rename;
        assert_eq!(l.oldcomm, inline_str(240, 16));
        assert_eq!(l.newcomm, FieldLoc::ABSENT);
        assert_eq!(l.record_size, 256);
    }

    #[test]
    fn raw_syscalls_layouts() {
        let mut layout = KernelLayout::default();
        let enter = parse_format(SYS_ENTER).unwrap();
        assert!(fill_layout(&mut layout, spec("sys_enter"), &enter));
        assert_eq!(
            layout.sys_enter,
            SysEnterLayout {
                record_size: 64,
                id: int(8, 8, true),
                args: FieldLoc {
                    offset: 16,
                    size: 48,
                    flags: FieldLoc::PRESENT
                },
            }
        );
        let exit = parse_format(SYS_EXIT).unwrap();
        assert!(fill_layout(&mut layout, spec("sys_exit"), &exit));
        assert_eq!(
            layout.sys_exit,
            SysExitLayout {
                record_size: 24,
                id: int(8, 8, true),
                ret: int(16, 8, true),
            }
        );
        // An argument array the programs cannot read whole words of is
        // absent, not misread.
        let odd = "name: sys_enter\nformat:\n\
            \tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
            \tfield:unsigned int args[6];\toffset:20;\tsize:24;\tsigned:0;\n";
        let f = parse_format(odd).unwrap();
        assert_eq!(locate(&f, "args", Want::Words), FieldLoc::ABSENT);
    }

    #[test]
    fn irq_layouts() {
        let mut layout = KernelLayout::default();
        let f = parse_format(IRQ_HANDLER_ENTRY).unwrap();
        assert!(fill_layout(&mut layout, spec("irq_handler_entry"), &f));
        assert_eq!(
            layout.irq_handler_entry,
            IrqHandlerEntryLayout {
                record_size: 16,
                irq: int(8, 4, true),
                name: FieldLoc {
                    offset: 12,
                    size: 4,
                    flags: FieldLoc::PRESENT | FieldLoc::DATA_LOC
                },
            }
        );
        let f = parse_format(IRQ_HANDLER_EXIT).unwrap();
        assert!(fill_layout(&mut layout, spec("irq_handler_exit"), &f));
        assert_eq!(
            layout.irq_handler_exit,
            IrqHandlerExitLayout {
                record_size: 16,
                irq: int(8, 4, true),
                ret: int(12, 4, true),
            }
        );
        let f = parse_format(SOFTIRQ_ENTRY).unwrap();
        assert!(fill_layout(&mut layout, spec("softirq_exit"), &f));
        assert_eq!(
            layout.softirq_exit,
            SoftirqLayout {
                record_size: 12,
                vec: int(8, 4, false),
            }
        );
        assert_eq!(layout.softirq_entry, SoftirqLayout::default());
    }

    #[test]
    fn every_tracepoint_has_a_layout() {
        let f = parse_format("name: x\n").unwrap();
        for spec in TRACEPOINTS {
            assert!(
                fill_layout(&mut KernelLayout::default(), spec, &f),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn rel_loc_strings() {
        let text = "name: x\nformat:\n\tfield:__rel_loc char[] s;\toffset:8;\tsize:4;\tsigned:0;\n";
        let f = parse_format(text).unwrap();
        assert_eq!(
            locate(&f, "s", Want::Str),
            FieldLoc {
                offset: 8,
                size: 4,
                flags: FieldLoc::PRESENT | FieldLoc::REL_LOC
            }
        );
        assert_eq!(locate(&f, "s", Want::Int), FieldLoc::ABSENT);
    }

    #[test]
    fn misaligned_integers_are_absent() {
        let text = "name: x\nformat:\n\tfield:int a;\toffset:6;\tsize:4;\tsigned:1;\n\
                    \tfield:short b;\toffset:6;\tsize:2;\tsigned:1;\n";
        let f = parse_format(text).unwrap();
        assert_eq!(locate(&f, "a", Want::Int), FieldLoc::ABSENT);
        assert_eq!(locate(&f, "b", Want::Int), int(6, 2, true));
    }

    #[test]
    fn rejects_broken_files() {
        assert!(parse_format("").is_err());
        assert!(parse_format("name: x\n\tfield:int a;\toffset:zz;\tsize:4;\n").is_err());
        assert!(parse_format("name: x\n\tfield:int;\toffset:0;\tsize:4;\n").is_err());
        assert!(parse_format("name: x\n\tfield:int a[x];\toffset:0;\tsize:4;\n").is_err());
        assert!(parse_format("name: x\n\tfield:int a;\tsize:4;\n").is_err());
    }
}
