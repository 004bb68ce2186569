//! Entities: a key, typed properties, and the system fields the store sets.

use std::collections::BTreeMap;
use std::fmt;

use super::value::{DateTime, Value};

/// Properties by name. Ordered so that encodings and listings are deterministic.
pub type Properties = BTreeMap<String, Value>;

/// An entity's address inside a table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityKey {
    pub partition_key: String,
    pub row_key: String,
}

impl EntityKey {
    pub fn new(partition_key: impl Into<String>, row_key: impl Into<String>) -> Self {
        EntityKey {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
        }
    }
}

impl fmt::Display for EntityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(PartitionKey {:?}, RowKey {:?})",
            self.partition_key, self.row_key
        )
    }
}

/// An opaque entity version tag. It changes on every write of the entity;
/// conditional writes compare it for equality.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ETag(pub String);

impl ETag {
    /// The weak ETag that names a version number (how the embedded engine
    /// tags its entities).
    pub fn of_version(version: u64) -> ETag {
        ETag(format!("W/\"{version}\""))
    }
}

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The precondition of a write that requires the entity to exist
/// (the HTTP `If-Match` header of the Azure service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: any version of the entity.
    Any,
    /// Exactly this version.
    ETag(ETag),
}

/// An entity as read from or written to a table.
///
/// `timestamp` and `etag` are set by the store; values given on a write are ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    pub key: EntityKey,
    pub properties: Properties,
    pub timestamp: Option<DateTime>,
    pub etag: Option<ETag>,
}

impl Entity {
    pub fn new(partition_key: impl Into<String>, row_key: impl Into<String>) -> Self {
        Entity {
            key: EntityKey::new(partition_key, row_key),
            properties: Properties::new(),
            timestamp: None,
            etag: None,
        }
    }

    /// Adds a property, builder style.
    pub fn with(mut self, name: impl Into<String>, value: Value) -> Self {
        self.properties.insert(name.into(), value);
        self
    }

    pub fn partition_key(&self) -> &str {
        &self.key.partition_key
    }

    pub fn row_key(&self) -> &str {
        &self.key.row_key
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.properties.get(name)
    }

    /// The entity's size as the Azure service counts it against the 1 MiB
    /// limit: 4 bytes, plus the keys at two bytes a character, plus for every
    /// property 8 bytes, its name at two bytes a character and its value.
    pub fn billed_size(&self) -> usize {
        billed_size_of(&self.key, self.property_refs())
    }

    /// The properties as names and values, in name order.
    pub fn property_refs(&self) -> impl Iterator<Item = (&str, &Value)> + Clone {
        self.properties
            .iter()
            .map(|(name, value)| (name.as_str(), value))
    }
}

/// [`Entity::billed_size`] of an entity held in parts.
pub fn billed_size_of<'a>(
    key: &EntityKey,
    properties: impl Iterator<Item = (&'a str, &'a Value)>,
) -> usize {
    use super::value::utf16_len;
    4 + 2 * (utf16_len(&key.partition_key) + utf16_len(&key.row_key))
        + properties
            .map(|(name, value)| 8 + 2 * utf16_len(name) + value.billed_size())
            .sum::<usize>()
}
