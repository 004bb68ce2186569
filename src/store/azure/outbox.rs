//! Writes over several partitions, made whole by a durable outbox (the
//! seeds' eventually consistent transactions pattern).
//!
//! The service applies atomically only the operations of one partition of
//! one table. Past that, [`write`]:
//!
//! 1. reads the entities that the operations replace, merge or delete (their
//!    before-images);
//! 2. writes a record to the outbox table: what the operations leave, each
//!    as an unconditional upsert, merge or delete, so that applying it
//!    twice changes nothing. A record is entities of one partition of its
//!    own: data chunks, then a header, written last, which commits it;
//! 3. applies the operations, a partition at a time, with their own
//!    conditions (an insert still fails on an existing entity, an ETag
//!    still has to match);
//! 4. on success deletes the record. When a condition fails, it writes a
//!    second record holding the undo of what was applied (before-images
//!    put back, inserted entities deleted), deletes the first, applies
//!    the undo, deletes the second and returns the error: the write is
//!    then as if never made.
//!
//! While it applies a record, the writer renews the record's header every
//! [`LEASE_RENEWAL`]. A gateway that stops between 2 and 4 leaves records
//! that nobody renews, and [`recover`] (at startup, then periodically, by
//! any gateway over the account) applies them oldest first, so that an
//! undo comes after what it undoes.
//! Until then readers may see part of the write; the oldest record's age
//! is the lag.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value as Json};

use super::{json as entity_json, AzureStore};
use crate::model::{DateTime, Entity, EntityKey, IfMatch, Value};
use crate::store::{
    EntityRead, EntityWrite, Query, Result, StoreError, TableAdmin, WriteOp, WriteOutcome,
};

/// The store table of outbox records.
pub const OUTBOX_TABLE: &str = "_tablegate_outbox";
/// Bytes of a record's data per property (the service's limit is 64 KiB).
const CHUNK_BYTES: usize = 60_000;
/// Data properties per chunk entity (an entity holds at most 1 MiB).
const CHUNK_PROPERTIES: usize = 15;
/// Chunk entities per batch (a batch carries at most 4 MiB).
const CHUNKS_PER_BATCH: usize = 3;
/// Partitions applied at once.
const PARALLEL_PARTITIONS: usize = 8;
/// How often a writer renews the header of the record it applies; a record
/// is taken for abandoned when the age given to [`recover`] has passed
/// since (which must be well above this).
const LEASE_RENEWAL: Duration = Duration::from_secs(10);
const HEADER: &str = "header";

/// One operation as the outbox keeps it: unconditional, so that applying
/// it again changes nothing.
#[derive(Debug, Clone)]
enum Step {
    Upsert(String, Entity),
    Merge(String, Entity),
    Delete(String, EntityKey),
}

impl Step {
    /// The final state `op` leaves.
    fn redo(table: &str, op: &WriteOp) -> Step {
        let table = table.to_owned();
        match op {
            WriteOp::Insert(e)
            | WriteOp::InsertOrReplace(e)
            | WriteOp::Replace { entity: e, .. } => Step::Upsert(table, e.clone()),
            WriteOp::Merge { entity: e, .. } | WriteOp::InsertOrMerge(e) => {
                Step::Merge(table, e.clone())
            }
            WriteOp::Delete { key, .. } => Step::Delete(table, key.clone()),
        }
    }

    /// What puts back `before` (None: the entity was not there).
    fn undo(table: &str, key: &EntityKey, before: Option<&Entity>) -> Step {
        match before {
            Some(entity) => Step::Upsert(table.to_owned(), entity.clone()),
            None => Step::Delete(table.to_owned(), key.clone()),
        }
    }

    fn table(&self) -> &str {
        match self {
            Step::Upsert(t, _) | Step::Merge(t, _) | Step::Delete(t, _) => t,
        }
    }

    fn op(&self) -> WriteOp {
        match self {
            Step::Upsert(_, e) => WriteOp::InsertOrReplace(e.clone()),
            Step::Merge(_, e) => WriteOp::InsertOrMerge(e.clone()),
            Step::Delete(_, key) => WriteOp::Delete {
                key: key.clone(),
                if_match: IfMatch::Any,
            },
        }
    }

    fn to_json(&self) -> Json {
        match self {
            Step::Upsert(t, e) => {
                json!({"do": "upsert", "table": t, "entity": entity_json::entity_body(e)})
            }
            Step::Merge(t, e) => {
                json!({"do": "merge", "table": t, "entity": entity_json::entity_body(e)})
            }
            Step::Delete(t, k) => json!({"do": "delete", "table": t,
                "pk": k.partition_key, "rk": k.row_key}),
        }
    }

    fn of_json(json: &Json) -> Option<Step> {
        let table = json["table"].as_str()?.to_owned();
        let entity = || match &json["entity"] {
            Json::Object(map) => entity_json::entity_of(map.clone()).ok(),
            _ => None,
        };
        Some(match json["do"].as_str()? {
            "upsert" => Step::Upsert(table, entity()?),
            "merge" => Step::Merge(table, entity()?),
            "delete" => Step::Delete(
                table,
                EntityKey::new(json["pk"].as_str()?, json["rk"].as_str()?),
            ),
            _ => return None,
        })
    }
}

/// Operations grouped by table and partition, in order; each group in
/// batches of at most 100 operations on distinct entities.
fn groups(ops: &[(String, WriteOp)]) -> Vec<Vec<Vec<usize>>> {
    let mut by_partition: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (index, (table, op)) in ops.iter().enumerate() {
        by_partition
            .entry((table.as_str(), op.key().partition_key.as_str()))
            .or_default()
            .push(index);
    }
    by_partition
        .into_values()
        .map(|indexes| {
            let mut batches: Vec<Vec<usize>> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for index in indexes {
                let key = &ops[index].1.key().row_key;
                let full = batches.last().is_none_or(|b| {
                    b.len() == crate::model::MAX_BATCH_OPERATIONS || seen.contains(key)
                });
                if full {
                    batches.push(Vec::new());
                    seen.clear();
                }
                seen.insert(key.clone());
                batches.last_mut().expect("a batch").push(index);
            }
            batches
        })
        .collect()
}

/// Applies operations over several partitions (see the module's text).
pub async fn write(store: &AzureStore, ops: Vec<(String, WriteOp)>) -> Result<Vec<WriteOutcome>> {
    // 1. Before-images of what is replaced, merged or deleted.
    let reads: Vec<Option<(String, EntityKey)>> = ops
        .iter()
        .map(|(table, op)| match op {
            WriteOp::Insert(_) => None,
            _ => Some((table.clone(), op.key().clone())),
        })
        .collect();
    let befores: Vec<Option<Entity>> = futures::stream::iter(reads)
        .map(|read| {
            let store = store.clone();
            async move {
                match read {
                    Some((table, key)) => store.get(&table, &key, None).await,
                    None => Ok(None),
                }
            }
        })
        .buffered(32)
        .try_collect()
        .await?;

    // 2. The record of what the operations leave.
    let redo: Vec<Step> = ops.iter().map(|(t, op)| Step::redo(t, op)).collect();
    let record = Record::write(store, &redo).await?;
    let lease = record.keep_alive(store);

    // 3. The operations, with their conditions.
    let groups = groups(&ops);
    let ops = std::sync::Arc::new(ops);
    let applied: Vec<Applied> = futures::stream::iter(groups)
        .map(|group| {
            let (store, ops) = (store.clone(), ops.clone());
            async move { apply_group(&store, &ops, &group).await }
        })
        .buffer_unordered(PARALLEL_PARTITIONS)
        .collect()
        .await;
    let mut outcomes: Vec<Option<WriteOutcome>> = vec![None; ops.len()];
    let mut failure = None;
    for group in applied {
        group
            .done
            .into_iter()
            .for_each(|(i, o)| outcomes[i] = Some(o));
        if let Some(failed) = group.failed {
            failure.get_or_insert(failed);
        }
    }

    // 4. Done, or undone: the applied operations' undo, in reverse, goes
    // in a record of its own before the first record goes.
    lease.abort();
    let Some((index, error)) = failure else {
        record.delete(store).await?;
        return Ok(outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or(WriteOutcome {
                    etag: None,
                    timestamp: None,
                })
            })
            .collect());
    };
    let undo: Vec<Step> = (0..ops.len())
        .rev()
        .filter(|&i| outcomes[i].is_some())
        .map(|i| Step::undo(&ops[i].0, ops[i].1.key(), befores[i].as_ref()))
        .collect();
    let undoing = Record::write(store, &undo).await?;
    let lease = undoing.keep_alive(store);
    record.delete(store).await?;
    apply_steps(store, &undo).await?;
    lease.abort();
    undoing.delete(store).await?;
    Err(StoreError::BatchOperationFailed {
        index,
        source: Box::new(error),
    })
}

/// What one partition's operations did: those applied, and the failure
/// that stopped the rest.
struct Applied {
    done: Vec<(usize, WriteOutcome)>,
    failed: Option<(usize, StoreError)>,
}

/// One partition's operations, batch after batch, up to the first failure.
async fn apply_group(
    store: &AzureStore,
    ops: &[(String, WriteOp)],
    group: &[Vec<usize>],
) -> Applied {
    let mut done = Vec::new();
    for batch in group {
        let table = &ops[batch[0]].0;
        let batch_ops: Vec<WriteOp> = batch.iter().map(|&i| ops[i].1.clone()).collect();
        let failed = match store.write_batch(table, batch_ops).await {
            Ok(outcomes) => {
                done.extend(batch.iter().copied().zip(outcomes));
                continue;
            }
            Err(StoreError::BatchOperationFailed { index, source }) => (batch[index], *source),
            Err(other) => (batch[0], other),
        };
        return Applied {
            done,
            failed: Some(failed),
        };
    }
    Applied { done, failed: None }
}

/// Applies unconditional steps (redo or undo), a partition at a time; an
/// entity already deleted is no error.
async fn apply_steps(store: &AzureStore, steps: &[Step]) -> Result<()> {
    let ops: Vec<(String, WriteOp)> = steps
        .iter()
        .map(|s| (s.table().to_owned(), s.op()))
        .collect();
    let groups = groups(&ops);
    let ops = std::sync::Arc::new(ops);
    futures::stream::iter(groups)
        .map(|group| {
            let (store, ops) = (store.clone(), ops.clone());
            async move {
                for batch in group {
                    let table = &ops[batch[0]].0;
                    for &i in &batch {
                        // One at a time: a delete of a missing entity would
                        // fail a whole batch.
                        match store.write(table, ops[i].1.clone()).await {
                            Ok(_) | Err(StoreError::EntityNotFound { .. }) => {}
                            Err(StoreError::TableNotFound(_)) => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Ok(())
            }
        })
        .buffer_unordered(PARALLEL_PARTITIONS)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// An outbox record: one partition of the outbox table.
struct Record {
    id: String,
    chunks: usize,
}

impl Record {
    async fn write(store: &AzureStore, steps: &[Step]) -> Result<Record> {
        let data = Json::Array(steps.iter().map(Step::to_json).collect()).to_string();
        let now = chrono::Utc::now();
        let id = format!(
            "{}-{:08x}",
            now.format("%Y%m%dT%H%M%S%.6f"),
            super::random_u32()
        );
        let pieces: Vec<&[u8]> = data.as_bytes().chunks(CHUNK_BYTES).collect();
        let chunks: Vec<Entity> = pieces
            .chunks(CHUNK_PROPERTIES)
            .enumerate()
            .map(|(n, properties)| {
                let mut entity = Entity::new(id.clone(), format!("c{n:06}"));
                for (p, bytes) in properties.iter().enumerate() {
                    entity
                        .properties
                        .insert(format!("d{p:02}"), Value::Binary(bytes.to_vec()));
                }
                entity
            })
            .collect();
        let count = chunks.len();
        ensure_table(store).await?;
        for batch in chunks.chunks(CHUNKS_PER_BATCH) {
            let ops = batch.iter().cloned().map(WriteOp::Insert).collect();
            store.write_batch(OUTBOX_TABLE, ops).await?;
        }
        let record = Record { id, chunks: count };
        store
            .write(OUTBOX_TABLE, WriteOp::Insert(record.header()))
            .await?;
        Ok(record)
    }

    /// The header: the number of chunks, and when its writer last said it
    /// was still applying the record.
    fn header(&self) -> Entity {
        let now = DateTime(chrono::Utc::now().timestamp_micros());
        Entity::new(self.id.clone(), HEADER)
            .with("chunks", Value::Int32(self.chunks as i32))
            .with("alive", Value::DateTime(now))
    }

    /// While its writer applies it, the record's header says so every
    /// [`LEASE_RENEWAL`], so that no other gateway takes it for abandoned.
    /// Stopped by aborting the task; a renewal never brings back a deleted
    /// header (it replaces only an existing one).
    fn keep_alive(&self, store: &AzureStore) -> tokio::task::JoinHandle<()> {
        let (store, record) = (
            store.clone(),
            Record {
                id: self.id.clone(),
                chunks: self.chunks,
            },
        );
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(LEASE_RENEWAL).await;
                let renew = WriteOp::Replace {
                    entity: record.header(),
                    if_match: IfMatch::Any,
                };
                if store.write(OUTBOX_TABLE, renew).await.is_err() {
                    return;
                }
            }
        })
    }

    /// Deletes the header first: a record without one is never applied.
    async fn delete(&self, store: &AzureStore) -> Result<()> {
        let delete = |row: String| WriteOp::Delete {
            key: EntityKey::new(self.id.clone(), row),
            if_match: IfMatch::Any,
        };
        match store.write(OUTBOX_TABLE, delete(HEADER.into())).await {
            Ok(_) | Err(StoreError::EntityNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let rows: Vec<WriteOp> = (0..self.chunks)
            .map(|n| delete(format!("c{n:06}")))
            .collect();
        for batch in rows.chunks(crate::model::MAX_BATCH_OPERATIONS) {
            match store.write_batch(OUTBOX_TABLE, batch.to_vec()).await {
                Ok(_) => {}
                // Another gateway finishing the same record removed them.
                Err(e) if matches!(e.root(), StoreError::EntityNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads a committed record's steps.
    async fn steps(store: &AzureStore, header: &Entity) -> Result<Vec<Step>> {
        let id = header.key.partition_key.clone();
        let mut data = Vec::new();
        let mut token = None;
        loop {
            let page = store
                .query(OUTBOX_TABLE, &Query::partition(id.clone()), token.as_ref())
                .await?;
            for chunk in page.entities.iter().filter(|e| e.key.row_key != HEADER) {
                for value in chunk.properties.values() {
                    if let Value::Binary(bytes) = value {
                        data.extend_from_slice(bytes);
                    }
                }
            }
            token = page.continuation;
            if token.is_none() {
                break;
            }
        }
        let corrupt = || StoreError::Service(format!("outbox record {id} does not decode"));
        let json: Json = serde_json::from_slice(&data).map_err(|_| corrupt())?;
        json.as_array()
            .ok_or_else(corrupt)?
            .iter()
            .map(|s| Step::of_json(s).ok_or_else(corrupt))
            .collect()
    }
}

async fn ensure_table(store: &AzureStore) -> Result<()> {
    match store.create_table(OUTBOX_TABLE).await {
        Ok(()) | Err(StoreError::TableAlreadyExists(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Finishes the records abandoned for longer than `age` (left by a gateway
/// that stopped: its header not renewed, or never written, for that long),
/// oldest first: applies each committed one, and drops those never
/// committed. Returns how many were finished.
pub async fn recover(store: &AzureStore, age: Duration) -> Result<usize> {
    let now = chrono::Utc::now().naive_utc();
    let abandoned = |at: Option<chrono::NaiveDateTime>| {
        at.is_none_or(|at| (now - at).to_std().is_ok_and(|idle| idle >= age))
    };
    let mut finished = 0;
    let mut records: BTreeMap<String, (Option<Entity>, usize)> = BTreeMap::new();
    let mut resume = None;
    loop {
        let (page, next) = match store
            .inner
            .service_page(
                OUTBOX_TABLE,
                "",
                Some(&["chunks".to_owned(), "alive".to_owned()]),
                1000,
                resume.as_ref(),
            )
            .await
        {
            Ok(page) => page,
            Err(StoreError::TableNotFound(_)) => return Ok(0),
            Err(e) => return Err(e),
        };
        for entity in page {
            let record = records.entry(entity.key.partition_key.clone()).or_default();
            if entity.key.row_key == HEADER {
                record.0 = Some(entity);
            } else {
                record.1 += 1;
            }
        }
        resume = next;
        if resume.is_none() {
            break;
        }
    }
    for (id, (header, chunks)) in records {
        let alive = match header.as_ref().and_then(|h| h.properties.get("alive")) {
            Some(Value::DateTime(t)) => {
                chrono::DateTime::from_timestamp_micros(t.0).map(|t| t.naive_utc())
            }
            _ => created(&id),
        };
        if !abandoned(alive) {
            continue;
        }
        if let Some(header) = &header {
            let steps = Record::steps(store, header).await?;
            apply_steps(store, &steps).await?;
            tracing::info!("finished outbox record {id} ({} steps)", steps.len());
        }
        let chunks = header
            .as_ref()
            .and_then(|h| h.properties.get("chunks"))
            .and_then(Value::as_i64)
            .map_or(chunks, |n| n as usize);
        Record { id, chunks }.delete(store).await?;
        finished += 1;
    }
    Ok(finished)
}

/// The age of the oldest outbox record, if there is one: the lag of writes
/// not yet whole.
pub async fn oldest(store: &AzureStore) -> Result<Option<Duration>> {
    let (page, _) = match store
        .inner
        .service_page(OUTBOX_TABLE, "", Some(&[]), 1, None)
        .await
    {
        Ok(page) => page,
        Err(StoreError::TableNotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(page.first().and_then(|e| {
        let at = created(&e.key.partition_key)?;
        (chrono::Utc::now().naive_utc() - at).to_std().ok()
    }))
}

/// When a record was made, from its id.
fn created(id: &str) -> Option<chrono::NaiveDateTime> {
    let stamp = id.split('-').next()?;
    chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S%.6f").ok()
}
