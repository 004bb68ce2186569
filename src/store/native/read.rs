//! Reads through one fjall snapshot: point gets, paged range queries and
//! partition statistics, all consistent with each other within the snapshot.

use std::ops::Bound;

use fjall::{Readable, Snapshot};

use super::layout::{etag_of, timestamp_of, PartitionHeader};
use super::Table;
use crate::model::codec::key::{
    decode_entity_key, decode_partition_prefix, encode_entity_key, encode_partition_prefix,
};
use crate::model::codec::record::{decode_record, record_header};
use crate::model::{Entity, EntityKey};
use crate::store::{
    Continuation, Page, PartitionStats, PartitionStatsPage, Query, Result, StoreError,
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
            self.deleted_through = match self
                .snapshot
                .get(&self.table.partitions, partition_prefix)
                .map_err(storage)?
            {
                Some(bytes) => PartitionHeader::decode(&bytes)?.deleted_through,
                None => 0,
            };
        }
        Ok(version > self.deleted_through)
    }
}

fn to_entity(key: EntityKey, record: &[u8], projection: Option<&[String]>) -> Result<Entity> {
    let (header, properties) = decode_record(record, projection)?;
    Ok(Entity {
        key,
        properties,
        timestamp: Some(timestamp_of(header.version)),
        etag: Some(etag_of(header.version)),
    })
}

pub(super) fn get(
    table: &Table,
    snapshot: &Snapshot,
    key: &EntityKey,
    projection: Option<&[String]>,
) -> Result<Option<Entity>> {
    let encoded = encode_entity_key(&key.partition_key, &key.row_key);
    let Some(record) = snapshot.get(&table.entities, &encoded).map_err(storage)? else {
        return Ok(None);
    };
    let version = record_header(&record)?.version;
    let prefix = encode_partition_prefix(&key.partition_key);
    if !Visibility::new(table, snapshot).is_visible(&prefix, version)? {
        return Ok(None);
    }
    to_entity(key.clone(), &record, projection).map(Some)
}

/// The length of the partition prefix at the start of an encoded entity key.
fn partition_prefix_len(encoded: &[u8]) -> Result<usize> {
    let mut pos = 0;
    crate::model::codec::key::read_element(encoded, &mut pos)?;
    Ok(pos)
}

pub(super) fn query(
    table: &Table,
    snapshot: &Snapshot,
    query: &Query,
    continuation: Option<&Continuation>,
) -> Result<Page> {
    query.check()?;
    let bounds = query.encoded_bounds(continuation)?;
    let iter = snapshot.range(&table.entities, bounds);
    let mut iter: Box<dyn Iterator<Item = fjall::Guard>> = if query.reverse {
        Box::new(iter.rev())
    } else {
        Box::new(iter)
    };
    let projection = query.projection.as_deref();
    let mut visibility = Visibility::new(table, snapshot);
    let mut entities = Vec::with_capacity(query.page_size.min(1024));
    for guard in iter.by_ref() {
        let (key, record) = guard.into_inner().map_err(storage)?;
        let prefix_len = partition_prefix_len(&key)?;
        if !visibility.is_visible(&key[..prefix_len], record_header(&record)?.version)? {
            continue;
        }
        let (pk, rk) = decode_entity_key(&key)?;
        let key = EntityKey::new(pk, rk);
        if entities.len() == query.page_size {
            return Ok(Page {
                entities,
                continuation: Some(Continuation::to_next(&key)),
            });
        }
        entities.push(to_entity(key, &record, projection)?);
    }
    Ok(Page {
        entities,
        continuation: None,
    })
}

pub(super) fn partition_stats(
    table: &Table,
    snapshot: &Snapshot,
    partition_key: &str,
) -> Result<PartitionStats> {
    let prefix = encode_partition_prefix(partition_key);
    let header = match snapshot.get(&table.partitions, &prefix).map_err(storage)? {
        Some(bytes) => PartitionHeader::decode(&bytes)?,
        None => PartitionHeader::default(),
    };
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
