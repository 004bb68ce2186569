//! The tables DataFusion sees: a schema provider over the catalog, and a
//! table provider that plans [`StoreScan`]s.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::datasource::TableType;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::columnar::ColumnCopies;
use super::diagnostics::traffic::Traffic;
use super::pushdown::{access_path, index_path, needs_split_points, split, AccessPath};
use super::scan::{ScanSpec, StoreScan};
use super::settings::Settings;
use super::txn::{Definitions, Writes, WrittenRows};
use super::types::arrow_field;
use crate::catalog::{Catalog, Keys, TableDef};
use crate::store::{EntityRead, KeyRange, Statistics};

/// The name of the extra column that carries each row's key and ETag in the
/// scans of UPDATE and DELETE (see [`dml_table_name`], [`row_identity`]).
pub const ROW_COLUMN: &str = "__tablegate_row";

/// Separates the parts of a [`ROW_COLUMN`] value: keys hold no control
/// characters.
const ROW_SEPARATOR: char = '\u{1f}';

/// The [`ROW_COLUMN`] value of a row: its PartitionKey, RowKey and ETag.
/// UPDATE and DELETE address the row they read by it (a table without a
/// primary key has no columns that give its key).
pub fn row_identity(partition_key: &str, row_key: &str, etag: Option<&str>) -> String {
    let etag = etag.unwrap_or_default();
    format!("{partition_key}{ROW_SEPARATOR}{row_key}{ROW_SEPARATOR}{etag}")
}

/// The key and ETag a [`ROW_COLUMN`] value holds.
pub fn parse_row_identity(
    value: &str,
) -> Option<(crate::model::EntityKey, Option<crate::model::ETag>)> {
    let mut parts = value.splitn(3, ROW_SEPARATOR);
    let (pk, rk, etag) = (parts.next()?, parts.next()?, parts.next()?);
    let etag = (!etag.is_empty()).then(|| crate::model::ETag(etag.to_owned()));
    Some((crate::model::EntityKey::new(pk, rk), etag))
}
pub(super) const DML_PREFIX: &str = "__tablegate_dml_";

/// The name under which a table also shows its rows' keys and ETags, for the scans
/// that UPDATE and DELETE plan.
pub fn dml_table_name(table: &str) -> String {
    format!("{DML_PREFIX}{table}")
}

/// What a session's scans read through: a snapshot taken at the start of each
/// statement (or transaction) and the table definitions its open transaction
/// changed; and the session's switches for comparing access paths: whether
/// scans push key predicates down (`SET tablegate.pushdown = off` reads
/// whole tables) and whether whole-table scans read column copies (`SET
/// tablegate.column_copies = off` reads the store's records).
pub struct ReadView {
    view: RwLock<Option<Arc<dyn EntityRead>>>,
    definitions: RwLock<Definitions>,
    /// The rows the open transaction wrote, by table: the tables' indexes
    /// do not hold them yet.
    written: RwLock<Writes>,
    /// The session's parameters, which hold its switches.
    settings: Settings,
    /// The role made with SQL the session runs as: its grants may limit
    /// the partitions it sees.
    role: RwLock<Option<String>>,
}

impl ReadView {
    pub fn new(settings: Settings) -> Self {
        ReadView {
            view: RwLock::new(None),
            definitions: RwLock::new(Definitions::new()),
            written: RwLock::new(Default::default()),
            settings,
            role: RwLock::new(None),
        }
    }

    pub fn set(&self, view: Arc<dyn EntityRead>, definitions: Definitions, written: Writes) {
        *self.view.write().unwrap_or_else(|e| e.into_inner()) = Some(view);
        *self.definitions.write().unwrap_or_else(|e| e.into_inner()) = definitions;
        *self.written.write().unwrap_or_else(|e| e.into_inner()) = written;
    }

    /// Whether a table's indexes can be read: not when the open
    /// transaction changed its definition (an index it created is built at
    /// COMMIT). The rows it wrote are not in them yet ([`ReadView::written`]).
    fn indexes_usable(&self, table: &str) -> bool {
        !self
            .definitions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(table)
    }

    /// The rows the open transaction wrote to a table, if it wrote any.
    fn written(&self, table: &str) -> Option<WrittenRows> {
        self.written
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(table)
            .cloned()
    }

    fn get(&self) -> Option<Arc<dyn EntityRead>> {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The definition of a table as the statement sees it.
    pub(super) fn definition(&self, catalog: &Catalog, name: &str) -> Option<Arc<TableDef>> {
        match self
            .definitions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            Some(own) => own.clone(),
            None => catalog.get(name),
        }
    }

    /// Every table's definition as the statement sees it, by name.
    pub(super) fn tables(&self, catalog: &Catalog) -> Vec<Arc<TableDef>> {
        self.table_names(catalog)
            .iter()
            .filter_map(|name| self.definition(catalog, name))
            .collect()
    }

    pub(super) fn table_names(&self, catalog: &Catalog) -> Vec<String> {
        let own = self.definitions.read().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = catalog
            .list()
            .iter()
            .map(|t| t.name.clone())
            .filter(|name| !own.contains_key(name))
            .collect();
        names.extend(
            own.iter()
                .filter(|(_, def)| def.is_some())
                .map(|(name, _)| name.clone()),
        );
        names.sort();
        names
    }

    pub fn set_role(&self, role: Option<String>) {
        *self.role.write().unwrap_or_else(|e| e.into_inner()) = role;
    }

    pub(super) fn pushdown(&self) -> bool {
        self.settings.switches().pushdown
    }

    fn column_copies(&self) -> bool {
        self.settings.switches().column_copies
    }
}

/// The `public` schema: every table of the catalog.
pub struct TablegateSchema {
    catalog: Arc<Catalog>,
    stats: Arc<dyn Statistics>,
    view: Arc<ReadView>,
    /// Where unqualified names that are not tables resolve: `pg_catalog`,
    /// which PostgreSQL searches implicitly.
    system: Arc<dyn SchemaProvider>,
    traffic: Arc<Traffic>,
    copies: Option<Arc<ColumnCopies>>,
}

impl std::fmt::Debug for TablegateSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TablegateSchema")
    }
}

impl TablegateSchema {
    pub fn new(
        catalog: Arc<Catalog>,
        stats: Arc<dyn Statistics>,
        view: Arc<ReadView>,
        system: Arc<dyn SchemaProvider>,
        traffic: Arc<Traffic>,
        copies: Option<Arc<ColumnCopies>>,
    ) -> Self {
        TablegateSchema {
            catalog,
            stats,
            view,
            system,
            traffic,
            copies,
        }
    }
}

#[async_trait]
impl SchemaProvider for TablegateSchema {
    fn table_names(&self) -> Vec<String> {
        self.view.table_names(&self.catalog)
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let (name, with_row) = match name.strip_prefix(DML_PREFIX) {
            Some(base) => (base, true),
            None => (name, false),
        };
        let mut def = self.view.definition(&self.catalog, name);
        if def.is_none()
            && self
                .catalog
                .refresh(std::time::Duration::ZERO)
                .await
                .is_ok()
        {
            // Another gateway may have made it since the definitions were read.
            def = self.view.definition(&self.catalog, name);
        }
        // A view is read as its query (see `views::expand`), never scanned.
        let def = def.filter(|def| def.holds_rows());
        let Some(def) = def else {
            if with_row {
                return Ok(None);
            }
            return match self.catalog.sequences.get(name) {
                Some(sequence) => super::pg_catalog::sequence_relation(&sequence).map(Some),
                None => self.system.table(name).await,
            };
        };
        Ok(Some({
            Arc::new(StoreTable {
                schema: table_schema(&def, with_row),
                def,
                stats: self.stats.clone(),
                view: self.view.clone(),
                with_row,
                traffic: self.traffic.clone(),
                copies: self.copies.clone(),
            }) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.view
            .definition(&self.catalog, name.strip_prefix(DML_PREFIX).unwrap_or(name))
            .is_some()
    }
}

/// One table, as DataFusion plans it.
pub struct StoreTable {
    def: Arc<TableDef>,
    schema: SchemaRef,
    stats: Arc<dyn Statistics>,
    view: Arc<ReadView>,
    with_row: bool,
    traffic: Arc<Traffic>,
    copies: Option<Arc<ColumnCopies>>,
}

impl std::fmt::Debug for StoreTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreTable")
            .field("table", &self.def.name)
            .finish()
    }
}

impl std::fmt::Debug for ReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadView")
    }
}

/// The columns DataFusion sees: the table's, and the row column for DML scans.
pub(super) fn table_schema(def: &TableDef, with_row: bool) -> SchemaRef {
    let mut fields: Vec<Field> = def.columns.iter().map(arrow_field).collect();
    if with_row {
        fields.push(Field::new(ROW_COLUMN, DataType::Utf8, true));
    }
    Arc::new(Schema::new(fields))
}

/// Whether an access path stays inside one partition.
fn single_partition(access: &AccessPath) -> bool {
    match access {
        AccessPath::Points(keys) => keys
            .windows(2)
            .all(|w| w[0].partition_key == w[1].partition_key),
        AccessPath::Ranges(ranges) => {
            let mut partitions = ranges.iter().map(|r| match r {
                KeyRange::Rows { partition_key, .. } => Some(partition_key),
                KeyRange::Partitions { .. } => None,
            });
            match partitions.next() {
                Some(Some(first)) => partitions.all(|p| p == Some(first)),
                _ => false,
            }
        }
        AccessPath::Table | AccessPath::Index { .. } => false,
    }
}

fn has_subquery(expr: &Expr) -> bool {
    let mut found = false;
    let _ = expr.apply(|e| {
        if matches!(
            e,
            Expr::ScalarSubquery(_)
                | Expr::InSubquery(_)
                | Expr::Exists(_)
                | Expr::OuterReferenceColumn(..)
                | Expr::Placeholder(_)
        ) {
            found = true;
        }
        Ok(if found {
            datafusion::common::tree_node::TreeNodeRecursion::Stop
        } else {
            datafusion::common::tree_node::TreeNodeRecursion::Continue
        })
    });
    found
}

use datafusion::common::tree_node::TreeNode;

#[async_trait]
impl TableProvider for StoreTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Every filter the scan can evaluate is applied by the scan itself, while
    /// decoding, so DataFusion need not filter again (and can push limits).
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if has_subquery(f) {
                    TableProviderFilterPushDown::Unsupported
                } else {
                    TableProviderFilterPushDown::Exact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let def = &self.def;
        // A grant limited to some partitions: rows outside them are not
        // there for the session, and the filter narrows what is read.
        let role = self
            .view
            .role
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let limited: Vec<Expr>;
        let filters = match role.and_then(|r| super::access::PartitionLimit::of(def, &r)) {
            Some(limit) => {
                limited = filters.iter().cloned().chain([limit.filter()]).collect();
                &limited[..]
            }
            None => filters,
        };
        let table_columns = def.columns.len();
        let row_position = self.with_row.then_some(table_columns);
        let output: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let with_row = row_position.is_some_and(|e| output.contains(&e));
        // The row column, when asked, must be last among the output columns.
        let mut decoded: Vec<usize> = output
            .iter()
            .copied()
            .filter(|&i| Some(i) != row_position)
            .collect();
        let mut output_schema_fields: Vec<Field> = decoded
            .iter()
            .map(|&i| self.schema.field(i).clone())
            .collect();
        if with_row {
            output_schema_fields.push(self.schema.field(table_columns).clone());
        }
        let output_count = decoded.len();

        let mut referenced = HashSet::new();
        for f in filters {
            for c in f.column_refs() {
                if let Some(i) = def.column_index(&c.name) {
                    referenced.insert(i);
                }
            }
        }
        let mut filter_only: Vec<usize> = referenced
            .into_iter()
            .filter(|i| !decoded.contains(i))
            .collect();
        filter_only.sort();
        decoded.extend(&filter_only);

        let mut decode_fields = output_schema_fields.clone();
        decode_fields.extend(filter_only.iter().map(|&i| self.schema.field(i).clone()));
        let decode_schema = Arc::new(Schema::new(decode_fields));
        let filter = match conjunction(filters.iter().cloned()) {
            Some(expr) => {
                let df_schema = DFSchema::try_from(decode_schema.as_ref().clone())?;
                Some(state.create_physical_expr(expr, &df_schema)?)
            }
            None => None,
        };

        // The output is in key order. Within one partition that is the order
        // of the row key columns; across partitions, of all key columns. The
        // ordering is declared when those columns are all in the output.
        let access = if self.view.pushdown() {
            let usable = self.view.indexes_usable(&def.name);
            match access_path(def, filters) {
                AccessPath::Table if usable => {
                    index_path(def, filters).unwrap_or(AccessPath::Table)
                }
                // Whole partitions: an index inside them reads less.
                AccessPath::Ranges(ranges) if usable && whole_partitions(&ranges) => {
                    match index_path(def, filters) {
                        Some(AccessPath::Index { index, ranges }) if index.intra_partition => {
                            AccessPath::Index { index, ranges }
                        }
                        _ => AccessPath::Ranges(ranges),
                    }
                }
                keyed => keyed,
            }
        } else {
            AccessPath::Table
        };
        let key_order = match &def.keys {
            // A store whose pages are not in key order (Cosmos DB).
            _ if !self.stats.key_ordered() => Vec::new(),
            // An index gives rows in the order of its values.
            _ if matches!(access, AccessPath::Index { .. }) => Vec::new(),
            Keys::Columns { partition, row } => {
                let ordered: Vec<usize> = if single_partition(&access) {
                    row.clone()
                } else {
                    partition.iter().chain(row).copied().collect()
                };
                let positions: Option<Vec<usize>> = ordered
                    .iter()
                    .map(|k| decoded[..output_count].iter().position(|c| c == k))
                    .collect();
                positions.unwrap_or_default()
            }
            Keys::Generated => Vec::new(),
        };

        // A scan whose limit ends it early is not worth cutting.
        let parts = state.config().target_partitions();
        let splits = if parts < 2 || (limit.is_some() && filters.is_empty()) {
            vec![access.clone()]
        } else {
            let points = if needs_split_points(&access) {
                // Only a hint: a table created in the open transaction has no
                // statistics yet, and a scan reads every piece either way.
                self.stats
                    .split_points(&def.name, parts)
                    .await
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            split(&access, &points, parts)
        };

        // What the access path reads, and a fifth of it when filters
        // narrow it further (DataFusion's guess for a filter).
        let entities = || async {
            self.stats
                .table_stats(&def.name)
                .await
                .ok()
                .map(|s| usize::try_from(s.entities).unwrap_or(usize::MAX))
        };
        let read = match &access {
            AccessPath::Points(keys) => Some(keys.len()),
            AccessPath::Table => entities().await,
            AccessPath::Ranges(_) | AccessPath::Index { .. } => None,
        };
        let reader = self.view.get().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal("no read view for this statement".into())
        })?;
        let copy = match (&access, &self.copies) {
            (AccessPath::Table, Some(copies)) if !with_row && self.view.column_copies() => {
                copies.for_scan(def, &reader, read).await
            }
            _ => None,
        };
        let estimated_rows = read.map(|n| match filters.is_empty() {
            true => n,
            false => n.div_ceil(5),
        });
        let spec = ScanSpec {
            table: def.clone(),
            access,
            splits,
            decoded,
            output: output_count,
            with_row,
            decode_schema,
            schema: Arc::new(Schema::new(output_schema_fields)),
            filter,
            limit,
            reverse: false,
            key_order,
            key_lookup: None,
            pushdown: self.view.pushdown(),
            indexes_usable: self.view.indexes_usable(&def.name),
            written: self.view.written(&def.name),
            estimated_rows,
            traffic: self.traffic.clone(),
            copy,
        };
        Ok(Arc::new(StoreScan::new(spec, reader)))
    }
}

/// Whether every range is a whole partition.
fn whole_partitions(ranges: &[KeyRange]) -> bool {
    ranges.iter().all(|r| {
        matches!(
            r,
            KeyRange::Rows {
                from: std::ops::Bound::Unbounded,
                to: std::ops::Bound::Unbounded,
                ..
            }
        )
    })
}
