//! Definitions of one kind kept in a partition of the system table, one
//! entity each, its RowKey the definition's name, and in memory by name:
//! the roles made with SQL ([`super::Roles`]) and the enum types
//! ([`super::EnumTypes`]).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::{CatalogError, SYSTEM_TABLE};
use crate::model::{Entity, EntityKey, IfMatch};
use crate::store::{query_all, Query, StoreError, TableStore, WriteOp};

pub(super) struct Named<T> {
    store: Arc<dyn TableStore>,
    partition: &'static str,
    all: RwLock<HashMap<String, T>>,
}

impl<T: Clone> Named<T> {
    /// The definitions the partition holds, each read by `read`.
    pub async fn open(
        store: Arc<dyn TableStore>,
        partition: &'static str,
        read: impl Fn(&Entity) -> Result<T, CatalogError>,
    ) -> Result<Self, CatalogError> {
        let mut all = HashMap::new();
        for entity in query_all(&*store, SYSTEM_TABLE, &Query::partition(partition)).await? {
            all.insert(entity.key.row_key.clone(), read(&entity)?);
        }
        Ok(Named {
            store,
            partition,
            all: RwLock::new(all),
        })
    }

    pub fn get(&self, name: &str) -> Option<T> {
        self.all
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.all
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Every definition, by name.
    pub fn list(&self) -> Vec<T> {
        let all = self.all.read().unwrap_or_else(|e| e.into_inner());
        let mut named: Vec<(&String, &T)> = all.iter().collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        named.into_iter().map(|(_, t)| t.clone()).collect()
    }

    /// Writes a new definition, its entity `entity` (of this partition);
    /// `exists` is the error for a name taken.
    pub async fn create(
        &self,
        name: &str,
        entity: Entity,
        definition: T,
        exists: impl FnOnce() -> CatalogError,
    ) -> Result<(), CatalogError> {
        crate::model::check_key(crate::model::KeyKind::RowKey, name)
            .map_err(|e| CatalogError::InvalidDefinition(e.to_string()))?;
        self.write(vec![WriteOp::Insert(entity)])
            .await
            .map_err(|e| match e {
                CatalogError::Store(s)
                    if matches!(s.root(), StoreError::EntityAlreadyExists { .. }) =>
                {
                    exists()
                }
                other => other,
            })?;
        self.remember(name, definition);
        Ok(())
    }

    /// Writes a definition in place of the one named `before` (another
    /// name when it is renamed), in one atomic write.
    pub async fn replace(
        &self,
        before: &str,
        name: &str,
        entity: Entity,
        definition: T,
    ) -> Result<(), CatalogError> {
        let mut ops = vec![WriteOp::InsertOrReplace(entity)];
        if before != name {
            ops.push(self.removal(before));
        }
        self.write(ops).await?;
        self.forget(before);
        self.remember(name, definition);
        Ok(())
    }

    pub async fn drop(&self, name: &str) -> Result<(), CatalogError> {
        self.write(vec![self.removal(name)]).await?;
        self.forget(name);
        Ok(())
    }

    fn removal(&self, name: &str) -> WriteOp {
        WriteOp::Delete {
            key: EntityKey::new(self.partition, name),
            if_match: IfMatch::Any,
        }
    }

    async fn write(&self, ops: Vec<WriteOp>) -> Result<(), CatalogError> {
        let writes = ops.into_iter().map(|op| (SYSTEM_TABLE.to_owned(), op));
        self.store.write_atomic(writes.collect()).await?;
        Ok(())
    }

    fn remember(&self, name: &str, definition: T) {
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), definition);
    }

    fn forget(&self, name: &str) {
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}
