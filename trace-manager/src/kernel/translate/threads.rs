//! The kernel provider's FXT thread table.

/// The kernel provider's thread table: FXT thread records map indexes
/// 1..=255 to (process, thread) koids, so that a record can name a thread in
/// one byte. Entries are replaced by a clock sweep (a used entry gets a
/// second chance), so the threads that switch most keep theirs.
#[derive(Debug)]
pub struct ThreadTable {
    /// Entry of each (process, thread) pair, keyed `process << 32 | thread`.
    index_of: super::Map<u64, u8>,
    /// Entry `i` (index 0 unused): its pair and whether it was used since
    /// the sweep last passed.
    slots: Vec<Option<((u32, u32), bool)>>,
    hand: usize,
}

impl Default for ThreadTable {
    fn default() -> Self {
        ThreadTable {
            index_of: super::Map::default(),
            slots: vec![None; 256],
            hand: 1,
        }
    }
}

impl ThreadTable {
    /// The index of thread `tid` of process `tgid`, and whether it is new
    /// (its thread record must be written before it is used). Entry `keep`
    /// is not replaced (another thread of the same record holds it).
    pub fn index(&mut self, tgid: u32, tid: u32, keep: Option<u8>) -> (u8, bool) {
        let key = (u64::from(tgid) << 32) | u64::from(tid);
        if let Some(&i) = self.index_of.get(&key) {
            if let Some((_, used)) = self.slots[usize::from(i)].as_mut() {
                *used = true;
            }
            return (i, false);
        }
        let i = loop {
            let i = self.hand;
            self.hand = if self.hand == 255 { 1 } else { self.hand + 1 };
            if keep == Some(i as u8) {
                continue;
            }
            match self.slots[i].as_mut() {
                Some((_, used)) if *used => *used = false,
                _ => break i,
            }
        };
        if let Some(((old_tgid, old_tid), _)) = self.slots[i].take() {
            self.index_of
                .remove(&((u64::from(old_tgid) << 32) | u64::from(old_tid)));
        }
        self.slots[i] = Some(((tgid, tid), true));
        self.index_of.insert(key, i as u8);
        (i as u8, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_table_never_replaces_the_entry_a_record_holds() {
        let mut table = ThreadTable::default();
        for tid in 1..=255 {
            table.index(1, tid, None);
        }
        // Every entry used since the last sweep, the hand on entry 1: a
        // newcomer would sweep a full lap and take entry 1, which the other
        // thread of the same record holds.
        let (held, _) = table.index(1, 1, None);
        assert_eq!(held, 1);
        let (i, new) = table.index(1, 9999, Some(held));
        assert!(new);
        assert_ne!(i, held);
        assert_eq!(table.index(1, 1, None), (held, false));
    }

    #[test]
    fn the_thread_table_keeps_the_threads_in_use() {
        let mut table = ThreadTable::default();
        // 255 threads fill the table; each gets its own index once.
        let mut seen = std::collections::HashSet::new();
        for tid in 1..=255 {
            let (i, new) = table.index(1, tid, None);
            assert!(new && i >= 1 && seen.insert(i));
        }
        assert!(!table.index(1, 7, None).1, "a known thread keeps its entry");
        // A newcomer evicts an entry; thread 7, used since the sweep, is
        // passed over once and stays.
        for tid in 1000..1100 {
            let (i, new) = table.index(1, tid, None);
            assert!(new && i >= 1);
            let (_, again) = table.index(1, 7, None);
            assert!(!again, "the thread in use lost its entry");
        }
    }
}
