//! Keeping a file's flows drawable: [`FlowFilter`].

use std::collections::HashSet;

use trace_common::fxt::wire::{event_type, record_type};

/// Which point of a flow a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlowPoint {
    /// Its begin.
    Begin,
    /// A step or its end.
    Later,
}

/// The flow point `record` is, and the flow's id, read from its header and
/// its last word (a flow event's id) without decoding the rest.
fn flow_point(record: &[u8]) -> Option<(FlowPoint, u64)> {
    let header = u64::from_le_bytes(record.get(..8)?.try_into().ok()?);
    if (header & 0xF) as u8 != record_type::EVENT {
        return None;
    }
    let point = match ((header >> 16) & 0xF) as u8 {
        event_type::FLOW_BEGIN => FlowPoint::Begin,
        event_type::FLOW_STEP | event_type::FLOW_END => FlowPoint::Later,
        _ => return None,
    };
    let last = record.get(record.len().checked_sub(8)?..)?;
    Some((point, u64::from_le_bytes(last.try_into().ok()?)))
}

/// The flows begun in one file, to leave out of it the steps and ends of
/// those that began before it (in an earlier file of a rotation, or before
/// a snapshot's window): a reader of the file alone has nothing to draw
/// them from, and Perfetto drops them.
#[derive(Clone, Debug, Default)]
pub struct FlowFilter {
    begun: HashSet<(u32, u64)>,
}

impl FlowFilter {
    /// A filter for a new file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `record`, of provider `provider`, belongs in the file: any
    /// record but a flow step or end whose flow did not begin in it.
    pub fn keep(&mut self, provider: u32, record: &[u8]) -> bool {
        match flow_point(record) {
            Some((FlowPoint::Begin, id)) => {
                self.begun.insert((provider, id));
                true
            }
            Some((FlowPoint::Later, id)) => self.begun.contains(&(provider, id)),
            None => true,
        }
    }
}
