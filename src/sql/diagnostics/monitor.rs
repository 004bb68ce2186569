//! What the server watches as statements run: partition traffic, the
//! recent-queries log, index and view checks, and the warnings that follow
//! from them (sent as NOTICE messages and written to the log).

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Result as DfResult;
use datafusion::physical_plan::{ExecutionPlan, RecordBatchStream, SendableRecordBatchStream};
use futures::Stream;
use std::future::Future;

use super::queries::{QueryLog, QueryRecord, ScanRecord};
use super::traffic::{Traffic, WriteShape};
use crate::model::{MAX_ENTITY_BYTES, MAX_PROPERTIES};
use crate::sql::scan::StoreScan;
use crate::sql::session::Notices;
use crate::store::WriteOp;

/// The last VERIFY of an index or materialized view.
#[derive(Debug, Clone, Copy)]
pub struct Verification {
    pub at: SystemTime,
    pub differences: u64,
}

/// Everything watched, shared by the sessions of a server.
#[derive(Default)]
pub struct Monitor {
    pub traffic: Arc<Traffic>,
    pub queries: QueryLog,
    verifications: Mutex<HashMap<String, Verification>>,
    refreshes: Mutex<HashMap<String, SystemTime>>,
}

/// A warning about a write, and what it is about (a session gets each at
/// most once a minute).
pub struct Warning {
    pub topic: String,
    pub message: String,
}

impl Monitor {
    /// Logs a finished statement; returns the warnings of its low-density
    /// scans.
    pub fn record_statement(&self, record: QueryRecord) -> Vec<String> {
        let mut warnings = Vec::new();
        for scan in &record.scans {
            if scan.across_partitions() {
                self.traffic.record_scan(&scan.table, scan.entities_read);
            }
            if let Some(warning) = scan.low_density_warning() {
                tracing::warn!(statement = %record.text, "{warning}");
                warnings.push(warning);
            }
        }
        self.queries.push(record);
        warnings
    }

    pub fn record_verification(&self, name: &str, differences: u64) {
        let verification = Verification {
            at: SystemTime::now(),
            differences,
        };
        lock(&self.verifications).insert(name.to_owned(), verification);
    }

    pub fn verification(&self, name: &str) -> Option<Verification> {
        lock(&self.verifications).get(name).copied()
    }

    pub fn record_refresh(&self, view: &str) {
        lock(&self.refreshes).insert(view.to_owned(), SystemTime::now());
    }

    pub fn refreshed(&self, view: &str) -> Option<SystemTime> {
        lock(&self.refreshes).get(view).copied()
    }

    /// Counts a committed statement's writes and returns the warnings they
    /// earn: a row near the entity limits, a table whose recent writes
    /// concentrate on one partition or on the newest or oldest key.
    pub fn record_writes(&self, writes: Writes) -> Vec<Warning> {
        let mut warnings = Vec::new();
        for (table, near) in writes.near_limits {
            let Some(message) = near.first else { continue };
            let rows = near.count;
            warnings.push(Warning {
                topic: format!("{table}: entity limits"),
                message: format!("{table}: {message} ({rows} such rows in this statement)"),
            });
        }
        for (table, runs) in writes.per_table {
            let runs: Vec<(&str, u64)> = runs.iter().map(|(p, n)| (p.as_str(), *n)).collect();
            let Some(shape) = self.traffic.record_writes(&table, &runs) else {
                continue;
            };
            warnings.push(Warning {
                topic: format!("{table}: write shape"),
                message: shape_warning(&table, &shape),
            });
        }
        warnings
    }
}

/// What a statement writes, noted before its commit takes the operations.
pub struct Writes {
    /// Per table, the entities written per partition, in write order.
    per_table: BTreeMap<String, Vec<(String, u64)>>,
    /// Per table, the rows near the entity limits.
    near_limits: BTreeMap<String, NearLimits>,
}

/// Rows near the entity limits: how many, and the first one's warning.
#[derive(Default)]
pub struct NearLimits {
    count: usize,
    first: Option<String>,
}

impl NearLimits {
    /// Counts the entity at `key`, of `properties` properties and `bytes`
    /// billed, if it is within a tenth of a limit.
    pub fn note(
        &mut self,
        key: &crate::model::EntityKey,
        properties: usize,
        bytes: usize,
        def: Option<&crate::catalog::TableDef>,
    ) {
        if let Some(message) = near_limit(key, properties, bytes, def) {
            self.count += 1;
            self.first.get_or_insert(message);
        }
    }

    /// Adds the rows `later` counted (made after these).
    pub fn add(&mut self, later: NearLimits) {
        self.count += later.count;
        if self.first.is_none() {
            self.first = later.first;
        }
    }
}

impl Writes {
    /// The writes of new rows into one table, with those of them near the
    /// entity limits (counted when the rows were made).
    pub fn of_rows(
        table: &str,
        rows: &crate::store::EncodedRows,
        near_limits: NearLimits,
    ) -> Writes {
        let mut runs: Vec<(String, u64)> = Vec::new();
        for row in rows.iter() {
            match runs.last_mut() {
                Some((p, n)) if p == row.partition_key => *n += 1,
                _ => runs.push((row.partition_key.to_owned(), 1)),
            }
        }
        Writes {
            per_table: BTreeMap::from([(table.to_owned(), runs)]),
            near_limits: BTreeMap::from([(table.to_owned(), near_limits)]),
        }
    }

    /// No writes, only the rows of `table` near the entity limits.
    pub fn of_near_limits(table: &str, near_limits: NearLimits) -> Writes {
        Writes {
            per_table: BTreeMap::new(),
            near_limits: BTreeMap::from([(table.to_owned(), near_limits)]),
        }
    }

    /// The writes of `ops`, whose tables' definitions are among `used`.
    pub fn of(ops: &[(String, WriteOp)], used: &[Arc<crate::catalog::TableDef>]) -> Writes {
        let mut per_table: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
        let mut near_limits: BTreeMap<String, NearLimits> = BTreeMap::new();
        for (table, op) in ops {
            let runs = match per_table.get_mut(table) {
                Some(runs) => runs,
                None => per_table.entry(table.clone()).or_default(),
            };
            let partition = &op.key().partition_key;
            match runs.last_mut() {
                Some((p, n)) if p == partition => *n += 1,
                _ => runs.push((partition.clone(), 1)),
            }
            if let Some(entity) = op_entity(op) {
                let def = used.iter().find(|d| &d.name == table);
                near_limits.entry(table.clone()).or_default().note(
                    &entity.key,
                    entity.properties.len(),
                    entity.billed_size(),
                    def.map(|d| &**d),
                );
            }
        }
        Writes {
            per_table,
            near_limits,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn op_entity(op: &WriteOp) -> Option<&crate::model::Entity> {
    match op {
        WriteOp::Insert(e)
        | WriteOp::InsertOrReplace(e)
        | WriteOp::InsertOrMerge(e)
        | WriteOp::Replace { entity: e, .. }
        | WriteOp::Merge { entity: e, .. } => Some(e),
        WriteOp::Delete { .. } => None,
    }
}

/// A row within a tenth of the 1 MiB or 252-property limit.
fn near_limit(
    key: &crate::model::EntityKey,
    properties: usize,
    bytes: usize,
    def: Option<&crate::catalog::TableDef>,
) -> Option<String> {
    // The row by its key columns' values, as SQL shows them (made only
    // for a row that earns a warning: every written row passes here).
    let key = || match def {
        Some(def) => def.describe_key(key),
        None => format!("({:?}, {:?})", key.partition_key, key.row_key),
    };
    if bytes * 10 >= MAX_ENTITY_BYTES * 9 {
        let key = key();
        return Some(format!(
            "row {key} is {bytes} bytes, near the entity limit of {MAX_ENTITY_BYTES}; keep large \
             values outside the row and a reference in it (large entities pattern)"
        ));
    }
    if properties * 10 >= MAX_PROPERTIES * 9 {
        let key = key();
        return Some(format!(
            "row {key} has {properties} properties, near the limit of {MAX_PROPERTIES}; split \
             the row over several entities of one partition (wide entities pattern)"
        ));
    }
    None
}

pub fn shape_warning(table: &str, shape: &WriteShape) -> String {
    match shape {
        WriteShape::HotPartition {
            partition,
            count,
            of,
        } => format!(
            "hot partition: {count} of the last {of} statements writing \"{table}\" wrote \
             partition {partition:?}; a partition key with more spread shares the load (compound key \
             pattern; the sharding pattern of the data partitioning guidance)"
        ),
        WriteShape::AppendOnly { count, of } => format!(
            "append-only writes: {count} of the last {of} statements writing \"{table}\" wrote \
             at its newest PartitionKey, so one partition takes every write; prefix the key with a bucket or \
             hash that spreads them (prepend/append anti-pattern, log data anti-pattern)"
        ),
        WriteShape::PrependOnly { count, of } => format!(
            "prepend-only writes: {count} of the last {of} statements writing \"{table}\" wrote \
             at its oldest PartitionKey, so one partition takes every write; prefix the key with a \
             bucket or hash that spreads them (prepend/append anti-pattern)"
        ),
    }
}

/// The scans of a physical plan, with what each did.
pub fn scans_of(plan: &Arc<dyn ExecutionPlan>) -> Vec<ScanRecord> {
    fn walk(
        plan: &Arc<dyn ExecutionPlan>,
        joined: bool,
        aggregated: bool,
        out: &mut Vec<ScanRecord>,
    ) {
        if let Some(scan) = plan.downcast_ref::<StoreScan>() {
            out.push(scan.record(joined, aggregated));
            return;
        }
        let name = plan.name();
        let joined = joined || name.contains("Join");
        let aggregated = aggregated || name.contains("Aggregate");
        for child in plan.children() {
            walk(child, joined, aggregated, out);
        }
    }
    let mut out = Vec::new();
    walk(plan, false, false, &mut out);
    out
}

/// A query's rows on their way to the client; when they end (or the client
/// stops reading), the statement goes into the log and its low-density
/// scans become warnings.
pub struct Watched {
    inner: SendableRecordBatchStream,
    plan: Arc<dyn ExecutionPlan>,
    monitor: Arc<Monitor>,
    notices: Notices,
    text: Arc<str>,
    started: SystemTime,
    clock: Instant,
    rows: u64,
    done: bool,
    /// When the statement times out (`statement_timeout`).
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Watched {
    pub fn new(
        inner: SendableRecordBatchStream,
        plan: Arc<dyn ExecutionPlan>,
        monitor: Arc<Monitor>,
        notices: Notices,
        text: Arc<str>,
        deadline: Option<tokio::time::Instant>,
    ) -> Self {
        Watched {
            inner,
            plan,
            monitor,
            notices,
            text,
            started: SystemTime::now(),
            clock: Instant::now(),
            rows: 0,
            done: false,
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
        }
    }

    fn finish(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let scans = scans_of(&self.plan);
        let warnings = self.monitor.record_statement(QueryRecord {
            id: 0,
            started: self.started,
            text: self.text.clone(),
            elapsed: self.clock.elapsed(),
            rows: self.rows,
            scans,
        });
        for warning in warnings {
            self.notices.push(warning);
        }
    }
}

impl Stream for Watched {
    type Item = DfResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(deadline) = &mut self.deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                self.finish();
                return Poll::Ready(Some(Err(datafusion::error::DataFusionError::External(
                    Box::new(crate::sql::SqlError::statement_timeout()),
                ))));
            }
        }
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(batch))) => self.rows += batch.num_rows() as u64,
            Poll::Ready(None) => self.finish(),
            _ => {}
        }
        polled
    }
}

impl RecordBatchStream for Watched {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.finish();
    }
}
