//! The pid filter: the threads of followed processes in the `FOLLOWED` map.

use trace_common::kernel::{COUNTER_FOLLOW_FULL, MAP_FOLLOWED};

use super::{KernelError, KernelProvider};
use crate::procfs::thread_ids;

impl KernelProvider {
    /// Follows process `pid`: records its threads' events and those of
    /// every task it creates from now on. Needs a pid filter
    /// ([`KernelConfig::pids`](crate::kernel::KernelConfig::pids)); without one everything is recorded anyway
    /// and this does nothing.
    pub fn follow(&mut self, pid: u32) -> Result<(), KernelError> {
        let Some(map) = self.followed.as_mut() else {
            return Ok(());
        };
        let tids = thread_ids(pid).ok_or(KernelError::NoSuchProcess { pid })?;
        for tid in tids {
            map.insert(tid, 0, 0).map_err(|e| KernelError::Map {
                name: MAP_FOLLOWED,
                source: Box::new(e),
            })?;
        }
        Ok(())
    }

    /// New tasks of followed processes that could not be followed because
    /// the map of followed threads was full.
    pub fn unfollowed(&self) -> Result<u64, KernelError> {
        self.counter(COUNTER_FOLLOW_FULL)
    }
}
