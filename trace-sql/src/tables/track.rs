//! The columns naming where and what an event is: `pid`, `tid`,
//! `provider_id`, `provider`, `category`, `name`, shared by the tables of
//! instants, counters and async spans.

use datafusion::arrow::array::{StringBuilder, UInt32Builder, UInt64Builder};
use trace_analysis::event::Track;
use trace_analysis::{Context, Sym};

use super::declare::columns;

columns! {
    /// Builders of the track, category and name columns.
    pub struct TrackColumns {
        /// Process.
        pid: UInt64Builder,
        /// Thread.
        tid: UInt64Builder,
        /// Provider id.
        provider_id: UInt32Builder,
        /// Provider name.
        provider: StringBuilder,
        /// Category.
        category: StringBuilder,
        /// Name.
        name: StringBuilder,
    }
}

impl TrackColumns {
    /// Appends one row.
    pub fn append(&mut self, track: &Track, category: Sym, name: Sym, cx: &Context) {
        self.pid.append_value(track.pid);
        self.tid.append_value(track.tid);
        self.provider_id.append_value(track.provider);
        self.provider.append_value(cx.provider_name(track.provider));
        self.category.append_value(cx.strings.get(category));
        self.name.append_value(cx.strings.get(name));
    }
}
