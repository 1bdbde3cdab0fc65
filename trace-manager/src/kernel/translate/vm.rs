//! Memory: user page faults as instants, resident-set changes as
//! counters of the owning process, in `kernel:vm`.

use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind, StringRef};
use trace_common::kernel::{PageFaultEvent, RssStatEvent};

use super::{EventRecord, KernelTranslator, Map};
use crate::output::{FxtStream, OutputError};

/// What the `kernel:vm` translation keeps.
#[derive(Default)]
pub(super) struct VmState {
    /// Address spaces (`rss_stat`'s `mm_id`) by owning process.
    pub(super) mm_owners: Map<u32, u32>,
}

impl KernelTranslator {
    /// The current task faulted at `address` (instruction `ip`) with the
    /// architecture's `error_code`.
    pub fn page_fault<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &PageFaultEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid) = (e.header.ts, e.header.tid, e.header.tgid);
        let (address, ip, error_code) = (e.address, e.ip, e.error_code);
        // x86 page fault error code: P, W/R, U/S, RSVD, I/D, PK.
        let access = if error_code & 0x10 != 0 {
            "exec"
        } else if error_code & 0x2 != 0 {
            "write"
        } else {
            "read"
        };
        let all = [
            ("address", ArgValue::Pointer(address)),
            ("ip", ArgValue::Pointer(ip)),
            ("error_code", ArgValue::Uint64(error_code)),
            ("access", ArgValue::String(StringRef::inline(access))),
            ("present", ArgValue::Bool(error_code & 0x1 != 0)),
        ];
        // The access and presence are read from the code on x86 only.
        let x86 = cfg!(any(target_arch = "x86_64", target_arch = "x86"));
        let args = &all[..if x86 { 5 } else { 3 }];
        self.know_thread(out, tid, tgid)?;
        self.vm_event(
            out,
            EventRecord {
                ts,
                category: trace_common::category::KERNEL_VM,
                thread: (tgid, tid),
                name: "page_fault",
                args,
                kind: EventKind::Instant,
            },
        )
    }

    /// A resident-set counter (`member`: 0 file, 1 anon, 2 swap, 3 shmem)
    /// of address space `mm_id` became `size` bytes; `curr` when it is the
    /// address space of the current task's process, which changed it.
    pub fn rss_stat<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &RssStatEvent,
    ) -> Result<(), OutputError> {
        let (ts, tgid, curr) = (e.header.ts, e.header.tgid, e.curr != 0);
        let (mm_id, member, size) = (e.mm_id, e.member, e.size);
        let owner = if curr {
            self.vm.mm_owners.insert(mm_id, tgid);
            tgid
        } else {
            match self.vm.mm_owners.get(&mm_id) {
                Some(&o) => o,
                // Not seen from its own process yet: no owner to show it on.
                None => return Ok(()),
            }
        };
        let Some(kind) = trace_common::kernel::rss_member_name(member) else {
            return Ok(());
        };
        if owner == 0 {
            return Ok(());
        }
        self.know_thread(out, owner, owner)?;
        let args = [(kind, ArgValue::Int64(size))];
        self.vm_event(
            out,
            EventRecord {
                ts,
                category: trace_common::category::KERNEL_VM,
                thread: (owner, owner),
                name: "rss",
                args: &args,
                kind: EventKind::Counter { id: 0 },
            },
        )
    }

    /// Writes a memory event of `kernel:vm`.
    fn vm_event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: EventRecord<'_>,
    ) -> Result<(), OutputError> {
        self.event(out, e)?;
        self.counts.memory_events += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::testing::{ev, records};
    use trace_common::fxt::Record;

    #[test]
    fn resident_set_changes_go_to_the_owning_process() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        let (a, b) = (4_000_010_u32, 4_000_020_u32);
        // Seen from another process before its own: no owner yet, left out.
        t.rss_stat(&mut out, &ev::rss_stat(10, b, false, 77, 1, 4096))
            .unwrap();
        t.rss_stat(&mut out, &ev::rss_stat(20, a, true, 77, 1, 8192))
            .unwrap();
        // Now known: b's reclaim of a's pages lands on a.
        t.rss_stat(&mut out, &ev::rss_stat(30, b, false, 77, 0, 100))
            .unwrap();
        // Unknown member: left out.
        t.rss_stat(&mut out, &ev::rss_stat(40, a, true, 77, 9, 1))
            .unwrap();
        t.page_fault(&mut out, &ev::page_fault(50, a + 1, a, 0x1000, 0x2000, 0x6))
            .unwrap();
        assert_eq!(t.counts().memory_events, 3);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let mut ev = Vec::new();
        for r in &recs {
            if let Record::Event {
                ts,
                thread,
                name,
                args,
                kind,
                ..
            } = r
            {
                let (p, _) = st.thread(*thread).unwrap();
                let args: Vec<String> = args
                    .iter()
                    .map(|x| format!("{}={:?}", st.string(&x.name).unwrap(), x.value))
                    .collect();
                ev.push((*ts, p, st.string(name).unwrap().to_owned(), *kind, args));
            }
        }
        let a = u64::from(a);
        assert_eq!(ev[0].0, 20);
        assert_eq!(ev[0].1, a);
        assert_eq!(ev[0].3, EventKind::Counter { id: 0 });
        assert_eq!(ev[0].4, ["anon=Int64(8192)"]);
        assert_eq!((ev[1].0, ev[1].1), (30, a));
        assert_eq!(ev[1].4, ["file=Int64(100)"]);
        assert_eq!(
            (ev[2].2.as_str(), ev[2].3),
            ("page_fault", EventKind::Instant)
        );
        assert_eq!(ev[2].4[0], "address=Pointer(4096)");
        if cfg!(target_arch = "x86_64") {
            assert!(
                ev[2]
                    .4
                    .iter()
                    .any(|x| x.starts_with("access=") && x.contains("write"))
            );
            assert!(ev[2].4.contains(&"present=Bool(false)".to_owned()));
        }
    }
}
