//! The `tablegate` schema: what the store holds for each table, index and
//! materialized view, the traffic of its partitions and the recent queries,
//! queried with SQL (`SELECT * FROM tablegate.partitions ORDER BY hot_rank`).
//!
//! - `tables`: every table and view, with its entities, bytes (the Azure
//!   service's size formula), non-empty partitions, traffic since start,
//!   the shape of its recent writes and its column copy (`ready` when one
//!   holds its latest rows, `making` while one is made);
//! - `partitions`: per partition, entities, bytes, reads and writes since
//!   start and per second over the last minute, and its rank by traffic;
//! - `indexes`: every secondary index, its state (`built`, or `building`
//!   with the rows read so far), entries, lag and last verification;
//! - `materialized_views`: every view, whether writes keep it current, the
//!   tables it is made from, its rows, lag and last verification;
//! - `queries`: the recent statements, one row per scan, with its access
//!   path, entities read, rows returned and density.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::Result as DfResult;

use super::traffic::WriteShape;
use super::Monitor;
use crate::catalog::{Catalog, TableDef};
use crate::sql::columnar::ColumnCopies;
use crate::sql::pg_catalog::{table, Cell, Ty};
use crate::sql::provider::ReadView;
use crate::store::{TableStats, TableStore};

pub const SCHEMA: &str = "tablegate";

const NAMES: &[&str] = &[
    "tables",
    "partitions",
    "indexes",
    "materialized_views",
    "queries",
];

const TABLES: &[(&str, Ty)] = &[
    ("table_name", Ty::Text),
    ("kind", Ty::Text),
    ("entities", Ty::Int8),
    ("bytes", Ty::Int8),
    ("partitions", Ty::Int8),
    ("indexes", Ty::Int8),
    ("reads", Ty::Int8),
    ("writes", Ty::Int8),
    ("scans", Ty::Int8),
    ("entities_scanned", Ty::Int8),
    ("write_pattern", Ty::Text),
    ("column_copy", Ty::Text),
];

const PARTITIONS: &[(&str, Ty)] = &[
    ("table_name", Ty::Text),
    ("partition_key", Ty::Text),
    ("entities", Ty::Int8),
    ("bytes", Ty::Int8),
    ("reads", Ty::Int8),
    ("writes", Ty::Int8),
    ("reads_per_second", Ty::Float8),
    ("writes_per_second", Ty::Float8),
    ("reads_per_second_since_start", Ty::Float8),
    ("writes_per_second_since_start", Ty::Float8),
    ("hot_rank", Ty::Int8),
];

const INDEXES: &[(&str, Ty)] = &[
    ("index_name", Ty::Text),
    ("table_name", Ty::Text),
    ("columns", Ty::Text),
    ("is_unique", Ty::Bool),
    ("intra_partition", Ty::Bool),
    ("state", Ty::Text),
    ("entries", Ty::Int8),
    ("bytes", Ty::Int8),
    ("build_rows_done", Ty::Int8),
    ("build_rows_total", Ty::Int8),
    ("lag_seconds", Ty::Float8),
    ("last_verified", Ty::Timestamptz),
    ("last_verify_differences", Ty::Int8),
];

const VIEWS: &[(&str, Ty)] = &[
    ("view_name", Ty::Text),
    ("maintained", Ty::Bool),
    ("base_tables", Ty::Text),
    ("rows", Ty::Int8),
    ("bytes", Ty::Int8),
    ("lag_seconds", Ty::Float8),
    ("last_refreshed", Ty::Timestamptz),
    ("last_verified", Ty::Timestamptz),
    ("last_verify_differences", Ty::Int8),
    ("definition", Ty::Text),
];

const QUERIES: &[(&str, Ty)] = &[
    ("query_id", Ty::Int8),
    ("started", Ty::Timestamptz),
    ("query", Ty::Text),
    ("elapsed_ms", Ty::Float8),
    ("rows", Ty::Int8),
    ("scan", Ty::Int4),
    ("table_name", Ty::Text),
    ("access", Ty::Text),
    ("entities_read", Ty::Int8),
    ("rows_returned", Ty::Int8),
    ("density", Ty::Float8),
    ("filter_columns", Ty::Text),
];

/// Partitions of a table the `partitions` view lists from the store, besides
/// those with traffic: enough for most tables, bounded for huge ones.
const LISTED_PARTITIONS: usize = 10_000;

/// The views of the schema and their columns (for `pg_class` and
/// `pg_attribute`).
pub(in crate::sql) fn relations(
) -> impl Iterator<Item = (&'static str, &'static [(&'static str, Ty)])> {
    NAMES
        .iter()
        .copied()
        .zip([TABLES, PARTITIONS, INDEXES, VIEWS, QUERIES])
}

pub struct DiagnosticsSchema {
    catalog: Arc<Catalog>,
    store: Arc<dyn TableStore>,
    view: Arc<ReadView>,
    monitor: Arc<Monitor>,
    copies: Option<Arc<ColumnCopies>>,
}

impl std::fmt::Debug for DiagnosticsSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DiagnosticsSchema")
    }
}

fn count(n: u64) -> Cell {
    Cell::from(i64::try_from(n).unwrap_or(i64::MAX))
}

fn time(t: Option<SystemTime>) -> Cell {
    t.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(Cell::Null, |d| {
            Cell::Int(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        })
}

fn shape_name(shape: &WriteShape) -> String {
    match shape {
        WriteShape::HotPartition { partition, .. } => format!("hot partition {partition:?}"),
        WriteShape::AppendOnly { .. } => "append-only".into(),
        WriteShape::PrependOnly { .. } => "prepend-only".into(),
    }
}

impl DiagnosticsSchema {
    pub fn new(
        catalog: Arc<Catalog>,
        store: Arc<dyn TableStore>,
        view: Arc<ReadView>,
        monitor: Arc<Monitor>,
        copies: Option<Arc<ColumnCopies>>,
    ) -> Self {
        DiagnosticsSchema {
            catalog,
            store,
            view,
            monitor,
            copies,
        }
    }

    /// A store table's counters; zeros for one not made yet (a table
    /// created in the open transaction).
    /// What index entries and maintained view rows lag behind their tables:
    /// nothing when the store writes them in the rows' own atomic write; the
    /// age of the oldest write not yet whole for one that makes writes whole
    /// later (the Azure service's outbox).
    async fn derived_lag(&self) -> Cell {
        match self.store.pending_for().await {
            Ok(pending) => Cell::Double(pending.map_or(0.0, |d| d.as_secs_f64())),
            Err(_) => Cell::Null,
        }
    }

    async fn column_copy(&self, table: &str) -> Cell {
        let Some(copies) = &self.copies else {
            return Cell::Null;
        };
        let version = self.store.read_view().table_version(table).await;
        match version.ok().flatten().and_then(|v| copies.state(table, v)) {
            Some(state) => state.into(),
            None => Cell::Null,
        }
    }

    async fn stats(&self, store_table: &str) -> TableStats {
        self.store
            .table_stats(store_table)
            .await
            .unwrap_or_default()
    }

    async fn tables(&self, defs: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
        let mut rows = Vec::with_capacity(defs.len());
        for def in defs {
            let stats = self.stats(&def.name).await;
            let traffic = self.monitor.traffic.table(&def.name);
            let kind = if def.view.is_some() {
                "materialized view"
            } else {
                "table"
            };
            rows.push(vec![
                def.name.clone().into(),
                kind.into(),
                count(stats.entities),
                count(stats.bytes),
                count(stats.partitions),
                count(def.indexes.len() as u64),
                count(traffic.total.reads),
                count(traffic.total.writes),
                count(traffic.scans),
                count(traffic.entities_scanned),
                traffic
                    .write_shape
                    .as_ref()
                    .map_or(Cell::Null, |s| shape_name(s).into()),
                self.column_copy(&def.name).await,
            ]);
        }
        rows
    }

    async fn partitions(&self, defs: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
        let seconds = self.monitor.traffic.seconds_counted();
        let minute = seconds.min(60.0);
        let mut rows = Vec::new();
        for def in defs {
            let traffic = self.monitor.traffic.table(&def.name);
            let mut listed = std::collections::BTreeMap::new();
            let mut continuation = None;
            while listed.len() < LISTED_PARTITIONS {
                let Ok(page) = self
                    .store
                    .list_partition_stats(&def.name, 1000, continuation.as_ref())
                    .await
                else {
                    break;
                };
                for p in page.partitions {
                    listed.insert(p.partition_key.clone(), p);
                }
                continuation = page.continuation;
                if continuation.is_none() {
                    break;
                }
            }
            // Busiest first, then the quiet ones in key order.
            for (rank, p) in traffic.partitions.iter().enumerate() {
                let stats = match listed.remove(&p.partition) {
                    Some(stats) => stats,
                    None => self
                        .store
                        .partition_stats(&def.name, &p.partition)
                        .await
                        .unwrap_or_default(),
                };
                rows.push(vec![
                    def.name.clone().into(),
                    p.partition.clone().into(),
                    count(stats.entities),
                    count(stats.bytes),
                    count(p.total.reads),
                    count(p.total.writes),
                    Cell::Double(p.last_minute.reads as f64 / minute),
                    Cell::Double(p.last_minute.writes as f64 / minute),
                    Cell::Double(p.total.reads as f64 / seconds),
                    Cell::Double(p.total.writes as f64 / seconds),
                    count(rank as u64 + 1),
                ]);
            }
            for (key, stats) in listed {
                rows.push(vec![
                    def.name.clone().into(),
                    key.into(),
                    count(stats.entities),
                    count(stats.bytes),
                    count(0),
                    count(0),
                    Cell::Double(0.0),
                    Cell::Double(0.0),
                    Cell::Double(0.0),
                    Cell::Double(0.0),
                    Cell::Null,
                ]);
            }
        }
        rows
    }

    async fn indexes(&self, defs: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
        let builds = self.catalog.builds();
        let lag = self.derived_lag().await;
        let mut rows = Vec::new();
        for def in defs {
            for index in &def.indexes {
                let stats = self.stats(&index.store_table()).await;
                let build = builds
                    .iter()
                    .find(|(n, _)| *n == index.name)
                    .map(|(_, b)| b);
                let verified = self.monitor.verification(&index.name);
                rows.push(vec![
                    index.name.clone().into(),
                    def.name.clone().into(),
                    index.columns.join(", ").into(),
                    index.unique.into(),
                    index.intra_partition.into(),
                    if index.building { "building" } else { "built" }.into(),
                    count(stats.entities),
                    count(stats.bytes),
                    build.map_or(Cell::Null, |b| count(b.done)),
                    build.map_or(Cell::Null, |b| count(b.total)),
                    lag.clone(),
                    time(verified.map(|v| v.at)),
                    verified.map_or(Cell::Null, |v| count(v.differences)),
                ]);
            }
        }
        rows
    }

    async fn views(&self, defs: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
        let derived_lag = self.derived_lag().await;
        let mut rows = Vec::new();
        for def in defs {
            let Some(view) = &def.view else { continue };
            let stats = self.stats(&def.name).await;
            let refreshed = self.monitor.refreshed(&def.name);
            // A maintained view changes with its base rows (see
            // `derived_lag`); a refreshed one is as old as its last refresh.
            let lag = match (&view.maintained, refreshed) {
                (Some(_), _) => derived_lag.clone(),
                (None, Some(t)) => Cell::Double(t.elapsed().map_or(0.0, |d| d.as_secs_f64())),
                (None, None) => Cell::Null,
            };
            let verified = self.monitor.verification(&def.name);
            rows.push(vec![
                def.name.clone().into(),
                view.maintained.is_some().into(),
                view.base_tables().join(", ").into(),
                count(stats.entities),
                count(stats.bytes),
                lag,
                time(refreshed),
                time(verified.map(|v| v.at)),
                verified.map_or(Cell::Null, |v| count(v.differences)),
                view.query.clone().into(),
            ]);
        }
        rows
    }

    fn queries(&self) -> Vec<Vec<Cell>> {
        let mut rows = Vec::new();
        for q in self.monitor.queries.recent() {
            let statement = |scan: Cell| {
                vec![
                    count(q.id),
                    time(Some(q.started)),
                    q.text.to_string().into(),
                    Cell::Double(q.elapsed.as_secs_f64() * 1000.0),
                    count(q.rows),
                    scan,
                ]
            };
            if q.scans.is_empty() {
                let mut row = statement(Cell::Null);
                row.extend(std::iter::repeat_n(Cell::Null, 6));
                rows.push(row);
            }
            for (i, scan) in q.scans.iter().enumerate() {
                let mut row = statement(Cell::Int(i as i64 + 1));
                row.extend([
                    scan.table.clone().into(),
                    scan.access_text().into(),
                    count(scan.entities_read),
                    count(scan.rows_returned),
                    scan.density().map_or(Cell::Null, Cell::Double),
                    if scan.filter_columns.is_empty() {
                        Cell::Null
                    } else {
                        scan.filter_columns.join(", ").into()
                    },
                ]);
                rows.push(row);
            }
        }
        rows
    }

    async fn build(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        // Views hold no rows, partitions or traffic of their own.
        let defs: Vec<Arc<TableDef>> = self
            .view
            .tables(&self.catalog)
            .into_iter()
            .filter(|def| def.holds_rows())
            .collect();
        let provider = match name {
            "tables" => table(TABLES, self.tables(&defs).await),
            "partitions" => table(PARTITIONS, self.partitions(&defs).await),
            "indexes" => table(INDEXES, self.indexes(&defs).await),
            "materialized_views" => table(VIEWS, self.views(&defs).await),
            "queries" => table(QUERIES, self.queries()),
            _ => return Ok(None),
        };
        provider.map(Some)
    }
}

#[async_trait]
impl SchemaProvider for DiagnosticsSchema {
    fn table_names(&self) -> Vec<String> {
        NAMES.iter().map(|n| (*n).to_owned()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        self.build(name).await
    }

    fn table_exist(&self, name: &str) -> bool {
        NAMES.contains(&name)
    }
}
