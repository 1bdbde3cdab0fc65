//! The columns naming where and what an event is: `pid`, `tid`,
//! `provider_id`, `provider`, `category`, `name`, shared by the tables of
//! instants, counters and async spans.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringBuilder, UInt32Builder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field};
use trace_analysis::event::Track;
use trace_analysis::{Context, Sym};

/// Builders of the track, category and name columns.
#[derive(Default)]
pub struct TrackColumns {
    pid: UInt64Builder,
    tid: UInt64Builder,
    provider_id: UInt32Builder,
    provider: StringBuilder,
    category: StringBuilder,
    name: StringBuilder,
}

impl TrackColumns {
    /// The fields, in order.
    pub fn fields() -> Vec<Field> {
        vec![
            Field::new("pid", DataType::UInt64, false),
            Field::new("tid", DataType::UInt64, false),
            Field::new("provider_id", DataType::UInt32, false),
            Field::new("provider", DataType::Utf8, false),
            Field::new("category", DataType::Utf8, false),
            Field::new("name", DataType::Utf8, false),
        ]
    }

    /// Appends one row.
    pub fn append(&mut self, track: &Track, category: Sym, name: Sym, cx: &Context) {
        self.pid.append_value(track.pid);
        self.tid.append_value(track.tid);
        self.provider_id.append_value(track.provider);
        self.provider.append_value(cx.provider_name(track.provider));
        self.category.append_value(cx.strings.get(category));
        self.name.append_value(cx.strings.get(name));
    }

    /// The columns, emptied.
    pub fn finish(&mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.provider_id.finish()),
            Arc::new(self.provider.finish()),
            Arc::new(self.category.finish()),
            Arc::new(self.name.finish()),
        ]
    }
}
