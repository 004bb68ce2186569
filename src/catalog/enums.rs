//! Enum types (`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`), kept in
//! the system table's `types` partition: a name and its labels, in order.
//!
//! A column of an enum type holds its label as text (a `String` property),
//! and its definition carries a copy of the type (`Column::enum_type`), by
//! which each write checks its values; `ALTER TYPE` changes the type here
//! and the copies of the tables that use it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::named::Named;
use super::{CatalogError, DEFINITION};
use crate::model::{Entity, Value};
use crate::store::TableStore;

const TYPES_PARTITION: &str = "types";

/// An enum type: its name and its labels, in their order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnumType {
    pub name: String,
    pub labels: Vec<String>,
}

impl EnumType {
    /// Whether `label` is one of the type's values.
    pub fn holds(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l == label)
    }
}

/// Every enum type, by name.
pub struct EnumTypes(Named<Arc<EnumType>>);

impl EnumTypes {
    pub(super) async fn open(store: Arc<dyn TableStore>) -> Result<Self, CatalogError> {
        let read = |entity: &Entity| {
            let Some(Value::Json(text)) = entity.get(DEFINITION) else {
                return Err(CatalogError::InvalidDefinition(format!(
                    "type {} has no definition",
                    entity.key.row_key
                )));
            };
            let ty: EnumType = serde_json::from_str(text).map_err(|e| {
                CatalogError::InvalidDefinition(format!("type {}: {e}", entity.key.row_key))
            })?;
            Ok(Arc::new(ty))
        };
        Ok(EnumTypes(Named::open(store, TYPES_PARTITION, read).await?))
    }

    pub fn get(&self, name: &str) -> Option<Arc<EnumType>> {
        self.0.get(name)
    }

    /// Whether there is any enum type (statements naming none skip looking).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every enum type, by name.
    pub fn list(&self) -> Vec<Arc<EnumType>> {
        self.0.list()
    }

    pub async fn create(&self, ty: EnumType) -> Result<(), CatalogError> {
        let exists = || CatalogError::TypeExists(ty.name.clone());
        let entity = entity(&ty)?;
        (self.0)
            .create(&ty.name, entity, Arc::new(ty.clone()), exists)
            .await
    }

    /// Replaces a type's definition; `before` is its old name, when it is
    /// renamed.
    pub async fn replace(&self, before: &str, ty: EnumType) -> Result<(), CatalogError> {
        let entity = entity(&ty)?;
        (self.0)
            .replace(before, &ty.name, entity, Arc::new(ty.clone()))
            .await
    }

    pub async fn drop(&self, name: &str) -> Result<(), CatalogError> {
        self.0.drop(name).await
    }
}

fn entity(ty: &EnumType) -> Result<Entity, CatalogError> {
    let text = serde_json::to_string(ty)
        .map_err(|e| CatalogError::InvalidDefinition(format!("type {}: {e}", ty.name)))?;
    Ok(Entity::new(TYPES_PARTITION, ty.name.as_str()).with(DEFINITION, Value::Json(text)))
}
