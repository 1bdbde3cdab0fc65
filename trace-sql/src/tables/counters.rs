//! `counters`: one row per value of a counter sample: each numeric
//! argument of a counter event is one series.

use datafusion::arrow::array::{Float64Builder, StringBuilder, UInt64Builder};
use trace_analysis::{Context, Event, Wants};

use super::Table;
use super::declare::table;
use super::track::TrackColumns;

table! {
    /// Builds `counters`.
    pub struct Counters as "counters" {
        /// Time, ns.
        ts: UInt64Builder,
        /// Where the counter is, and its name.
        track: TrackColumns flatten,
        /// The counter's id.
        counter_id: UInt64Builder,
        /// The argument's name: the series.
        series: StringBuilder,
        /// The value.
        value: Float64Builder,
    }
}

impl Table for Counters {
    fn wants(&self) -> Wants {
        Wants {
            counters: true,
            ..Wants::default()
        }
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Counter(c) = event else {
            return;
        };
        for (series, value) in &c.args {
            let Some(value) = value.as_f64() else {
                continue;
            };
            self.ts.append_value(c.ts);
            self.track.append(&c.track, c.category, c.name, cx);
            self.counter_id.append_value(c.id);
            self.series.append_value(cx.strings.get(*series));
            self.value.append_value(value);
            self.rows += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{args, build, column, cx, sym, track};
    use trace_analysis::Value;
    use trace_analysis::event::Counter;

    #[test]
    fn one_row_per_numeric_series() {
        let mut cx = cx();
        let (cat, name) = (sym(&mut cx, "kernel:vm"), sym(&mut cx, "rss"));
        let a = args(
            &mut cx,
            &[
                ("file", Value::Uint(10)),
                ("anon", Value::Int(-2)),
                ("ratio", Value::Double(0.5)),
                ("label", Value::Str("x".into())),
            ],
        );
        let events = [Event::Counter(Counter {
            ts: 77,
            track: track(5, 5),
            category: cat,
            name,
            id: 3,
            args: a,
        })];
        let batch = build(&mut Counters::default(), &cx, &events);
        assert_eq!(column(&batch, "series"), ["file", "anon", "ratio"]);
        assert_eq!(column(&batch, "value"), ["10.0", "-2.0", "0.5"]);
        assert_eq!(column(&batch, "ts"), ["77", "77", "77"]);
        assert_eq!(column(&batch, "counter_id"), ["3", "3", "3"]);
        assert_eq!(column(&batch, "name"), ["rss", "rss", "rss"]);
    }
}
