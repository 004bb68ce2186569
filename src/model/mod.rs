//! The data model every layer agrees on: entities addressed by
//! `(PartitionKey, RowKey)`, typed property values, system fields, the limits
//! of the Azure Table service, and the byte encodings of keys and entities.
//!
//! Layer rule: `model` depends on nothing else in the crate.

mod entity;
mod error;
mod limits;
mod value;

pub mod codec;

pub use entity::{ETag, Entity, EntityKey, IfMatch, Properties};
pub use error::ModelError;
pub use limits::{
    check_entity, check_entity_parts, check_entity_shape, check_key, check_property_name,
    check_table_name, KeyKind, MAX_BATCH_OPERATIONS, MAX_ENTITY_BYTES, MAX_KEY_BYTES,
    MAX_PROPERTIES, MAX_PROPERTY_NAME_CHARS, SYSTEM_PROPERTIES,
};
pub use value::{
    Date, DateTime, Decimal, Guid, PropertyType, Value, ValueRef, DECIMAL_MAX_PRECISION,
};
