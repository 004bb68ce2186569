//! The on-disk layout of the native engine.
//!
//! One fjall database under `<data-dir>/store`, holding these keyspaces:
//!
//! | keyspace | key | value |
//! |---|---|---|
//! | `catalog` | `table/<name>` | table id (u64 LE) |
//! | `catalog` | `stats/<id BE>` | [`TableTotals`]: entities, bytes, partitions |
//! | `catalog` | `tomb/<id BE><encoded PartitionKey>` | empty: the partition was bulk-deleted once |
//! | `catalog` | `next_table_id` | u64 LE |
//! | `catalog` | `version_floor` | u64 LE, the highest version ever committed |
//! | `catalog` | `load/<id BE>` | [`LoadMarker`]: a load into the table is under way (see [`load_key`]) |
//! | `t<id>` | encoded `(PartitionKey, RowKey)` | entity record ([`crate::model::codec::record`]) |
//! | `p<id>` | encoded `(PartitionKey)` | [`PartitionHeader`] |
//!
//! Table ids are never reused, so a dropped table's keyspaces can be deleted
//! whole and a leftover keyspace (a crash between the catalog write and the
//! keyspace removal) is recognised at open and removed.
//!
//! Versions: every committed write gets a version, strictly increasing over the
//! life of the data dir, taken as `max(now in microseconds, last + 1)`. It is
//! the entity's Timestamp and the source of its ETag.
//!
//! Bulk-deleted partitions: a partition delete does not visit entities; it sets
//! the partition header's `deleted_through` to a fresh version. An entity
//! whose record version is at most `deleted_through` is invisible, and a new
//! write to its key overwrites it. The `tomb/` records let readers skip the
//! header lookup for partitions that were never bulk-deleted.

use crate::model::codec::CodecError;
use crate::model::{DateTime, ETag};

pub const CATALOG: &str = "catalog";
pub const TABLE_PREFIX: &str = "table/";
pub const STATS_PREFIX: &[u8] = b"stats/";
pub const TOMB_PREFIX: &[u8] = b"tomb/";
pub const NEXT_TABLE_ID: &str = "next_table_id";
pub const VERSION_FLOOR: &str = "version_floor";
pub const LOAD_PREFIX: &[u8] = b"load/";

/// How a table's keyspaces are stored (fjall keeps these with the
/// keyspace when it is made; an existing keyspace keeps its own).
///
/// Every level's index and filter blocks stay in memory: a COPY ingests a
/// table's rows straight into the last level, whose blocks fjall would
/// otherwise fetch from its block cache on each read by key.
pub fn table_keyspace_options() -> fjall::KeyspaceCreateOptions {
    use fjall::config::PinningPolicy;
    fjall::KeyspaceCreateOptions::default()
        .index_block_pinning_policy(PinningPolicy::all(true))
        .filter_block_pinning_policy(PinningPolicy::all(true))
}

pub fn entities_keyspace(id: u64) -> String {
    format!("t{id}")
}

pub fn partitions_keyspace(id: u64) -> String {
    format!("p{id}")
}

/// The table id of a keyspace named `t<id>` or `p<id>`.
pub fn keyspace_table_id(name: &str) -> Option<u64> {
    let rest = name.strip_prefix('t').or_else(|| name.strip_prefix('p'))?;
    rest.parse().ok()
}

pub fn table_key(name: &str) -> Vec<u8> {
    [TABLE_PREFIX.as_bytes(), name.as_bytes()].concat()
}

/// Set while rows are written straight into a table's files, and removed
/// with the commit of its headers: found at open, it means the load did not
/// finish, and its rows are removed. Its value is a [`LoadMarker`].
pub fn load_key(id: u64) -> Vec<u8> {
    [LOAD_PREFIX, &id.to_be_bytes()].concat()
}

/// Which rows a load writes: every row it writes carries `version`, which
/// no other row has (versions are never reused), and has its encoded key
/// from `first` to `last`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadMarker {
    pub version: u64,
    pub first: Vec<u8>,
    pub last: Vec<u8>,
}

impl LoadMarker {
    /// The version (u64 LE), the length of `first` (u32 LE), `first`, `last`.
    pub fn encode(&self) -> Vec<u8> {
        let first_len = u32::try_from(self.first.len()).unwrap_or(u32::MAX);
        [
            &self.version.to_le_bytes()[..],
            &first_len.to_le_bytes(),
            &self.first,
            &self.last,
        ]
        .concat()
    }

    /// `None` for the empty marker that loads into empty tables left before
    /// markers held their rows: all of that table's rows are the load's.
    pub fn decode(bytes: &[u8]) -> Result<Option<Self>, CodecError> {
        if bytes.is_empty() {
            return Ok(None);
        }
        let truncated = || CodecError::Truncated(bytes.len());
        let version = decode_u64(bytes.get(..8).ok_or_else(truncated)?)?;
        let first_len: [u8; 4] = bytes
            .get(8..12)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(truncated)?;
        let rest = &bytes[12..];
        let first_len = u32::from_le_bytes(first_len) as usize;
        if rest.len() < first_len {
            return Err(truncated());
        }
        let (first, last) = rest.split_at(first_len);
        Ok(Some(LoadMarker {
            version,
            first: first.to_vec(),
            last: last.to_vec(),
        }))
    }
}

pub fn stats_key(id: u64) -> Vec<u8> {
    [STATS_PREFIX, &id.to_be_bytes()].concat()
}

pub fn tomb_table_prefix(id: u64) -> Vec<u8> {
    [TOMB_PREFIX, &id.to_be_bytes()].concat()
}

pub fn tomb_key(id: u64, encoded_partition: &[u8]) -> Vec<u8> {
    [&tomb_table_prefix(id), encoded_partition].concat()
}

pub fn decode_u64(bytes: &[u8]) -> Result<u64, CodecError> {
    let arr: [u8; 8] = bytes
        .try_into()
        .map_err(|_| CodecError::Truncated(bytes.len()))?;
    Ok(u64::from_le_bytes(arr))
}

fn decode_u64s<const N: usize>(bytes: &[u8]) -> Result<[u64; N], CodecError> {
    if bytes.len() != N * 8 {
        return Err(CodecError::Truncated(bytes.len()));
    }
    let mut out = [0; N];
    for (slot, chunk) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        *slot = decode_u64(chunk)?;
    }
    Ok(out)
}

fn encode_u64s(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Totals of a table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableTotals {
    pub entities: u64,
    pub bytes: u64,
    pub partitions: u64,
    /// The version of the last commit that changed the table's entities
    /// (0: none since the table was made, or before versions were kept).
    pub changed_at: u64,
}

impl TableTotals {
    pub fn encode(&self) -> Vec<u8> {
        encode_u64s(&[self.entities, self.bytes, self.partitions, self.changed_at])
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        // Totals written before `changed_at` was kept have three numbers.
        let [entities, bytes, partitions, changed_at] = match bytes.len() {
            24 => {
                let [entities, bytes, partitions] = decode_u64s(bytes)?;
                [entities, bytes, partitions, 0]
            }
            _ => decode_u64s(bytes)?,
        };
        Ok(TableTotals {
            entities,
            bytes,
            partitions,
            changed_at,
        })
    }
}

/// What the engine keeps about a partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionHeader {
    pub entities: u64,
    pub bytes: u64,
    /// Records of this partition with a version at most this are deleted.
    pub deleted_through: u64,
}

impl PartitionHeader {
    pub fn encode(&self) -> Vec<u8> {
        encode_u64s(&[self.entities, self.bytes, self.deleted_through])
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let [entities, bytes, deleted_through] = decode_u64s(bytes)?;
        Ok(PartitionHeader {
            entities,
            bytes,
            deleted_through,
        })
    }

    /// The header a partition has, from its stored value: a partition
    /// without one has the default.
    pub fn of_stored(stored: Option<impl AsRef<[u8]>>) -> Result<Self, CodecError> {
        stored.map_or(Ok(PartitionHeader::default()), |bytes| {
            PartitionHeader::decode(bytes.as_ref())
        })
    }

    /// Whether the header carries nothing worth storing.
    pub fn is_empty(&self) -> bool {
        *self == PartitionHeader::default()
    }
}

/// The version an ETag names, if it is one of ours ([`ETag::of_version`]).
pub fn version_of(etag: &ETag) -> Option<u64> {
    etag.0
        .strip_prefix("W/\"")
        .and_then(|s| s.strip_suffix('"'))
        .and_then(|s| s.parse().ok())
}

pub fn timestamp_of(version: u64) -> DateTime {
    DateTime(i64::try_from(version).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_round_trip() {
        assert_eq!(version_of(&ETag::of_version(42)), Some(42));
        assert_eq!(version_of(&ETag("*".into())), None);
        assert_eq!(version_of(&ETag("W/\"x\"".into())), None);
    }

    #[test]
    fn keyspace_names() {
        assert_eq!(keyspace_table_id(&entities_keyspace(7)), Some(7));
        assert_eq!(keyspace_table_id(&partitions_keyspace(7)), Some(7));
        assert_eq!(keyspace_table_id(CATALOG), None);
    }

    #[test]
    fn load_marker_round_trip() {
        let marker = LoadMarker {
            version: 77,
            first: b"a\0\0b".to_vec(),
            last: b"z".to_vec(),
        };
        assert_eq!(LoadMarker::decode(&marker.encode()).unwrap(), Some(marker));
        assert_eq!(LoadMarker::decode(&[]).unwrap(), None);
        assert!(LoadMarker::decode(&[1, 2, 3]).is_err());
        let mut cut = LoadMarker {
            version: 1,
            first: vec![9; 10],
            last: Vec::new(),
        }
        .encode();
        cut.truncate(15);
        assert!(LoadMarker::decode(&cut).is_err());
    }

    #[test]
    fn header_round_trip() {
        let h = PartitionHeader {
            entities: 3,
            bytes: 99,
            deleted_through: 5,
        };
        assert_eq!(PartitionHeader::decode(&h.encode()).unwrap(), h);
        assert!(PartitionHeader::decode(&[1, 2]).is_err());
    }
}
