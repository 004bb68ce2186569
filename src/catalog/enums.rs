//! Enum types (`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`), kept in
//! the system table's `types` partition: a name and its labels, in order.
//!
//! A column of an enum type holds its label as text (a `String` property),
//! and its definition carries a copy of the type (`Column::enum_type`), by
//! which each write checks its values; `ALTER TYPE` changes the type here
//! and the copies of the tables that use it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use super::{CatalogError, DEFINITION, SYSTEM_TABLE};
use crate::model::{Entity, EntityKey, IfMatch, Value};
use crate::store::{query_all, Query, StoreError, TableStore, WriteOp};

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
pub struct EnumTypes {
    store: Arc<dyn TableStore>,
    all: RwLock<HashMap<String, Arc<EnumType>>>,
}

impl EnumTypes {
    pub(super) async fn open(store: Arc<dyn TableStore>) -> Result<Self, CatalogError> {
        let mut all = HashMap::new();
        for entity in query_all(&*store, SYSTEM_TABLE, &Query::partition(TYPES_PARTITION)).await? {
            let Some(Value::Json(text)) = entity.get(DEFINITION) else {
                return Err(CatalogError::InvalidDefinition(format!(
                    "type {} has no definition",
                    entity.key.row_key
                )));
            };
            let ty: EnumType = serde_json::from_str(text).map_err(|e| {
                CatalogError::InvalidDefinition(format!("type {}: {e}", entity.key.row_key))
            })?;
            all.insert(ty.name.clone(), Arc::new(ty));
        }
        Ok(EnumTypes {
            store,
            all: RwLock::new(all),
        })
    }

    pub fn get(&self, name: &str) -> Option<Arc<EnumType>> {
        self.all
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Whether there is any enum type (statements naming none skip looking).
    pub fn is_empty(&self) -> bool {
        self.all
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Every enum type, by name.
    pub fn list(&self) -> Vec<Arc<EnumType>> {
        let mut all: Vec<Arc<EnumType>> = self
            .all
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    pub async fn create(&self, ty: EnumType) -> Result<(), CatalogError> {
        crate::model::check_key(crate::model::KeyKind::RowKey, &ty.name)
            .map_err(|e| CatalogError::InvalidDefinition(e.to_string()))?;
        self.write(WriteOp::Insert(entity(&ty)?))
            .await
            .map_err(|e| match e {
                CatalogError::Store(s)
                    if matches!(s.root(), StoreError::EntityAlreadyExists { .. }) =>
                {
                    CatalogError::TypeExists(ty.name.clone())
                }
                other => other,
            })?;
        self.remember(ty);
        Ok(())
    }

    /// Replaces a type's definition; `before` is its old name, when it is
    /// renamed.
    pub async fn replace(&self, before: &str, ty: EnumType) -> Result<(), CatalogError> {
        let mut ops = vec![WriteOp::InsertOrReplace(entity(&ty)?)];
        if before != ty.name {
            ops.push(WriteOp::Delete {
                key: EntityKey::new(TYPES_PARTITION, before),
                if_match: IfMatch::Any,
            });
        }
        let writes = ops.into_iter().map(|op| (SYSTEM_TABLE.to_owned(), op));
        self.store.write_atomic(writes.collect()).await?;
        self.forget(before);
        self.remember(ty);
        Ok(())
    }

    pub async fn drop(&self, name: &str) -> Result<(), CatalogError> {
        self.write(WriteOp::Delete {
            key: EntityKey::new(TYPES_PARTITION, name),
            if_match: IfMatch::Any,
        })
        .await?;
        self.forget(name);
        Ok(())
    }

    async fn write(&self, op: WriteOp) -> Result<(), CatalogError> {
        self.store
            .write_atomic(vec![(SYSTEM_TABLE.to_owned(), op)])
            .await?;
        Ok(())
    }

    fn remember(&self, ty: EnumType) {
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ty.name.clone(), Arc::new(ty));
    }

    fn forget(&self, name: &str) {
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}

fn entity(ty: &EnumType) -> Result<Entity, CatalogError> {
    let text = serde_json::to_string(ty)
        .map_err(|e| CatalogError::InvalidDefinition(format!("type {}: {e}", ty.name)))?;
    Ok(Entity::new(TYPES_PARTITION, ty.name.as_str()).with(DEFINITION, Value::Json(text)))
}
