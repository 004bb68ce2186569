//! Reads through one fjall snapshot: point gets, paged range queries and
//! partition statistics, all consistent with each other within the snapshot.

use std::ops::Bound;
use std::sync::Arc;

use fjall::{Readable, Snapshot};

use super::layout::{stats_key, timestamp_of, PartitionHeader, TableTotals};
use super::partition_cache::{partition_prefix, CachedRows, PartitionCache};
use super::Table;
use crate::model::codec::key::{
    decode_entity_key_into, decode_partition_prefix, decode_row_key_into, encode_entity_key,
    encode_partition_prefix,
};
use crate::model::codec::record::{decode_record, record_header};
use crate::model::{ETag, Entity, EntityKey};
use crate::store::{
    bulk_threads, on_threads, Continuation, EncodedRows, KeyRange, Page, PartitionStats,
    PartitionStatsPage, Query, Result, RowETag, StoreError,
};

pub(super) fn storage(e: fjall::Error) -> StoreError {
    StoreError::Storage(e.to_string())
}

/// Answers "is a record of this version in this partition deleted by a bulk
/// partition delete?", looking up each partition's header at most once.
pub(super) struct Visibility<'a> {
    table: &'a Table,
    snapshot: &'a Snapshot,
    partition: Vec<u8>,
    deleted_through: u64,
}

impl<'a> Visibility<'a> {
    pub fn new(table: &'a Table, snapshot: &'a Snapshot) -> Self {
        Visibility {
            table,
            snapshot,
            partition: Vec::new(),
            deleted_through: 0,
        }
    }

    pub fn is_visible(&mut self, partition_prefix: &[u8], version: u64) -> Result<bool> {
        if !self.table.may_have_tombstone(partition_prefix) {
            return Ok(true);
        }
        if self.partition != partition_prefix {
            self.partition = partition_prefix.to_vec();
            let stored = self
                .snapshot
                .get(&self.table.partitions, partition_prefix)
                .map_err(storage)?;
            self.deleted_through = PartitionHeader::of_stored(stored)?.deleted_through;
        }
        Ok(version > self.deleted_through)
    }
}

/// A stored record, read from fjall or found in the partition cache.
enum Stored {
    Read(fjall::Slice),
    Cached(Arc<CachedRows>, usize),
}

impl AsRef<[u8]> for Stored {
    fn as_ref(&self) -> &[u8] {
        match self {
            Stored::Read(record) => record,
            Stored::Cached(rows, i) => rows.pair(*i).1,
        }
    }
}

/// The record of a key, if the key is there and visible.
fn lookup(
    table: &Table,
    snapshot: &Snapshot,
    cache: &PartitionCache,
    key: &EntityKey,
) -> Result<Option<Stored>> {
    let encoded = encode_entity_key(&key.partition_key, &key.row_key);
    let prefix = partition_prefix(&encoded)?;
    let record = match cache.rows(table, prefix, snapshot, Some(&encoded))? {
        Some(rows) => match rows.position(&encoded) {
            Some(i) => Stored::Cached(rows, i),
            None => return Ok(None),
        },
        None => match snapshot.get(&table.entities, &encoded).map_err(storage)? {
            Some(record) => Stored::Read(record),
            None => return Ok(None),
        },
    };
    let version = record_header(record.as_ref())?.version;
    if !Visibility::new(table, snapshot).is_visible(prefix, version)? {
        return Ok(None);
    }
    Ok(Some(record))
}

pub(super) fn get(
    table: &Table,
    snapshot: &Snapshot,
    cache: &PartitionCache,
    key: &EntityKey,
    projection: Option<&[String]>,
) -> Result<Option<Entity>> {
    let Some(record) = lookup(table, snapshot, cache, key)? else {
        return Ok(None);
    };
    let (header, properties) = decode_record(record.as_ref(), projection)?;
    Ok(Some(Entity {
        key: key.clone(),
        properties,
        timestamp: Some(timestamp_of(header.version)),
        etag: Some(ETag::of_version(header.version)),
    }))
}

/// How many stored records [`contains`] steps over to reach the next key
/// it looks for before it seeks to that key instead.
const STEPS_BEFORE_SEEK: usize = 16;

/// Which of `keys` the table holds, as `snapshot` sees it, in their order.
///
/// The keys are looked for in key order along one iterator over the
/// table's records: a key a few records past the last one looked for is
/// reached by stepping over them, a key further on by a new seek. A COPY
/// checking its foreign keys asks for many keys of one table at once,
/// often most of a range of it; a point read of each (the partition cache,
/// the index block's search, the data block's) cost about 8 µs a key
/// (BENCHMARKS.md, "COPY's foreign keys looked up together").
pub(super) fn contains(
    table: &Table,
    snapshot: &Snapshot,
    keys: &[EntityKey],
) -> Result<Vec<bool>> {
    // Each key with its first 16 bytes as a number, which orders the keys
    // as their bytes do where those differ, in one comparison: keys of
    // numbers start with the same zeros.
    let mut sought: Vec<(u128, Vec<u8>, usize)> = (keys.iter().enumerate())
        .map(|(i, key)| {
            let key = encode_entity_key(&key.partition_key, &key.row_key);
            let mut start = [0u8; 16];
            let len = key.len().min(16);
            start[..len].copy_from_slice(&key[..len]);
            (u128::from_be_bytes(start), key, i)
        })
        .collect();
    // Keys often come sorted already (see `check_loaded`).
    if !sought.is_sorted() {
        sought.sort_unstable();
    }
    // Many keys are walked for on each core, each core along its own
    // range of them.
    let per_thread = sought
        .len()
        .div_ceil(bulk_threads())
        .max(KEYS_A_THREAD_AT_LEAST);
    let walks = on_threads(sought.chunks(per_thread), |sought| {
        walk(table, snapshot, sought)
    });
    let mut found = vec![false; keys.len()];
    for (chunk, walked) in sought.chunks(per_thread).zip(walks) {
        for ((_, _, i), present) in chunk.iter().zip(walked?) {
            found[*i] = present;
        }
    }
    Ok(found)
}

/// Fewer keys than this are walked for on one thread: a thread is worth
/// starting only for many keys.
const KEYS_A_THREAD_AT_LEAST: usize = 16_384;

/// Which of `sought` (encoded keys in key order, each with its first 16
/// bytes as a number) the table holds, in their order.
fn walk(
    table: &Table,
    snapshot: &Snapshot,
    sought: &[(u128, Vec<u8>, usize)],
) -> Result<Vec<bool>> {
    let mut found = vec![false; sought.len()];
    let mut visibility = Visibility::new(table, snapshot);
    let mut cursor: Option<Cursor> = None;
    for (n, (_, key, _)) in sought.iter().enumerate() {
        let stepped = match cursor.as_mut() {
            Some(cursor) => cursor.step_to(key)?,
            None => None,
        };
        let at = match stepped {
            Some(at) => at,
            // No cursor yet, or too far to step to.
            None => cursor
                .insert(Cursor::seek(table, snapshot, key)?)
                .record
                .as_ref(),
        };
        // Past the table's last record: so are the keys after this one.
        let Some((stored, record)) = at else { break };
        found[n] = stored.as_ref() == key.as_slice()
            && visibility.is_visible(partition_prefix(key)?, record_header(record)?.version)?;
    }
    Ok(found)
}

/// An iterator over a table's records and the record it is at: the key
/// and record of the first at or after the last key sought.
struct Cursor {
    records: fjall::Iter,
    record: Option<(fjall::Slice, fjall::Slice)>,
}

impl Cursor {
    fn seek(table: &Table, snapshot: &Snapshot, key: &[u8]) -> Result<Cursor> {
        let mut records = snapshot.range(&table.entities, key..);
        let record = Cursor::next(&mut records)?;
        Ok(Cursor { records, record })
    }

    fn next(records: &mut fjall::Iter) -> Result<Option<(fjall::Slice, fjall::Slice)>> {
        records
            .next()
            .map(|guard| guard.into_inner().map_err(storage))
            .transpose()
    }

    /// Moves to the first record at or after `key` if that takes at most
    /// [`STEPS_BEFORE_SEEK`] steps: `None` if it takes more, else the
    /// record (`None` past the last).
    fn step_to(&mut self, key: &[u8]) -> Result<Option<Option<&(fjall::Slice, fjall::Slice)>>> {
        let mut steps = 0;
        loop {
            match &self.record {
                Some((stored, _)) if stored.as_ref() < key => {
                    if steps == STEPS_BEFORE_SEEK {
                        return Ok(None);
                    }
                    self.record = Cursor::next(&mut self.records)?;
                    steps += 1;
                }
                _ => return Ok(Some(self.record.as_ref())),
            }
        }
    }
}

/// Appends a stored row with the ETag and Timestamp of its version.
fn push_row(rows: &mut EncodedRows, key: (&str, &str), record: &[u8]) -> Result<()> {
    let version = record_header(record)?.version;
    rows.push(
        key,
        RowETag::Version(version),
        Some(timestamp_of(version)),
        record,
    );
    Ok(())
}

pub(super) fn get_row(
    table: &Table,
    snapshot: &Snapshot,
    cache: &PartitionCache,
    key: &EntityKey,
    rows: &mut EncodedRows,
) -> Result<bool> {
    let Some(record) = lookup(table, snapshot, cache, key)? else {
        return Ok(false);
    };
    let key = (key.partition_key.as_str(), key.row_key.as_str());
    push_row(rows, key, record.as_ref())?;
    Ok(true)
}

pub(super) fn query(
    table: &Table,
    snapshot: &Snapshot,
    cache: &PartitionCache,
    query: &Query,
    continuation: Option<&Continuation>,
) -> Result<Page> {
    let mut rows = EncodedRows::new();
    let continuation = query_rows(table, snapshot, cache, query, continuation, &mut rows)?;
    let projection = query.projection.as_deref();
    let entities = (0..rows.len())
        .map(|i| rows.entity(i, projection))
        .collect::<std::result::Result<_, _>>()?;
    Ok(Page {
        entities,
        continuation,
    })
}

pub(super) fn query_rows(
    table: &Table,
    snapshot: &Snapshot,
    cache: &PartitionCache,
    query: &Query,
    continuation: Option<&Continuation>,
    rows: &mut EncodedRows,
) -> Result<Option<Continuation>> {
    query.check()?;
    let bounds = query.encoded_bounds(continuation)?;
    // A range of one partition starts at a key of it (or at its prefix).
    if let (KeyRange::Rows { .. }, Bound::Included(first) | Bound::Excluded(first)) =
        (&query.range, &bounds.0)
    {
        let prefix = partition_prefix(first)?;
        if let Some(cached) = cache.rows(table, prefix, snapshot, None)? {
            let range = cached.range(&bounds);
            let count = range.len().min(query.page_size);
            let wanted = match query.reverse {
                false => range.start..range.start + count,
                true => range.end - count..range.end,
            };
            let (keys, records) = cached.sizes(wanted);
            rows.reserve(count, keys, records);
            let pairs = |i| Ok(cached.pair(i));
            return if query.reverse {
                read_pairs(table, snapshot, query, range.rev().map(pairs), rows)
            } else {
                read_pairs(table, snapshot, query, range.map(pairs), rows)
            };
        }
    }
    let pairs = snapshot
        .range(&table.entities, bounds)
        .map(|guard| guard.into_inner().map_err(storage));
    if query.reverse {
        read_pairs(table, snapshot, query, pairs.rev(), rows)
    } else {
        read_pairs(table, snapshot, query, pairs, rows)
    }
}

/// Appends the visible rows of stored (key, record) pairs, in their order,
/// up to the query's page size; the continuation when more remain.
fn read_pairs<K: AsRef<[u8]>, R: AsRef<[u8]>>(
    table: &Table,
    snapshot: &Snapshot,
    query: &Query,
    pairs: impl Iterator<Item = Result<(K, R)>>,
    rows: &mut EncodedRows,
) -> Result<Option<Continuation>> {
    let mut visibility = Visibility::new(table, snapshot);
    let (mut pk, mut rk) = (String::new(), String::new());
    // The stored prefix `pk` was decoded from: the rows of one partition
    // decode it once.
    let mut pk_prefix = Vec::new();
    let mut read = 0;
    for pair in pairs {
        let (key, record) = pair?;
        let (key, record) = (key.as_ref(), record.as_ref());
        let prefix = partition_prefix(key)?;
        if !visibility.is_visible(prefix, record_header(record)?.version)? {
            continue;
        }
        if prefix == pk_prefix.as_slice() {
            decode_row_key_into(key, prefix.len(), &mut rk)?;
        } else {
            decode_entity_key_into(key, &mut pk, &mut rk)?;
            pk_prefix.clear();
            pk_prefix.extend_from_slice(prefix);
        }
        if read == query.page_size {
            return Ok(Some(Continuation::to_next(&EntityKey::new(pk, rk))));
        }
        push_row(rows, (&pk, &rk), record)?;
        read += 1;
    }
    Ok(None)
}

pub(super) fn partition_stats(
    table: &Table,
    snapshot: &Snapshot,
    partition_key: &str,
) -> Result<PartitionStats> {
    let prefix = encode_partition_prefix(partition_key);
    let stored = snapshot.get(&table.partitions, &prefix).map_err(storage)?;
    let header = PartitionHeader::of_stored(stored)?;
    Ok(PartitionStats {
        partition_key: partition_key.to_owned(),
        entities: header.entities,
        bytes: header.bytes,
    })
}

pub(super) fn list_partition_stats(
    table: &Table,
    snapshot: &Snapshot,
    page_size: usize,
    continuation: Option<&Continuation>,
) -> Result<PartitionStatsPage> {
    if page_size == 0 || page_size > crate::store::MAX_PAGE_SIZE {
        return Err(StoreError::InvalidQuery(format!(
            "page size {page_size} is out of range"
        )));
    }
    let lower = match continuation {
        Some(token) => Bound::Included(encode_partition_prefix(&token.decode()?.partition_key)),
        None => Bound::Unbounded,
    };
    let mut partitions = Vec::new();
    for guard in snapshot.range(&table.partitions, (lower, Bound::<Vec<u8>>::Unbounded)) {
        let (key, value) = guard.into_inner().map_err(storage)?;
        let header = PartitionHeader::decode(&value)?;
        if header.entities == 0 {
            continue;
        }
        let partition_key = decode_partition_prefix(&key)?;
        if partitions.len() == page_size {
            return Ok(PartitionStatsPage {
                partitions,
                continuation: Some(Continuation::to_next(&EntityKey::new(partition_key, ""))),
            });
        }
        partitions.push(PartitionStats {
            partition_key,
            entities: header.entities,
            bytes: header.bytes,
        });
    }
    Ok(PartitionStatsPage {
        partitions,
        continuation: None,
    })
}

/// The version of the last commit that changed the table, as of `snapshot`
/// (`None` if no commit did since versions were kept).
pub fn table_version(
    catalog: &fjall::Keyspace,
    table: &Table,
    snapshot: &Snapshot,
) -> Result<Option<u64>> {
    let Some(totals) = snapshot
        .get(catalog, stats_key(table.id))
        .map_err(storage)?
    else {
        return Ok(None);
    };
    let changed_at = TableTotals::decode(&totals)?.changed_at;
    Ok((changed_at > 0).then_some(changed_at))
}
