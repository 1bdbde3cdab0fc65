//! The pid filter: the threads of followed processes in the `FOLLOWED` map.

use trace_common::kernel::{COUNTER_FOLLOW_FULL, MAP_FOLLOWED};

use super::{KernelError, KernelProvider};

impl KernelProvider {
    /// Follows process `pid`: records its threads' events and those of
    /// every task it creates from now on. Needs a pid filter
    /// ([`KernelConfig::pids`]); without one everything is recorded anyway
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

/// Whether process `pid` exists now.
pub fn process_exists(pid: u32) -> bool {
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}/task")).is_dir()
}

/// The thread ids of process `pid`, `None` if it does not exist.
pub(super) fn thread_ids(pid: u32) -> Option<Vec<u32>> {
    if pid == 0 {
        return None;
    }
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}
