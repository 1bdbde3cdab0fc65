//! What tests of tracepoint selection and translation share: a tracefs
//! tree of format files, and events as the program writes them.

use std::fs;
use std::path::{Path, PathBuf};

use trace_common::kernel::EventHeader;
use trace_common::kernel::tracepoint::{STRING_UNREADABLE, TracepointEvent};

use super::Tracepoint;

/// A tracefs tree with the test format files, removed when dropped.
pub(crate) struct FakeTracefs(pub(crate) PathBuf);

impl FakeTracefs {
    /// A tree under the temporary directory, `name` keeping tests apart.
    pub(crate) fn new(name: &str) -> FakeTracefs {
        let root = std::env::temp_dir().join(format!("tp-sel-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (group, event) in [
            ("sched", "sched_switch"),
            ("sched", "sched_migrate_task"),
            ("irq", "softirq_entry"),
            ("irq", "softirq_exit"),
            ("syscalls", "sys_enter_openat"),
            ("syscalls", "sys_exit_openat"),
            ("signal", "signal_generate"),
            ("kmem", "kmalloc"),
        ] {
            let dir = root.join("events").join(group).join(event);
            fs::create_dir_all(&dir).unwrap();
            let src = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/kernel/testdata")
                .join(format!("{event}.format"));
            fs::copy(src, dir.join("format")).unwrap();
        }
        FakeTracefs(root)
    }
}

impl Drop for FakeTracefs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// An event of `tp` with record `data` and `strings` (each `None` for an
/// unreadable one).
pub(crate) fn event(tp: &Tracepoint, data: &[u8], strings: &[Option<&[u8]>]) -> Vec<u8> {
    event_at(tp, EventHeader::default(), data, strings)
}

/// [`event`] with the common header `header`.
pub(crate) fn event_at(
    tp: &Tracepoint,
    header: EventHeader,
    data: &[u8],
    strings: &[Option<&[u8]>],
) -> Vec<u8> {
    let head = TracepointEvent {
        header,
        id: tp.id,
        data_len: data.len() as u16,
        n_strings: strings.len() as u32,
        ..Default::default()
    };
    // SAFETY: plain data, read as its bytes.
    let mut out = unsafe {
        std::slice::from_raw_parts(
            std::ptr::from_ref(&head).cast::<u8>(),
            size_of::<TracepointEvent>(),
        )
    }
    .to_vec();
    out.extend_from_slice(data);
    for s in strings {
        match s {
            Some(s) => {
                out.extend_from_slice(&(s.len() as u16).to_ne_bytes());
                out.extend_from_slice(s);
            }
            None => out.extend_from_slice(&STRING_UNREADABLE.to_ne_bytes()),
        }
    }
    out
}
