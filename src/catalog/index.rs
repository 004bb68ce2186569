//! Secondary indexes: index entities kept in a store table of their own,
//! under a PartitionKey made of the indexed values (the seeds'
//! inter-partition secondary index pattern), and what a row change does to
//! them. Everything here is a pure function of definitions and entities.

use std::ops::Bound;

use serde::{Deserialize, Serialize};

use super::keys::{encode_index_component, join_components};
use super::table::{RowError, TableDef};
use super::SYSTEM_TABLE;
use crate::model::codec::record::read_record;
use crate::model::codec::CodecError;
use crate::model::{Entity, EntityKey, Value, ValueRef};
use crate::store::KeyRange;

/// The properties of an index entity that name its base row.
pub const BASE_PARTITION_KEY: &str = "base_partition_key";
pub const BASE_ROW_KEY: &str = "base_row_key";

/// `CREATE [UNIQUE] INDEX name ON table (columns)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDef {
    pub name: String,
    pub columns: Vec<String>,
    pub unique: bool,
    /// Entries kept in the base row's own partition (the seeds'
    /// intra-partition secondary index pattern): looked up only together
    /// with the partition key, never unique.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intra_partition: bool,
    /// Being built for the table's rows, a page at a time, while writes go
    /// on and keep the entries of the rows they write: not used by queries
    /// yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub building: bool,
    /// Made by a UNIQUE constraint (of CREATE TABLE or ALTER TABLE ADD),
    /// not by CREATE UNIQUE INDEX: the catalogs list the constraint, which
    /// ALTER TABLE DROP CONSTRAINT drops, and DROP INDEX refuses to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub constraint: bool,
    /// The name its store table is made from, when not its own: an index
    /// renamed keeps its entries where they are, and one made while
    /// another index holds the store table of its name (dropped in the
    /// same transaction, or renamed from it) gets one of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_as: Option<String>,
}

impl IndexDef {
    /// Whether two definitions are of one index, whose entries are in one
    /// store table (whether built or being built, whatever its name and
    /// its columns' names).
    pub fn same_entries(&self, other: &IndexDef) -> bool {
        self.store_table() == other.store_table()
    }

    /// The store table that holds the index entities.
    pub fn store_table(&self) -> String {
        Self::store_table_of(self.stored_as.as_deref().unwrap_or(&self.name))
    }

    /// The store table an index stored as `name` holds its entities in.
    pub fn store_table_of(name: &str) -> String {
        format!("{SYSTEM_TABLE}.index.{name}")
    }

    /// The index entity of a base entity: PartitionKey the indexed values
    /// (encoded like key columns, so that their order is kept, but for text
    /// holding characters keys cannot: see `encode_index_component`), RowKey the
    /// base key (empty for a unique index, so that a second row with the
    /// same values collides), and the base key as properties. `None` when an
    /// indexed column is NULL: such rows are not indexed (and, as in
    /// PostgreSQL, never collide in a unique index).
    pub fn entry(&self, table: &TableDef, base: &Entity) -> Result<Option<Entity>, RowError> {
        let parts = table.key_parts(&base.key)?;
        let mut components = Vec::with_capacity(self.columns.len());
        for name in &self.columns {
            let i = table
                .column_index(name)
                .ok_or_else(|| RowError::Key(super::KeyError::Malformed { key: name.clone() }))?;
            let column = &table.columns[i];
            let Some(value) = table.column_value(base, &parts, i)? else {
                return Ok(None);
            };
            components.push(encode_index_component(&column.name, column.ty, &value)?);
        }
        let (partition_key, row_key) = if self.intra_partition {
            components.push(base.key.row_key.clone());
            (base.key.partition_key.clone(), join_components(&components))
        } else if self.unique {
            (join_components(&components), String::new())
        } else {
            (
                join_components(&components),
                join_components(&[base.key.partition_key.clone(), base.key.row_key.clone()]),
            )
        };
        Ok(Some(
            Entity::new(partition_key, row_key)
                .with(
                    BASE_PARTITION_KEY,
                    Value::String(base.key.partition_key.clone()),
                )
                .with(BASE_ROW_KEY, Value::String(base.key.row_key.clone())),
        ))
    }

    /// The key of the one entry a range over this index names, when it
    /// does: a whole partition of a unique index, whose values are fixed
    /// whole and whose RowKey is empty (see [`IndexDef::entry`]). Read
    /// with a get rather than a range.
    pub fn only_entry(&self, range: &KeyRange) -> Option<EntityKey> {
        match range {
            KeyRange::Rows {
                partition_key,
                from: Bound::Unbounded,
                to: Bound::Unbounded,
            } if self.unique && !self.intra_partition => {
                Some(EntityKey::new(partition_key.clone(), String::new()))
            }
            _ => None,
        }
    }
}

/// The base key an index entity points at.
pub fn base_key(entry: &Entity) -> Option<EntityKey> {
    match (entry.get(BASE_PARTITION_KEY), entry.get(BASE_ROW_KEY)) {
        (Some(Value::String(pk)), Some(Value::String(rk))) => Some(EntityKey::new(pk, rk)),
        _ => None,
    }
}

/// [`base_key`] of an index entry's stored record, read in place.
pub fn base_key_in_record(record: &[u8]) -> Result<Option<EntityKey>, CodecError> {
    let (_, properties) = read_record(record)?;
    let (mut partition_key, mut row_key) = (None, None);
    for property in properties {
        let (name, value) = property?;
        let slot = if name == BASE_PARTITION_KEY.as_bytes() {
            &mut partition_key
        } else if name == BASE_ROW_KEY.as_bytes() {
            &mut row_key
        } else {
            continue;
        };
        *slot = match value.get()? {
            ValueRef::String(text) => Some(text),
            _ => None,
        };
    }
    Ok(partition_key
        .zip(row_key)
        .map(|(pk, rk)| EntityKey::new(pk, rk)))
}

/// What a row change does to one index, from the row's entries before and
/// after it (`IndexDef::entry`): the key of the entry to remove and the
/// entry to add (`None` for none). A change that keeps the indexed values
/// and the base key touches nothing.
pub fn index_change(
    old: Option<Entity>,
    new: Option<Entity>,
) -> (Option<EntityKey>, Option<Entity>) {
    if let (Some(o), Some(n)) = (&old, &new) {
        if o.key == n.key && o.properties == n.properties {
            return (None, None);
        }
    }
    (old.map(|e| e.key), new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Column, Keys, SqlType};

    fn employees() -> TableDef {
        let column = Column::new;
        TableDef::new(
            "employees",
            vec![
                column("dept", SqlType::Text),
                column("id", SqlType::Int4),
                column("email", SqlType::Text),
            ],
            Keys::Columns {
                partition: vec![0],
                row: vec![1],
            },
        )
    }

    fn row(dept: &str, id: i32, email: Option<&str>) -> Entity {
        let def = employees();
        let row = vec![
            Some(Value::String(dept.into())),
            Some(Value::Int32(id)),
            email.map(|e| Value::String(e.into())),
        ];
        def.row_to_entity(def.entity_key(&row).unwrap(), &row)
            .unwrap()
    }

    #[test]
    fn entries_are_keyed_by_the_indexed_values() {
        let def = employees();
        let by_email = IndexDef {
            name: "by_email".into(),
            columns: vec!["email".into()],
            unique: false,
            intra_partition: false,
            building: false,
            stored_as: None,
            constraint: false,
        };
        let ann = row("Sales", 7, Some("ann@x"));
        let entry = by_email.entry(&def, &ann).unwrap().unwrap();
        assert_eq!(entry.key.partition_key, "ann@x");
        assert_eq!(base_key(&entry), Some(ann.key.clone()));
        let record = crate::model::codec::record::encode_record(
            crate::model::codec::record::RecordHeader {
                version: 1,
                billed_size: 0,
            },
            &entry.properties,
        );
        assert_eq!(base_key_in_record(&record).unwrap(), Some(ann.key.clone()));
        // The same value in another row is another entry, unless unique.
        let other = by_email
            .entry(&def, &row("HR", 7, Some("ann@x")))
            .unwrap()
            .unwrap();
        assert_ne!(entry.key, other.key);
        let unique = IndexDef {
            unique: true,
            ..by_email.clone()
        };
        assert_eq!(
            unique.entry(&def, &ann).unwrap().unwrap().key,
            unique
                .entry(&def, &row("HR", 7, Some("ann@x")))
                .unwrap()
                .unwrap()
                .key
        );
        // A whole partition of the unique index names that one entry.
        let whole = |partition_key: &str| KeyRange::Rows {
            partition_key: partition_key.into(),
            from: Bound::Unbounded,
            to: Bound::Unbounded,
        };
        assert_eq!(
            unique.only_entry(&whole("ann@x")),
            Some(unique.entry(&def, &ann).unwrap().unwrap().key)
        );
        assert_eq!(by_email.only_entry(&whole("ann@x")), None);
        // NULLs are not indexed.
        assert_eq!(by_email.entry(&def, &row("HR", 1, None)).unwrap(), None);
        // Characters keys cannot hold are escaped.
        let hash = by_email
            .entry(&def, &row("HR", 3, Some("a#b")))
            .unwrap()
            .unwrap();
        assert_eq!(hash.key.partition_key, "a%23b");
        // An index on a key column reads it from the key.
        let by_id = IndexDef {
            name: "by_id".into(),
            columns: vec!["id".into()],
            unique: false,
            intra_partition: false,
            building: false,
            stored_as: None,
            constraint: false,
        };
        assert_eq!(
            by_id.entry(&def, &ann).unwrap().unwrap().key.partition_key,
            "0000000007"
        );
    }

    #[test]
    fn changes_remove_the_old_entry_and_add_the_new() {
        let def = employees();
        let index = IndexDef {
            name: "by_email".into(),
            columns: vec!["email".into()],
            unique: false,
            intra_partition: false,
            building: false,
            stored_as: None,
            constraint: false,
        };
        let old = row("Sales", 7, Some("ann@x"));
        let moved = row("Sales", 7, Some("ann@y"));
        let entry = |e: &Entity| index.entry(&def, e).unwrap();
        let (gone, added) = index_change(entry(&old), entry(&moved));
        assert_eq!(gone.unwrap().partition_key, "ann@x");
        assert_eq!(added.unwrap().key.partition_key, "ann@y");
        // Same value: nothing to do.
        assert_eq!(index_change(entry(&old), entry(&old)), (None, None));
        // Insert and delete.
        let (gone, added) = index_change(None, entry(&old));
        assert!(gone.is_none() && added.is_some());
        let (gone, added) = index_change(entry(&old), None);
        assert!(gone.is_some() && added.is_none());
        // To NULL: only the removal.
        let cleared = row("Sales", 7, None);
        let (gone, added) = index_change(entry(&old), entry(&cleared));
        assert!(gone.is_some() && added.is_none());
    }
}
