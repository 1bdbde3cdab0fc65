//! `losses`: records a provider lost, per CPU where the trace says; each
//! row holds only what was lost since the provider's previous loss, so
//! `sum(events)` is what was lost in all.

use datafusion::arrow::array::{StringBuilder, UInt32Builder, UInt64Builder};
use trace_analysis::{Context, Event, Wants};

use super::Table;
use super::declare::table;

table! {
    /// Builds `losses`.
    pub struct Losses as "losses" {
        /// Provider id.
        provider_id: UInt32Builder,
        /// Provider name.
        provider: StringBuilder,
        /// The CPU whose ring buffer was full, if one.
        cpu: UInt32Builder nullable,
        /// Events lost since the provider's previous loss, if counted.
        events: UInt64Builder nullable,
    }
}

impl Table for Losses {
    fn wants(&self) -> Wants {
        Wants {
            counters: true,
            ..Wants::default()
        }
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        let Event::Loss(l) = event else {
            return;
        };
        let mut row = |cpu: Option<u32>, events: Option<u64>| {
            self.provider_id.append_value(l.provider);
            self.provider.append_value(cx.strings.get(l.provider_name));
            self.cpu.append_option(cpu);
            self.events.append_option(events);
            self.rows += 1;
        };
        if l.per_cpu.is_empty() {
            row(None, l.events);
        } else {
            for d in &l.per_cpu {
                row(d.cpu, Some(d.events));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx, sym};
    use trace_analysis::event::{Dropped, Loss};

    #[test]
    fn per_cpu_rows_or_one() {
        let mut cx = cx();
        let kernel = sym(&mut cx, "kernel");
        let events = [
            Event::Loss(Loss {
                provider: 1,
                provider_name: kernel,
                per_cpu: vec![
                    Dropped {
                        cpu: Some(0),
                        events: 5,
                    },
                    Dropped {
                        cpu: Some(3),
                        events: 7,
                    },
                    Dropped {
                        cpu: None,
                        events: 2,
                    },
                ],
                events: Some(14),
            }),
            Event::Loss(Loss {
                provider: 2,
                provider_name: Sym::EMPTY,
                per_cpu: Vec::new(),
                events: None,
            }),
        ];
        let batch = build(&mut Losses::default(), &cx, &events);
        assert_eq!(column(&batch, "provider_id"), ["1", "1", "1", "2"]);
        assert_eq!(
            column(&batch, "provider"),
            ["kernel", "kernel", "kernel", ""]
        );
        assert_eq!(column(&batch, "cpu"), ["0", "3", "", ""]);
        assert_eq!(column(&batch, "events"), ["5", "7", "2", ""]);
    }

    use trace_analysis::Sym;
}
