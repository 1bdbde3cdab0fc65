//! Streaming a trace into the tables: [`TableWriter`] is the
//! [`Sink`] that appends each event's rows to the tables' Arrow builders
//! and hands a table's rows on as a [`RecordBatch`] whenever it holds
//! [`BATCH_ROWS`] of them, so what it holds is bounded by the batch size,
//! not by the trace.

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

use datafusion::arrow::array::RecordBatch;
use trace_analysis::{Context, Event, ReadStats, Sink, Wants, read_trace_wanting};

use crate::SqlError;
use crate::tables::{self, Table, TraceInfo, take_projected};

/// Rows a table holds before they are handed on as a batch.
pub const BATCH_ROWS: usize = 16_384;

/// Receives the batches of every table of one trace.
pub trait BatchConsumer {
    /// One batch of `table`'s rows.
    fn batch(&mut self, table: &'static str, batch: RecordBatch) -> Result<(), SqlError>;
}

/// A table to build, and the columns of its full schema to build (indices
/// into [`tables::schema`], in the order wanted), or all of them.
pub type Selected = (Box<dyn Table>, Option<Vec<usize>>);

/// Builds tables from the events of one trace (every table, or those
/// selected) and hands their rows on to a [`BatchConsumer`] in batches of
/// at most `batch_rows` rows.
pub struct TableWriter<C> {
    info: TraceInfo,
    tables: Vec<Box<dyn Table>>,
    projections: Vec<Option<Vec<usize>>>,
    batch_rows: usize,
    consumer: C,
    failed: Option<SqlError>,
    abort: Rc<Cell<bool>>,
}

impl<C: BatchConsumer> TableWriter<C> {
    /// A writer of `info`'s trace into `consumer`.
    pub fn new(info: TraceInfo, batch_rows: usize, consumer: C) -> Self {
        let all = tables::all().into_iter().map(|t| (t, None)).collect();
        Self::with_tables(info, all, batch_rows, consumer)
    }

    /// A writer of the `selected` tables (and columns) of `info`'s trace
    /// into `consumer`.
    pub fn with_tables(
        info: TraceInfo,
        selected: Vec<Selected>,
        batch_rows: usize,
        consumer: C,
    ) -> Self {
        let mut tables = Vec::with_capacity(selected.len());
        let mut projections = Vec::with_capacity(selected.len());
        for (mut table, projection) in selected {
            if let Some(p) = &projection {
                let schema = tables::schema(table.as_ref());
                let kept: Vec<String> = p
                    .iter()
                    .filter_map(|i| schema.fields().get(*i).map(|f| f.name().clone()))
                    .collect();
                table.keep_columns(&|name| kept.iter().any(|k| k == name));
            }
            tables.push(table);
            projections.push(projection);
        }
        TableWriter {
            info,
            tables,
            projections,
            batch_rows: batch_rows.max(1),
            consumer,
            failed: None,
            abort: Rc::default(),
        }
    }

    fn flush(&mut self, i: usize) {
        let Some(table) = self.tables.get_mut(i) else {
            return;
        };
        if table.rows() == 0 || self.failed.is_some() {
            return;
        }
        let name = table.name();
        let projection = self.projections.get(i).and_then(Option::as_deref);
        let result = take_projected(table.as_mut(), &self.info, projection)
            .map_err(SqlError::from)
            .and_then(|batch| self.consumer.batch(name, batch));
        if let Err(e) = result {
            self.failed = Some(e);
            self.abort.set(true);
        }
    }

    /// The events the tables are made of.
    pub fn wants(&self) -> Wants {
        self.tables
            .iter()
            .fold(Wants::default(), |w, t| w.or(t.wants()))
    }

    /// Adds the rows known at the end of the trace, hands every row still
    /// held on, and returns the consumer.
    pub fn finish(mut self, cx: &Context) -> Result<C, SqlError> {
        for i in 0..self.tables.len() {
            self.tables[i].end(cx);
            self.flush(i);
        }
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(self.consumer),
        }
    }
}

impl<C: BatchConsumer> Sink for TableWriter<C> {
    fn event(&mut self, event: &Event, cx: &Context) {
        if self.failed.is_some() {
            return;
        }
        for i in 0..self.tables.len() {
            let table = &mut self.tables[i];
            table.event(event, cx);
            if table.rows() >= self.batch_rows {
                self.flush(i);
            }
        }
    }
}

/// The trace's input, cut short once the consumer failed.
struct Abortable<R> {
    inner: R,
    abort: Rc<Cell<bool>>,
}

impl<R: Read> Read for Abortable<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.abort.get() {
            return Err(std::io::Error::other(
                "stopped: the tables could not be written",
            ));
        }
        self.inner.read(buf)
    }
}

/// Streams the trace read from `input` into every table, handing their
/// rows to `consumer` in batches of at most `batch_rows` rows; returns what
/// reading saw and the consumer.
pub fn stream_trace<C: BatchConsumer>(
    input: impl Read,
    info: TraceInfo,
    batch_rows: usize,
    consumer: C,
) -> Result<(ReadStats, C), SqlError> {
    let all = tables::all().into_iter().map(|t| (t, None)).collect();
    stream_tables(input, info, all, batch_rows, consumer)
}

/// [`stream_trace`] into the `selected` tables and columns only: the
/// reader decodes only the records those tables are made of
/// ([`Table::wants`]).
pub fn stream_tables<C: BatchConsumer>(
    input: impl Read,
    info: TraceInfo,
    selected: Vec<Selected>,
    batch_rows: usize,
    consumer: C,
) -> Result<(ReadStats, C), SqlError> {
    let mut writer = TableWriter::with_tables(info, selected, batch_rows, consumer);
    let wants = writer.wants();
    let input = Abortable {
        inner: input,
        abort: writer.abort.clone(),
    };
    match read_trace_wanting(input, &mut writer, wants) {
        Ok((stats, cx)) => {
            let consumer = writer.finish(&cx)?;
            Ok((stats, consumer))
        }
        Err(e) => Err(writer.failed.take().unwrap_or(SqlError::Read(e))),
    }
}

/// A consumer that keeps every batch, by table.
#[derive(Clone, Debug, Default)]
pub struct Collected {
    /// Each table's batches, in order.
    pub batches: std::collections::BTreeMap<&'static str, Vec<RecordBatch>>,
}

impl BatchConsumer for Collected {
    fn batch(&mut self, table: &'static str, batch: RecordBatch) -> Result<(), SqlError> {
        self.batches.entry(table).or_default().push(batch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{cx, info, sym};
    use trace_analysis::event::{OutState, Switch};

    fn switch(ts: u64) -> Event {
        Event::Switch(Switch {
            ts,
            cpu: 0,
            prev_pid: 1,
            prev_tid: 1,
            prev_state: OutState::Blocked,
            next_pid: 0,
            next_tid: 0,
            prev_prio: None,
            next_prio: None,
            inferred: false,
            untraced: false,
        })
    }

    #[test]
    fn batches_are_bounded_and_every_row_arrives() {
        let mut cx = cx();
        let name = sym(&mut cx, "p");
        let mut w = TableWriter::new(info(), 4, Collected::default());
        for ts in 0..10 {
            w.event(&switch(ts), &cx);
        }
        w.event(&Event::Process { pid: 1, name }, &cx);
        let got = w.finish(&cx).unwrap();
        let sizes: Vec<usize> = got.batches["context_switches"]
            .iter()
            .map(RecordBatch::num_rows)
            .collect();
        assert_eq!(sizes, [4, 4, 2]);
        assert_eq!(got.batches["processes"][0].num_rows(), 1);
        // Tables without rows get no batch.
        assert!(!got.batches.contains_key("slices"));
    }

    struct Failing(usize);

    impl BatchConsumer for Failing {
        fn batch(&mut self, _: &'static str, _: RecordBatch) -> Result<(), SqlError> {
            self.0 += 1;
            Err(SqlError::io("out", std::io::Error::other("disk full")))
        }
    }

    #[test]
    fn a_failing_consumer_stops_the_writer() {
        let cx = cx();
        let mut w = TableWriter::new(info(), 2, Failing(0));
        for ts in 0..10 {
            w.event(&switch(ts), &cx);
        }
        assert!(w.abort.get());
        let err = w.finish(&cx).err().unwrap();
        assert_eq!(err.to_string(), "out");
        let source = std::error::Error::source(&err).map(|s| s.to_string());
        assert_eq!(source.as_deref(), Some("disk full"), "{err}");
    }

    #[test]
    fn not_fxt_is_an_error() {
        let r = stream_trace(&b"not a trace at all"[..], info(), 10, Collected::default());
        assert!(matches!(r, Err(SqlError::Read(_))), "{r:?}");
    }
}
