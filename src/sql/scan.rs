//! `StoreScan`: the execution plan that reads a table through its access path,
//! decodes only the columns it needs, applies the pushed-down filters while
//! decoding, and stops at the pushed-down limit.

use super::txn::{written_entities, wrote_row, WrittenRows};
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{
    EquivalenceProperties, LexOrdering, PhysicalExpr, PhysicalSortExpr,
};
use datafusion::physical_plan::execution_plan::{
    Boundedness, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::sort_pushdown::SortOrderPushdownResult;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::stream;

use super::columnar::{ColumnCopy, CopyReader};
use super::convert::RowDecoder;
use super::diagnostics::queries::ScanRecord;
use super::diagnostics::traffic::Traffic;
use super::pushdown::{self, AccessPath};
use crate::catalog::TableDef;
use crate::model::Entity;
use crate::store::{Continuation, EncodedRows, EntityRead, Query};

/// Entities a page holds when no limit bounds the scan.
const PAGE: usize = 4096;
/// Point gets made before a batch is produced.
const POINTS_PER_BATCH: usize = 256;

/// What a scan reads and returns. Built by the table provider.
#[derive(Clone)]
pub struct ScanSpec {
    pub table: Arc<TableDef>,
    pub access: AccessPath,
    /// Pieces of `access`, read in parallel, one output partition each.
    pub splits: Vec<AccessPath>,
    /// Table columns decoded from each entity: the output columns first, then
    /// those only the filter needs.
    pub decoded: Vec<usize>,
    /// How many of `decoded` are output.
    pub output: usize,
    /// Whether the entity's key and ETag (see `provider::row_identity`) follow the output columns (for UPDATE and DELETE).
    pub with_row: bool,
    /// Schema of the decoded columns (plus the row column), which the filter is bound to.
    pub decode_schema: SchemaRef,
    pub schema: SchemaRef,
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    pub limit: Option<usize>,
    pub reverse: bool,
    /// Output columns (positions) in key order, when the output is sorted by key.
    pub key_order: Vec<usize>,
    /// A join's run-time filter on the table's partition key column or an
    /// index's leading column: once the join has read its other side, a
    /// whole-table scan reads only the rows of the keys it found (see
    /// [`key_lookup`]).
    pub key_lookup: Option<Arc<dyn PhysicalExpr>>,
    /// Whether the table's indexes can be read (not when the statement's
    /// transaction changed the table's definition).
    pub indexes_usable: bool,
    /// The rows the statement's transaction block wrote to the table, which
    /// its indexes hold only from the commit: a scan through an index reads
    /// them from here.
    pub written: Option<WrittenRows>,
    /// Whether the scan may narrow what it reads at run time (off with
    /// `SET tablegate.pushdown = off`, which compares against full scans).
    pub pushdown: bool,
    /// About how many rows the scan returns (for join planning: the smaller
    /// side of a join is the one it holds in memory).
    pub estimated_rows: Option<usize>,
    /// Where the entities read from named partitions are counted.
    pub traffic: Arc<Traffic>,
    /// The table's column copy at the version the scan's read view sees,
    /// which a whole-table scan reads instead of the store (every piece
    /// of it: the copy's pieces are not the store's).
    pub copy: Option<Arc<ColumnCopy>>,
}

pub struct StoreScan {
    spec: ScanSpec,
    reader: Arc<dyn EntityRead>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for StoreScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreScan")
            .field("table", &self.spec.table.name)
            .field("access", &self.spec.access)
            .finish()
    }
}

impl StoreScan {
    pub fn new(spec: ScanSpec, reader: Arc<dyn EntityRead>) -> Self {
        let mut eq = EquivalenceProperties::new(spec.schema.clone());
        let ordering: Vec<PhysicalSortExpr> = spec
            .key_order
            .iter()
            .map(|&i| {
                let field = spec.schema.field(i);
                let column: Arc<dyn PhysicalExpr> = Arc::new(
                    datafusion::physical_expr::expressions::Column::new(field.name(), i),
                );
                let mut sort = PhysicalSortExpr::new_default(column);
                if spec.reverse {
                    sort = sort.reverse();
                }
                sort
            })
            .collect();
        if let Some(ordering) = LexOrdering::new(ordering) {
            eq.add_orderings([ordering]);
        }
        let properties = PlanProperties::new(
            eq,
            Partitioning::UnknownPartitioning(spec.splits.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        StoreScan {
            spec,
            reader,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    fn with_spec(&self, spec: ScanSpec) -> Self {
        StoreScan::new(spec, self.reader.clone())
    }
}

impl DisplayAs for StoreScan {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.spec;
        write!(f, "StoreScan: table={}, access={}", s.table.name, s.access)?;
        if s.splits.len() > 1 {
            write!(f, ", splits={}", s.splits.len())?;
        }
        let names: Vec<&str> = s.decoded[..s.output]
            .iter()
            .map(|&i| s.table.columns[i].name.as_str())
            .collect();
        write!(f, ", columns=[{}]", names.join(", "))?;
        if let Some(filter) = &s.filter {
            write!(f, ", filter={filter}")?;
        }
        if let Some(limit) = s.limit {
            write!(f, ", limit={limit}")?;
        }
        if s.reverse {
            write!(f, ", reverse")?;
        }
        if s.key_lookup.is_some() {
            write!(f, ", key lookups from the join")?;
        }
        if s.copy.is_some() && !s.reverse {
            write!(f, ", from the column copy")?;
        }
        if let AccessPath::Index { index, .. } = &s.access {
            if covering(&s.table, index, &s.decoded, s.with_row).is_some() {
                write!(f, ", covering")?;
            }
        }
        Ok(())
    }
}

impl ExecutionPlan for StoreScan {
    fn name(&self) -> &'static str {
        "StoreScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        // The join's filter too: a join computes it only for a plan that
        // holds it.
        for expr in self.spec.filter.iter().chain(&self.spec.key_lookup) {
            if f(expr)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_new_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let mut spec = self.spec.clone();
        spec.limit = match (spec.limit, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Some(Arc::new(self.with_spec(spec)))
    }

    fn fetch(&self) -> Option<usize> {
        self.spec.limit
    }

    /// Reading the key range backwards gives the reverse key order for free
    /// (`ORDER BY key DESC LIMIT n`, the log-tail pattern).
    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
    ) -> DfResult<SortOrderPushdownResult<Arc<dyn ExecutionPlan>>> {
        let s = &self.spec;
        if order.is_empty() || order.len() > s.key_order.len() {
            return Ok(SortOrderPushdownResult::Unsupported);
        }
        let matches = |reverse: bool| {
            order.iter().zip(&s.key_order).all(|(sort, &i)| {
                let is_column = sort
                    .expr
                    .downcast_ref::<datafusion::physical_expr::expressions::Column>()
                    .is_some_and(|c| c.index() == i);
                is_column && sort.options.descending == (s.reverse != reverse)
            })
        };
        if matches(false) {
            return Ok(SortOrderPushdownResult::Exact {
                inner: Arc::new(self.with_spec(s.clone())),
            });
        }
        if matches(true) {
            let mut spec = s.clone();
            spec.reverse = !spec.reverse;
            return Ok(SortOrderPushdownResult::Exact {
                inner: Arc::new(self.with_spec(spec)),
            });
        }
        Ok(SortOrderPushdownResult::Unsupported)
    }

    /// Takes a hash join's dynamic filter on the table's partition key
    /// column or an index's leading column (the probe side of a join on
    /// this table's key or index). It is not applied as
    /// a filter (the join checks every row itself); it only narrows a
    /// whole-table scan to the keys the join's other side holds.
    fn handle_child_pushdown_result(
        &self,
        _phase: datafusion::physical_plan::filter_pushdown::FilterPushdownPhase,
        child_pushdown_result: datafusion::physical_plan::filter_pushdown::ChildPushdownResult,
        _config: &datafusion::common::config::ConfigOptions,
    ) -> DfResult<
        datafusion::physical_plan::filter_pushdown::FilterPushdownPropagation<
            Arc<dyn ExecutionPlan>,
        >,
    > {
        use datafusion::physical_plan::filter_pushdown::{FilterPushdownPropagation, PushedDown};
        let filters: Vec<Arc<dyn PhysicalExpr>> = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|f| f.filter)
            .collect();
        let unsupported = vec![PushedDown::No; filters.len()];
        let lookup = (self.spec.pushdown
            && self.spec.access == AccessPath::Table
            && self.spec.key_lookup.is_none())
        .then(|| {
            filters
                .into_iter()
                .find(|f| self.lookup_column(f).is_some())
        })
        .flatten();
        let propagation = FilterPushdownPropagation::with_parent_pushdown_result(unsupported);
        Ok(match lookup {
            Some(lookup) => {
                let mut spec = self.spec.clone();
                spec.key_lookup = Some(lookup);
                let node: Arc<dyn ExecutionPlan> = Arc::new(self.with_spec(spec));
                propagation.with_updated_node(node)
            }
            None => propagation,
        })
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let access = self.spec.splits.get(partition).ok_or_else(|| {
            DataFusionError::Internal(format!("StoreScan has no partition {partition}"))
        })?;
        let read = MetricBuilder::new(&self.metrics).counter("entities_read", partition);
        let from_copy = MetricBuilder::new(&self.metrics).counter("read_from_copy", partition);
        let returned = MetricBuilder::new(&self.metrics).output_rows(partition);
        let pieces = self.spec.splits.len().max(1);
        // A join's key lookup may still narrow it on the first poll.
        let cursor = match &self.spec.copy {
            Some(copy) if !self.spec.reverse => {
                Cursor::Copy(copy.read(&self.spec.decoded, partition, pieces))
            }
            _ => Cursor::new(access, self.spec.reverse, &self.spec),
        };
        let state = ScanState {
            spec: self.spec.clone(),
            decoder: RowDecoder::new(&self.spec.table, &self.spec.decoded),
            rows: EncodedRows::new(),
            reader: self.reader.clone(),
            cursor,
            returned: 0,
            entities_read: read,
            read_from_copy: from_copy,
            rows_returned: returned,
        };
        let schema = self.spec.schema.clone();
        let lookup = self
            .spec
            .key_lookup
            .clone()
            .and_then(|filter| Some((self.lookup_column(&filter)?, filter)));
        let batches = stream::try_unfold((state, lookup), move |(mut state, lookup)| async move {
            // First poll: the join has read its other side by now.
            if let Some((column, filter)) = lookup {
                if let Some(access) =
                    key_lookup(&state.spec, column, &filter, partition, pieces).await
                {
                    state.cursor = Cursor::new(&access, state.spec.reverse, &state.spec);
                }
            }
            let batch = state.next_batch().await?;
            Ok(batch.map(|b| (b, (state, None))))
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }

    fn partition_statistics(
        &self,
        partition: Option<usize>,
    ) -> DfResult<Arc<datafusion::common::Statistics>> {
        use datafusion::common::stats::Precision;
        let mut statistics = datafusion::common::Statistics::new_unknown(&self.spec.schema);
        if let Some(rows) = self.spec.estimated_rows {
            let pieces = if partition.is_some() {
                self.spec.splits.len().max(1)
            } else {
                1
            };
            statistics.num_rows = Precision::Inexact(rows.div_ceil(pieces));
        }
        Ok(Arc::new(statistics))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

impl StoreScan {
    /// What the scan did, for the query log: `joined` and `aggregated` say
    /// whether a join or an aggregate consumed its rows.
    pub fn record(&self, joined: bool, aggregated: bool) -> ScanRecord {
        let s = &self.spec;
        let metrics = self.metrics.clone_inner();
        let read = metrics
            .sum_by_name("entities_read")
            .map_or(0, |v| v.as_usize());
        let returned = metrics.output_rows().unwrap_or(0);
        let mut filter_columns: Vec<String> = s
            .filter
            .iter()
            .flat_map(datafusion::physical_expr::utils::collect_columns)
            .filter_map(|c| {
                let i = s.table.column_index(c.name())?;
                (!s.table.is_key_column(i)).then(|| c.name().to_owned())
            })
            .collect();
        filter_columns.sort();
        filter_columns.dedup();
        ScanRecord {
            table: s.table.name.clone(),
            access: s.access.clone(),
            key_lookups: s.key_lookup.is_some(),
            entities_read: read as u64,
            rows_returned: returned as u64,
            filter_columns,
            reverse: s.reverse,
            joined,
            aggregated,
        }
    }

    /// The table column a join's dynamic filter constrains, when it is the
    /// table's only partition key column and the filter names nothing else.
    fn lookup_column(&self, filter: &Arc<dyn PhysicalExpr>) -> Option<usize> {
        use datafusion::physical_expr::expressions::{Column, DynamicFilterPhysicalExpr};
        filter.downcast_ref::<DynamicFilterPhysicalExpr>()?;
        let [child] = filter.children()[..] else {
            return None;
        };
        let output = child.downcast_ref::<Column>()?.index();
        let column = *self.spec.decoded[..self.spec.output].get(output)?;
        let table = &self.spec.table;
        let name = &table.columns[column].name;
        let leads_index = self.spec.indexes_usable
            && self.spec.written.is_none()
            && table
                .indexes
                .iter()
                .any(|i| !i.building && !i.intra_partition && i.columns.first() == Some(name));
        (table.key_columns().0 == [column] || leads_index).then_some(column)
    }
}

/// The access path a join's dynamic filter gives, once the join has read
/// its other side: the rows whose column holds a value of its `IN` list
/// (see [`pushdown::lookup_path`]), this piece's share of them. `None`
/// when the filter holds no `IN` list (the other side had too many
/// distinct keys), or only an index would read them and the scan declared
/// its rows in key order, so the scan reads the table.
async fn key_lookup(
    spec: &ScanSpec,
    column: usize,
    filter: &Arc<dyn PhysicalExpr>,
    piece: usize,
    pieces: usize,
) -> Option<AccessPath> {
    use datafusion::physical_expr::expressions::{
        BinaryExpr, DynamicFilterPhysicalExpr, InListExpr, Literal,
    };
    let dynamic = filter.downcast_ref::<DynamicFilterPhysicalExpr>()?;
    dynamic.wait_complete().await;
    let current = dynamic.current().ok()?;
    let mut conjuncts = vec![current];
    let mut list = None;
    while let Some(expr) = conjuncts.pop() {
        if let Some(binary) = expr.downcast_ref::<BinaryExpr>() {
            if *binary.op() == datafusion::logical_expr::Operator::And {
                conjuncts.push(binary.left().clone());
                conjuncts.push(binary.right().clone());
            }
        } else if let Some(in_list) = expr.downcast_ref::<InListExpr>() {
            if !in_list.negated() {
                list = Some(in_list.list().to_vec());
            }
        }
    }
    let ty = spec.table.columns[column].ty;
    let values: Vec<crate::model::Value> = list?
        .iter()
        .map(|item| pushdown::literal_value(ty, item.downcast_ref::<Literal>()?.value()))
        .collect::<Option<_>>()?;
    // An index gives rows in another order than the key order a scan may
    // have declared.
    // The pieces of a key lookup through an index would each read the
    // rows the block wrote: they read the table instead.
    let by_index = spec.indexes_usable && spec.written.is_none() && spec.key_order.is_empty();
    let access = pushdown::lookup_path(&spec.table, column, values, by_index)?;
    pushdown::share(access, piece, pieces)
}

/// How to make rows from index entries alone.
struct Covering {
    /// How many values an entry holds.
    values: usize,
    /// The values are in the entry's RowKey (then the base RowKey) rather
    /// than its PartitionKey.
    intra_partition: bool,
    /// Each decoded non-key column, and its position among the values.
    columns: Vec<(usize, usize)>,
}

/// Whether an index holds every column a scan decodes (key columns come
/// from the base key its entries carry). Not for scans that need the
/// row's ETag.
fn covering(
    table: &TableDef,
    index: &crate::catalog::IndexDef,
    decoded: &[usize],
    with_row: bool,
) -> Option<Covering> {
    if with_row {
        return None;
    }
    let columns = decoded
        .iter()
        .filter(|&&i| !table.is_key_column(i))
        .map(|&i| {
            let column = &table.columns[i];
            if column.system.is_some() {
                return None;
            }
            let position = index.columns.iter().position(|c| *c == column.name)?;
            Some((i, position))
        })
        .collect::<Option<_>>()?;
    Some(Covering {
        values: index.columns.len(),
        intra_partition: index.intra_partition,
        columns,
    })
}

/// The base row an index entry stands for, made of the base key and the
/// indexed values it holds.
fn covered_row(
    table: &TableDef,
    covering: &Covering,
    entry: &Entity,
    key: crate::model::EntityKey,
) -> DfResult<Entity> {
    let mut entity = Entity::new(key.partition_key, key.row_key);
    if covering.columns.is_empty() {
        return Ok(entity);
    }
    let corrupt = || {
        DataFusionError::Internal(format!(
            "index entry {} of table {} does not read as its values",
            entry.key, table.name
        ))
    };
    let parts = match covering.intra_partition {
        true => crate::catalog::split_components(&entry.key.row_key, covering.values + 1),
        false => crate::catalog::split_components(&entry.key.partition_key, covering.values),
    }
    .ok_or_else(corrupt)?;
    for &(i, position) in &covering.columns {
        let column = &table.columns[i];
        let part = parts.get(position).ok_or_else(corrupt)?;
        let value = crate::catalog::decode_index_component(column.ty, part).ok_or_else(corrupt)?;
        entity.properties.insert(column.name.clone(), value);
    }
    Ok(entity)
}

/// Where a scan is in its access path.
enum Cursor {
    Points {
        keys: Vec<crate::model::EntityKey>,
        next: usize,
    },
    /// Reads an index's entities under each value, then point-gets the
    /// base rows they name.
    Index {
        index_table: String,
        /// A query for each range, with the key of the one entry it names,
        /// if it names one (see [`crate::catalog::IndexDef::only_entry`]):
        /// that entry is read with a get.
        queries: Vec<(Query, Option<crate::model::EntityKey>)>,
        next: usize,
        continuation: Option<Continuation>,
        /// When the index holds every decoded column that is not part of
        /// the base key: (column, its position among the index's values).
        /// The rows are then made from the entries, without point gets.
        covering: Option<Covering>,
        /// The rows the transaction block wrote to the table: their entries
        /// are skipped, and they are read last (an index path is one piece,
        /// so they are read once).
        written: Option<WrittenRows>,
    },
    Ranges {
        queries: Vec<Query>,
        next: usize,
        continuation: Option<Continuation>,
        /// Whether the ranges span partitions (the whole table, or a range
        /// of PartitionKeys) rather than naming them.
        across: bool,
    },
    /// Reads the table's column copy instead of the store.
    Copy(CopyReader),
}

impl Cursor {
    fn new(access: &AccessPath, reverse: bool, spec: &ScanSpec) -> Self {
        match access {
            AccessPath::Points(keys) => {
                let mut keys = keys.clone();
                if reverse {
                    keys.reverse();
                }
                Cursor::Points { keys, next: 0 }
            }
            AccessPath::Ranges(ranges) => {
                let mut queries: Vec<Query> = ranges.iter().cloned().map(Query::new).collect();
                if reverse {
                    queries.reverse();
                }
                Cursor::Ranges {
                    queries,
                    next: 0,
                    continuation: None,
                    across: access.across_partitions(),
                }
            }
            AccessPath::Table => Cursor::Ranges {
                queries: vec![Query::table()],
                next: 0,
                continuation: None,
                across: true,
            },
            AccessPath::Index { index, ranges } => Cursor::Index {
                index_table: index.store_table(),
                queries: ranges
                    .iter()
                    .map(|range| (Query::new(range.clone()), index.only_entry(range)))
                    .collect(),
                covering: covering(&spec.table, index, &spec.decoded, spec.with_row),
                written: spec.written.clone(),
                next: 0,
                continuation: None,
            },
        }
    }
}

struct ScanState {
    spec: ScanSpec,
    decoder: RowDecoder,
    rows: EncodedRows,
    reader: Arc<dyn EntityRead>,
    cursor: Cursor,
    returned: usize,
    entities_read: Count,
    read_from_copy: Count,
    rows_returned: Count,
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl ScanState {
    /// Properties the store must decode for the decoded columns.
    fn projection(&self) -> Option<Vec<String>> {
        self.spec
            .table
            .store_projection(self.spec.decoded.iter().copied())
    }

    /// Reads the next chunk of rows into `rows`; `false` when the access
    /// path is done.
    async fn next_rows(&mut self, rows: &mut EncodedRows) -> DfResult<bool> {
        let table = self.spec.table.name.clone();
        let projection = self.projection();
        let remaining = self.spec.limit.map(|l| l.saturating_sub(self.returned));
        // Without a filter every entity read is a row returned, so a limit
        // bounds the page; with one, read a full page.
        let page_size = match (remaining, &self.spec.filter) {
            (Some(r), None) => r.clamp(1, PAGE),
            _ => PAGE,
        };
        match &mut self.cursor {
            Cursor::Points { keys, next } => {
                if *next >= keys.len() {
                    return Ok(false);
                }
                let end = (*next + POINTS_PER_BATCH.min(page_size)).min(keys.len());
                for key in &keys[*next..end] {
                    self.reader
                        .get_row(&table, key, rows)
                        .await
                        .map_err(external)?;
                }
                *next = end;
                Ok(true)
            }
            Cursor::Index {
                index_table,
                queries,
                next,
                continuation,
                covering,
                written,
            } => {
                let Some((query, only_entry)) = queries.get(*next) else {
                    let Some(written) = written.take() else {
                        return Ok(false);
                    };
                    let entities: Vec<_> = written_entities(&written).collect();
                    rows.push_entities(&entities);
                    return Ok(true);
                };
                let base_key = [
                    crate::catalog::BASE_PARTITION_KEY.to_owned(),
                    crate::catalog::BASE_ROW_KEY.to_owned(),
                ];
                let entries = match only_entry {
                    Some(key) => {
                        *next += 1;
                        let entry = self.reader.get(index_table, key, Some(&base_key));
                        entry.await.map_err(external)?.into_iter().collect()
                    }
                    None => {
                        let query = query
                            .clone()
                            .page_size(POINTS_PER_BATCH.min(page_size))
                            .project(base_key.to_vec());
                        let page = self
                            .reader
                            .query(index_table, &query, continuation.as_ref())
                            .await
                            .map_err(external)?;
                        *continuation = page.continuation;
                        if continuation.is_none() {
                            *next += 1;
                        }
                        page.entities
                    }
                };
                for entry in &entries {
                    let Some(key) = crate::catalog::base_key(entry) else {
                        continue;
                    };
                    if written.as_ref().is_some_and(|w| wrote_row(w, &key)) {
                        continue;
                    }
                    if let Some(covering) = covering {
                        rows.push_entity(&covered_row(&self.spec.table, covering, entry, key)?);
                        continue;
                    }
                    self.reader
                        .get_row(&table, &key, rows)
                        .await
                        .map_err(external)?;
                }
                Ok(true)
            }
            Cursor::Copy(_) => Ok(false),
            Cursor::Ranges {
                queries,
                next,
                continuation,
                ..
            } => {
                let Some(query) = queries.get(*next) else {
                    return Ok(false);
                };
                let mut query = query.clone().page_size(page_size);
                query.projection = projection;
                query.reverse = self.spec.reverse;
                *continuation = self
                    .reader
                    .query_rows(&table, &query, continuation.as_ref(), rows)
                    .await
                    .map_err(external)?;
                if continuation.is_none() {
                    *next += 1;
                }
                Ok(true)
            }
        }
    }

    async fn next_batch(&mut self) -> DfResult<Option<RecordBatch>> {
        // The buffers of the rows read are kept from batch to batch.
        let mut rows = std::mem::take(&mut self.rows);
        let batch = self.next_batch_with(&mut rows).await;
        self.rows = rows;
        batch
    }

    async fn next_batch_with(&mut self, rows: &mut EncodedRows) -> DfResult<Option<RecordBatch>> {
        loop {
            let Some(mut batch) = self.next_decoded(rows).await? else {
                return Ok(None);
            };
            if let Some(filter) = &self.spec.filter {
                let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
                let mask = mask
                    .as_any()
                    .downcast_ref::<datafusion::arrow::array::BooleanArray>()
                    .ok_or_else(|| {
                        DataFusionError::Internal("scan filter is not boolean".into())
                    })?;
                batch = filter_record_batch(&batch, mask)?;
            }
            let keep: Vec<usize> = (0..self.spec.schema.fields().len()).collect();
            let mut batch = batch.project(&keep)?;
            if let Some(limit) = self.spec.limit {
                let room = limit.saturating_sub(self.returned);
                if batch.num_rows() > room {
                    batch = batch.slice(0, room);
                }
            }
            self.returned += batch.num_rows();
            self.rows_returned.add(batch.num_rows());
            if batch.num_rows() > 0 {
                return Ok(Some(batch));
            }
        }
    }

    /// The decoded columns of the next rows read; `None` when the access
    /// path or the limit is done.
    async fn next_decoded(&mut self, rows: &mut EncodedRows) -> DfResult<Option<RecordBatch>> {
        if self.spec.limit.is_some_and(|l| self.returned >= l) {
            return Ok(None);
        }
        if let Cursor::Copy(copy) = &mut self.cursor {
            let Some(next) = copy.next_batch() else {
                return Ok(None);
            };
            let (count, columns) = next?;
            self.entities_read.add(count);
            self.read_from_copy.add(count);
            let options =
                datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(count));
            return Ok(Some(RecordBatch::try_new_with_options(
                self.spec.decode_schema.clone(),
                columns,
                &options,
            )?));
        }
        rows.clear();
        if !self.next_rows(rows).await? {
            return Ok(None);
        }
        self.entities_read.add(rows.len());
        self.count_partition_reads(rows);
        Ok(Some(self.decode(rows)?))
    }

    /// Counts the entities read from named partitions (a scan across
    /// partitions is counted once, in the query log).
    fn count_partition_reads(&self, rows: &EncodedRows) {
        if matches!(self.cursor, Cursor::Ranges { across: true, .. }) || rows.is_empty() {
            return;
        }
        let mut runs: Vec<(&str, u64)> = Vec::new();
        for row in rows.iter() {
            match runs.last_mut() {
                Some((p, n)) if *p == row.partition_key => *n += 1,
                _ => runs.push((row.partition_key, 1)),
            }
        }
        self.spec.traffic.record_reads(&self.spec.table.name, runs);
    }

    /// The decoded columns of some rows, with the row column where asked.
    fn decode(&mut self, rows: &EncodedRows) -> DfResult<RecordBatch> {
        let s = &self.spec;
        let mut fields = s.decode_schema.fields().to_vec();
        if s.with_row {
            fields.remove(s.output);
        }
        let table_schema = Arc::new(datafusion::arrow::datatypes::Schema::new(fields));
        let batch = self
            .decoder
            .decode(&s.table, table_schema, rows)
            .map_err(external)?;
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        if s.with_row {
            let identities: StringArray = rows
                .iter()
                .map(|row| {
                    Some(super::provider::row_identity(
                        row.partition_key,
                        row.row_key,
                        row.etag.text().as_deref(),
                    ))
                })
                .collect();
            // The row column sits right after the output columns, before filter-only columns.
            columns.insert(s.output, Arc::new(identities));
        }
        let options =
            datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len()));
        Ok(RecordBatch::try_new_with_options(
            s.decode_schema.clone(),
            columns,
            &options,
        )?)
    }
}
