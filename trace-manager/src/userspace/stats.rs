//! What the providers' buffers hold, for progress reports and statistics.

use super::{ProviderStats, Registry};

impl Registry {
    /// How each provider's buffer is doing now (from its header, which
    /// the provider updates as it writes).
    pub fn progress(&self) -> Vec<trace_common::controller::ProviderProgress> {
        use trace_common::provider::buffer::{HEADER_BYTES, Header};
        self.providers
            .iter()
            .filter_map(|p| {
                let t = p.trace.as_ref()?;
                let mut raw = [0u8; HEADER_BYTES];
                if t.buffer.len >= HEADER_BYTES {
                    // SAFETY: the mapping is `len` readable bytes, at least a
                    // header's; the memfd cannot shrink.
                    unsafe {
                        std::ptr::copy_nonoverlapping(t.buffer.map, raw.as_mut_ptr(), HEADER_BYTES)
                    };
                }
                let h = Header::read(&raw);
                let len = t.buffer.len as u64;
                let used = h
                    .durable_data_end
                    .min(len)
                    .saturating_add(h.rolling_data_end[0].min(len))
                    .saturating_add(h.rolling_data_end[1].min(len))
                    .min(len);
                Some(trace_common::controller::ProviderProgress {
                    name: p.info.name.clone(),
                    fill_permille: (used * 1000 / len.max(1)) as u16,
                    dropped: h.num_records_dropped,
                    bytes_written: t.fwd.stats.bytes,
                })
            })
            .collect()
    }

    /// Each provider's numbers in the session so far.
    pub fn stats(&self) -> Vec<ProviderStats> {
        self.providers
            .iter()
            .filter_map(|p| {
                let t = p.trace.as_ref()?;
                Some(ProviderStats {
                    id: p.info.id,
                    name: p.info.name.clone(),
                    pid: p.info.pid,
                    collect: t.fwd.stats.clone(),
                    started: t.started,
                    aborted: p.aborted || (p.gone && !t.stopped),
                })
            })
            .chain(self.departed.iter().cloned())
            .collect()
    }
}
