use super::limits::{
    KeyKind, MAX_ENTITY_BYTES, MAX_KEY_BYTES, MAX_PROPERTIES, MAX_PROPERTY_NAME_CHARS,
};

/// A violation of the data model's rules. Each message names the limit or rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("{kind} is {bytes} bytes; the limit is {MAX_KEY_BYTES} bytes")]
    KeyTooLong { kind: KeyKind, bytes: usize },
    #[error("{kind} contains the forbidden character {character:?} (control characters and / \\ # ? are not allowed in keys)")]
    KeyForbiddenCharacter { kind: KeyKind, character: char },
    #[error(
        "property name {name:?} has {chars} characters; names have 1 to {MAX_PROPERTY_NAME_CHARS}"
    )]
    PropertyNameLength { name: String, chars: usize },
    #[error("property name {name:?} contains the control character {character:?}")]
    PropertyNameForbiddenCharacter { name: String, character: char },
    #[error("property name {0:?} is reserved for a system property")]
    ReservedPropertyName(String),
    #[error("entity has {count} properties; the limit is {MAX_PROPERTIES} user properties")]
    TooManyProperties { count: usize },
    #[error("entity is {bytes} bytes; the limit is {MAX_ENTITY_BYTES} bytes (1 MiB)")]
    EntityTooLarge { bytes: usize },
    #[error("invalid table name {0:?}: a table name has 1 to 255 bytes and no control characters")]
    InvalidTableName(String),
}
