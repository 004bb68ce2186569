//! The catalog: SQL table definitions, how their rows map to entities, and
//! their persistence in a system table of the store itself (so a restart, or
//! another gateway over the same store, sees the same tables).
//!
//! Layer rule: `catalog` depends on `store` and `model`, never on `sql` or `pg`.

mod derive;
mod enums;
mod index;
mod keys;
mod named;
mod roles;
mod sequence;
mod table;
mod types;
mod view;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub use derive::{unique_violation, BuildProgress};
pub use enums::{EnumType, EnumTypes};
pub use index::{
    base_key, base_key_in_record, index_change, IndexDef, BASE_PARTITION_KEY, BASE_ROW_KEY,
};
pub use keys::{
    decode_component, decode_index_component, encode_component, encode_index_component,
    join_components, key_components, split_components, KeyError,
};
pub use roles::{salted_password, RoleDef, Roles, ScramSecret, SCRAM_ITERATIONS};
pub use sequence::{NextvalError, Sequence, SequenceDef, SequenceExhausted, Sequences};
pub use table::{
    Check, Column, ForeignKey, Grant, Identity, KeyParts, Keys, Privilege, RefAction, Row,
    RowError, SystemField, TableDef, GENERATED_PARTITIONS,
};
pub use types::{Element, SqlType, DEFAULT_NUMERIC};
pub use view::{
    Aggregate, CompareOp, GroupItem, GroupState, Input, KeyJoin, Maintained, NeedsRecompute,
    PlainView, Predicate, Shape, Source, ViewDef,
};

use crate::model::{Entity, EntityKey, IfMatch, Value};
use crate::store::{for_each_page, query_all, LoadRows, Query, StoreError, TableStore, WriteOp};

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
    /// Two rows with the same values in a unique index.
    #[error("duplicate key value violates unique constraint {index:?}: Key ({columns})=({values}) already exists.")]
    UniqueIndex {
        index: String,
        columns: String,
        values: String,
    },
    /// A row whose index entry cannot be made (an indexed value too long
    /// for a key, say).
    #[error(transparent)]
    Row(#[from] RowError),
    /// A sequence's bounds, step or value do not fit together.
    #[error("{0}")]
    InvalidSequence(String),
    /// A change of a table that a materialized view reads.
    #[error("{0}")]
    Dependent(String),
    #[error("role {0:?} already exists")]
    RoleExists(String),
    #[error("type {0:?} already exists")]
    TypeExists(String),
    #[error("type {0:?} does not exist")]
    TypeNotFound(String),
    #[error("role {0:?} does not exist")]
    RoleNotFound(String),
    #[error(
        "the definition of relation {0:?} was changed by another session; retry the transaction"
    )]
    ChangedConcurrently(String),
    /// Work given a deadline ran past it.
    #[error("canceling statement due to statement timeout")]
    TimedOut,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<KeyError> for CatalogError {
    fn from(e: KeyError) -> Self {
        CatalogError::Row(e.into())
    }
}

/// The table definitions, cached in memory and written through to the store.
pub struct Catalog {
    store: Arc<dyn TableStore>,
    pub sequences: Sequences,
    pub roles: Roles,
    pub types: EnumTypes,
    tables: RwLock<HashMap<String, Arc<TableDef>>>,
    /// Held exclusively while a commit changes definitions, and shared by
    /// commits that only write rows: a commit's check of the definitions it
    /// used and its write are not interleaved with a change of them.
    definitions_lock: tokio::sync::RwLock<()>,
    /// Held by a commit that writes rows of tables with indexes or
    /// materialized views, from its reads of their rows to its write.
    derived: tokio::sync::Mutex<()>,
    /// The indexes being built, by name.
    builds: std::sync::Mutex<HashMap<String, BuildProgress>>,
    /// When the definitions were last read from the store.
    loaded: std::sync::Mutex<std::time::Instant>,
}

/// The table definitions the store holds.
async fn load_definitions(
    store: &dyn TableStore,
) -> Result<HashMap<String, Arc<TableDef>>, CatalogError> {
    let mut tables = HashMap::new();
    for entity in query_all(store, SYSTEM_TABLE, &Query::partition(TABLES_PARTITION)).await? {
        let Some(Value::Json(text)) = entity.get(DEFINITION) else {
            return Err(CatalogError::InvalidDefinition(format!(
                "entry {} has no definition",
                entity.key
            )));
        };
        let def: TableDef = serde_json::from_str(text)
            .map_err(|e| CatalogError::InvalidDefinition(format!("entry {}: {e}", entity.key)))?;
        tables.insert(def.name.clone(), Arc::new(def));
    }
    Ok(tables)
}

impl Catalog {
    /// Loads the definitions from the store, creating the system table on first use.
    pub async fn open(store: Arc<dyn TableStore>) -> Result<Self, CatalogError> {
        match store.create_table(SYSTEM_TABLE).await {
            Ok(()) | Err(StoreError::TableAlreadyExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let tables = load_definitions(&*store).await?;
        let catalog = Catalog {
            sequences: Sequences::open(store.clone()).await?,
            roles: Roles::open(store.clone()).await?,
            types: EnumTypes::open(store.clone()).await?,
            store,
            tables: RwLock::new(tables),
            definitions_lock: tokio::sync::RwLock::new(()),
            derived: tokio::sync::Mutex::new(()),
            builds: Default::default(),
            loaded: std::sync::Mutex::new(std::time::Instant::now()),
        };
        catalog.drop_interrupted_builds().await?;
        Ok(catalog)
    }

    /// On a store other gateways change too, reads the definitions again
    /// when they were read more than `max_age` ago, so that tables another
    /// gateway made or changed are seen here.
    pub async fn refresh(&self, max_age: std::time::Duration) -> Result<(), CatalogError> {
        if !self.store.shared() {
            return Ok(());
        }
        {
            let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
            if loaded.elapsed() < max_age {
                return Ok(());
            }
            *loaded = std::time::Instant::now();
        }
        let mut tables = load_definitions(&*self.store).await?;
        let _changing = self.definitions_lock.read().await;
        let mut current = self.tables.write().unwrap_or_else(|e| e.into_inner());
        // An unchanged definition stays the same value: statements planned
        // with it are not taken for ones that raced a change.
        for (name, def) in tables.iter_mut() {
            if let Some(kept) = current.get(name).filter(|kept| **kept == *def) {
                *def = kept.clone();
            }
        }
        *current = tables;
        Ok(())
    }

    /// An index whose build a restart interrupted is dropped: its entries
    /// are not complete, and nothing goes on building it.
    async fn drop_interrupted_builds(&self) -> Result<(), CatalogError> {
        let changes: Vec<DefinitionChange> = self
            .list()
            .into_iter()
            .filter(|def| def.indexes.iter().any(|i| i.building))
            .map(|def| {
                let mut after = (*def).clone();
                after.indexes.retain(|i| !i.building);
                DefinitionChange::altered(def, after)
            })
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        self.commit(changes, Vec::new(), Vec::new()).await
    }

    /// The indexes being built and how far each has come.
    pub fn builds(&self) -> Vec<(String, BuildProgress)> {
        let mut builds: Vec<_> = self
            .builds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, progress)| (name.clone(), progress.clone()))
            .collect();
        builds.sort_by(|a, b| a.0.cmp(&b.0));
        builds
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

    /// Commits a transaction: its definition changes and its data writes in
    /// one atomic write, so a crash keeps all of them or none. Store tables
    /// of created tables are made first (a crash before the write leaves an
    /// empty store table without a definition, which a later create of the
    /// same name replaces); those of dropped tables are removed after it.
    /// A definition that another session changed since the transaction read
    /// it fails the commit.
    ///
    /// `used` are the definitions the rows were made with (of tables whose
    /// definition the transaction did not change itself): if another
    /// session changed one since (added a primary key, say), the rows may
    /// not fit it and the commit fails.
    pub async fn commit(
        &self,
        definitions: Vec<DefinitionChange>,
        writes: Vec<(String, WriteOp)>,
        used: Vec<Arc<TableDef>>,
    ) -> Result<(), CatalogError> {
        let unchanged = |used: &[Arc<TableDef>]| {
            for def in used {
                if !self
                    .get(&def.name)
                    .is_some_and(|current| Arc::ptr_eq(&current, def))
                {
                    return Err(CatalogError::ChangedConcurrently(def.name.clone()));
                }
            }
            Ok(())
        };
        if definitions.is_empty() {
            if !writes.is_empty() {
                let _rows_only = self.definitions_lock.read().await;
                unchanged(&used)?;
                // Derived writes read rows and view entities that other
                // commits also change: such commits go one at a time.
                let tables: std::collections::BTreeSet<&str> =
                    writes.iter().map(|(t, _)| t.as_str()).collect();
                let derived = match self.derives_from(&tables) {
                    true => Some(self.derived.lock().await),
                    false => None,
                };
                let mut writes = writes;
                if derived.is_some() {
                    let more = self.derived_writes(&[], &writes).await?;
                    writes.extend(more);
                }
                self.write(writes).await?;
            }
            return Ok(());
        }
        let _one_at_a_time = self.definitions_lock.write().await;
        // Its row writes may derive entries too, while an index build
        // writes its pages.
        let _derived = self.derived.lock().await;
        unchanged(&used)?;
        self.check_dependents(&definitions)?;
        let mut ops = Vec::with_capacity(definitions.len() + writes.len());
        for change in &definitions {
            let current = self.get(&change.name);
            let unchanged = match (&current, &change.before) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !unchanged {
                return Err(match (&change.before, current) {
                    (None, Some(_)) => CatalogError::TableExists(change.name.clone()),
                    _ => CatalogError::ChangedConcurrently(change.name.clone()),
                });
            }
            // The Azure service compares table names without case.
            if change.before.is_none() && self.store.shared() {
                if let Some(other) = self
                    .list()
                    .iter()
                    .find(|d| d.name != change.name && d.name.eq_ignore_ascii_case(&change.name))
                {
                    return Err(CatalogError::InvalidDefinition(format!(
                        "relation {:?} would share its store table with {:?}: the table service \
                         compares table names without case",
                        change.name, other.name
                    )));
                }
            }
            let key = EntityKey::new(TABLES_PARTITION, change.name.as_str());
            let op = match (&change.before, &change.after) {
                (_, Some(after)) => {
                    check_definition(after)?;
                    let entity = Self::definition_entity(after)?;
                    if change.before.is_some() {
                        WriteOp::Replace {
                            entity,
                            if_match: IfMatch::Any,
                        }
                    } else {
                        WriteOp::Insert(entity)
                    }
                }
                (Some(_), None) => WriteOp::Delete {
                    key,
                    if_match: IfMatch::Any,
                },
                (None, None) => continue,
            };
            ops.push((SYSTEM_TABLE.to_owned(), op));
        }
        // A table created again loses its old rows; a new row at an old
        // key replaces it instead (one operation per key).
        let mut writes = writes;
        for change in definitions
            .iter()
            .filter(|c| c.recreated && c.after.as_ref().is_some_and(|a| a.holds_rows()))
        {
            let mut old: std::collections::HashSet<EntityKey> =
                self.row_keys(&change.name).await?.into_iter().collect();
            for (table, op) in &mut writes {
                if *table == change.name {
                    if let WriteOp::Insert(entity) = op {
                        if old.remove(&entity.key) {
                            *op = WriteOp::InsertOrReplace(entity.clone());
                        }
                    }
                }
            }
            ops.extend(old.into_iter().map(|key| {
                (
                    change.name.clone(),
                    WriteOp::Delete {
                        key,
                        if_match: IfMatch::Any,
                    },
                )
            }));
        }
        // Store tables for created tables and for created indexes.
        let mut new_tables: Vec<String> = definitions
            .iter()
            .filter(|c| {
                let holds =
                    |def: &Option<Arc<TableDef>>| def.as_ref().is_some_and(|d| d.holds_rows());
                holds(&c.after) && !holds(&c.before)
            })
            .map(|c| c.name.clone())
            .collect();
        let (added, removed) = index_changes(&definitions);
        new_tables.extend(added.iter().map(|i| i.store_table()));
        // Only tables made here are dropped again on failure, not ones
        // declared over data that was there.
        let mut created = Vec::new();
        for name in new_tables {
            if self.create_store_table(&name).await? {
                created.push(name);
            }
        }
        let indexed = match self.derived_writes(&definitions, &writes).await {
            Ok(indexed) => indexed,
            Err(e) => {
                self.drop_store_tables(&created).await;
                return Err(e);
            }
        };
        ops.extend(writes);
        ops.extend(indexed);
        if let Err(e) = self.write(ops).await {
            self.drop_store_tables(&created).await;
            return Err(e);
        }
        let mut dropped: Vec<String> = removed.iter().map(|i| i.store_table()).collect();
        {
            let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
            for change in definitions {
                match change.after {
                    Some(after) => {
                        let holds_rows = after.holds_rows();
                        let before = tables.insert(change.name.clone(), after);
                        // A table made a view in one transaction.
                        if before.is_some_and(|b| b.holds_rows()) && !holds_rows {
                            dropped.push(change.name);
                        }
                    }
                    None => {
                        if let Some(def) = tables.remove(&change.name) {
                            dropped.extend(def.indexes.iter().map(IndexDef::store_table));
                            if def.holds_rows() {
                                dropped.push(change.name);
                            }
                        }
                    }
                }
            }
        }
        for name in dropped {
            match self.store.drop_table(&name).await {
                Ok(()) | Err(StoreError::TableNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Writes ops in one atomic write; a collision in the system table is a
    /// table created twice, and one in an index a unique index violated.
    /// Inserts new rows into a table, all or none, from their stored form
    /// (what COPY writes; see `AtomicWrite::insert_rows`). Rows of a table
    /// that indexes or views derive from go through [`Catalog::commit`].
    pub async fn insert_rows(
        &self,
        def: &Arc<TableDef>,
        rows: LoadRows,
    ) -> Result<u64, CatalogError> {
        let tables = std::collections::BTreeSet::from([def.name.as_str()]);
        let derives = self.derives_from(&tables);
        let entries = match derives {
            true => self.index_entries(def, &rows)?,
            false => Some(Vec::new()),
        };
        let Some(entries) = entries else {
            // Views (and indexes being built) read rows in the commit.
            let LoadRows::Held(rows) = rows else {
                return Err(CatalogError::ChangedConcurrently(def.name.clone()));
            };
            let ops = (0..rows.len())
                .map(|i| {
                    let entity = rows.entity(i, None).map_err(StoreError::from)?;
                    Ok((def.name.clone(), WriteOp::Insert(entity)))
                })
                .collect::<Result<Vec<_>, CatalogError>>()?;
            let count = ops.len() as u64;
            self.commit(Vec::new(), ops, vec![def.clone()]).await?;
            return Ok(count);
        };
        let _rows_only = self.definitions_lock.read().await;
        // The entries were made from this definition.
        if !self
            .get(&def.name)
            .is_some_and(|current| Arc::ptr_eq(&current, def))
        {
            return Err(CatalogError::ChangedConcurrently(def.name.clone()));
        }
        // One at a time with the commits whose derived writes read rows.
        let _derived = match derives {
            true => Some(self.derived.lock().await),
            false => None,
        };
        let count = rows.len() as u64;
        let mut loads = vec![(def.name.clone(), rows)];
        loads.extend(entries);
        self.store
            .insert_rows(loads)
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(count)
    }

    async fn write(&self, ops: Vec<(String, WriteOp)>) -> Result<(), CatalogError> {
        match self.store.write_atomic(ops).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.write_error(e)),
        }
    }

    /// A failed write as the catalog reports it: a duplicate key of an
    /// index or view names it.
    fn write_error(&self, e: StoreError) -> CatalogError {
        match e.root() {
            StoreError::EntityAlreadyExists { table, key } if table == SYSTEM_TABLE => {
                CatalogError::TableExists(key.row_key.clone())
            }
            StoreError::EntityAlreadyExists { table, key } => match self.unique_index_of(table) {
                Some((def, index)) => derive::unique_violation(&def, &index, &key.partition_key),
                None => match self.get(table).filter(|d| d.view.is_some()) {
                    Some(view) => derive::view_key_violation(&view, key),
                    None => CatalogError::Store(e),
                },
            },
            _ => CatalogError::Store(e),
        }
    }

    /// The table and index a store table holds the entries of.
    fn unique_index_of(&self, store_table: &str) -> Option<(Arc<TableDef>, IndexDef)> {
        self.list().into_iter().find_map(|def| {
            let index = def
                .indexes
                .iter()
                .find(|i| i.store_table() == store_table)?
                .clone();
            Some((def, index))
        })
    }

    async fn drop_store_tables(&self, names: &[String]) {
        for name in names {
            let _ = self.store.drop_table(name).await;
        }
    }

    /// Recomputes an index from its table's rows and compares it with the
    /// entries the store holds: every entry missing, extra, or pointing
    /// elsewhere than it should. Empty when the index is right. Past
    /// `deadline` it stops between two pages with [`CatalogError::TimedOut`].
    pub async fn verify_index(
        &self,
        table: &TableDef,
        index: &IndexDef,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<IndexDifference>, CatalogError> {
        let past = || deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
        let mut expected = std::collections::BTreeMap::new();
        let mut failed = Ok(());
        for_each_page(&*self.store, &table.name, &Query::table(), |page| {
            for row in &page.entities {
                match index.entry(table, row) {
                    Ok(Some(entry)) => {
                        expected.insert(entry.key.clone(), entry);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        failed = Err(e.into());
                        return false;
                    }
                }
            }
            if past() {
                failed = Err(CatalogError::TimedOut);
            }
            failed.is_ok()
        })
        .await?;
        std::mem::replace(&mut failed, Ok(()))?;
        let mut differences = Vec::new();
        for_each_page(
            &*self.store,
            &index.store_table(),
            &Query::table(),
            |page| {
                for actual in page.entities {
                    match expected.remove(&actual.key) {
                        None => differences.push(IndexDifference::Extra(actual.key)),
                        Some(entry) if base_key(&entry) != base_key(&actual) => {
                            differences.push(IndexDifference::Different(actual.key))
                        }
                        Some(_) => {}
                    }
                }
                if past() {
                    failed = Err(CatalogError::TimedOut);
                }
                failed.is_ok()
            },
        )
        .await?;
        failed?;
        differences.extend(expected.into_keys().map(IndexDifference::Missing));
        Ok(differences)
    }

    /// The keys of every row of a table, for a transaction that dropped it
    /// and created it again.
    async fn row_keys(&self, table: &str) -> Result<Vec<EntityKey>, CatalogError> {
        let rows = self.store.table_stats(table).await?.entities;
        if rows > MAX_RECREATED_ROWS {
            return Err(CatalogError::InvalidDefinition(format!(
                "table {table:?} holds {rows} rows; dropping and creating it again in one transaction \
                 is limited to {MAX_RECREATED_ROWS} rows: drop it in a transaction of its own"
            )));
        }
        let keys = query_all(
            &*self.store,
            table,
            &Query::table().project(Vec::<String>::new()),
        )
        .await?;
        Ok(keys.into_iter().map(|e| e.key).collect())
    }

    /// Makes a table's store table; false when one was there already and
    /// is kept: on a shared store (the Azure service) that is a table other
    /// clients wrote, which the new definition is declared over.
    async fn create_store_table(&self, name: &str) -> Result<bool, CatalogError> {
        match self.store.create_table(name).await {
            Ok(()) => Ok(true),
            Err(StoreError::TableAlreadyExists(_)) if self.store.shared() => Ok(false),
            // A store table without a definition: left by a crash between the
            // steps of an earlier create or drop. It holds no SQL table.
            Err(StoreError::TableAlreadyExists(_)) => {
                self.store.drop_table(name).await?;
                self.store.create_table(name).await?;
                Ok(true)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl Catalog {
    /// Views keep reading the tables they are made from: a table a view
    /// reads cannot be dropped, or its columns or key changed, while the
    /// view stays.
    fn check_dependents(&self, definitions: &[DefinitionChange]) -> Result<(), CatalogError> {
        let views = self.maintained_views(definitions);
        for change in definitions {
            let Some(before) = &change.before else {
                continue;
            };
            let reshaped = match &change.after {
                None => true,
                // Added columns change nothing a view reads.
                Some(after) => {
                    change.recreated
                        || after.keys != before.keys
                        || !before.columns.iter().all(|c| {
                            after
                                .column_index(&c.name)
                                .is_some_and(|i| after.columns[i].ty == c.ty)
                        })
                }
            };
            if !reshaped {
                continue;
            }
            if let Some(view) = views.iter().find(|v| {
                v.name != change.name
                    && v.view
                        .as_ref()
                        .is_some_and(|d| d.base_tables().contains(&change.name.as_str()))
            }) {
                let what = if change.after.is_none() {
                    "drop"
                } else {
                    "alter"
                };
                return Err(CatalogError::Dependent(format!(
                    "cannot {what} table {:?} because materialized view {:?} depends on it",
                    change.name, view.name
                )));
            }
        }
        Ok(())
    }
}

/// The indexes a commit creates and those it drops (with their tables or alone).
fn index_changes(definitions: &[DefinitionChange]) -> (Vec<IndexDef>, Vec<IndexDef>) {
    let added = definitions
        .iter()
        .flat_map(DefinitionChange::added_indexes)
        .cloned()
        .collect();
    // A dropped table's index tables go with it (see `Catalog::commit`).
    let removed = definitions
        .iter()
        .filter(|c| c.after.is_some())
        .flat_map(|c| {
            let after = c.indexes_after();
            c.indexes_before()
                .iter()
                .filter(move |i| !after.iter().any(|a| a.same_entries(i)))
        })
        .cloned()
        .collect();
    (added, removed)
}

/// A way an index differs from what its table's rows make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexDifference {
    /// A row's entry is not there.
    Missing(EntityKey),
    /// An entry no row makes.
    Extra(EntityKey),
    /// An entry that points at another row than the one that makes it.
    Different(EntityKey),
}

/// A change of one table's definition, made by a transaction.
#[derive(Debug, Clone)]
pub struct DefinitionChange {
    pub name: String,
    /// The definition the transaction found; `None` when there was no such table.
    pub before: Option<Arc<TableDef>>,
    /// The definition it leaves; `None` when it dropped the table.
    pub after: Option<Arc<TableDef>>,
    /// Dropped and created again: the rows of `before` go.
    pub recreated: bool,
}

impl DefinitionChange {
    /// A table's definition `before` changed into `after` (same name).
    pub fn altered(before: Arc<TableDef>, after: TableDef) -> DefinitionChange {
        DefinitionChange {
            name: before.name.clone(),
            before: Some(before),
            after: Some(Arc::new(after)),
            recreated: false,
        }
    }

    fn indexes_before(&self) -> &[IndexDef] {
        self.before.as_ref().map_or(&[][..], |d| &d.indexes[..])
    }

    fn indexes_after(&self) -> &[IndexDef] {
        self.after.as_ref().map_or(&[][..], |d| &d.indexes[..])
    }

    /// The indexes the change creates.
    fn added_indexes(&self) -> impl Iterator<Item = &IndexDef> {
        let before = self.indexes_before();
        self.indexes_after()
            .iter()
            .filter(move |i| !before.iter().any(|b| b.same_entries(i)))
    }
}

/// Most rows a table dropped and created again in one transaction may hold:
/// their deletes are part of the transaction's one atomic write.
pub const MAX_RECREATED_ROWS: u64 = 100_000;

/// Checks a definition against the model: names, key column types, property count.
pub fn check_definition(def: &TableDef) -> Result<(), CatalogError> {
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
    for (i, index) in def.indexes.iter().enumerate() {
        if def.indexes[..i]
            .iter()
            .any(|other| other.name == index.name)
        {
            return invalid(format!("index {:?} is declared twice", index.name));
        }
        if index.columns.is_empty() {
            return invalid(format!("index {:?} needs at least one column", index.name));
        }
        for name in &index.columns {
            let Some(column) = def.column_index(name).map(|c| &def.columns[c]) else {
                return invalid(format!(
                    "column {name:?} of index {:?} does not exist",
                    index.name
                ));
            };
            if !column.ty.can_be_key() || column.system.is_some() {
                return invalid(format!(
                    "column {name:?} of type {} cannot be indexed",
                    column.ty.pg_name()
                ));
            }
        }
    }
    if matches!(def.keys, Keys::Columns { .. }) && partition.is_empty() {
        return invalid("the partition key needs at least one column".into());
    }
    let properties = def.property_columns().count();
    if properties > crate::model::MAX_PROPERTIES {
        return invalid(format!(
            "{properties} non-key columns; an entity holds at most {} properties",
            crate::model::MAX_PROPERTIES
        ));
    }
    Ok(())
}
