//! The tables, one module each. Every table starts with the columns
//! `trace_id` and `host` ([`TraceInfo`]); times are `UInt64` nanoseconds of
//! the recording's clock (CLOCK_BOOTTIME for this project's recorder),
//! durations `UInt64` nanoseconds. Each table declares its columns once,
//! with `table!` ([`declare`]); docs/SQL.md documents every column, which a
//! test checks against the declarations.

pub mod args;
pub mod async_spans;
pub mod block_requests;
pub mod context_switches;
pub mod counters;
pub mod declare;
#[cfg(test)]
mod docs_tests;
pub mod instants;
pub mod losses;
pub mod processes;
pub mod samples;
pub mod slices;
pub mod syscalls;
pub mod threads;
pub mod track;
pub mod waits;
pub mod wakeups;

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use trace_analysis::{Context, Event, Wants};

use self::declare::ColumnDoc;

/// The trace rows come from: the first two columns of every table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceInfo {
    /// The trace's stable id ([`crate::trace_id`]).
    pub trace_id: String,
    /// The machine it was recorded on.
    pub host: String,
    /// The machines of a trace recorded on several
    /// ([`trace_hosts::read_machines`]): each row's `host` is then the
    /// machine of its `pid` (or, without one, of its `cpu`).
    pub machines: Vec<trace_hosts::Machine>,
}

/// The columns every table begins with, filled from [`TraceInfo`]: `Utf8`,
/// not null.
pub const TRACE_COLUMNS: &[ColumnDoc] = &[
    ColumnDoc {
        name: "trace_id",
        doc: "The trace's stable id (`crate::trace_id`).",
    },
    ColumnDoc {
        name: "host",
        doc: "The machine it was recorded on (in a trace of several machines, the row's: by its `pid`, else its `cpu`).",
    },
];

/// What a table declares with `table!` ([`declare`]): its name, its columns
/// and the rows its builders hold.
pub trait Columns {
    /// The table's name.
    fn name(&self) -> &'static str;
    /// Its columns after [`TRACE_COLUMNS`].
    fn columns(&self) -> Vec<Field>;
    /// The names of [`Columns::columns`], in order, with their
    /// descriptions.
    fn column_docs(&self) -> &'static [ColumnDoc];
    /// Rows held.
    fn rows(&self) -> usize;
    /// The rows held, one array per column of [`Columns::columns`]; the
    /// table is empty after.
    fn take(&mut self) -> Vec<ArrayRef>;
}

/// One table, built row by row from a trace's events; its columns are
/// declared with `table!` ([`declare`]).
pub trait Table: Columns + Send {
    /// The events the table is made of: what the reader must decode for it.
    fn wants(&self) -> Wants;
    /// Leaves out the costly columns (arguments as JSON, stacks) that `keep`
    /// does not keep: [`Columns::take`] then returns an array of no rows for
    /// each, which [`take_batch`] given a projection without them never
    /// looks at. Every column is built by default.
    fn keep_columns(&mut self, _keep: &dyn Fn(&str) -> bool) {}
    /// Adds the rows `event` makes, if any, counting them in the `rows` that
    /// `table!` ([`declare`]) declares.
    fn event(&mut self, event: &Event, cx: &Context);
    /// Adds the rows known only at the end of the trace.
    fn end(&mut self, _cx: &Context) {}
}

/// A fresh builder of every table, in the order they are documented.
pub fn all() -> Vec<Box<dyn Table>> {
    vec![
        Box::new(processes::Processes::default()),
        Box::new(threads::Threads::default()),
        Box::new(slices::Slices::default()),
        Box::new(instants::Instants::default()),
        Box::new(counters::Counters::default()),
        Box::new(async_spans::AsyncSpans::default()),
        Box::new(context_switches::ContextSwitches::default()),
        Box::new(wakeups::Wakeups::default()),
        Box::new(waits::Waits::default()),
        Box::new(syscalls::Syscalls::default()),
        Box::new(block_requests::BlockRequests::default()),
        Box::new(samples::Samples::default()),
        Box::new(losses::Losses::default()),
    ]
}

/// A fresh builder of the table named `name`, if there is one.
pub fn by_name(name: &str) -> Option<Box<dyn Table>> {
    all().into_iter().find(|t| t.name() == name)
}

/// The names of every table.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|t| t.name()).collect()
}

/// The full schema of `table`: [`TRACE_COLUMNS`] (`trace_id`, `host`),
/// then its columns.
pub fn schema(table: &dyn Table) -> SchemaRef {
    let mut fields: Vec<Field> = TRACE_COLUMNS
        .iter()
        .map(|c| Field::new(c.name, DataType::Utf8, false))
        .collect();
    fields.extend(table.columns());
    Arc::new(Schema::new(fields))
}

/// The schema of the table named `name`, if there is one.
pub fn schema_of(name: &str) -> Option<SchemaRef> {
    all()
        .iter()
        .find(|t| t.name() == name)
        .map(|t| schema(t.as_ref()))
}

/// The rows `table` holds as a batch of its full schema, for `info`'s trace.
pub fn take_batch(table: &mut dyn Table, info: &TraceInfo) -> Result<RecordBatch, ArrowError> {
    take_projected(table, info, None)
}

/// The rows `table` holds as a batch of the columns of its full schema
/// that `projection` lists (indices into [`schema`], in that order), or of
/// all of them; the table is empty after.
pub fn take_projected(
    table: &mut dyn Table,
    info: &TraceInfo,
    projection: Option<&[usize]>,
) -> Result<RecordBatch, ArrowError> {
    let schema = schema(table);
    let rows = table.rows();
    let mut columns: Vec<Option<ArrayRef>> = table.take().into_iter().map(Some).collect();
    let constant = |v: &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(v, rows)))
    };
    let hosts = (!info.machines.is_empty()).then(|| {
        let fields = table.columns();
        let column = |name: &str| {
            fields
                .iter()
                .position(|f| f.name() == name)
                .and_then(|i| columns.get(i).cloned().flatten())
        };
        row_hosts(&info.machines, column("pid"), column("cpu"), rows)
    });
    let all: Vec<usize> = (0..schema.fields().len()).collect();
    let indices = projection.unwrap_or(&all);
    let mut out = Vec::with_capacity(indices.len());
    for &i in indices {
        let column = match i {
            0 => constant(&info.trace_id),
            1 => match &hosts {
                Some(h) => h.clone(),
                None => constant(&info.host),
            },
            i => columns
                .get_mut(i - TRACE_COLUMNS.len())
                .and_then(Option::take)
                .ok_or_else(|| ArrowError::SchemaError(format!("no column {i}")))?,
        };
        out.push(column);
    }
    let schema = Arc::new(schema.project(indices)?);
    RecordBatch::try_new_with_options(
        schema,
        out,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// Each row's machine: that of its pid, else of its cpu, else the
/// recording machine.
fn row_hosts(
    machines: &[trace_hosts::Machine],
    pid: Option<ArrayRef>,
    cpu: Option<ArrayRef>,
    rows: usize,
) -> ArrayRef {
    use datafusion::arrow::array::{Array as _, UInt64Array};
    let local = machines[0].name.as_str();
    let as_u64 = |a: Option<ArrayRef>| {
        a.and_then(|a| datafusion::arrow::compute::cast(&a, &DataType::UInt64).ok())
    };
    let (pid, cpu) = (as_u64(pid), as_u64(cpu));
    let value = |a: &Option<ArrayRef>, i: usize| {
        a.as_ref()
            .and_then(|a| a.as_any().downcast_ref::<UInt64Array>())
            .filter(|a| a.is_valid(i))
            .map(|a| a.value(i))
    };
    Arc::new(StringArray::from_iter_values((0..rows).map(|i| {
        if let Some(p) = value(&pid, i) {
            trace_hosts::machine_of_pid(machines, p).map_or(local, |m| m.name.as_str())
        } else if let Some(c) = value(&cpu, i) {
            u32::try_from(c)
                .ok()
                .and_then(|c| trace_hosts::machine_of_cpu(machines, c))
                .map_or(local, |m| m.name.as_str())
        } else {
            local
        }
    })))
}

#[cfg(test)]
pub(crate) mod testing {
    //! Hand-made events for the tables' tests.

    use datafusion::arrow::array::{Array, RecordBatch};
    use trace_analysis::event::{Args, Track};
    use trace_analysis::{Context, Event, Sym, Value};

    use super::{Table, TraceInfo, take_batch};

    /// The info of the tests' trace.
    pub fn info() -> TraceInfo {
        TraceInfo {
            trace_id: "0123456789abcdef".into(),
            host: "test-host".into(),
            machines: Vec::new(),
        }
    }

    /// A context whose strings tests intern.
    pub fn cx() -> Context {
        Context::default()
    }

    /// `s` interned in `cx`.
    pub fn sym(cx: &mut Context, s: &str) -> Sym {
        cx.strings.intern(s)
    }

    /// Arguments from `(name, value)` pairs.
    pub fn args(cx: &mut Context, pairs: &[(&str, Value)]) -> Args {
        pairs
            .iter()
            .map(|(n, v)| (cx.strings.intern(n), v.clone()))
            .collect()
    }

    /// A track of provider 1.
    pub fn track(pid: u64, tid: u64) -> Track {
        Track {
            provider: 1,
            pid,
            tid,
        }
    }

    /// `events` through `table`, as one batch, checked against its schema.
    pub fn build(table: &mut dyn Table, cx: &Context, events: &[Event]) -> RecordBatch {
        for e in events {
            table.event(e, cx);
        }
        table.end(cx);
        let rows = table.rows();
        let batch = take_batch(table, &info()).unwrap();
        assert_eq!(batch.num_rows(), rows);
        assert_eq!(table.rows(), 0, "emptied");
        batch
    }

    /// Column `name` of `batch` as text, one string per row ("" for null).
    pub fn column(batch: &RecordBatch, name: &str) -> Vec<String> {
        use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
        let col = batch
            .column_by_name(name)
            .unwrap_or_else(|| panic!("{name}"));
        let f = ArrayFormatter::try_new(col.as_ref(), &FormatOptions::default()).unwrap();
        (0..col.len()).map(|i| f.value(i).to_string()).collect()
    }
}
