//! The catalog: SQL table definitions, how their rows map to entities, and
//! their persistence in a system table of the store itself (so a restart, or
//! another gateway over the same store, sees the same tables).
//!
//! Layer rule: `catalog` depends on `store` and `model`, never on `sql` or `pg`.

mod keys;
mod table;
mod types;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub use keys::{encode_component, join_components, KeyError};
pub use table::{
    Column, KeyParts, Keys, Row, RowError, SystemField, TableDef, GENERATED_PARTITIONS,
};
pub use types::{SqlType, DEFAULT_NUMERIC};

use crate::model::{Entity, EntityKey, IfMatch, Value};
use crate::store::{query_all, Query, StoreError, TableStore, WriteOp};

/// The store table that holds table definitions.
pub const SYSTEM_TABLE: &str = "_tablegate_catalog";
const TABLES_PARTITION: &str = "tables";
const DEFINITION: &str = "definition";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    #[error("relation {0:?} already exists")]
    TableExists(String),
    #[error("relation {0:?} does not exist")]
    TableNotFound(String),
    #[error("invalid table definition: {0}")]
    InvalidDefinition(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The table definitions, cached in memory and written through to the store.
pub struct Catalog {
    store: Arc<dyn TableStore>,
    tables: RwLock<HashMap<String, Arc<TableDef>>>,
}

impl Catalog {
    /// Loads the definitions from the store, creating the system table on first use.
    pub async fn open(store: Arc<dyn TableStore>) -> Result<Self, CatalogError> {
        match store.create_table(SYSTEM_TABLE).await {
            Ok(()) | Err(StoreError::TableAlreadyExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let mut tables = HashMap::new();
        for entity in query_all(&*store, SYSTEM_TABLE, &Query::partition(TABLES_PARTITION)).await? {
            let Some(Value::Json(text)) = entity.get(DEFINITION) else {
                return Err(CatalogError::InvalidDefinition(format!(
                    "entry {} has no definition",
                    entity.key
                )));
            };
            let def: TableDef = serde_json::from_str(text).map_err(|e| {
                CatalogError::InvalidDefinition(format!("entry {}: {e}", entity.key))
            })?;
            tables.insert(def.name.clone(), Arc::new(def));
        }
        Ok(Catalog {
            store,
            tables: RwLock::new(tables),
        })
    }

    pub fn store(&self) -> &Arc<dyn TableStore> {
        &self.store
    }

    pub fn get(&self, name: &str) -> Option<Arc<TableDef>> {
        self.tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    pub fn table(&self, name: &str) -> Result<Arc<TableDef>, CatalogError> {
        self.get(name)
            .ok_or_else(|| CatalogError::TableNotFound(name.to_owned()))
    }

    /// All definitions, by name.
    pub fn list(&self) -> Vec<Arc<TableDef>> {
        let mut all: Vec<_> = self
            .tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn definition_entity(def: &TableDef) -> Result<Entity, CatalogError> {
        let text = serde_json::to_string(def)
            .map_err(|e| CatalogError::InvalidDefinition(e.to_string()))?;
        Ok(Entity::new(TABLES_PARTITION, def.name.clone()).with(DEFINITION, Value::Json(text)))
    }

    /// Creates the table in the store and records its definition.
    pub async fn create(&self, def: TableDef) -> Result<(), CatalogError> {
        check_definition(&def)?;
        if self.get(&def.name).is_some() {
            return Err(CatalogError::TableExists(def.name));
        }
        match self.store.create_table(&def.name).await {
            Ok(()) => {}
            // A store table without a definition: left by a crash between the
            // two steps of an earlier create or drop. It holds no SQL table.
            Err(StoreError::TableAlreadyExists(_)) => {
                self.store.drop_table(&def.name).await?;
                self.store.create_table(&def.name).await?;
            }
            Err(e) => return Err(e.into()),
        }
        match self
            .store
            .write(
                SYSTEM_TABLE,
                WriteOp::Insert(Self::definition_entity(&def)?),
            )
            .await
        {
            Ok(_) => {}
            Err(StoreError::EntityAlreadyExists { .. }) => {
                return Err(CatalogError::TableExists(def.name))
            }
            Err(e) => return Err(e.into()),
        }
        self.tables
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(def.name.clone(), Arc::new(def));
        Ok(())
    }

    /// Replaces a table's definition (for ALTER TABLE).
    pub async fn replace(&self, def: TableDef) -> Result<(), CatalogError> {
        check_definition(&def)?;
        let op = WriteOp::Replace {
            entity: Self::definition_entity(&def)?,
            if_match: IfMatch::Any,
        };
        self.store.write(SYSTEM_TABLE, op).await?;
        self.tables
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(def.name.clone(), Arc::new(def));
        Ok(())
    }

    /// Forgets the definition, then drops the store table with all its rows.
    pub async fn drop_table(&self, name: &str) -> Result<(), CatalogError> {
        self.table(name)?;
        let key = EntityKey::new(TABLES_PARTITION, name);
        match self
            .store
            .write(
                SYSTEM_TABLE,
                WriteOp::Delete {
                    key,
                    if_match: IfMatch::Any,
                },
            )
            .await
        {
            Ok(_) | Err(StoreError::EntityNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.tables
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        match self.store.drop_table(name).await {
            Ok(()) | Err(StoreError::TableNotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn check_definition(def: &TableDef) -> Result<(), CatalogError> {
    let invalid = |m: String| Err(CatalogError::InvalidDefinition(m));
    if def.name == SYSTEM_TABLE {
        return invalid(format!("{SYSTEM_TABLE:?} is reserved"));
    }
    if def.columns.is_empty() {
        return invalid(format!("table {:?} needs at least one column", def.name));
    }
    for (i, c) in def.columns.iter().enumerate() {
        if def.columns[..i].iter().any(|d| d.name == c.name) {
            return invalid(format!("column {:?} specified more than once", c.name));
        }
        if let Err(e) = crate::model::check_property_name(&c.name) {
            if c.system.is_none() && !def.is_key_column(i) {
                return invalid(format!("column {:?}: {e}", c.name));
            }
        }
    }
    let (partition, row) = def.key_columns();
    for &i in partition.iter().chain(row) {
        let column = &def.columns[i];
        if !column.ty.can_be_key() {
            return invalid(format!(
                "column {:?} of type {} cannot be part of the primary key",
                column.name,
                column.ty.pg_name()
            ));
        }
        if column.system.is_some() {
            return invalid(format!(
                "column {:?} is a system column and cannot be part of the primary key",
                column.name
            ));
        }
    }
    if matches!(def.keys, Keys::Columns { .. }) && partition.is_empty() {
        return invalid("the partition key needs at least one column".into());
    }
    let properties = def
        .columns
        .iter()
        .enumerate()
        .filter(|(i, c)| c.system.is_none() && !def.is_key_column(*i))
        .count();
    if properties > crate::model::MAX_PROPERTIES {
        return invalid(format!(
            "{properties} non-key columns; an entity holds at most {} properties",
            crate::model::MAX_PROPERTIES
        ));
    }
    Ok(())
}
