//! The store: the operations of the Azure Table model behind traits split by
//! capability, and their backends.
//!
//! - [`TableAdmin`]: create, drop and list tables.
//! - [`EntityRead`]: point gets and paged range queries ([`Query`], [`Page`]).
//! - [`EntityWrite`]: single writes and atomic one-partition batches ([`WriteOp`]).
//! - [`AtomicWrite`]: many operations over tables and partitions, all or none.
//! - [`Snapshots`]: consistent read views.
//! - [`BulkDelete`]: remove a whole partition without reading it.
//! - [`Statistics`]: entity counts and bytes per table and per partition.
//! - [`TableStore`]: all of the above; what the layers above hold.
//!
//! Backends: [`native`] (embedded, the default) and [`azure`] (the Azure
//! Table service).
//!
//! Layer rule: `store` depends only on `model`. It never sees SQL, DataFusion,
//! Arrow or wire-protocol types.

mod error;
mod query;
mod rows;
mod runs;
mod stream;

pub mod azure;
pub mod native;

pub use error::{Result, StoreError};
pub use query::{
    bounds_contain, Continuation, KeyRange, Page, Query, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE,
};
pub use rows::{bulk_ranges, bulk_threads, on_threads, EncodedRow, EncodedRows, RowETag};
pub use runs::{key_order, KeyOrder, LoadRows, Merged, SortedRuns, ROWS_PER_SPILLED_PART};
pub use stream::{for_each_page, query_all};

use async_trait::async_trait;

use crate::model::{DateTime, ETag, Entity, EntityKey, IfMatch};

/// A write of one entity.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    /// Adds the entity; fails with `EntityAlreadyExists` if it is there.
    Insert(Entity),
    /// Replaces all properties of an existing entity.
    Replace { entity: Entity, if_match: IfMatch },
    /// Adds or overwrites the given properties of an existing entity, keeping the others.
    Merge { entity: Entity, if_match: IfMatch },
    /// Insert, or Replace unconditionally.
    InsertOrReplace(Entity),
    /// Insert, or Merge unconditionally.
    InsertOrMerge(Entity),
    /// Removes an existing entity.
    Delete { key: EntityKey, if_match: IfMatch },
}

impl WriteOp {
    pub fn key(&self) -> &EntityKey {
        match self {
            WriteOp::Insert(e)
            | WriteOp::InsertOrReplace(e)
            | WriteOp::InsertOrMerge(e)
            | WriteOp::Replace { entity: e, .. }
            | WriteOp::Merge { entity: e, .. } => &e.key,
            WriteOp::Delete { key, .. } => key,
        }
    }
}

/// What a successful write reports: the entity's new version, or nothing for a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    pub etag: Option<ETag>,
    pub timestamp: Option<DateTime>,
}

/// Size of a table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    pub entities: u64,
    /// Sum of the entities' sizes in the service's formula ([`Entity::billed_size`]).
    pub bytes: u64,
    /// Partitions holding at least one entity.
    pub partitions: u64,
}

/// Size of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionStats {
    pub partition_key: String,
    pub entities: u64,
    pub bytes: u64,
}

/// A page of partition statistics, in PartitionKey order.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionStatsPage {
    pub partitions: Vec<PartitionStats>,
    pub continuation: Option<Continuation>,
}

#[async_trait]
pub trait TableAdmin: Send + Sync {
    async fn create_table(&self, name: &str) -> Result<()>;
    /// Drops the table and all its entities at once.
    async fn drop_table(&self, name: &str) -> Result<()>;
    async fn list_tables(&self) -> Result<Vec<String>>;

    /// Whether other processes may change the tables too (several gateways
    /// over one remote account): then what was read before may be stale.
    fn shared(&self) -> bool {
        false
    }

    /// A directory for files made from the tables (which can be made again
    /// from them), when the backend has local storage.
    fn derived_files_dir(&self) -> Option<std::path::PathBuf> {
        None
    }
}

#[async_trait]
pub trait EntityRead: Send + Sync {
    async fn get(
        &self,
        table: &str,
        key: &EntityKey,
        projection: Option<&[String]>,
    ) -> Result<Option<Entity>>;

    /// One page of the query, resuming at `continuation` if given.
    async fn query(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
    ) -> Result<Page>;

    /// Which of `keys` name an entity of the table, in their order.
    async fn contains(&self, table: &str, keys: &[EntityKey]) -> Result<Vec<bool>> {
        let mut found = Vec::with_capacity(keys.len());
        for key in keys {
            found.push(self.get(table, key, Some(&[])).await?.is_some());
        }
        Ok(found)
    }

    /// The entity of the key, if there is one, appended to `rows` in its
    /// stored form (with all its properties); whether it was there.
    async fn get_row(&self, table: &str, key: &EntityKey, rows: &mut EncodedRows) -> Result<bool> {
        let entity = self.get(table, key, None).await?;
        Ok(rows.push_entities(entity.as_slice()) > 0)
    }

    /// One page of the query appended to `rows` in stored form; returns
    /// where the next page starts. The projection may be ignored: readers
    /// of the rows pick the properties they need.
    async fn query_rows(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
        rows: &mut EncodedRows,
    ) -> Result<Option<Continuation>> {
        let page = self.query(table, query, continuation).await?;
        rows.push_entities(&page.entities);
        Ok(page.continuation)
    }

    /// A number that changes whenever the table's entities change, as this
    /// view sees them: two reads with the same number see the same entities.
    /// `None` when the backend cannot tell.
    async fn table_version(&self, _table: &str) -> Result<Option<u64>> {
        Ok(None)
    }
}

#[async_trait]
pub trait EntityWrite: Send + Sync {
    /// Applies one operation; it is durable when this returns.
    async fn write(&self, table: &str, op: WriteOp) -> Result<WriteOutcome>;

    /// Applies up to 100 operations on distinct entities of one partition,
    /// all or none (an entity group transaction). A failure names the index
    /// of the failing operation ([`StoreError::BatchOperationFailed`]).
    async fn write_batch(&self, table: &str, ops: Vec<WriteOp>) -> Result<Vec<WriteOutcome>>;
}

/// Atomic writes beyond one partition: any number of operations on any
/// entities of any tables, all or none. What a SQL statement or transaction
/// needs; a backend that cannot offer it for a given set of operations says so
/// with an error instead of applying part of them.
#[async_trait]
pub trait AtomicWrite: Send + Sync {
    /// Applies the operations in order, all or none; a failure names the index
    /// of the failing operation ([`StoreError::BatchOperationFailed`]).
    async fn write_atomic(&self, ops: Vec<(String, WriteOp)>) -> Result<Vec<WriteOutcome>>;

    /// Inserts new entities into some tables, all or none, from rows in
    /// stored form whose entities the caller has checked (`check_entity`)
    /// and whose records carry their billed size; returns how many. What
    /// COPY writes (a table's rows, and its index entries): the native
    /// engine writes the rows straight into new sorted files, after looking
    /// up their keys, when the tables are empty or the rows are many.
    async fn insert_rows(&self, tables: Vec<(String, LoadRows)>) -> Result<u64> {
        let mut ops = Vec::new();
        for (table, rows) in &tables {
            rows.for_each_part(ROWS_PER_SPILLED_PART, |part| -> Result<()> {
                for i in 0..part.len() {
                    ops.push((table.clone(), WriteOp::Insert(part.entity(i, None)?)));
                }
                Ok(())
            })?;
        }
        Ok(self.write_atomic(ops).await?.len() as u64)
    }

    /// Where a load too large to hold in memory may spill its rows, in
    /// sorted runs ([`SortedRuns`]) that [`AtomicWrite::insert_rows`] reads
    /// merged; `None` when the store writes every row from memory anyway.
    fn spill_dir(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// Whether writes over several partitions are atomic at every moment
    /// (false: they become whole later, as through an outbox, and readers
    /// may see part of them meanwhile).
    fn atomic_across_partitions(&self) -> bool {
        true
    }

    /// How long the oldest write that is not yet whole has waited (for a
    /// store that makes writes whole later); `None` when none waits.
    async fn pending_for(&self) -> Result<Option<std::time::Duration>> {
        Ok(None)
    }
}

/// Consistent reads: a view of every table as of one moment.
pub trait Snapshots: Send + Sync {
    /// Reads as of now; later writes are not seen through the view. A backend
    /// without snapshots returns a view that reads the latest data.
    fn read_view(&self) -> std::sync::Arc<dyn EntityRead>;
}

#[async_trait]
pub trait BulkDelete: Send + Sync {
    /// Removes every entity of the partition without visiting them, and
    /// returns what the partition held.
    async fn delete_partition(&self, table: &str, partition_key: &str) -> Result<PartitionStats>;
}

#[async_trait]
pub trait Statistics: Send + Sync {
    async fn table_stats(&self, table: &str) -> Result<TableStats>;
    async fn partition_stats(&self, table: &str, partition_key: &str) -> Result<PartitionStats>;
    /// Non-empty partitions in key order, paged like queries.
    async fn list_partition_stats(
        &self,
        table: &str,
        page_size: usize,
        continuation: Option<&Continuation>,
    ) -> Result<PartitionStatsPage>;

    /// Whether query pages come in key order (the Cosmos DB Table API's do
    /// not): only then may a scan's output be declared sorted by key.
    fn key_ordered(&self) -> bool {
        true
    }

    /// PartitionKeys that cut the table into at most `parts` pieces of about
    /// the same number of entities, for scanning the pieces in parallel:
    /// piece `i` holds the partitions from point `i - 1` (included) to point
    /// `i` (excluded). Empty when the table is too small to be worth cutting.
    async fn split_points(&self, table: &str, parts: usize) -> Result<Vec<String>> {
        compute_split_points(self, table, parts).await
    }
}

/// [`Statistics::split_points`] from the partition statistics, read in full.
pub async fn compute_split_points<S: Statistics + ?Sized>(
    store: &S,
    table: &str,
    parts: usize,
) -> Result<Vec<String>> {
    let totals = store.table_stats(table).await?;
    let mut cutter = SplitCutter::new(totals, parts);
    let mut continuation = None;
    while !cutter.is_done() {
        let page = store
            .list_partition_stats(table, MAX_PAGE_SIZE, continuation.as_ref())
            .await?;
        for partition in &page.partitions {
            cutter.visit(partition);
        }
        continuation = page.continuation;
        if continuation.is_none() {
            break;
        }
    }
    Ok(cutter.points)
}

/// A table smaller than this many entities per piece is not cut.
pub const MIN_SPLIT_ENTITIES: u64 = 16_384;

/// Walks partitions in key order and cuts where the running entity count
/// passes each `i / parts` of the table.
struct SplitCutter {
    total: u64,
    parts: u64,
    seen: u64,
    points: Vec<String>,
}

impl SplitCutter {
    fn new(totals: TableStats, parts: usize) -> Self {
        let parts = (parts as u64)
            .min(totals.entities / MIN_SPLIT_ENTITIES)
            .min(totals.partitions);
        SplitCutter {
            total: totals.entities,
            parts,
            seen: 0,
            points: Vec::new(),
        }
    }

    fn is_done(&self) -> bool {
        self.parts < 2 || self.points.len() as u64 + 1 >= self.parts
    }

    fn visit(&mut self, partition: &PartitionStats) {
        if self.is_done() {
            return;
        }
        let next_cut = self.total * (self.points.len() as u64 + 1) / self.parts;
        if self.seen >= next_cut && self.seen > 0 {
            self.points.push(partition.partition_key.clone());
        }
        self.seen += partition.entities;
    }
}

/// Everything a backend offers; what the layers above hold as `Arc<dyn TableStore>`.
pub trait TableStore:
    TableAdmin + EntityRead + EntityWrite + AtomicWrite + Snapshots + BulkDelete + Statistics
{
}

impl<
        T: TableAdmin + EntityRead + EntityWrite + AtomicWrite + Snapshots + BulkDelete + Statistics,
    > TableStore for T
{
}

/// Checks the rules of an entity group transaction that do not need the
/// stored data: 1 to 100 operations, one partition, one operation per entity,
/// and each entity valid. Backends call it before doing any work.
pub fn check_batch(ops: &[WriteOp]) -> Result<()> {
    let Some(first) = ops.first() else {
        return Err(StoreError::BatchEmpty);
    };
    if ops.len() > crate::model::MAX_BATCH_OPERATIONS {
        return Err(StoreError::BatchTooLarge { count: ops.len() });
    }
    let partition = &first.key().partition_key;
    let mut seen = std::collections::HashSet::with_capacity(ops.len());
    for (index, op) in ops.iter().enumerate() {
        let key = op.key();
        if &key.partition_key != partition {
            return Err(StoreError::BatchMixedPartitions {
                index,
                expected: partition.clone(),
                found: key.partition_key.clone(),
            });
        }
        if !seen.insert(&key.row_key) {
            return Err(StoreError::BatchDuplicateEntity {
                index,
                key: key.clone(),
            });
        }
        check_op(op).map_err(|e| StoreError::BatchOperationFailed {
            index,
            source: Box::new(e),
        })?;
    }
    Ok(())
}

/// Checks one operation's keys and entity against the model's limits.
pub fn check_op(op: &WriteOp) -> Result<()> {
    use crate::model::{check_entity, check_key, KeyKind};
    match op {
        WriteOp::Delete { key, .. } => {
            check_key(KeyKind::PartitionKey, &key.partition_key)?;
            check_key(KeyKind::RowKey, &key.row_key)?;
        }
        WriteOp::Insert(e)
        | WriteOp::InsertOrReplace(e)
        | WriteOp::InsertOrMerge(e)
        | WriteOp::Replace { entity: e, .. }
        | WriteOp::Merge { entity: e, .. } => {
            check_entity(e)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(sizes: &[u64], parts: usize) -> Vec<String> {
        let totals = TableStats {
            entities: sizes.iter().sum(),
            bytes: 0,
            partitions: sizes.len() as u64,
        };
        let mut cutter = SplitCutter::new(totals, parts);
        for (i, &entities) in sizes.iter().enumerate() {
            cutter.visit(&PartitionStats {
                partition_key: format!("p{i:03}"),
                entities,
                bytes: 0,
            });
        }
        cutter.points
    }

    #[test]
    fn even_partitions_are_cut_evenly() {
        let sizes = vec![MIN_SPLIT_ENTITIES; 8];
        assert_eq!(cut(&sizes, 2), vec!["p004"]);
        assert_eq!(cut(&sizes, 4), vec!["p002", "p004", "p006"]);
    }

    #[test]
    fn uneven_partitions_are_cut_by_entities() {
        // One large partition first: the cut falls right after it.
        let sizes = [4 * MIN_SPLIT_ENTITIES, 1000, 1000, 1000];
        assert_eq!(cut(&sizes, 2), vec!["p001"]);
    }

    #[test]
    fn small_tables_and_single_partitions_are_not_cut() {
        assert!(cut(&[MIN_SPLIT_ENTITIES - 1, 1], 2).is_empty());
        assert!(cut(&[10 * MIN_SPLIT_ENTITIES], 4).is_empty());
        assert!(cut(&[MIN_SPLIT_ENTITIES; 8], 1).is_empty());
    }
}
