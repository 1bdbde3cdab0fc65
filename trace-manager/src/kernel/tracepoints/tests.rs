use trace_common::kernel::tracepoint::{FLAG_SIGNED, OP_LT, TracepointRecord};

use super::field::FieldKind;
use super::testing::{FakeTracefs, event};
use super::*;

fn specs(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| (*x).to_owned()).collect()
}

#[test]
fn globs_and_lists_select_each_event_once() {
    let fs = FakeTracefs::new("globs");
    let sel = select(
        &fs.0,
        &specs(&["sched:*", "irq:softirq_*,sched:sched_switch"]),
    )
    .unwrap();
    let mut names: Vec<String> = sel.tracepoints.iter().map(Tracepoint::name).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "irq:softirq_entry",
            "irq:softirq_exit",
            "sched:sched_migrate_task",
            "sched:sched_switch"
        ]
    );
    assert!(sel.tracepoints.iter().all(|t| t.role == Role::Instant));
    assert!(sel.get(sel.tracepoints[0].id).is_some());
    let sel = select(&fs.0, &specs(&["*:softirq_e?it"])).unwrap();
    assert_eq!(sel.tracepoints.len(), 1);
}

#[test]
fn unknown_events_suggest_what_was_meant() {
    let fs = FakeTracefs::new("unknown");
    let e = select(&fs.0, &specs(&["sched:sched_swich"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean sched:sched_switch?"), "{e}");
    let e = select(&fs.0, &specs(&["sched:softirq_entry"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean irq:softirq_entry?"), "{e}");
    let e = select(&fs.0, &specs(&["nothing:here*"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no tracepoint nothing:here*"), "{e}");
    let e = select(&fs.0, &specs(&["sched_switch"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("GROUP:EVENT") && e.contains("sched:sched_switch"),
        "{e}"
    );
}

#[test]
fn pairs_become_durations_named_by_their_common_words() {
    let fs = FakeTracefs::new("pairs");
    let sel = select(
        &fs.0,
        &specs(&[
            "irq:softirq_entry..irq:softirq_exit",
            "syscalls:sys_enter_openat..syscalls:sys_exit_openat",
        ]),
    )
    .unwrap();
    assert_eq!(sel.pairs[0].name, "softirq");
    assert_eq!(sel.pairs[1].name, "sys_openat");
    let entry = sel.get(sel.pairs[0].entry).unwrap();
    assert_eq!(entry.role, Role::Entry(0));
    assert_eq!(sel.get(sel.pairs[1].exit).unwrap().role, Role::Exit(1));
    let e = select(
        &fs.0,
        &specs(&["irq:softirq_entry", "irq:softirq_entry..irq:softirq_exit"]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("selected twice"), "{e}");
    assert!(select(&fs.0, &specs(&["irq:*..irq:softirq_exit"])).is_err());
}

#[test]
fn filters_compile_per_event_and_errors_name_the_field() {
    let fs = FakeTracefs::new("filters");
    let sel = select(&fs.0, &specs(&["sched:sched_switch if prev_prio < 100"])).unwrap();
    let c = &sel.tracepoints[0].config;
    assert_eq!(c.n_insns, 1);
    assert_eq!(c.insns[0].op, OP_LT);
    assert_eq!(c.insns[0].flags, FLAG_SIGNED);
    // An `int` system call argument in an 8-byte slot is compared as an int.
    let sel = select(&fs.0, &specs(&["syscalls:sys_enter_openat if dfd == -100"])).unwrap();
    let c = &sel.tracepoints[0].config;
    assert_eq!((c.insns[0].size, c.insns[0].value), (4, (-100i64) as u64));
    assert_eq!(c.n_strings, 1, "the file name is read");
    // Symbolic names of values.
    let sel = select(&fs.0, &specs(&["irq:softirq_entry if vec == TIMER"])).unwrap();
    assert_eq!(sel.tracepoints[0].config.insns[0].value, 1);
    let e = select(&fs.0, &specs(&["sched:* if prev_prio < 100"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sched:sched_migrate_task") && e.contains("no field `prev_prio`"),
        "{e}"
    );
    let e = select(&fs.0, &specs(&["sched:sched_switch if prev_prio <"])).unwrap_err();
    assert!(e.to_string().contains("has no value"), "{e}");
    // Selected with and without a filter: no filter.
    let sel = select(
        &fs.0,
        &specs(&[
            "sched:sched_switch if prev_prio < 100",
            "sched:sched_switch",
        ]),
    )
    .unwrap();
    assert_eq!(sel.tracepoints[0].config.n_insns, 0);
}

#[test]
fn every_field_is_decoded_by_its_type() {
    let fs = FakeTracefs::new("decode");
    let sel = select(
        &fs.0,
        &specs(&[
            "sched:sched_migrate_task",
            "syscalls:sys_enter_openat",
            "irq:softirq_entry",
            "kmem:kmalloc",
        ]),
    )
    .unwrap();
    let tp = |name: &str| sel.tracepoints.iter().find(|t| t.event == name).unwrap();

    // sched_migrate_task: __data_loc comm at 8, pid 12, prio 16, cpus 20/24.
    let mut d = vec![0u8; 28];
    d[8..12].copy_from_slice(&(28u32 | 5 << 16).to_le_bytes());
    d[12..16].copy_from_slice(&4242i32.to_le_bytes());
    d[16..20].copy_from_slice(&120i32.to_le_bytes());
    d[20..24].copy_from_slice(&0i32.to_le_bytes());
    d[24..28].copy_from_slice(&1i32.to_le_bytes());
    d.extend_from_slice(b"spin\0");
    let bytes = event(tp("sched_migrate_task"), &d, &[]);
    let r = TracepointRecord::parse(&bytes).unwrap();
    assert_eq!(
        decode(tp("sched_migrate_task"), &r),
        [
            ("comm".to_owned(), Decoded::Text("spin".into())),
            ("pid".to_owned(), Decoded::I32(4242)),
            ("prio".to_owned(), Decoded::I32(120)),
            ("orig_cpu".to_owned(), Decoded::I32(0)),
            ("dest_cpu".to_owned(), Decoded::I32(1)),
        ]
    );

    // sys_enter_openat: dfd (int in 8 bytes) 16, filename 24, flags 32, mode 40.
    let mut d = vec![0u8; 48];
    d[16..24].copy_from_slice(&0xffff_ff9cu64.to_le_bytes());
    d[24..32].copy_from_slice(&0x7ffd_0000_1000u64.to_le_bytes());
    d[32..40].copy_from_slice(&0x80000u64.to_le_bytes());
    let t = tp("sys_enter_openat");
    let bytes = event(t, &d, &[Some(b"/etc/hostname")]);
    let got = decode(t, &TracepointRecord::parse(&bytes).unwrap());
    assert_eq!(got[0], ("dfd".to_owned(), Decoded::I32(-100)));
    assert_eq!(
        got[1],
        ("filename".to_owned(), Decoded::Text("/etc/hostname".into()))
    );
    assert_eq!(got[2], ("flags".to_owned(), Decoded::I32(0x80000)));
    assert_eq!(got[3], ("mode".to_owned(), Decoded::U32(0)));
    // Unreadable: the pointer instead.
    let bytes = event(t, &d, &[None]);
    let got = decode(t, &TracepointRecord::parse(&bytes).unwrap());
    assert_eq!(
        got[1],
        ("filename".to_owned(), Decoded::Pointer(0x7ffd_0000_1000))
    );

    // softirq_entry: vec by name.
    let mut d = vec![0u8; 12];
    d[8..12].copy_from_slice(&1u32.to_le_bytes());
    let t = tp("softirq_entry");
    let bytes = event(t, &d, &[]);
    let got = decode(t, &TracepointRecord::parse(&bytes).unwrap());
    assert_eq!(got, [("vec".to_owned(), Decoded::Text("TIMER".into()))]);

    // kmalloc: pointers, sizes, flags by name.
    let t = tp("kmalloc");
    let fields: Vec<&str> = t.fields.iter().map(|f| f.name()).collect();
    assert!(fields.contains(&"gfp_flags"), "{fields:?}");
    let gfp = t.fields.iter().find(|f| f.name() == "gfp_flags").unwrap();
    assert!(gfp.names.as_ref().is_some_and(|n| n.is_flags()));
    let call_site = t.fields.iter().find(|f| f.name() == "call_site").unwrap();
    assert_eq!(call_site.kind, FieldKind::Pointer, "printed as an address");
    let ptr = t.fields.iter().find(|f| f.name() == "ptr").unwrap();
    assert_eq!(ptr.kind, FieldKind::Pointer);
}

#[test]
fn a_short_record_leaves_fields_out_instead_of_failing() {
    let fs = FakeTracefs::new("short");
    let sel = select(&fs.0, &specs(&["signal:signal_generate"])).unwrap();
    let t = &sel.tracepoints[0];
    let mut d = vec![0u8; 20];
    d[8..12].copy_from_slice(&9i32.to_le_bytes());
    let bytes = event(t, &d, &[]);
    let got = decode(t, &TracepointRecord::parse(&bytes).unwrap());
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0], ("sig".to_owned(), Decoded::I32(9)));
}
