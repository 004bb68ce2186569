//! The writes a commit derives from its row writes: index entries and
//! materialized view rows. They join the base writes in one atomic write,
//! so a crash keeps all of them or none.
//!
//! Every written row's old version is read from the store (the row's own
//! write is conditional on the version the transaction read, or the commit
//! holds `Catalog::derived` so that nothing changes it in between), and its
//! new version is the one written. What an index or a view makes of them is
//! the pure functions of `index` and `view`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::index::{index_change, IndexDef};
use super::keys::{self, encode_index_component, join_components};
use super::view::{GroupItem, GroupState, Input, KeyJoin, Maintained, NeedsRecompute, Shape};
use super::{Catalog, CatalogError, DefinitionChange, Row, TableDef};
use crate::model::{Entity, EntityKey, IfMatch, Value};
use crate::store::{
    bulk_ranges, for_each_page, on_threads, EncodedRows, LoadRows, Query, SortedRuns, StoreError,
    WriteOp, ROWS_PER_SPILLED_PART,
};

/// Per derived entity (store table and key): whether it is in the store
/// before the commit, and what the commit puts there.
type Entries = BTreeMap<(String, EntityKey), Entry>;

struct Entry {
    there: bool,
    put: Option<Entity>,
}

/// Rows an index build reads and indexes at a time.
const BUILD_PAGE: usize = 1000;
/// The index entries of a load's rows are made on as many threads as it
/// has this many rows (see `bulk_ranges`).
const ROWS_PER_ENTRY_THREAD: usize = 50_000;

/// How far the build of an index has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildProgress {
    pub table: String,
    /// Rows read so far.
    pub done: u64,
    /// Rows the table held when the build began.
    pub total: u64,
}

/// Records that a derived entity goes (`gone`) and another comes (`put`).
/// Two puts at one key are two rows claiming one unique key: the error
/// names that key.
fn add(
    entries: &mut Entries,
    store_table: &str,
    gone: Option<EntityKey>,
    put: Option<Entity>,
) -> Result<(), EntityKey> {
    if let Some(key) = gone {
        entries
            .entry((store_table.to_owned(), key))
            .or_insert(Entry {
                there: true,
                put: None,
            })
            .there = true;
    }
    if let Some(entity) = put {
        let entry = entries
            .entry((store_table.to_owned(), entity.key.clone()))
            .or_insert(Entry {
                there: false,
                put: None,
            });
        if entry.put.is_some() {
            return Err(entity.key);
        }
        entry.put = Some(entity);
    }
    Ok(())
}

/// A commit's view of the rows: before it (the store) and after it (its
/// writes over the store). Rows read are kept, as many derivations read
/// the same rows.
struct Rows<'a> {
    catalog: &'a Catalog,
    written: HashMap<(&'a str, &'a EntityKey), Option<&'a Entity>>,
    /// The keys of `written`, by table.
    written_keys: HashMap<&'a str, Vec<&'a EntityKey>>,
    before: HashMap<(String, EntityKey), Option<Entity>>,
}

impl<'a> Rows<'a> {
    fn new(catalog: &'a Catalog, writes: &'a [(String, WriteOp)]) -> Self {
        let mut written = HashMap::new();
        let mut written_keys: HashMap<&str, Vec<&EntityKey>> = HashMap::new();
        for (table, op) in writes {
            let after = match op {
                WriteOp::Insert(e)
                | WriteOp::InsertOrReplace(e)
                | WriteOp::Replace { entity: e, .. } => Some(e),
                WriteOp::Delete { .. } => None,
                WriteOp::Merge { .. } | WriteOp::InsertOrMerge(_) => {
                    // Merges only come from the entity API, on tables
                    // without derived data (checked by the caller).
                    continue;
                }
            };
            if written.insert((table.as_str(), op.key()), after).is_none() {
                written_keys
                    .entry(table.as_str())
                    .or_default()
                    .push(op.key());
            }
        }
        Rows {
            catalog,
            written,
            written_keys,
            before: HashMap::new(),
        }
    }

    async fn before(
        &mut self,
        table: &str,
        key: &EntityKey,
    ) -> Result<Option<Entity>, CatalogError> {
        let slot = (table.to_owned(), key.clone());
        if let Some(found) = self.before.get(&slot) {
            return Ok(found.clone());
        }
        let found = self.catalog.store.get(table, key, None).await?;
        self.before.insert(slot, found.clone());
        Ok(found)
    }

    async fn after(
        &mut self,
        table: &str,
        key: &EntityKey,
    ) -> Result<Option<Entity>, CatalogError> {
        match self.written.get(&(table, key)) {
            Some(after) => Ok(after.cloned()),
            None => self.before(table, key).await,
        }
    }

    async fn version(
        &mut self,
        table: &str,
        key: &EntityKey,
        after: bool,
    ) -> Result<Option<Entity>, CatalogError> {
        if after {
            self.after(table, key).await
        } else {
            self.before(table, key).await
        }
    }

    /// Keys the commit writes in a table.
    fn written_keys(&self, table: &str) -> Vec<EntityKey> {
        self.written_keys
            .get(table)
            .map_or_else(Vec::new, |keys| keys.iter().map(|&k| k.clone()).collect())
    }
}

impl Catalog {
    /// The definition a commit leaves for a table.
    fn effective(&self, definitions: &[DefinitionChange], table: &str) -> Option<Arc<TableDef>> {
        match definitions.iter().find(|c| c.name == table) {
            Some(change) => change.after.clone(),
            None => self.get(table),
        }
    }

    /// Every maintained view a commit leaves.
    pub(super) fn maintained_views(&self, definitions: &[DefinitionChange]) -> Vec<Arc<TableDef>> {
        let mut names: BTreeSet<String> = self.list().iter().map(|d| d.name.clone()).collect();
        names.extend(definitions.iter().map(|c| c.name.clone()));
        names
            .iter()
            .filter_map(|name| self.effective(definitions, name))
            .filter(|d| d.view.as_ref().is_some_and(|v| v.maintained.is_some()))
            .collect()
    }

    /// Whether writing rows of these tables derives other writes: one of
    /// them has indexes, or a maintained view is made from one. One pass
    /// over the definitions, as every commit that writes rows asks.
    pub fn derives_from(&self, tables: &BTreeSet<&str>) -> bool {
        let all = self.tables.read().unwrap_or_else(|e| e.into_inner());
        all.values().any(|def| {
            (!def.indexes.is_empty() && tables.contains(def.name.as_str()))
                || def.view.as_ref().is_some_and(|v| {
                    v.maintained.is_some() && v.base_tables().iter().any(|t| tables.contains(t))
                })
        })
    }

    /// Whether writes of rows of `def` derive writes that read rows in the
    /// commit: a maintained view is made from the table, or an index of it
    /// is being built. Loads into such a table are written from memory.
    pub fn derives_by_reading(&self, def: &TableDef) -> bool {
        let viewed = self.list().iter().any(|d| {
            d.view.as_ref().is_some_and(|v| {
                v.maintained.is_some() && v.base_tables().iter().any(|t| *t == def.name)
            })
        });
        viewed || def.indexes.iter().any(|i| i.building)
    }

    /// The index entries of new rows of `def`, by index table, held or
    /// spilled as the rows are, when they are all the rows derive (see
    /// [`Catalog::derives_by_reading`] and [`Catalog::derived_writes`]).
    /// `None` when they are not.
    pub(super) fn index_entries(
        &self,
        def: &TableDef,
        rows: &LoadRows,
    ) -> Result<Option<Vec<(String, LoadRows)>>, CatalogError> {
        if self.derives_by_reading(def) {
            return Ok(None);
        }
        let runs = match rows {
            LoadRows::Held(rows) => {
                let entries = entries_of_rows(def, rows)?;
                return Ok(Some(
                    entries.into_iter().map(|(t, e)| (t, e.into())).collect(),
                ));
            }
            LoadRows::Spilled(runs) => runs,
        };
        // Entries are held until they fill a run of their own.
        let mut spilled: Vec<(String, EncodedRows, SortedRuns)> = def
            .indexes
            .iter()
            .map(|index| (index.store_table(), EncodedRows::new(), runs.beside()))
            .collect();
        for part in runs.parts(ROWS_PER_SPILLED_PART) {
            let entries = entries_of_rows(def, &part?)?;
            for ((_, held, runs), (_, made)) in spilled.iter_mut().zip(entries) {
                held.append(made);
                if held.allocated_bytes() >= MAX_HELD_ENTRY_BYTES {
                    runs.add(held).map_err(CatalogError::Store)?;
                    held.clear();
                }
            }
        }
        let mut entries = Vec::with_capacity(spilled.len());
        for (table, held, mut runs) in spilled {
            runs.add(&held).map_err(CatalogError::Store)?;
            entries.push((table, LoadRows::Spilled(runs)));
        }
        Ok(Some(entries))
    }

    /// The index and view writes of a commit: entries and view rows of
    /// indexes and views the commit creates, for the rows there are, and
    /// the changes every written row makes to those that exist. Derived
    /// entities are merged by key, so that a value one row gives up and
    /// another takes is one write; two rows taking one unique key fail
    /// with 23505.
    pub(super) async fn derived_writes(
        &self,
        definitions: &[DefinitionChange],
        writes: &[(String, WriteOp)],
    ) -> Result<Vec<(String, WriteOp)>, CatalogError> {
        if let Some(change) = definitions
            .iter()
            .find(|c| c.recreated && c.before.as_ref().is_some_and(|d| !d.indexes.is_empty()))
        {
            return Err(CatalogError::InvalidDefinition(format!(
                "table {:?} has indexes: drop it and create it again in separate transactions",
                change.name
            )));
        }
        let mut entries = Entries::new();
        let mut rows = Rows::new(self, writes);
        self.build_indexes(definitions, writes, &mut entries)
            .await?;
        self.index_changes(definitions, writes, &mut rows, &mut entries)
            .await?;
        for view in self.maintained_views(definitions) {
            let created = definitions
                .iter()
                .any(|c| c.name == view.name && c.before.as_ref().is_none_or(|b| b.view.is_none()));
            if created {
                self.build_view(definitions, writes, &view, &mut entries)
                    .await?;
            } else {
                self.maintain_view(definitions, &view, &mut rows, &mut entries)
                    .await?;
            }
        }
        Ok(entries
            .into_iter()
            .filter_map(|((store_table, key), entry)| {
                let op = match (entry.there, entry.put) {
                    (false, None) => return None,
                    (true, None) => WriteOp::Delete {
                        key,
                        if_match: IfMatch::Any,
                    },
                    (true, Some(e)) => WriteOp::InsertOrReplace(e),
                    (false, Some(e)) => WriteOp::Insert(e),
                };
                Some((store_table, op))
            })
            .collect())
    }

    /// Entries of the indexes a commit creates, for the rows there are.
    async fn build_indexes(
        &self,
        definitions: &[DefinitionChange],
        writes: &[(String, WriteOp)],
        entries: &mut Entries,
    ) -> Result<(), CatalogError> {
        for change in definitions {
            // A table the commit creates has no rows to index yet.
            let (Some(_), Some(after)) = (&change.before, &change.after) else {
                continue;
            };
            // An index being built is built after the commit (`build_index`).
            let new: Vec<&IndexDef> = change.added_indexes().filter(|i| !i.building).collect();
            if new.is_empty() {
                continue;
            }
            refuse_written(change, writes, "CREATE INDEX")?;
            let mut failed = Ok(());
            for_each_page(&*self.store, &change.name, &Query::table(), |page| {
                for row in &page.entities {
                    for index in &new {
                        let entry = match index.entry(after, row) {
                            Ok(entry) => entry,
                            Err(e) => {
                                failed = Err(e.into());
                                return false;
                            }
                        };
                        if let Err(key) = add(entries, &index.store_table(), None, entry) {
                            failed = Err(unique_violation(after, index, &key.partition_key));
                            return false;
                        }
                    }
                }
                true
            })
            .await?;
            failed?;
        }
        Ok(())
    }

    /// Every written row moves its index entries from its old values to
    /// its new ones.
    async fn index_changes(
        &self,
        definitions: &[DefinitionChange],
        writes: &[(String, WriteOp)],
        rows: &mut Rows<'_>,
        entries: &mut Entries,
    ) -> Result<(), CatalogError> {
        // Looked up once per table: a COPY writes many rows to one. With
        // the definition the commit leaves, the one the rows there are were
        // written under (they differ when it renames a column).
        type Definitions = Option<(Arc<TableDef>, Arc<TableDef>)>;
        let mut indexed: HashMap<&str, Definitions> = HashMap::new();
        for (table, op) in writes {
            let defs = indexed.entry(table.as_str()).or_insert_with(|| {
                let def = self
                    .effective(definitions, table)
                    .filter(|d| !d.indexes.is_empty())?;
                let before = definitions
                    .iter()
                    .find(|c| c.name == *table)
                    .and_then(|c| c.before.clone())
                    .unwrap_or_else(|| def.clone());
                Some((def, before))
            });
            let Some((def, before)) = defs.clone() else {
                continue;
            };
            refuse_merge(table, op)?;
            let old = rows.before(table, op.key()).await?;
            let new = rows.after(table, op.key()).await?;
            for index in &def.indexes {
                let (old_def, old_index) =
                    match before.indexes.iter().find(|i| i.same_entries(index)) {
                        Some(old_index) => (&*before, old_index),
                        None => (&*def, index),
                    };
                let old_entry = match &old {
                    Some(row) => old_index.entry(old_def, row)?,
                    None => None,
                };
                let new_entry = match &new {
                    Some(row) => index.entry(&def, row)?,
                    None => None,
                };
                let (mut gone, put) = index_change(old_entry, new_entry);
                // An index being built may not have the old entry yet.
                if let (true, Some(key)) = (index.building, &gone) {
                    if self
                        .store
                        .get(&index.store_table(), key, None)
                        .await?
                        .is_none()
                    {
                        gone = None;
                    }
                }
                add(entries, &index.store_table(), gone, put)
                    .map_err(|key| unique_violation(&def, index, &key.partition_key))?;
            }
        }
        Ok(())
    }

    /// Builds an index defined as being built (`IndexDef::building`) for
    /// the rows of its table, a page at a time, while writes go on: each
    /// page's rows are read again and their entries written with the lock
    /// writes to indexed tables hold, so a row a writer changes in between
    /// gets the entry of its new version either way. Then the index is
    /// marked built. If the build fails (two rows with one value of a
    /// unique index, say) the index is dropped and the error returned.
    /// Progress is in [`Catalog::builds`]. Past `deadline` the build stops
    /// (between two pages) and the index is dropped, as on failure.
    pub async fn build_index(
        &self,
        table: &str,
        index: &str,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), CatalogError> {
        let result = self.backfill(table, index, deadline).await;
        self.builds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(index);
        let current = self.table(table)?;
        let mut after = (*current).clone();
        match &result {
            Ok(()) => after
                .indexes
                .iter_mut()
                .filter(|i| i.name == index)
                .for_each(|i| i.building = false),
            Err(_) => after.indexes.retain(|i| i.name != index),
        }
        let change = DefinitionChange::altered(current, after);
        self.commit(vec![change], Vec::new(), Vec::new()).await?;
        result
    }

    async fn backfill(
        &self,
        table: &str,
        index: &str,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), CatalogError> {
        let total = self.store.table_stats(table).await?.entities;
        self.builds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                index.to_owned(),
                BuildProgress {
                    table: table.to_owned(),
                    done: 0,
                    total,
                },
            );
        let query = Query::table().page_size(BUILD_PAGE);
        let mut continuation = None;
        loop {
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                return Err(CatalogError::TimedOut);
            }
            let page = self
                .store
                .query(table, &query, continuation.as_ref())
                .await?;
            {
                let _derived = self.derived.lock().await;
                let def = self.table(table)?;
                let Some(building) = def.indexes.iter().find(|i| i.name == index && i.building)
                else {
                    return Err(CatalogError::ChangedConcurrently(index.to_owned()));
                };
                let store_table = building.store_table();
                let mut puts: BTreeMap<EntityKey, Entity> = BTreeMap::new();
                for seen in &page.entities {
                    let Some(row) = self.store.get(table, &seen.key, None).await? else {
                        continue;
                    };
                    let Some(entry) = building.entry(&def, &row)? else {
                        continue;
                    };
                    // Another row's entry under the same key: a unique
                    // index's values taken twice.
                    let taken = match puts.get(&entry.key) {
                        Some(other) => Some(other.clone()),
                        None => self.store.get(&store_table, &entry.key, None).await?,
                    };
                    if taken.is_some_and(|other| super::base_key(&other).as_ref() != Some(&row.key))
                    {
                        return Err(unique_violation(&def, building, &entry.key.partition_key));
                    }
                    puts.insert(entry.key.clone(), entry);
                }
                let ops: Vec<(String, WriteOp)> = puts
                    .into_values()
                    .map(|entry| (store_table.clone(), WriteOp::InsertOrReplace(entry)))
                    .collect();
                if !ops.is_empty() {
                    self.write(ops).await?;
                }
            }
            if let Some(progress) = self
                .builds
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(index)
            {
                progress.done += page.entities.len() as u64;
            }
            continuation = page.continuation;
            if continuation.is_none() {
                return Ok(());
            }
        }
    }

    /// The rows of a view the commit creates, from the rows of its base
    /// tables (which the commit may not write: their new rows are not in the
    /// store yet).
    async fn build_view(
        &self,
        definitions: &[DefinitionChange],
        writes: &[(String, WriteOp)],
        view: &TableDef,
        entries: &mut Entries,
    ) -> Result<(), CatalogError> {
        let m = maintained(view);
        for table in view
            .view
            .as_ref()
            .map(|v| v.base_tables())
            .unwrap_or_default()
        {
            if let Some(change) = definitions.iter().find(|c| c.name == table) {
                refuse_written(change, writes, "CREATE MATERIALIZED VIEW")?;
            }
            if writes.iter().any(|(t, _)| t == table) {
                return Err(CatalogError::InvalidDefinition(format!(
                    "CREATE MATERIALIZED VIEW over table {table:?} in a transaction that writes its rows: commit those first"
                )));
            }
        }
        let base = self.table_def(definitions, &m.table)?;
        let join = self.join_def(definitions, m)?;
        let mut rows = Rows::new(self, &[]);
        let mut groups = Groups::default();
        let mut base_rows = Vec::new();
        // The base rows are read a page at a time; each page's view rows
        // (which may read joined rows) are made before the next page.
        let mut continuation = None;
        loop {
            let page = self
                .store
                .query(&m.table, &Query::table(), continuation.as_ref())
                .await?;
            base_rows.clear();
            for entity in &page.entities {
                base_rows.push(base.entity_to_row(entity)?);
            }
            for row in &base_rows {
                match &m.shape {
                    Shape::Rows { .. } => {
                        let entity =
                            view_row(m, view, &base, row, join.as_ref(), &mut rows, true).await?;
                        add(entries, &view.name, None, entity)
                            .map_err(|key| view_key_violation(view, &key))?;
                    }
                    Shape::Groups { .. } => {
                        groups.fold(m, view, &base, row, 1)?;
                    }
                }
            }
            continuation = page.continuation;
            if continuation.is_none() {
                break;
            }
        }
        groups.write(self, m, view, &base, &mut rows, entries).await
    }

    /// What the commit's writes to a view's base tables do to its rows.
    async fn maintain_view(
        &self,
        definitions: &[DefinitionChange],
        view: &TableDef,
        rows: &mut Rows<'_>,
        entries: &mut Entries,
    ) -> Result<(), CatalogError> {
        let m = maintained(view);
        let join = self.join_def(definitions, m)?;
        let mut touched: BTreeSet<EntityKey> = rows.written_keys(&m.table).into_iter().collect();
        if let Some((join, joined)) = &join {
            for key in rows.written_keys(&join.table) {
                touched.extend(
                    self.rows_joined_to(definitions, m, join, joined, &key)
                        .await?,
                );
            }
        }
        if touched.is_empty() {
            return Ok(());
        }
        let base = self.table_def(definitions, &m.table)?;
        let mut groups = Groups::default();
        for key in &touched {
            let old = rows.before(&m.table, key).await?;
            let new = rows.after(&m.table, key).await?;
            let old = old.map(|e| base.entity_to_row(&e)).transpose()?;
            let new = new.map(|e| base.entity_to_row(&e)).transpose()?;
            match &m.shape {
                Shape::Rows { .. } => {
                    let gone = match &old {
                        Some(row) => {
                            view_row(m, view, &base, row, join.as_ref(), rows, false).await?
                        }
                        None => None,
                    };
                    let put = match &new {
                        Some(row) => {
                            view_row(m, view, &base, row, join.as_ref(), rows, true).await?
                        }
                        None => None,
                    };
                    let unchanged = matches!((&gone, &put), (Some(a), Some(b)) if a.key == b.key && a.properties == b.properties);
                    if !unchanged {
                        add(entries, &view.name, gone.map(|e| e.key), put)
                            .map_err(|key| view_key_violation(view, &key))?;
                    }
                }
                Shape::Groups { .. } => {
                    if let Some(row) = &old {
                        groups.fold(m, view, &base, row, -1)?;
                    }
                    if let Some(row) = &new {
                        groups.fold(m, view, &base, row, 1)?;
                    }
                }
            }
        }
        groups.write(self, m, view, &base, rows, entries).await
    }

    fn table_def(
        &self,
        definitions: &[DefinitionChange],
        name: &str,
    ) -> Result<Arc<TableDef>, CatalogError> {
        self.effective(definitions, name)
            .ok_or_else(|| CatalogError::TableNotFound(name.to_owned()))
    }

    fn join_def<'m>(
        &self,
        definitions: &[DefinitionChange],
        m: &'m Maintained,
    ) -> Result<Option<(&'m KeyJoin, Arc<TableDef>)>, CatalogError> {
        match &m.shape {
            Shape::Rows {
                join: Some(join), ..
            } => Ok(Some((join, self.table_def(definitions, &join.table)?))),
            _ => Ok(None),
        }
    }

    /// The keys of the base rows (before the commit) whose join columns
    /// hold a joined row's key: through an index on those columns when the
    /// base table has one, a partition scan when they are its partition
    /// key, else a scan of the table.
    async fn rows_joined_to(
        &self,
        definitions: &[DefinitionChange],
        m: &Maintained,
        join: &KeyJoin,
        joined: &TableDef,
        key: &EntityKey,
    ) -> Result<Vec<EntityKey>, CatalogError> {
        let base = self.table_def(definitions, &m.table)?;
        let parts = joined.key_parts(key)?;
        let (partition, row) = joined.key_columns();
        let values: Vec<Value> = partition
            .iter()
            .chain(row)
            .filter_map(|&i| parts.value(i).cloned())
            .collect();
        let on: Vec<usize> = join
            .on
            .iter()
            .filter_map(|name| base.column_index(name))
            .collect();
        if let Some(index) = base
            .indexes
            .iter()
            .find(|i| i.columns == join.on && !i.unique && !i.intra_partition)
        {
            let components = on
                .iter()
                .zip(&values)
                .map(|(&i, v)| encode_index_component(&base.columns[i].name, base.columns[i].ty, v))
                .collect::<Result<Vec<_>, _>>()?;
            let mut keys = Vec::new();
            for_each_page(
                &*self.store,
                &index.store_table(),
                &Query::partition(join_components(&components)),
                |page| {
                    keys.extend(page.entities.iter().filter_map(super::base_key));
                    true
                },
            )
            .await?;
            return Ok(keys);
        }
        let query = if base.key_columns().0 == on.as_slice() {
            let mut probe: Row = vec![None; base.columns.len()];
            for (&i, v) in on.iter().zip(&values) {
                probe[i] = Some(v.clone());
            }
            Query::partition(base.encode_key_part(&on, &probe)?)
        } else {
            Query::table()
        };
        let mut keys = Vec::new();
        for_each_page(&*self.store, &m.table, &query, |page| {
            for entity in &page.entities {
                let holds = on.iter().zip(&values).all(|(&i, v)| {
                    base.key_parts(&entity.key).ok().is_some_and(|parts| {
                        base.column_value(entity, &parts, i)
                            .ok()
                            .flatten()
                            .is_some_and(|w| w.compare(v) == Some(std::cmp::Ordering::Equal))
                    })
                });
                if holds {
                    keys.push(entity.key.clone());
                }
            }
            true
        })
        .await?;
        Ok(keys)
    }
}

fn maintained(view: &TableDef) -> &Maintained {
    view.view
        .as_ref()
        .and_then(|v| v.maintained.as_ref())
        .expect("a maintained view")
}

/// A base row's view row (shape `Rows`), reading the joined row before or
/// after the commit.
async fn view_row(
    m: &Maintained,
    view: &TableDef,
    base: &TableDef,
    row: &Row,
    join: Option<&(&KeyJoin, Arc<TableDef>)>,
    rows: &mut Rows<'_>,
    after: bool,
) -> Result<Option<Entity>, CatalogError> {
    let joined_row = match join {
        Some((join, joined)) => match joined_key(base, row, join, joined)? {
            Some(key) => match rows.version(&join.table, &key, after).await? {
                Some(entity) => Some(joined.entity_to_row(&entity)?),
                None => None,
            },
            None => None,
        },
        None => None,
    };
    let input = Input {
        base,
        row,
        joined: join.map(|(_, joined)| (&**joined, joined_row.as_ref())),
    };
    Ok(m.view_row(view, &input)?)
}

/// The key of the joined row a base row's join columns give; `None` when
/// one of them is NULL.
fn joined_key(
    base: &TableDef,
    row: &Row,
    join: &KeyJoin,
    joined: &TableDef,
) -> Result<Option<EntityKey>, CatalogError> {
    let mut probe: Row = vec![None; joined.columns.len()];
    let (partition, rest) = joined.key_columns();
    for (name, &i) in join.on.iter().zip(partition.iter().chain(rest)) {
        let Some(value) = base.column_index(name).and_then(|b| row[b].clone()) else {
            return Ok(None);
        };
        probe[i] = Some(value);
    }
    Ok(Some(joined.entity_key(&probe)?))
}

/// The groups of a view that a commit changes: per group, its key values
/// and the state folded so far (from the view entity there was).
#[derive(Default)]
struct Groups {
    touched: BTreeMap<EntityKey, Group>,
}

struct Group {
    values: Vec<Option<Value>>,
    /// Rows to add (1) or take away (-1), folded into the state the view
    /// entity holds once it is read, in `write`.
    pending: Vec<(Row, i64)>,
}

impl Groups {
    fn fold(
        &mut self,
        m: &Maintained,
        view: &TableDef,
        base: &TableDef,
        row: &Row,
        sign: i64,
    ) -> Result<(), CatalogError> {
        let input = Input {
            base,
            row,
            joined: None,
        };
        let Some(values) = m.group_of(&input) else {
            return Ok(());
        };
        let key = group_key(m, view, &values)?;
        let group = self.touched.entry(key).or_insert(Group {
            values,
            pending: Vec::new(),
        });
        group.pending.push((row.clone(), sign));
        Ok(())
    }

    /// Reads each touched group's entity, folds the rows into its state
    /// (computing a group again from its rows when a MIN or MAX lost its
    /// extreme), and records the entity the group leaves.
    async fn write(
        self,
        catalog: &Catalog,
        m: &Maintained,
        view: &TableDef,
        base: &TableDef,
        rows: &mut Rows<'_>,
        entries: &mut Entries,
    ) -> Result<(), CatalogError> {
        let Shape::Groups { group, columns } = &m.shape else {
            return Ok(());
        };
        for (key, g) in self.touched {
            let current = rows.before(&view.name, &key).await?;
            let mut recompute = false;
            let mut state = match &current {
                Some(entity) => GroupState::of_entity(view, entity),
                None => GroupState::empty(columns.len()),
            };
            for (row, sign) in &g.pending {
                let input = Input {
                    base,
                    row,
                    joined: None,
                };
                match state.fold(columns, &input, *sign) {
                    Ok(Ok(())) => {}
                    Ok(Err(NeedsRecompute)) => recompute = true,
                    Err(e) => return Err(CatalogError::InvalidDefinition(e.0)),
                }
            }
            if recompute {
                state = catalog
                    .group_state(m, base, columns, &g.values, rows)
                    .await?;
            }
            let entity = state.entity(view, columns, group, &g.values)?;
            let gone = current.is_some().then(|| key.clone());
            add(entries, &view.name, gone, entity).map_err(|key| view_key_violation(view, &key))?;
        }
        Ok(())
    }
}

impl Catalog {
    /// A group's state computed from its base rows as the commit leaves
    /// them: a partition scan when the group columns are the base table's
    /// partition key, else a table scan.
    async fn group_state(
        &self,
        m: &Maintained,
        base: &TableDef,
        items: &[GroupItem],
        values: &[Option<Value>],
        rows: &mut Rows<'_>,
    ) -> Result<GroupState, CatalogError> {
        let Shape::Groups { group, .. } = &m.shape else {
            return Ok(GroupState::empty(items.len()));
        };
        let group_columns: Vec<usize> = group.iter().filter_map(|g| base.column_index(g)).collect();
        let query = if base.key_columns().0 == group_columns.as_slice() {
            let mut probe: Row = vec![None; base.columns.len()];
            for (&i, v) in group_columns.iter().zip(values) {
                probe[i] = v.clone();
            }
            Query::partition(base.encode_key_part(&group_columns, &probe)?)
        } else {
            Query::table()
        };
        let mut candidates: Vec<Entity> = Vec::new();
        for_each_page(&*self.store, &m.table, &query, |page| {
            candidates.extend(
                page.entities
                    .into_iter()
                    .filter(|e| !rows.written.contains_key(&(m.table.as_str(), &e.key))),
            );
            true
        })
        .await?;
        // Rows the commit writes, as it leaves them.
        for key in rows.written_keys(&m.table) {
            if let Some(entity) = rows.after(&m.table, &key).await? {
                candidates.push(entity);
            }
        }
        let mut state = GroupState::empty(items.len());
        for entity in &candidates {
            let row = base.entity_to_row(entity)?;
            let input = Input {
                base,
                row: &row,
                joined: None,
            };
            if m.group_of(&input).as_deref() != Some(values) {
                continue;
            }
            if let Err(e) = state.fold(items, &input, 1) {
                return Err(CatalogError::InvalidDefinition(e.0));
            }
        }
        Ok(state)
    }
}

/// The view key of a group: its key columns are the group columns.
fn group_key(
    m: &Maintained,
    view: &TableDef,
    values: &[Option<Value>],
) -> Result<EntityKey, CatalogError> {
    let Shape::Groups { group, columns } = &m.shape else {
        return Err(CatalogError::InvalidDefinition("not a grouped view".into()));
    };
    let row: Row = columns
        .iter()
        .map(|item| match item {
            GroupItem::Group(name) => group
                .iter()
                .position(|g| g == name)
                .and_then(|g| values[g].clone()),
            GroupItem::Aggregate { .. } => None,
        })
        .collect();
    Ok(view.entity_key(&row)?)
}

fn refuse_written(
    change: &DefinitionChange,
    writes: &[(String, WriteOp)],
    statement: &str,
) -> Result<(), CatalogError> {
    if change.recreated || writes.iter().any(|(t, _)| *t == change.name) {
        return Err(CatalogError::InvalidDefinition(format!(
            "{statement} on table {:?} in a transaction that also writes its rows or creates it again: \
             commit those first",
            change.name
        )));
    }
    Ok(())
}

fn refuse_merge(table: &str, op: &WriteOp) -> Result<(), CatalogError> {
    match op {
        WriteOp::Merge { .. } | WriteOp::InsertOrMerge(_) => Err(CatalogError::InvalidDefinition(
            format!("a merge into table {table:?}, which has indexes or materialized views"),
        )),
        _ => Ok(()),
    }
}

/// The error for two rows with the same values in a unique index, showing
/// the values as the index holds them.
pub fn unique_violation(table: &TableDef, index: &IndexDef, values: &str) -> CatalogError {
    let shown = keys::split_components(values, index.columns.len())
        .map(|parts| {
            parts
                .iter()
                .zip(&index.columns)
                .map(|(part, name)| {
                    let ty = table.column_index(name).map(|i| table.columns[i].ty);
                    ty.and_then(|ty| keys::decode_component(ty, part))
                        .map_or_else(|| part.clone(), |v| v.to_string())
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|| values.to_owned());
    CatalogError::UniqueIndex {
        index: index.name.clone(),
        columns: index.columns.join(", "),
        values: shown,
    }
}

/// Two base rows that make view rows with one key.
pub(super) fn view_key_violation(view: &TableDef, key: &EntityKey) -> CatalogError {
    let described = view.describe_key(key);
    let (columns, values) = described
        .trim_start_matches('(')
        .split_once(")=(")
        .map(|(c, v)| (c.to_owned(), v.trim_end_matches(')').to_owned()))
        .unwrap_or_else(|| (String::new(), described.clone()));
    CatalogError::UniqueIndex {
        index: format!("{}_pkey", view.name),
        columns,
        values,
    }
}

/// Bytes of index entries of spilled rows held before they are spilled too.
const MAX_HELD_ENTRY_BYTES: usize = 64 << 20;

/// The index entries of rows of `def`, by index table.
fn entries_of_rows(
    def: &TableDef,
    rows: &EncodedRows,
) -> Result<Vec<(String, EncodedRows)>, CatalogError> {
    // Only the indexed properties are decoded (all of them when an
    // index takes a system column, which may be made of them all).
    let indexed: Vec<usize> = def
        .indexes
        .iter()
        .flat_map(|index| index.columns.iter())
        .filter_map(|name| def.column_index(name))
        .collect();
    let projection: Option<Vec<String>> = indexed
        .iter()
        .all(|&i| def.columns[i].system.is_none())
        .then(|| {
            indexed
                .iter()
                .map(|&i| def.columns[i].name.clone())
                .collect()
        });
    // Each range of rows on a thread of its own: a COPY's rows are many.
    let entries_of = |range: std::ops::Range<usize>| {
        let mut out: Vec<EncodedRows> = def.indexes.iter().map(|_| EncodedRows::new()).collect();
        for i in range {
            let row = rows
                .entity(i, projection.as_deref())
                .map_err(StoreError::from)?;
            for (index, out) in def.indexes.iter().zip(&mut out) {
                if let Some(entry) = index.entry(def, &row)? {
                    out.push_entity(&entry);
                }
            }
        }
        Ok::<_, CatalogError>(out)
    };
    let parts = on_threads(bulk_ranges(rows.len(), ROWS_PER_ENTRY_THREAD), entries_of);
    let mut entries: Vec<(String, EncodedRows)> = def
        .indexes
        .iter()
        .map(|index| (index.store_table(), EncodedRows::new()))
        .collect();
    for part in parts {
        for ((_, all), made) in entries.iter_mut().zip(part?) {
            all.append(made);
        }
    }
    Ok(entries)
}
