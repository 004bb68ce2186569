//! The limits of the data model, as the Azure Table service sets them, and the
//! checks that enforce them. Every check names the limit it enforces.

use super::entity::{billed_size_of, Entity, EntityKey};
use super::error::ModelError;
use super::value::Value;

/// Largest PartitionKey or RowKey, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 1024;
/// Most user properties an entity may carry (the service's 255 minus the
/// three system properties PartitionKey, RowKey and Timestamp).
pub const MAX_PROPERTIES: usize = 252;
/// Largest entity, in the service's size formula ([`Entity::billed_size`]).
pub const MAX_ENTITY_BYTES: usize = 1024 * 1024;
/// Longest property name, in characters.
pub const MAX_PROPERTY_NAME_CHARS: usize = 255;
/// Most operations in one entity group transaction.
pub const MAX_BATCH_OPERATIONS: usize = 100;
/// Longest table name, in bytes.
pub const MAX_TABLE_NAME_BYTES: usize = 255;

/// Names the store reserves for the system properties.
pub const SYSTEM_PROPERTIES: [&str; 4] = ["PartitionKey", "RowKey", "Timestamp", "ETag"];

/// Which key a check refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    PartitionKey,
    RowKey,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyKind::PartitionKey => "PartitionKey",
            KeyKind::RowKey => "RowKey",
        })
    }
}

/// Control characters are refused anywhere in a key or name: U+0000-U+001F and U+007F-U+009F.
fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// Checks a PartitionKey or RowKey: at most 1 KiB, none of `/ \ # ?`, no control characters.
pub fn check_key(kind: KeyKind, key: &str) -> Result<(), ModelError> {
    if key.len() > MAX_KEY_BYTES {
        return Err(ModelError::KeyTooLong {
            kind,
            bytes: key.len(),
        });
    }
    if let Some(c) = key
        .chars()
        .find(|&c| is_control(c) || matches!(c, '/' | '\\' | '#' | '?'))
    {
        return Err(ModelError::KeyForbiddenCharacter { kind, character: c });
    }
    Ok(())
}

/// Checks a property name: not empty, at most 255 characters, no control
/// characters, not a system property.
pub fn check_property_name(name: &str) -> Result<(), ModelError> {
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_PROPERTY_NAME_CHARS {
        return Err(ModelError::PropertyNameLength {
            name: name.to_owned(),
            chars,
        });
    }
    if let Some(c) = name.chars().find(|&c| is_control(c)) {
        return Err(ModelError::PropertyNameForbiddenCharacter {
            name: name.to_owned(),
            character: c,
        });
    }
    if SYSTEM_PROPERTIES.contains(&name) {
        return Err(ModelError::ReservedPropertyName(name.to_owned()));
    }
    Ok(())
}

/// Checks a table name: 1 to 255 bytes, no control characters.
pub fn check_table_name(name: &str) -> Result<(), ModelError> {
    if name.is_empty() || name.len() > MAX_TABLE_NAME_BYTES || name.chars().any(is_control) {
        return Err(ModelError::InvalidTableName(name.to_owned()));
    }
    Ok(())
}

/// Checks everything about an entity the store is asked to write:
/// keys, property names, property count, value ranges and total size.
/// Returns the entity's billed size (see [`Entity::billed_size`]).
pub fn check_entity(entity: &Entity) -> Result<usize, ModelError> {
    check_entity_parts(&entity.key, entity.property_refs())
}

/// [`check_entity`] of an entity held in parts: its key and its properties
/// (in name order).
pub fn check_entity_parts<'a>(
    key: &EntityKey,
    properties: impl Iterator<Item = (&'a str, &'a Value)> + Clone,
) -> Result<usize, ModelError> {
    check_key(KeyKind::PartitionKey, &key.partition_key)?;
    check_key(KeyKind::RowKey, &key.row_key)?;
    check_shape(key, properties)
}

/// The part of [`check_entity`] that a merge can change: names, count, size.
/// Returns the entity's billed size.
pub fn check_entity_shape(entity: &Entity) -> Result<usize, ModelError> {
    check_shape(&entity.key, entity.property_refs())
}

fn check_shape<'a>(
    key: &EntityKey,
    properties: impl Iterator<Item = (&'a str, &'a Value)> + Clone,
) -> Result<usize, ModelError> {
    let count = properties.clone().count();
    if count > MAX_PROPERTIES {
        return Err(ModelError::TooManyProperties { count });
    }
    for (name, _) in properties.clone() {
        check_property_name(name)?;
    }
    let size = billed_size_of(key, properties);
    if size > MAX_ENTITY_BYTES {
        return Err(ModelError::EntityTooLarge { bytes: size });
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    #[test]
    fn keys() {
        assert!(check_key(KeyKind::RowKey, "").is_ok());
        assert!(check_key(KeyKind::RowKey, "Sales_0001 é 漢").is_ok());
        assert!(check_key(KeyKind::RowKey, &"x".repeat(1024)).is_ok());
        let long = check_key(KeyKind::PartitionKey, &"x".repeat(1025)).unwrap_err();
        assert!(long.to_string().contains("1024"), "{long}");
        for bad in [
            "a/b", "a\\b", "a#b", "a?b", "a\u{0}b", "a\nb", "a\u{7f}", "a\u{85}",
        ] {
            let err = check_key(KeyKind::RowKey, bad).unwrap_err();
            assert!(
                matches!(err, ModelError::KeyForbiddenCharacter { .. }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn property_names() {
        assert!(check_property_name("Email").is_ok());
        assert!(check_property_name("").is_err());
        assert!(check_property_name(&"n".repeat(256)).is_err());
        assert!(check_property_name("RowKey").is_err());
        assert!(check_property_name("tab\there").is_err());
    }

    #[test]
    fn property_count_limit() {
        let mut e = Entity::new("p", "r");
        for i in 0..MAX_PROPERTIES {
            e.properties.insert(format!("p{i}"), Value::Int32(1));
        }
        assert!(check_entity(&e).is_ok());
        e.properties.insert("one_more".into(), Value::Int32(1));
        let err = check_entity(&e).unwrap_err();
        assert!(err.to_string().contains("252"), "{err}");
    }

    #[test]
    fn entity_size_limit() {
        // 4 + 2 + 2 for the keys, 8 + 2 for the name "b", 4 for the length.
        let overhead = 4 + 2 + 2 + 8 + 2 + 4;
        let fits =
            Entity::new("p", "r").with("b", Value::Binary(vec![0; MAX_ENTITY_BYTES - overhead]));
        assert_eq!(fits.billed_size(), MAX_ENTITY_BYTES);
        assert!(check_entity(&fits).is_ok());
        let over = Entity::new("p", "r")
            .with("b", Value::Binary(vec![0; MAX_ENTITY_BYTES - overhead + 1]));
        let err = check_entity(&over).unwrap_err();
        assert!(err.to_string().contains("1048576"), "{err}");
    }
}
