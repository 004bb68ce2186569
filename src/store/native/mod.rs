//! The native backend: an embedded, crash-safe store under `<data-dir>/store`.
//!
//! # Engine: fjall
//!
//! The entities live in [fjall](https://crates.io/crates/fjall) 3, an LSM-tree
//! key-value engine in safe Rust. It was chosen over the alternatives for:
//!
//! - **Durability on our terms**: fjall syncs its journal only when told to.
//!   A group of writes is made durable by one write to our own commit log
//!   (the `commit_log` module), then committed to fjall: many writers'
//!   batches, one sync, then every writer acknowledged.
//! - **Atomic batches across keyspaces**: an entity, its partition's header and
//!   the table's totals (later, its index and view entries) commit together or
//!   not at all; recovery replays whole batches only.
//! - **Snapshots** for consistent reads across pages and keyspaces, and
//!   **forward and reverse iteration** over key ranges (log-tail queries).
//! - **Write throughput**: an LSM absorbs inserts in memory and writes sorted
//!   runs; redb (a copy-on-write B-tree) allows one writer at a time and
//!   rewrites pages per commit. rocksdb has the same LSM design and per-range
//!   size estimates, but adds a long C++ build and a libclang dependency;
//!   tablegate keeps its own per-partition counters instead.
//! - **Whole-keyspace deletion**: each table is its own keyspace, so dropping a
//!   table deletes its files without reading it. fjall has no range deletion,
//!   so a whole partition is deleted by a version watermark in its header
//!   (see the `layout` module).
//!
//! # Concurrency
//!
//! Reads go to fjall through a snapshot, from any thread, or to the
//! partitions held whole in memory (the `partition_cache` module) when the
//! snapshot would read the same there. Writes go
//! to the single writer thread (the `writer` module), which checks and commits them in
//! groups. A write is acknowledged only after its group is in the commit log.
//!
//! Reads run on the caller's thread: a point get or a page is a short,
//! mostly-cached lookup, cheaper to do in place than to hand to another thread.

mod commit_log;
mod layout;
mod partition_cache;
mod read;
mod writer;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock, RwLockWriteGuard};
use std::thread::JoinHandle;

use async_trait::async_trait;
use fjall::{Database, Keyspace, KeyspaceCreateOptions};
use tokio::sync::oneshot;

use self::commit_log::{CommitLog, Space};
use self::layout::{
    LoadMarker, PartitionHeader, TableTotals, CATALOG, LOAD_PREFIX, NEXT_TABLE_ID, TABLE_PREFIX,
    TOMB_PREFIX, VERSION_FLOOR,
};
use self::partition_cache::{partition_prefix, PartitionCache};
use self::read::storage;
use self::writer::{Command, Prepared, Writer};
use super::{
    check_batch, check_op, AtomicWrite, BulkDelete, Continuation, EncodedRows, EntityRead,
    EntityWrite, LoadRows, Page, PartitionStats, PartitionStatsPage, Query, Result, Snapshots,
    Statistics, StoreError, TableAdmin, TableStats, WriteOp, WriteOutcome,
};
use crate::model::codec::key::prefix_end;
use crate::model::codec::record::record_header;
use crate::model::{check_table_name, Entity, EntityKey};

/// The read caches' size unless set: PostgreSQL's `shared_buffers` as
/// the comparisons in BENCHMARKS.md set it.
pub const DEFAULT_CACHE_MIB: u64 = 256;

/// The folder of the data directory that loads too large for memory spill
/// their rows into (files without names, gone with the load).
const SPILL_DIR: &str = "spill";

/// The folder of the data directory holding the commit log (see the
/// `commit_log` module).
const COMMIT_LOG_DIR: &str = "commit-log";

/// A table as the engine holds it in memory.
pub(crate) struct Table {
    id: u64,
    name: String,
    entities: Keyspace,
    partitions: Keyspace,
    totals: Mutex<TableTotals>,
    /// Encoded partition prefixes that were bulk-deleted at least once; only
    /// these need a header lookup to know whether a record is visible.
    tombstones: RwLock<HashSet<Vec<u8>>>,
    any_tombstone: AtomicBool,
    /// Set by the writer when the table is dropped; later writes through a
    /// stale handle fail instead of writing into a deleted keyspace.
    dropped: AtomicBool,
    /// The last split points computed: (entities then, parts asked, points).
    splits: Mutex<Option<(u64, usize, Vec<String>)>>,
}

impl Table {
    fn new(
        id: u64,
        name: String,
        entities: Keyspace,
        partitions: Keyspace,
        totals: TableTotals,
        tombstones: HashSet<Vec<u8>>,
    ) -> Self {
        Table {
            id,
            name,
            entities,
            partitions,
            totals: Mutex::new(totals),
            any_tombstone: AtomicBool::new(!tombstones.is_empty()),
            tombstones: RwLock::new(tombstones),
            dropped: AtomicBool::new(false),
            splits: Mutex::new(None),
        }
    }

    fn may_have_tombstone(&self, prefix: &[u8]) -> bool {
        self.any_tombstone.load(Ordering::Acquire)
            && self
                .tombstones
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains(prefix)
    }

    /// Records a bulk-deleted partition; true if it is the first time.
    fn add_tombstone(&self, prefix: &[u8]) -> bool {
        let added = self
            .tombstones
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(prefix.to_vec());
        self.any_tombstone.store(true, Ordering::Release);
        added
    }
}

/// What readers and the writer share.
pub(crate) struct Shared {
    db: Database,
    catalog: Keyspace,
    tables: RwLock<HashMap<String, Arc<Table>>>,
    partition_cache: PartitionCache,
}

impl Shared {
    fn table(&self, name: &str) -> Result<Arc<Table>> {
        self.tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| StoreError::TableNotFound(name.to_owned()))
    }

    fn tables_mut(&self) -> RwLockWriteGuard<'_, HashMap<String, Arc<Table>>> {
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The embedded store. Cheap to share behind an `Arc`; dropping the last
/// handle stops the writer after it has committed everything sent to it.
pub struct NativeStore {
    /// The data directory.
    dir: std::path::PathBuf,
    shared: Arc<Shared>,
    commands: Option<mpsc::Sender<Command>>,
    writer: Option<JoinHandle<()>>,
}

impl NativeStore {
    /// Opens the store in `dir`, creating it if needed, and recovers from the
    /// journal whatever was acknowledged before a crash.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with_cache(dir, DEFAULT_CACHE_MIB)
    }

    /// [`NativeStore::open`] with `cache_mib` MiB of caches for reads: half
    /// for fjall's decoded blocks (what reads find in memory instead of
    /// reading and decompressing them from the files again), half for
    /// small partitions held whole (see the `partition_cache` module).
    pub fn open_with_cache(dir: impl AsRef<Path>, cache_mib: u64) -> Result<Self> {
        std::fs::create_dir_all(dir.as_ref().join(SPILL_DIR))
            .map_err(|e| StoreError::Storage(format!("making the spill directory: {e}")))?;
        let cache_bytes = cache_mib << 20;
        let db = Database::builder(dir.as_ref().join("store"))
            .cache_size(cache_bytes / 2)
            .open()
            .map_err(storage)?;
        let catalog = db
            .keyspace(CATALOG, KeyspaceCreateOptions::default)
            .map_err(storage)?;
        let open = |ks: String| {
            db.keyspace(&ks, layout::table_keyspace_options)
                .map_err(storage)
        };
        let mut named = Vec::new();
        for guard in catalog.prefix(TABLE_PREFIX) {
            let (key, value) = guard.into_inner().map_err(storage)?;
            let name = String::from_utf8_lossy(&key[TABLE_PREFIX.len()..]).into_owned();
            let id = layout::decode_u64(&value)?;
            let entities = open(layout::entities_keyspace(id))?;
            let partitions = open(layout::partitions_keyspace(id))?;
            named.push((name, id, entities, partitions));
        }

        // What was acknowledged since fjall was last synced. Tables are
        // created and dropped only after a checkpoint, so the ones named
        // now are the ones the log's records write to.
        let (mut log, payloads) = CommitLog::open(&dir.as_ref().join(COMMIT_LOG_DIR))?;
        let keyspace = |space: Space| -> Option<&Keyspace> {
            match space {
                Space::Catalog => Some(&catalog),
                Space::Entities(id) => named.iter().find(|t| t.1 == id).map(|t| &t.2),
                Space::Partitions(id) => named.iter().find(|t| t.1 == id).map(|t| &t.3),
            }
        };
        for payload in &payloads {
            let mut batch = db.batch().durability(None);
            for change in commit_log::changes(payload) {
                let change = change?;
                let Some(keyspace) = keyspace(change.space) else {
                    tracing::warn!(
                        "the commit log writes to {:?}, which no table holds; skipped",
                        change.space
                    );
                    continue;
                };
                match change.value {
                    Some(value) => batch.insert(keyspace, change.key, value),
                    None => batch.remove(keyspace, change.key),
                }
            }
            batch.commit().map_err(storage)?;
        }
        db.persist(fjall::PersistMode::SyncAll).map_err(storage)?;
        log.checkpoint()?;
        if !payloads.is_empty() {
            tracing::info!("replayed {} commits from the commit log", payloads.len());
        }

        let read_u64 = |key: &str| -> Result<u64> {
            Ok(match catalog.get(key).map_err(storage)? {
                Some(bytes) => layout::decode_u64(&bytes)?,
                None => 0,
            })
        };
        let last_version = read_u64(VERSION_FLOOR)?;
        let next_table_id = read_u64(NEXT_TABLE_ID)?.max(1);

        let mut tombstones: HashMap<u64, HashSet<Vec<u8>>> = HashMap::new();
        for guard in catalog.prefix(TOMB_PREFIX) {
            let key = guard.key().map_err(storage)?;
            let rest = &key[TOMB_PREFIX.len()..];
            if let Some((id, prefix)) = rest.split_first_chunk::<8>() {
                tombstones
                    .entry(u64::from_be_bytes(*id))
                    .or_default()
                    .insert(prefix.to_vec());
            }
        }

        let mut tables = HashMap::new();
        for (name, id, entities, partitions) in named {
            let totals = match catalog.get(layout::stats_key(id)).map_err(storage)? {
                Some(bytes) => TableTotals::decode(&bytes)?,
                None => TableTotals::default(),
            };
            let table = Table::new(
                id,
                name.clone(),
                entities,
                partitions,
                totals,
                tombstones.remove(&id).unwrap_or_default(),
            );
            tables.insert(name, Arc::new(table));
        }

        // Keyspaces of tables the catalog no longer names: a crash came between
        // dropping a table and removing its files, or between creating them and
        // naming them.
        let live: HashSet<u64> = tables.values().map(|t| t.id).collect();
        for name in db.list_keyspace_names() {
            let name: &str = name.as_ref();
            if let Some(id) = layout::keyspace_table_id(name) {
                if !live.contains(&id) {
                    let keyspace = db
                        .keyspace(name, layout::table_keyspace_options)
                        .map_err(storage)?;
                    db.delete_keyspace(keyspace).map_err(storage)?;
                }
            }
        }

        // Loads that did not finish: their rows go.
        let unfinished: Vec<(fjall::Slice, fjall::Slice)> = catalog
            .prefix(LOAD_PREFIX)
            .map(|guard| guard.into_inner().map_err(storage))
            .collect::<Result<_>>()?;
        for (key, value) in unfinished {
            let id = key[LOAD_PREFIX.len()..]
                .try_into()
                .map(u64::from_be_bytes)
                .ok();
            let table = tables.values().find(|t| Some(t.id) == id);
            let marker = LoadMarker::decode(&value)?;
            remove_unfinished_load(
                &db,
                &catalog,
                table.map(|t| t.as_ref()),
                &key,
                marker.as_ref(),
            )?;
        }

        let shared = Arc::new(Shared {
            partition_cache: PartitionCache::new(db.clone(), cache_bytes / 2),
            db,
            catalog,
            tables: RwLock::new(tables),
        });
        let (commands, receiver) = mpsc::channel();
        let writer = Writer::new(shared.clone(), log, last_version, next_table_id);
        let writer = std::thread::Builder::new()
            .name("tablegate-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(|e| StoreError::Storage(format!("cannot start the writer thread: {e}")))?;
        Ok(NativeStore {
            dir: dir.as_ref().to_owned(),
            shared,
            commands: Some(commands),
            writer: Some(writer),
        })
    }

    /// A consistent view of every table as of now, for reads that must agree
    /// with each other (a multi-page scan, a statement reading several tables).
    pub fn snapshot(&self) -> NativeSnapshot {
        NativeSnapshot {
            shared: self.shared.clone(),
            snapshot: self.shared.db.snapshot(),
        }
    }

    async fn send<T>(&self, command: impl FnOnce(writer::Reply<T>) -> Command) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(command(reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

impl Drop for NativeStore {
    fn drop(&mut self) {
        drop(self.commands.take());
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Reads as of one moment. See [`NativeStore::snapshot`].
pub struct NativeSnapshot {
    shared: Arc<Shared>,
    snapshot: fjall::Snapshot,
}

#[async_trait]
impl EntityRead for NativeSnapshot {
    async fn get(
        &self,
        table: &str,
        key: &EntityKey,
        projection: Option<&[String]>,
    ) -> Result<Option<Entity>> {
        read::get(
            &*self.shared.table(table)?,
            &self.snapshot,
            &self.shared.partition_cache,
            key,
            projection,
        )
    }

    async fn query(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
    ) -> Result<Page> {
        read::query(
            &*self.shared.table(table)?,
            &self.snapshot,
            &self.shared.partition_cache,
            query,
            continuation,
        )
    }

    async fn contains(&self, table: &str, keys: &[EntityKey]) -> Result<Vec<bool>> {
        read::contains(&*self.shared.table(table)?, &self.snapshot, keys)
    }

    async fn get_row(&self, table: &str, key: &EntityKey, rows: &mut EncodedRows) -> Result<bool> {
        read::get_row(
            &*self.shared.table(table)?,
            &self.snapshot,
            &self.shared.partition_cache,
            key,
            rows,
        )
    }

    async fn query_rows(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
        rows: &mut EncodedRows,
    ) -> Result<Option<Continuation>> {
        read::query_rows(
            &*self.shared.table(table)?,
            &self.snapshot,
            &self.shared.partition_cache,
            query,
            continuation,
            rows,
        )
    }

    async fn table_version(&self, table: &str) -> Result<Option<u64>> {
        read::table_version(
            &self.shared.catalog,
            &*self.shared.table(table)?,
            &self.snapshot,
        )
    }
}

/// Reads through the store itself are reads of a snapshot taken for each.
#[async_trait]
impl EntityRead for NativeStore {
    async fn get(
        &self,
        table: &str,
        key: &EntityKey,
        projection: Option<&[String]>,
    ) -> Result<Option<Entity>> {
        self.snapshot().get(table, key, projection).await
    }

    async fn query(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
    ) -> Result<Page> {
        self.snapshot().query(table, query, continuation).await
    }

    async fn contains(&self, table: &str, keys: &[EntityKey]) -> Result<Vec<bool>> {
        self.snapshot().contains(table, keys).await
    }

    async fn get_row(&self, table: &str, key: &EntityKey, rows: &mut EncodedRows) -> Result<bool> {
        self.snapshot().get_row(table, key, rows).await
    }

    async fn query_rows(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
        rows: &mut EncodedRows,
    ) -> Result<Option<Continuation>> {
        self.snapshot()
            .query_rows(table, query, continuation, rows)
            .await
    }

    async fn table_version(&self, table: &str) -> Result<Option<u64>> {
        self.snapshot().table_version(table).await
    }
}

#[async_trait]
impl TableAdmin for NativeStore {
    async fn create_table(&self, name: &str) -> Result<()> {
        check_table_name(name)?;
        let name = name.to_owned();
        self.send(|reply| Command::CreateTable { name, reply })
            .await
    }

    async fn drop_table(&self, name: &str) -> Result<()> {
        let name = name.to_owned();
        self.send(|reply| Command::DropTable { name, reply }).await
    }

    async fn list_tables(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .shared
            .tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        names.sort();
        Ok(names)
    }

    fn derived_files_dir(&self) -> Option<std::path::PathBuf> {
        Some(self.dir.join("derived"))
    }
}

#[async_trait]
impl EntityWrite for NativeStore {
    async fn write(&self, table: &str, op: WriteOp) -> Result<WriteOutcome> {
        check_op(&op)?;
        let table = self.shared.table(table)?;
        let mut outcomes = self
            .send(|reply| Command::Write {
                ops: vec![Prepared::new(table, op)],
                batch: false,
                reply,
            })
            .await?;
        outcomes.pop().ok_or(StoreError::Closed)
    }

    async fn write_batch(&self, table: &str, ops: Vec<WriteOp>) -> Result<Vec<WriteOutcome>> {
        check_batch(&ops)?;
        let table = self.shared.table(table)?;
        let ops = ops
            .into_iter()
            .map(|op| Prepared::new(table.clone(), op))
            .collect();
        self.send(|reply| Command::Write {
            ops,
            batch: true,
            reply,
        })
        .await
    }
}

impl Snapshots for NativeStore {
    fn read_view(&self) -> Arc<dyn EntityRead> {
        Arc::new(self.snapshot())
    }
}

#[async_trait]
impl AtomicWrite for NativeStore {
    async fn write_atomic(&self, ops: Vec<(String, WriteOp)>) -> Result<Vec<WriteOutcome>> {
        let mut prepared = Vec::with_capacity(ops.len());
        let mut table: Option<Arc<Table>> = None;
        for (index, (name, op)) in ops.into_iter().enumerate() {
            check_op(&op).map_err(|e| StoreError::BatchOperationFailed {
                index,
                source: Box::new(e),
            })?;
            let handle = match &table {
                Some(t) if t.name == name => t.clone(),
                _ => self.shared.table(&name)?,
            };
            table = Some(handle.clone());
            prepared.push(Prepared::new(handle, op));
        }
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        self.send(|reply| Command::Write {
            ops: prepared,
            batch: true,
            reply,
        })
        .await
    }

    async fn insert_rows(&self, tables: Vec<(String, LoadRows)>) -> Result<u64> {
        let tables = tables
            .into_iter()
            .map(|(name, rows)| Ok((self.shared.table(&name)?, rows)))
            .collect::<Result<Vec<_>>>()?;
        self.send(|reply| Command::Load { tables, reply }).await
    }

    fn spill_dir(&self) -> Option<std::path::PathBuf> {
        Some(self.dir.join(SPILL_DIR))
    }
}

#[async_trait]
impl BulkDelete for NativeStore {
    async fn delete_partition(&self, table: &str, partition_key: &str) -> Result<PartitionStats> {
        let table = self.shared.table(table)?;
        let partition_key = partition_key.to_owned();
        self.send(|reply| Command::DeletePartition {
            table,
            partition_key,
            reply,
        })
        .await
    }
}

#[async_trait]
impl Statistics for NativeStore {
    async fn table_stats(&self, table: &str) -> Result<TableStats> {
        let totals = *self
            .shared
            .table(table)?
            .totals
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Ok(TableStats {
            entities: totals.entities,
            bytes: totals.bytes,
            partitions: totals.partitions,
        })
    }

    /// Reading every partition header is proportional to the number of
    /// partitions, so the points are kept until the table's entity count
    /// moves by a quarter.
    async fn split_points(&self, table: &str, parts: usize) -> Result<Vec<String>> {
        let handle = self.shared.table(table)?;
        let entities = handle
            .totals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entities;
        if let Some((then, asked, points)) =
            &*handle.splits.lock().unwrap_or_else(|e| e.into_inner())
        {
            if *asked == parts && entities.abs_diff(*then) <= *then / 4 {
                return Ok(points.clone());
            }
        }
        let points = crate::store::compute_split_points(self, table, parts).await?;
        *handle.splits.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((entities, parts, points.clone()));
        Ok(points)
    }

    async fn partition_stats(&self, table: &str, partition_key: &str) -> Result<PartitionStats> {
        read::partition_stats(
            &*self.shared.table(table)?,
            &self.shared.db.snapshot(),
            partition_key,
        )
    }

    async fn list_partition_stats(
        &self,
        table: &str,
        page_size: usize,
        continuation: Option<&Continuation>,
    ) -> Result<PartitionStatsPage> {
        read::list_partition_stats(
            &*self.shared.table(table)?,
            &self.shared.db.snapshot(),
            page_size,
            continuation,
        )
    }
}

/// Removes the rows of a load that did not finish, sets the headers of
/// the partitions in its span to what their rows now hold, and then
/// removes its marker (`table` is `None` when the table is gone; `marker`
/// is `None` for a marker of a load into an empty table that names no
/// rows: all rows and headers go).
pub(super) fn remove_unfinished_load(
    db: &Database,
    catalog: &Keyspace,
    table: Option<&Table>,
    marker_key: &[u8],
    marker: Option<&LoadMarker>,
) -> Result<()> {
    let mut batch = db.batch().durability(None);
    match (table, marker) {
        (Some(table), Some(marker)) => {
            // The load may have written its partitions' new headers into
            // files: each partition of its span is counted again from the
            // rows that stay.
            let first = partition_prefix(&marker.first)?;
            let end = prefix_end(partition_prefix(&marker.last)?);
            let mut counting: Option<Recount> = None;
            for guard in table.entities.range(first..end.as_slice()) {
                let (key, record) = guard.into_inner().map_err(storage)?;
                let prefix = partition_prefix(&key)?;
                if counting.as_ref().is_none_or(|c| c.prefix != prefix) {
                    if let Some(done) = counting.take() {
                        done.write(&mut batch, table);
                    }
                    counting = Some(Recount::new(table, prefix)?);
                }
                let Some(count) = counting.as_mut() else {
                    unreachable!("the row's partition is being counted");
                };
                let header = record_header(&record)?;
                if header.version == marker.version {
                    batch.remove(&table.entities, key);
                } else if header.version > count.stored.deleted_through {
                    count.counted.entities += 1;
                    count.counted.bytes += u64::from(header.billed_size);
                }
            }
            if let Some(done) = counting {
                done.write(&mut batch, table);
            }
        }
        (Some(table), None) => {
            for keyspace in [&table.entities, &table.partitions] {
                for guard in keyspace.iter() {
                    let key = guard.key().map_err(storage)?;
                    batch.remove(keyspace, key);
                }
            }
        }
        (None, _) => {}
    }
    batch.remove(catalog, marker_key);
    batch.commit().map_err(storage)?;
    db.persist(fjall::PersistMode::SyncAll).map_err(storage)
}

/// A partition's header counted again from its rows.
struct Recount {
    prefix: Vec<u8>,
    stored: PartitionHeader,
    /// Its visible rows so far (the bulk-delete watermark is the stored one's).
    counted: PartitionHeader,
}

impl Recount {
    fn new(table: &Table, prefix: &[u8]) -> Result<Self> {
        let stored = PartitionHeader::of_stored(table.partitions.get(prefix).map_err(storage)?)?;
        let counted = PartitionHeader {
            deleted_through: stored.deleted_through,
            ..PartitionHeader::default()
        };
        Ok(Recount {
            prefix: prefix.to_vec(),
            stored,
            counted,
        })
    }

    fn write(self, batch: &mut fjall::OwnedWriteBatch, table: &Table) {
        if self.counted == self.stored {
            return;
        }
        if self.counted.is_empty() {
            batch.remove(&table.partitions, self.prefix);
        } else {
            batch.insert(&table.partitions, self.prefix, self.counted.encode());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::codec::key::{encode_entity_key, encode_partition_prefix};
    use crate::store::{EncodedRows, Query, RowETag, WriteOp};

    fn rows(keys: &[(&str, &str)]) -> EncodedRows {
        let mut rows = EncodedRows::new();
        for (pk, rk) in keys {
            let mut entity = Entity::new(*pk, *rk);
            entity
                .properties
                .insert("v".into(), crate::model::Value::Int64(7));
            rows.push_entity(&entity);
        }
        rows
    }

    /// A store in `dir` with empty tables of these names.
    async fn store_with_tables(dir: &Path, names: &[&str]) -> NativeStore {
        let store = NativeStore::open(dir).unwrap();
        for name in names {
            store.create_table(name).await.unwrap();
        }
        store
    }

    async fn count(store: &NativeStore, table: &str) -> usize {
        let query = Query::table().page_size(1000);
        store
            .query(table, &query, None)
            .await
            .unwrap()
            .entities
            .len()
    }

    /// Does what a load does up to the commit of its batch, and stops: the
    /// marker (`marker`, encoded) is committed, `loaded` (in key order) is
    /// written into the table's files with records of `version`, and the
    /// new headers of its partitions into files of theirs.
    fn leave_unfinished_load(
        store: &NativeStore,
        table: &str,
        marker: &[u8],
        loaded: &EncodedRows,
        version: u64,
    ) {
        let table = store.shared.table(table).unwrap();
        let mut batch = store.shared.db.batch().durability(None);
        batch.insert(&store.shared.catalog, layout::load_key(table.id), marker);
        batch.commit().unwrap();
        let mut ingestion = table.entities.start_ingestion().unwrap();
        let mut headers: Vec<(Vec<u8>, PartitionHeader)> = Vec::new();
        for row in loaded.iter() {
            let mut record = row.record.to_vec();
            crate::model::codec::record::set_record_version(&mut record, version);
            let prefix = encode_partition_prefix(row.partition_key);
            if headers.last().is_none_or(|(last, _)| *last != prefix) {
                let stored = table.partitions.get(&prefix).unwrap();
                let before = PartitionHeader::of_stored(stored).unwrap();
                headers.push((prefix, before));
            }
            let (_, header) = headers.last_mut().unwrap();
            header.entities += 1;
            header.bytes += u64::from(record_header(&record).unwrap().billed_size);
            ingestion
                .write(encode_entity_key(row.partition_key, row.row_key), record)
                .unwrap();
        }
        ingestion.finish().unwrap();
        let mut ingestion = table.partitions.start_ingestion().unwrap();
        for (prefix, header) in headers {
            ingestion.write(prefix, header.encode()).unwrap();
        }
        ingestion.finish().unwrap();
        store
            .shared
            .db
            .persist(fjall::PersistMode::SyncAll)
            .unwrap();
    }

    /// A load that fails after some of its files are registered (here the
    /// second table's rows cannot be read; a full disk would do the same)
    /// leaves no row of it, at once: before, the first table's rows were
    /// read until the next open, and the writer took their partitions for
    /// empty, so a single-row insert of one of their keys overwrote it.
    #[tokio::test]
    async fn a_failed_load_leaves_none_of_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_tables(dir.path(), &["t", "u"]).await;
        let mut broken = rows(&[("a", "1")]);
        broken.push(("a", "2"), RowETag::None, None, &[0xff]);
        let err = store
            .insert_rows(vec![
                (
                    "t".to_owned(),
                    rows(&[("a", "1"), ("a", "2"), ("b", "1")]).into(),
                ),
                ("u".to_owned(), broken.into()),
            ])
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
        assert_eq!(count(&store, "t").await, 0);
        assert_eq!(count(&store, "u").await, 0);
        assert_eq!(store.shared.catalog.prefix(LOAD_PREFIX).count(), 0);
        assert_eq!(store.table_stats("t").await.unwrap().entities, 0);

        // A key of the failed load is new to a single-row insert, and is
        // then there to a second one.
        let entity = || rows(&[("a", "1")]).entity(0, None).unwrap();
        store.write("t", WriteOp::Insert(entity())).await.unwrap();
        let again = store.write("t", WriteOp::Insert(entity())).await;
        assert!(
            matches!(again, Err(StoreError::EntityAlreadyExists { .. })),
            "{again:?}"
        );
        assert_eq!(count(&store, "t").await, 1);
        assert_eq!(store.table_stats("t").await.unwrap().entities, 1);
        drop(store);
        let store = NativeStore::open(dir.path()).unwrap();
        assert_eq!(count(&store, "t").await, 1);
    }

    /// Keys asked for together are found whether the cursor steps to them
    /// or seeks, in the files or the memtable, and not when a partition
    /// delete or a later snapshot hides them.
    #[tokio::test]
    async fn contains_finds_each_key_asked_for_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_tables(dir.path(), &["t"]).await;
        let keys: Vec<(String, String)> = (0..50)
            .flat_map(|p| (0..4).map(move |r| (format!("p{p:03}"), format!("r{r}"))))
            .collect();
        let loaded: Vec<(&str, &str)> =
            keys.iter().map(|(p, r)| (p.as_str(), r.as_str())).collect();
        store
            .insert_rows(vec![("t".to_owned(), rows(&loaded).into())])
            .await
            .unwrap();
        let written = rows(&[("p025", "r9")]).entity(0, None).unwrap();
        store.write("t", WriteOp::Insert(written)).await.unwrap();
        store.delete_partition("t", "p010").await.unwrap();
        let before_insert = store.snapshot();
        let late = rows(&[("p049", "r7")]).entity(0, None).unwrap();
        store.write("t", WriteOp::Insert(late)).await.unwrap();

        let asked = [
            ("p030", "r2", true),
            ("p000", "r0", true),
            ("a", "", false),
            ("p000", "r1", true),
            ("p025", "r9", true),
            ("p010", "r1", false),
            ("p020", "r5", false),
            ("p049", "r3", true),
            ("p000", "r0", true),
            ("p049", "r7", false),
            ("z", "", false),
            ("p003", "r3", true),
        ];
        let keys: Vec<EntityKey> = asked
            .iter()
            .map(|(p, r, _)| EntityKey::new(*p, *r))
            .collect();
        let expected: Vec<bool> = asked.iter().map(|(_, _, there)| *there).collect();
        assert_eq!(before_insert.contains("t", &keys).await.unwrap(), expected);
        let now = store.contains("t", &keys).await.unwrap();
        assert!(
            now[9],
            "a key written after a snapshot is there in a later one"
        );
        assert_eq!(store.contains("t", &[]).await.unwrap(), Vec::<bool>::new());
    }

    /// Many keys are walked for on more than one thread, each along its own
    /// range of them: each key's answer still lands in its place, in a
    /// range ending past the table's last record as in one ending before
    /// it.
    #[tokio::test]
    async fn contains_answers_many_keys_walked_for_in_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_tables(dir.path(), &["t"]).await;
        let loaded: Vec<String> = (0..40_000).map(|n| format!("k{:06}", 2 * n)).collect();
        let pairs: Vec<(&str, &str)> = loaded.iter().map(|k| (k.as_str(), "")).collect();
        store
            .insert_rows(vec![("t".to_owned(), rows(&pairs).into())])
            .await
            .unwrap();
        // Every number up to 100,000, from the last: the even ones below
        // 80,000 are there.
        let asked: Vec<u32> = (0..100_000).rev().collect();
        let keys: Vec<EntityKey> = asked
            .iter()
            .map(|n| EntityKey::new(format!("k{n:06}"), ""))
            .collect();
        let found = store.contains("t", &keys).await.unwrap();
        let expected: Vec<bool> = asked.iter().map(|n| n % 2 == 0 && *n < 80_000).collect();
        assert_eq!(found.len(), expected.len());
        let wrong: Vec<u32> = (asked.iter().zip(found.iter().zip(&expected)))
            .filter(|(_, (found, expected))| found != expected)
            .map(|(n, _)| *n)
            .collect();
        assert!(
            wrong.is_empty(),
            "wrong answers for {:?}",
            &wrong[..wrong.len().min(10)]
        );
    }

    /// A load queued behind an insert into the same empty table finds the
    /// table holding the insert's row, and goes the way of writes into a
    /// table that holds rows: its rows are inserted as one batch, which
    /// fails on the key the insert took.
    #[tokio::test]
    async fn a_load_after_a_queued_insert_checks_its_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_tables(dir.path(), &["slow", "t"]).await;
        let many: Vec<(String, String)> =
            (0..1000).map(|i| ("p".into(), format!("{i:04}"))).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(p, r)| (&**p, &**r)).collect();
        // The three commands reach the writer in this order, the last two
        // while it loads the first.
        let (slow, insert, load) = tokio::join!(
            store.insert_rows(vec![("slow".to_owned(), rows(&many).into())]),
            store.write(
                "t",
                WriteOp::Insert(rows(&[("a", "1")]).entity(0, None).unwrap())
            ),
            store.insert_rows(vec![(
                "t".to_owned(),
                rows(&[("a", "1"), ("a", "2")]).into()
            )]),
        );
        assert_eq!(slow.unwrap(), 1000);
        insert.unwrap();
        let err = load.unwrap_err();
        assert!(
            matches!(&err, StoreError::BatchOperationFailed { source, .. }
                if matches!(**source, StoreError::EntityAlreadyExists { .. })),
            "{err}"
        );
        assert_eq!(count(&store, "t").await, 1);
        assert_eq!(store.table_stats("t").await.unwrap().entities, 1);
    }

    /// A load into a table that holds rows, stopped after its rows and
    /// its partitions' headers were written into files but before its
    /// batch was committed: opening the store again removes the rows of
    /// the load's version, and only those, even among the table's rows in
    /// the span of the load's keys, and counts the partitions again.
    #[tokio::test]
    async fn an_unfinished_load_into_a_table_with_rows_is_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = store_with_tables(dir.path(), &["t"]).await;
            let held = rows(&[("a", "1"), ("a", "3"), ("c", "1")]);
            store
                .insert_rows(vec![("t".to_owned(), held.into())])
                .await
                .unwrap();
            let loaded = rows(&[("a", "2"), ("a", "4"), ("b", "1")]);
            let key = |i: usize| {
                let row = loaded.get(i);
                encode_entity_key(row.partition_key, row.row_key)
            };
            let marker = LoadMarker {
                version: u64::MAX / 2,
                first: key(0),
                last: key(2),
            };
            leave_unfinished_load(&store, "t", &marker.encode(), &loaded, marker.version);
            assert_eq!(count(&store, "t").await, 6);
        }
        let store = NativeStore::open(dir.path()).unwrap();
        let page = store.query("t", &Query::table(), None).await.unwrap();
        let keys: Vec<(String, String)> = page
            .entities
            .into_iter()
            .map(|e| (e.key.partition_key, e.key.row_key))
            .collect();
        let expected = [("a", "1"), ("a", "3"), ("c", "1")].map(|(p, r)| (p.into(), r.into()));
        assert_eq!(keys, expected);
        assert_eq!(store.shared.catalog.prefix(LOAD_PREFIX).count(), 0);
        // The partitions count what they hold again, not what the load
        // wrote into their headers.
        for (partition, entities) in [("a", 2), ("b", 0), ("c", 1)] {
            let stats = store.partition_stats("t", partition).await.unwrap();
            assert_eq!(stats.entities, entities, "{partition}");
        }
        let b = store.shared.table("t").unwrap();
        let b = b.partitions.get(encode_partition_prefix("b")).unwrap();
        assert!(b.is_none(), "an empty partition keeps no header");
        // A key of the load is new to a single-row insert.
        let entity = rows(&[("b", "1")]).entity(0, None).unwrap();
        store.write("t", WriteOp::Insert(entity)).await.unwrap();
        assert_eq!(store.partition_stats("t", "b").await.unwrap().entities, 1);
    }

    /// A load into an empty table, its marker of the form that names no
    /// rows, that stopped after its rows were written but before its batch
    /// was committed: opening the store again removes the rows, their
    /// partitions' headers and the marker.
    #[tokio::test]
    async fn an_unfinished_load_is_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = store_with_tables(dir.path(), &["t"]).await;
            let loaded = rows(&[("a", "1"), ("a", "2"), ("b", "1")]);
            leave_unfinished_load(&store, "t", &[], &loaded, 0);
            assert_eq!(count(&store, "t").await, 3);
        }
        let store = NativeStore::open(dir.path()).unwrap();
        assert_eq!(count(&store, "t").await, 0);
        let markers = store.shared.catalog.prefix(LOAD_PREFIX).count();
        assert_eq!(markers, 0);
        assert_eq!(store.partition_stats("t", "a").await.unwrap().entities, 0);
        // The table takes a load again.
        assert_eq!(
            store
                .insert_rows(vec![("t".to_owned(), rows(&[("c", "1")]).into())])
                .await
                .unwrap(),
            1
        );
        assert_eq!(store.table_stats("t").await.unwrap().entities, 1);
    }
}
