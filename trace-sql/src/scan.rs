//! A trace file's tables as DataFusion tables that read the trace when a
//! query scans them: [`TraceTable`]. A scan reads the file once, in a
//! thread of its own, builds only its table and only the columns the query
//! uses (and those its filters read), decodes only the records that table
//! is made of ([`crate::tables::Table::wants`]), applies the query's
//! filters to each batch as it is made, and hands the batches on through a
//! channel of two: what a scan holds is a batch or two, whatever the size
//! of the trace. A query stopped early (`LIMIT`) stops the reading.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use tokio::sync::mpsc::Sender;
use trace_analysis::ReadStats;

use crate::SqlError;
use crate::tables::{self, TraceInfo};
use crate::writer::{BATCH_ROWS, BatchConsumer, stream_tables};

/// What the scans of one trace saw (each scan reads part of the file's
/// records): the most malformed records and refused names any one saw.
#[derive(Clone, Debug, Default)]
pub struct TraceStats(Arc<Mutex<ReadStats>>);

impl TraceStats {
    /// The figures so far.
    pub fn get(&self) -> ReadStats {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn add(&self, seen: &ReadStats) {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.errors > s.errors {
            s.errors = seen.errors;
            s.error_messages = seen.error_messages.clone();
        }
        s.names_refused = s.names_refused.max(seen.names_refused);
        s.bytes = s.bytes.max(seen.bytes);
    }
}

/// One table of a trace file, read from the file at each scan.
#[derive(Debug)]
pub struct TraceTable {
    path: PathBuf,
    info: TraceInfo,
    name: &'static str,
    schema: SchemaRef,
    stats: TraceStats,
}

impl TraceTable {
    /// Table `name` of the trace file at `path`, its reads counted in
    /// `stats`; `None` if there is no such table.
    pub fn new(
        path: PathBuf,
        info: TraceInfo,
        name: &str,
        stats: TraceStats,
    ) -> Option<TraceTable> {
        let table = tables::by_name(name)?;
        Some(TraceTable {
            path,
            info,
            name: table.name(),
            schema: tables::schema(table.as_ref()),
            stats,
        })
    }
}

#[async_trait]
impl TableProvider for TraceTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Applied while reading, and again by the plan: inexact.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let every: Vec<usize> = (0..self.schema.fields().len()).collect();
        let output = projection.cloned().unwrap_or(every);
        // The columns built: those of the output, then those the filters
        // read.
        let mut built = output.clone();
        let filters: Vec<Expr> = filters.iter().cloned().map(unnormalize_col).collect();
        for f in &filters {
            for c in f.column_refs() {
                if let Ok(i) = self.schema.index_of(&c.name)
                    && !built.contains(&i)
                {
                    built.push(i);
                }
            }
        }
        let built_schema = Arc::new(self.schema.project(&built)?);
        // A filter that cannot be evaluated here is left to the plan.
        let filter = conjunction(filters).and_then(|e| {
            let df_schema = DFSchema::try_from(built_schema.as_ref().clone()).ok()?;
            state.create_physical_expr(e, &df_schema).ok()
        });
        let partition = TracePartition {
            path: self.path.clone(),
            info: self.info.clone(),
            name: self.name,
            built,
            output_schema: Arc::new(self.schema.project(&output)?),
            outputs: output.len(),
            filter,
            stats: self.stats.clone(),
        };
        let exec = StreamingTableExec::try_new(
            partition.output_schema.clone(),
            vec![Arc::new(partition)],
            None,
            Vec::new(),
            false,
            limit,
        )?;
        Ok(Arc::new(exec))
    }
}

/// One scan's reading of the trace.
#[derive(Debug)]
struct TracePartition {
    path: PathBuf,
    info: TraceInfo,
    name: &'static str,
    /// Columns built (indices into the table's schema): the output's
    /// first, then those only the filter reads.
    built: Vec<usize>,
    output_schema: SchemaRef,
    /// How many of `built` the output has.
    outputs: usize,
    filter: Option<Arc<dyn PhysicalExpr>>,
    stats: TraceStats,
}

impl PartitionStream for TracePartition {
    fn schema(&self) -> &SchemaRef {
        &self.output_schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.output_schema.clone(), 2);
        let tx = builder.tx();
        let path = self.path.clone();
        let info = self.info.clone();
        let name = self.name;
        let built = self.built.clone();
        let stats = self.stats.clone();
        let sender = BatchSender {
            tx,
            filter: self.filter.clone(),
            output: (0..self.outputs).collect(),
        };
        builder.spawn_blocking(move || {
            let closed = sender.tx.clone();
            let result = (|| {
                let table = tables::by_name(name)
                    .ok_or_else(|| DataFusionError::Internal(format!("no table {name}")))?;
                let file = File::open(&path).map_err(|e| external(SqlError::io(&path, e)))?;
                let (seen, _) =
                    stream_tables(file, info, vec![(table, Some(built))], BATCH_ROWS, sender)
                        .map_err(external)?;
                stats.add(&seen);
                Ok(())
            })();
            // A query that stopped reading (`LIMIT`) is no failure.
            if closed.is_closed() { Ok(()) } else { result }
        });
        builder.build()
    }
}

fn external(e: SqlError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Hands a scan's batches on, filtered and projected to its output.
struct BatchSender {
    tx: Sender<DfResult<RecordBatch>>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    output: Vec<usize>,
}

impl BatchConsumer for BatchSender {
    fn batch(&mut self, _table: &'static str, batch: RecordBatch) -> Result<(), SqlError> {
        let batch = match &self.filter {
            Some(f) => {
                let keep = f
                    .evaluate(&batch)
                    .and_then(|v| v.into_array(batch.num_rows()))
                    .map_err(SqlError::Engine)?;
                let keep = keep.as_boolean_opt().ok_or_else(|| {
                    SqlError::Engine(DataFusionError::Internal(
                        "a filter that is not a boolean".into(),
                    ))
                })?;
                filter_record_batch(&batch, keep)?
            }
            None => batch,
        };
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = batch.project(&self.output)?;
        self.tx
            .blocking_send(Ok(batch))
            .map_err(|_| SqlError::Stopped)
    }
}
