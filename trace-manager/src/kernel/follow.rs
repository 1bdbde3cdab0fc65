//! The process filters: the threads of followed processes, or of the
//! selected cgroups, in the `FOLLOWED` map.

use trace_common::kernel::{CGROUPS_MAX, COUNTER_FOLLOW_FULL, FILTER_PIDS, MAP_FOLLOWED};

use super::{KernelError, KernelProvider};
use crate::procfs::thread_ids;

impl KernelProvider {
    /// Follows process `pid`: records its threads' events and those of
    /// every task it creates from now on. Needs a pid filter
    /// ([`KernelConfig::pids`](crate::kernel::KernelConfig::pids)); without one everything is recorded anyway
    /// and this does nothing (under a cgroup filter the cgroups decide).
    pub fn follow(&mut self, pid: u32) -> Result<(), KernelError> {
        let Some(map) = self
            .followed
            .as_mut()
            .filter(|_| self.layout.filter & FILTER_PIDS != 0)
        else {
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

    /// Follows every thread now in the cgroups `cgroups` or below them
    /// (under a cgroup filter): the programs ask the kernel about the
    /// current task themselves, and look these up for the task a switch
    /// brings in and the task a wake-up wakes until they are switched out.
    pub(super) fn follow_cgroups(&mut self, cgroups: &OpenCgroups) -> Result<(), KernelError> {
        let Some(map) = self.followed.as_mut() else {
            return Ok(());
        };
        let Some(hierarchy) = (!cgroups.is_empty())
            .then(crate::cgroup::Hierarchy::find)
            .transpose()?
        else {
            return Ok(());
        };
        for (path, _) in cgroups {
            for tid in hierarchy.threads(path) {
                map.insert(tid, 0, 0).map_err(|e| KernelError::Map {
                    name: MAP_FOLLOWED,
                    source: Box::new(e),
                })?;
            }
        }
        Ok(())
    }

    /// New tasks of followed processes that could not be followed because
    /// the map of followed threads was full.
    pub fn unfollowed(&self) -> Result<u64, KernelError> {
        self.counter(COUNTER_FOLLOW_FULL)
    }
}

/// The selected cgroups (paths from the v2 hierarchy's root), each with
/// its directory open: what the cgroup array takes.
pub(super) type OpenCgroups = Vec<(String, std::fs::File)>;

/// Opens the directory of each cgroup of `paths` in the cgroup v2
/// hierarchy this process sees.
pub(super) fn open_cgroups(paths: &[String]) -> Result<OpenCgroups, KernelError> {
    use crate::cgroup::{CgroupError, Hierarchy};
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    if paths.len() > CGROUPS_MAX as usize {
        return Err(CgroupError::TooMany {
            count: paths.len(),
            max: CGROUPS_MAX as usize,
        }
        .into());
    }
    let hierarchy = Hierarchy::find()?;
    paths
        .iter()
        .map(|p| {
            let name = hierarchy.resolve(p)?;
            let dir = hierarchy.dir(&name);
            let file = std::fs::File::open(&dir)
                .map_err(|source| CgroupError::Io { path: dir, source })?;
            Ok((name, file))
        })
        .collect()
}
