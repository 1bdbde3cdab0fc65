//! Stopping at one instant: the cut every program sees, then detaching.

use aya::programs::TracePoint;
use trace_common::kernel::MAP_LAYOUT;

use super::attach::fill_array;
use super::load::LayoutValue;
use super::{KernelError, KernelProvider};
use crate::clock::boottime_ns;

impl KernelProvider {
    /// Ends the recording at one instant, for every program at once: no
    /// program writes an event stamped after the returned time
    /// (CLOCK_BOOTTIME ns), however long detaching them takes. Events
    /// already written can still be drained.
    pub fn cut(&mut self) -> Result<u64, KernelError> {
        if let Some(ts) = self.stop_ts {
            return Ok(ts);
        }
        let ts = boottime_ns();
        self.layout.stop_ts = ts;
        fill_array(&mut self.ebpf, MAP_LAYOUT, [LayoutValue(self.layout)])?;
        self.stop_ts = Some(ts);
        Ok(ts)
    }

    /// When [`KernelProvider::cut`] ended the recording, if it did.
    pub fn stop_ts(&self) -> Option<u64> {
        self.stop_ts
    }

    /// Detaches and unloads every program; events already in the ring buffer
    /// can still be drained, and [`KernelProvider::dropped`] still answers.
    pub fn detach(&mut self) {
        self.detached_misses = self.recursion_misses();
        self.detached = true;
        self.probe_links.clear();
        for name in std::mem::take(&mut self.attached) {
            let Some(program) = self.ebpf.program_mut(name) else {
                continue;
            };
            let result = match program {
                aya::programs::Program::UProbe(up) => up.unload(),
                aya::programs::Program::BtfTracePoint(tp) => tp.unload(),
                aya::programs::Program::PerfEvent(pe) => pe.unload(),
                other => {
                    let tp: Result<&mut TracePoint, _> = other.try_into();
                    tp.and_then(|tp| tp.unload())
                }
            };
            if let Err(e) = result {
                log::warn!("detaching eBPF program `{name}`: {e}");
            }
        }
    }

    /// Detaches everything and frees the maps.
    pub fn stop(self) {
        drop(self);
    }
}
