//! Table definitions and the mapping between SQL rows and entities.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::keys::{
    decode_component, encode_component, join_components, split_components, KeyError,
};
use super::types::SqlType;
use crate::model::{Entity, EntityKey, Properties, Value};

/// The entity fields a column named after them exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SystemField {
    /// The entity's last-modified time (read-only).
    Timestamp,
    /// The entity's version tag (read-only); `WHERE "ETag" = ...` in UPDATE and
    /// DELETE makes them conditional writes.
    ETag,
    /// The entity's properties that no column names, as a JSON object
    /// (read-only): what other clients of a table wrote beyond its columns.
    Properties,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: SqlType,
    pub nullable: bool,
    /// Set for the read-only `"Timestamp"`, `"ETag"` and `"Properties"` columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemField>,
    /// The DEFAULT expression, as SQL text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// `COMMENT ON COLUMN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl Column {
    /// A nullable column of this type, without default or comment.
    pub fn new(name: impl Into<String>, ty: SqlType) -> Self {
        Column {
            name: name.into(),
            ty,
            nullable: true,
            system: None,
            default: None,
            comment: None,
        }
    }
}

/// How a table's rows are addressed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Keys {
    /// Columns (by index) encoded into PartitionKey and RowKey.
    Columns {
        partition: Vec<usize>,
        row: Vec<usize>,
    },
    /// No primary key: each row gets a unique generated RowKey, and rows are
    /// spread over [`GENERATED_PARTITIONS`] partitions.
    Generated,
}

/// Partitions that rows of a table without a primary key are spread over.
pub const GENERATED_PARTITIONS: u64 = 64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    pub name: String,
    pub columns: Vec<Column>,
    pub keys: Keys,
    /// Declared references to other tables. They are recorded and described
    /// (psql, JDBC, pg_dump see them) but not enforced on writes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<ForeignKey>,
    /// `COMMENT ON TABLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Secondary indexes, kept up to date by every commit that writes rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<super::IndexDef>,
    /// Set for a materialized view: its query, and how writes to its base
    /// tables keep its rows current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<super::ViewDef>,
    /// What roles made with SQL may do with the table (superusers may do
    /// anything).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
    /// Set for a temporary table: the session that made it, which drops it
    /// when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporary: Option<String>,
}

/// `FOREIGN KEY (columns) REFERENCES table (referenced)`, by column names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub name: String,
    pub columns: Vec<String>,
    pub table: String,
    pub referenced: Vec<String>,
}

/// A privilege on a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Privilege {
    Select,
    Insert,
    Update,
    Delete,
}

impl Privilege {
    pub const ALL: [Privilege; 4] = [
        Privilege::Select,
        Privilege::Insert,
        Privilege::Update,
        Privilege::Delete,
    ];

    /// The SQL keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
        }
    }
}

/// The privileges GRANT gave one role on a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub role: String,
    pub privileges: Vec<Privilege>,
    /// The first and last value of the partition key column the grant
    /// covers, as given (`GRANT ... PARTITIONS 'a' TO 'm'`); `None` for
    /// every partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<(String, String)>,
}

/// A row: one optional value per column, in column order. `None` is NULL.
pub type Row = Vec<Option<Value>>;

/// A row that cannot be stored, or an entity that does not read as a row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RowError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("null value in column {column:?} of table {table:?} violates not-null constraint")]
    NotNull { table: String, column: String },
    #[error("column {column:?} is read-only: it shows the entity's {field:?}")]
    ReadOnly { column: String, field: SystemField },
    /// A computed value past its type's range.
    #[error("{0}")]
    OutOfRange(String),
    #[error("property {property:?} of entity {key} holds a {found} value, which does not read as column type {expected}")]
    PropertyType {
        property: String,
        key: EntityKey,
        found: &'static str,
        expected: String,
    },
}

impl TableDef {
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Whether GRANT gave `role` the privilege.
    pub fn granted(&self, role: &str, privilege: Privilege) -> bool {
        self.grants
            .iter()
            .any(|g| g.role == role && g.privileges.contains(&privilege))
    }

    pub fn key_columns(&self) -> (&[usize], &[usize]) {
        match &self.keys {
            Keys::Columns { partition, row } => (partition, row),
            Keys::Generated => (&[], &[]),
        }
    }

    /// The names of the primary key columns, PartitionKey's first.
    pub fn key_column_names(&self) -> Vec<String> {
        let (partition, row) = self.key_columns();
        partition
            .iter()
            .chain(row)
            .map(|&i| self.columns[i].name.clone())
            .collect()
    }

    /// Whether column `i` is part of PartitionKey or RowKey.
    pub fn is_key_column(&self, i: usize) -> bool {
        let (p, r) = self.key_columns();
        p.contains(&i) || r.contains(&i)
    }

    /// The columns an entity holds as properties: neither key nor system
    /// columns.
    pub fn property_columns(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.columns.len())
            .filter(|&i| self.columns[i].system.is_none() && !self.is_key_column(i))
    }

    /// Encodes the given columns of a row as one key.
    pub fn encode_key_part(&self, columns: &[usize], row: &Row) -> Result<String, KeyError> {
        let mut parts = Vec::with_capacity(columns.len());
        for &i in columns {
            let column = &self.columns[i];
            let value = row[i].as_ref().ok_or_else(|| KeyError::Null {
                column: column.name.clone(),
            })?;
            parts.push(encode_component(&column.name, column.ty, value)?);
        }
        Ok(join_components(&parts))
    }

    /// The entity key of a row. Tables without a primary key get a new key.
    pub fn entity_key(&self, row: &Row) -> Result<EntityKey, KeyError> {
        match &self.keys {
            Keys::Columns { partition, row: rk } => Ok(EntityKey::new(
                self.encode_key_part(partition, row)?,
                self.encode_key_part(rk, row)?,
            )),
            Keys::Generated => Ok(generated_key()),
        }
    }

    /// The entity that stores a row: every non-key, non-system, non-NULL column
    /// as a property of the same name.
    pub fn row_to_entity(&self, key: EntityKey, row: &Row) -> Result<Entity, RowError> {
        let mut entity = Entity {
            key,
            properties: Default::default(),
            timestamp: None,
            etag: None,
        };
        for i in self.property_columns() {
            let column = &self.columns[i];
            match &row[i] {
                Some(v) => {
                    entity.properties.insert(column.name.clone(), v.clone());
                }
                None if !column.nullable => {
                    return Err(RowError::NotNull {
                        table: self.name.clone(),
                        column: column.name.clone(),
                    })
                }
                None => {}
            }
        }
        Ok(entity)
    }

    /// Checks what [`TableDef::row_to_entity`] does not: NOT NULL on key
    /// columns and writes to read-only columns.
    pub fn check_row(&self, row: &Row) -> Result<(), RowError> {
        for (i, column) in self.columns.iter().enumerate() {
            if let (Some(field), Some(_)) = (column.system, &row[i]) {
                return Err(RowError::ReadOnly {
                    column: column.name.clone(),
                    field,
                });
            }
            if row[i].is_none() && !column.nullable && column.system.is_none() {
                return Err(RowError::NotNull {
                    table: self.name.clone(),
                    column: column.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// The value of column `i` in an entity.
    pub fn column_value<'a>(
        &self,
        entity: &'a Entity,
        key_parts: &'a KeyParts,
        i: usize,
    ) -> Result<Option<Cow<'a, Value>>, RowError> {
        let column = &self.columns[i];
        if let Some(field) = column.system {
            let value = match field {
                SystemField::Timestamp => entity.timestamp.map(Value::DateTime),
                SystemField::ETag => entity.etag.as_ref().map(|e| Value::String(e.0.clone())),
                SystemField::Properties => Some(self.undeclared_properties(&entity.properties)),
            };
            return Ok(value.map(Cow::Owned));
        }
        if let Some(v) = key_parts.value(i) {
            return Ok(Some(Cow::Borrowed(v)));
        }
        match entity.properties.get(&column.name) {
            None => Ok(None),
            Some(v) if v.property_type() == column.ty.property_type() => Ok(Some(Cow::Borrowed(v))),
            Some(v) => Err(RowError::PropertyType {
                property: column.name.clone(),
                key: entity.key.clone(),
                found: v.property_type().edm_name(),
                expected: column.ty.pg_name(),
            }),
        }
    }

    /// The properties of an entity that no column names, as a JSON object.
    pub fn undeclared_properties(&self, properties: &Properties) -> Value {
        let object: serde_json::Map<String, serde_json::Value> = properties
            .iter()
            .filter(|(name, _)| !self.columns.iter().any(|c| &c.name == *name))
            .map(|(name, value)| (name.clone(), value.to_json()))
            .collect();
        Value::Json(serde_json::Value::Object(object).to_string())
    }

    /// The properties the store must decode for these columns: those of
    /// non-key, non-system columns; all of them (`None`) for `"Properties"`.
    pub fn store_projection(
        &self,
        columns: impl IntoIterator<Item = usize>,
    ) -> Option<Vec<String>> {
        let mut names = Vec::new();
        for i in columns {
            match self.columns[i].system {
                Some(SystemField::Properties) => return None,
                Some(_) => {}
                None if self.is_key_column(i) => {}
                None => names.push(self.columns[i].name.clone()),
            }
        }
        Some(names)
    }

    /// Every column of an entity, in column order.
    pub fn entity_to_row(&self, entity: &Entity) -> Result<Row, RowError> {
        let parts = self.key_parts(&entity.key)?;
        (0..self.columns.len())
            .map(|i| Ok(self.column_value(entity, &parts, i)?.map(Cow::into_owned)))
            .collect()
    }

    /// A key as PostgreSQL shows it in messages: `(dept, id)=(Sales, 7)`.
    pub fn describe_key(&self, key: &EntityKey) -> String {
        match (self.key_parts(key), &self.keys) {
            (Ok(parts), Keys::Columns { partition, row }) => {
                let columns: Vec<usize> = partition.iter().chain(row).copied().collect();
                let names: Vec<&str> = columns
                    .iter()
                    .map(|&i| self.columns[i].name.as_str())
                    .collect();
                let values: Vec<String> = columns
                    .iter()
                    .map(|&i| parts.value(i).map(|v| v.to_string()).unwrap_or_default())
                    .collect();
                format!("({})=({})", names.join(", "), values.join(", "))
            }
            _ => format!(
                "(PartitionKey, RowKey)=({}, {})",
                key.partition_key, key.row_key
            ),
        }
    }

    /// Decodes the key columns of an entity.
    pub fn key_parts(&self, key: &EntityKey) -> Result<KeyParts, KeyError> {
        self.key_parts_of(&key.partition_key, &key.row_key)
    }

    /// Decodes the key columns of a PartitionKey and RowKey.
    pub fn key_parts_of(&self, partition_key: &str, row_key: &str) -> Result<KeyParts, KeyError> {
        let mut values = Vec::new();
        if let Keys::Columns { partition, row } = &self.keys {
            for (columns, text) in [(partition, partition_key), (row, row_key)] {
                let malformed = || KeyError::Malformed {
                    key: text.to_owned(),
                };
                let parts = split_components(text, columns.len()).ok_or_else(malformed)?;
                for (&i, part) in columns.iter().zip(parts) {
                    let value =
                        decode_component(self.columns[i].ty, &part).ok_or_else(malformed)?;
                    values.push((i, value));
                }
            }
        }
        Ok(KeyParts(values))
    }
}

/// Decoded key column values of one entity (none where no key column is
/// wanted).
#[derive(Default)]
pub struct KeyParts(Vec<(usize, Value)>);

impl KeyParts {
    pub fn value(&self, column: usize) -> Option<&Value> {
        self.0.iter().find(|(i, _)| *i == column).map(|(_, v)| v)
    }
}

/// A new unique key for a table without a primary key: a RowKey that grows
/// with time, in one of [`GENERATED_PARTITIONS`] partitions chosen from it.
fn generated_key() -> EntityKey {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    // Ids are microseconds shifted to leave room for 1024 ids a microsecond,
    // and never below the last one handed out.
    let candidate = now << 10;
    let id = NEXT
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(candidate.max(last + 1))
        })
        .map(|last| candidate.max(last + 1))
        .unwrap_or(candidate);
    let bucket = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) % GENERATED_PARTITIONS;
    EntityKey::new(format!("{bucket:02}"), format!("{id:016x}"))
}
