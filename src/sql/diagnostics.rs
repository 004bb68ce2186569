//! The `tablegate` schema: what the store holds for each table, index and
//! materialized view, queried with SQL (`SELECT * FROM tablegate.tables`).
//!
//! - `tables`: every table and view, with its entities, bytes (the Azure
//!   service's size formula) and non-empty partitions;
//! - `indexes`: every secondary index, its state (`built`, or `building`
//!   with the rows read so far) and its entries;
//! - `materialized_views`: every view, whether writes keep it current, the
//!   tables it is made from, and its rows.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::Result as DfResult;

use super::pg_catalog::{table, Cell, Ty};
use super::provider::ReadView;
use crate::catalog::Catalog;
use crate::store::{TableStats, TableStore};

pub const SCHEMA: &str = "tablegate";

const NAMES: &[&str] = &["tables", "indexes", "materialized_views"];

const TABLES: &[(&str, Ty)] = &[
    ("table_name", Ty::Text),
    ("kind", Ty::Text),
    ("entities", Ty::Int8),
    ("bytes", Ty::Int8),
    ("partitions", Ty::Int8),
    ("indexes", Ty::Int8),
];

const INDEXES: &[(&str, Ty)] = &[
    ("index_name", Ty::Text),
    ("table_name", Ty::Text),
    ("columns", Ty::Text),
    ("is_unique", Ty::Bool),
    ("intra_partition", Ty::Bool),
    ("state", Ty::Text),
    ("entries", Ty::Int8),
    ("build_rows_done", Ty::Int8),
    ("build_rows_total", Ty::Int8),
];

const VIEWS: &[(&str, Ty)] = &[
    ("view_name", Ty::Text),
    ("maintained", Ty::Bool),
    ("base_tables", Ty::Text),
    ("rows", Ty::Int8),
    ("definition", Ty::Text),
];

/// The views of the schema and their column counts (for `pg_class`).
pub fn relations() -> impl Iterator<Item = (&'static str, usize)> {
    NAMES
        .iter()
        .copied()
        .zip([TABLES.len(), INDEXES.len(), VIEWS.len()])
}

pub struct DiagnosticsSchema {
    catalog: Arc<Catalog>,
    store: Arc<dyn TableStore>,
    view: Arc<ReadView>,
}

impl std::fmt::Debug for DiagnosticsSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DiagnosticsSchema")
    }
}

impl DiagnosticsSchema {
    pub fn new(catalog: Arc<Catalog>, store: Arc<dyn TableStore>, view: Arc<ReadView>) -> Self {
        DiagnosticsSchema {
            catalog,
            store,
            view,
        }
    }

    /// A store table's counters; zeros for one not made yet (a table
    /// created in the open transaction).
    async fn stats(&self, store_table: &str) -> TableStats {
        self.store
            .table_stats(store_table)
            .await
            .unwrap_or(TableStats {
                entities: 0,
                bytes: 0,
                partitions: 0,
            })
    }

    async fn build(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let defs = self.view.tables(&self.catalog);
        let count = |n: u64| Cell::from(i64::try_from(n).unwrap_or(i64::MAX));
        let provider = match name {
            "tables" => {
                let mut rows = Vec::with_capacity(defs.len());
                for def in &defs {
                    let stats = self.stats(&def.name).await;
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
                    ]);
                }
                table(TABLES, rows)
            }
            "indexes" => {
                let builds = self.catalog.builds();
                let mut rows = Vec::new();
                for def in &defs {
                    for index in &def.indexes {
                        let stats = self.stats(&index.store_table()).await;
                        let build = builds
                            .iter()
                            .find(|(n, _)| *n == index.name)
                            .map(|(_, b)| b);
                        rows.push(vec![
                            index.name.clone().into(),
                            def.name.clone().into(),
                            index.columns.join(", ").into(),
                            index.unique.into(),
                            index.intra_partition.into(),
                            if index.building { "building" } else { "built" }.into(),
                            count(stats.entities),
                            build.map_or(Cell::Null, |b| count(b.done)),
                            build.map_or(Cell::Null, |b| count(b.total)),
                        ]);
                    }
                }
                table(INDEXES, rows)
            }
            "materialized_views" => {
                let mut rows = Vec::new();
                for def in &defs {
                    let Some(view) = &def.view else { continue };
                    let stats = self.stats(&def.name).await;
                    rows.push(vec![
                        def.name.clone().into(),
                        view.maintained.is_some().into(),
                        view.base_tables().join(", ").into(),
                        count(stats.entities),
                        view.query.clone().into(),
                    ]);
                }
                table(VIEWS, rows)
            }
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
