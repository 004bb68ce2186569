//! Changes, and transactions that buffer them.
//!
//! Every DML statement computes [`Change`]s: the new state of each row it
//! touches, together with the version it read (the ETag, or "absent").
//! Outside a transaction block the changes are committed at once, in one
//! atomic write whose operations are conditional on those versions. Inside a
//! block they are buffered in the [`Transaction`], whose [`TxnView`] shows the
//! block's own writes over its snapshot, and committed the same way at
//! COMMIT. A version that changed in between is a conflict, never a silent
//! overwrite (optimistic concurrency with first-committer-wins).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;

use crate::catalog::{DefinitionChange, TableDef};
use crate::model::codec::key::encode_entity_key;
use crate::model::{ETag, Entity, EntityKey, IfMatch};
use crate::store::{
    Continuation, EncodedRows, EntityRead, Page, Query, Result as StoreResult, WriteOp,
};

/// The new state of one row, and the version it was computed from.
#[derive(Debug, Clone)]
pub struct Change {
    pub table: String,
    pub key: EntityKey,
    /// The ETag read, or `None` when the row did not exist.
    pub read: Option<ETag>,
    /// The new entity, or `None` to delete the row.
    pub new: Option<Entity>,
    /// Whether the change adds a row that must not exist yet (an insert,
    /// or the new key of an update that moves a row).
    pub creates: bool,
    /// For the removal of a row an update moves to another key: that key
    /// (foreign keys tell a moved row from a deleted one).
    pub moved_to: Option<EntityKey>,
}

impl Change {
    /// The insert of a new row (its checks done: NOT NULL, read-only columns, key).
    pub fn insert(
        def: &crate::catalog::TableDef,
        row: &crate::catalog::Row,
    ) -> Result<Change, super::SqlError> {
        def.check_row(row)?;
        let key = def.entity_key(row)?;
        Ok(Change::inserted(&def.name, def.row_to_entity(key, row)?))
    }

    /// The insert of a new entity, checked already.
    pub fn inserted(table: &str, entity: Entity) -> Change {
        Change {
            table: table.to_owned(),
            key: entity.key.clone(),
            read: None,
            new: Some(entity),
            creates: true,
            moved_to: None,
        }
    }

    /// The changes that rewrite a row read under `old` (at `read`) as
    /// `entity`: one replace, or a delete and an insert when its key moved.
    pub fn rewrite(table: &str, old: EntityKey, read: Option<ETag>, entity: Entity) -> Vec<Change> {
        if entity.key == old {
            return vec![Change {
                table: table.to_owned(),
                key: old,
                read,
                new: Some(entity),
                creates: false,
                moved_to: None,
            }];
        }
        vec![
            Change {
                table: table.to_owned(),
                key: old,
                read,
                new: None,
                creates: false,
                moved_to: Some(entity.key.clone()),
            },
            Change {
                table: table.to_owned(),
                key: entity.key.clone(),
                read: None,
                new: Some(entity),
                creates: true,
                moved_to: None,
            },
        ]
    }

    /// The store operation that applies the change only if the row is still
    /// as read; `None` when there is nothing to write.
    pub fn into_op(self) -> Option<(String, WriteOp)> {
        let op = match (self.read, self.new) {
            (None, None) => return None,
            (None, Some(entity)) => WriteOp::Insert(entity),
            (Some(etag), Some(entity)) => WriteOp::Replace {
                entity,
                if_match: IfMatch::ETag(etag),
            },
            (Some(etag), None) => WriteOp::Delete {
                key: self.key,
                if_match: IfMatch::ETag(etag),
            },
        };
        Some((self.table, op))
    }
}

/// A row a transaction wrote: the version first read and the latest state.
type Written = Arc<(Option<ETag>, Option<Entity>)>;

/// The rows a transaction wrote to one table, by encoded key: a persistent
/// map, so that a view made for each statement, or a savepoint, shares
/// them (a copy would make a block of n statements cost n² row copies).
pub type WrittenRows = imbl::OrdMap<Vec<u8>, Written>;

/// What a transaction has written, by table.
pub type Writes = BTreeMap<String, WrittenRows>;

/// The rows of `written` that exist after the writes, as a read shows them
/// (see [`shown`]).
pub fn written_entities(written: &WrittenRows) -> impl Iterator<Item = Entity> + '_ {
    written
        .values()
        .filter_map(|w| w.1.as_ref().map(|e| shown(e, &w.0)))
}

/// Whether `written` holds the row under `key`.
pub fn wrote_row(written: &WrittenRows, key: &EntityKey) -> bool {
    written.contains_key(&encode_entity_key(&key.partition_key, &key.row_key))
}

/// Table definitions as a transaction sees them where it changed them:
/// `Some` for a table it created or altered, `None` for one it dropped.
pub type Definitions = BTreeMap<String, Option<Arc<TableDef>>>;

/// An open transaction block (or the implicit one of a DDL statement).
pub struct Transaction {
    snapshot: Arc<dyn EntityRead>,
    writes: Writes,
    /// The definitions it changed, by table name.
    definitions: BTreeMap<String, DefinitionChange>,
    /// Savepoints, innermost last: each name with the writes and definitions
    /// as they were when it was set.
    savepoints: Vec<(String, Writes, BTreeMap<String, DefinitionChange>)>,
    /// The definitions its rows were made with, of tables whose definition
    /// it did not change itself (see `Catalog::commit`).
    used: BTreeMap<String, Arc<TableDef>>,
    pub sequences: SequenceChanges,
    /// The unique index entries of the rows it wrote, by index store table
    /// and entry key: the rows a statement of the block must find there
    /// before the store's index holds them. An entry whose row was written
    /// again, or rolled back to a savepoint, may be stale: a reader checks
    /// the row it names (`dml::unique_holder`).
    unique_entries: HashMap<String, HashMap<EntityKey, EntityKey>>,
    /// Set after an error: statements are refused until ROLLBACK.
    pub failed: bool,
    /// Which deferrable foreign keys wait for COMMIT (SET CONSTRAINTS).
    pub constraint_modes: super::foreign_keys::ConstraintModes,
    /// One statement's own transaction, committed when it ends, not a
    /// block: its writes are one statement's, made whole as a statement's.
    pub implicit: bool,
    /// Opened for a query string of several statements: committed when the
    /// text ends, unless a BEGIN in it makes it a block
    /// ([`super::Session::run_in_turn`]).
    pub ends_with_text: bool,
}

/// Sequences a transaction created (at once, so that it can draw from
/// them: dropped again if it does not commit) and dropped (at its commit),
/// and those whose owner it changed at once (a column or table renamed),
/// with the owner before, given back if it does not commit.
#[derive(Debug, Default)]
pub struct SequenceChanges {
    pub created: Vec<String>,
    pub dropped: Vec<String>,
    pub owners: Vec<(String, (String, String))>,
}

impl Transaction {
    /// The tables and partitions the transaction has written.
    pub fn written_partitions(&self) -> std::collections::BTreeSet<(String, String)> {
        self.writes
            .iter()
            .flat_map(|(table, rows)| {
                rows.keys().filter_map(move |key| {
                    crate::model::codec::key::decode_entity_key(key)
                        .ok()
                        .map(|(pk, _)| (table.clone(), pk))
                })
            })
            .collect()
    }

    pub fn new(snapshot: Arc<dyn EntityRead>) -> Self {
        Transaction {
            snapshot,
            writes: Writes::new(),
            used: BTreeMap::new(),
            sequences: SequenceChanges::default(),
            unique_entries: HashMap::new(),
            definitions: BTreeMap::new(),
            savepoints: Vec::new(),
            failed: false,
            constraint_modes: Default::default(),
            implicit: false,
            ends_with_text: false,
        }
    }

    /// `SAVEPOINT name`.
    pub fn savepoint(&mut self, name: &str) {
        self.savepoints.push((
            name.to_owned(),
            self.writes.clone(),
            self.definitions.clone(),
        ));
    }

    fn savepoint_index(&self, name: &str) -> Option<usize> {
        self.savepoints.iter().rposition(|(n, ..)| n == name)
    }

    /// `ROLLBACK TO SAVEPOINT name`: back to the state it saved (the
    /// savepoint stays, later ones go), and usable again after an error.
    /// False when there is no such savepoint.
    pub fn rollback_to(&mut self, name: &str) -> bool {
        let Some(i) = self.savepoint_index(name) else {
            return false;
        };
        self.savepoints.truncate(i + 1);
        let (_, writes, definitions) = &self.savepoints[i];
        self.writes = writes.clone();
        self.definitions = definitions.clone();
        self.failed = false;
        true
    }

    /// `RELEASE SAVEPOINT name`: forgets it and those after it, keeping
    /// the changes. False when there is no such savepoint.
    pub fn release(&mut self, name: &str) -> bool {
        let Some(i) = self.savepoint_index(name) else {
            return false;
        };
        self.savepoints.truncate(i);
        true
    }

    /// The transaction's own definition of a table, if it changed it:
    /// `Some(None)` when it dropped the table.
    pub fn definition(&self, name: &str) -> Option<Option<Arc<TableDef>>> {
        self.definitions.get(name).map(|c| c.after.clone())
    }

    pub fn definitions(&self) -> Definitions {
        self.definitions
            .iter()
            .map(|(name, c)| (name.clone(), c.after.clone()))
            .collect()
    }

    /// Whether the table was created in this transaction (so nothing of it
    /// is in the store yet).
    pub fn created(&self, name: &str) -> bool {
        self.definitions
            .get(name)
            .is_some_and(|c| (c.before.is_none() || c.recreated) && c.after.is_some())
    }

    /// Records a definition change: `before` is the definition outside the
    /// transaction, used the first time the table is changed in it.
    pub fn define(
        &mut self,
        name: &str,
        before: Option<Arc<TableDef>>,
        after: Option<Arc<TableDef>>,
    ) {
        let change = self
            .definitions
            .entry(name.to_owned())
            .or_insert_with(|| DefinitionChange {
                name: name.to_owned(),
                after: before.clone(),
                before,
                recreated: false,
            });
        // Created after this transaction dropped it.
        if change.before.is_some() && change.after.is_none() && after.is_some() {
            change.recreated = true;
        }
        change.after = after;
        if change.after.is_none() {
            // A dropped table's rows are not written.
            self.writes.remove(name);
            if change.before.is_none() {
                self.definitions.remove(name);
            }
        }
    }

    /// Forgets the rows written to a table (TRUNCATE of a table created in
    /// the transaction).
    pub fn clear_writes(&mut self, table: &str) {
        self.writes.remove(table);
    }

    /// Adds a statement's changes. A row written before in this transaction
    /// keeps the version it was first read at. Inserting a row the
    /// transaction already holds fails with its table and key (the
    /// transaction is then aborted, so the changes applied before it do not
    /// matter).
    pub fn apply(
        &mut self,
        changes: Vec<Change>,
        used: &Arc<TableDef>,
    ) -> Result<(), (String, EntityKey)> {
        self.used
            .entry(used.name.clone())
            .or_insert_with(|| used.clone());
        for change in changes {
            let encoded = encode_entity_key(&change.key.partition_key, &change.key.row_key);
            let new = change.new.map(|mut e| {
                e.etag = None;
                e.timestamp = None;
                e
            });
            if let Some(entity) = new.as_ref().filter(|_| change.table == used.name) {
                self.note_unique_entries(used, entity);
            }
            let rows = self.writes.entry(change.table.clone()).or_default();
            let read = match rows.get(&encoded) {
                Some(written) if written.1.is_some() && change.creates => {
                    return Err((change.table, change.key))
                }
                Some(written) => written.0.clone(),
                None => change.read,
            };
            rows.insert(encoded, Arc::new((read, new)));
        }
        Ok(())
    }

    /// Notes the unique index entries of a row written to `def`. An entry
    /// that cannot be made is left to the commit, which derives every
    /// entry again and reports it.
    fn note_unique_entries(&mut self, def: &TableDef, entity: &Entity) {
        for index in def.indexes.iter().filter(|i| i.unique) {
            if let Ok(Some(entry)) = index.entry(def, entity) {
                self.unique_entries
                    .entry(index.store_table())
                    .or_default()
                    .insert(entry.key, entity.key.clone());
            }
        }
    }

    /// The row this transaction wrote with `entry` in the unique index
    /// stored in `store_table`, as it was written (it may have been
    /// written again since).
    pub fn unique_entry(&self, store_table: &str, entry: &EntityKey) -> Option<&EntityKey> {
        self.unique_entries.get(store_table)?.get(entry)
    }

    /// The definition changes and row changes to commit.
    pub fn into_parts(self) -> (Vec<DefinitionChange>, Vec<Change>, Vec<Arc<TableDef>>) {
        let used = self
            .used
            .into_iter()
            .filter(|(name, _)| !self.definitions.contains_key(name))
            .map(|(_, def)| def)
            .collect();
        let definitions = self.definitions.into_values().collect();
        (definitions, changes_of(self.writes), used)
    }

    /// The rows written so far, as changes.
    pub fn changes(&self) -> Vec<Change> {
        changes_of(self.writes.clone())
    }

    /// The rows it wrote to `table`, if any.
    pub fn written_rows(&self, table: &str) -> Option<WrittenRows> {
        self.writes
            .get(table)
            .filter(|rows| !rows.is_empty())
            .cloned()
    }

    /// The rows it wrote, of the tables it wrote rows to.
    pub fn writes(&self) -> Writes {
        self.writes
            .iter()
            .filter(|(_, rows)| !rows.is_empty())
            .map(|(table, rows)| (table.clone(), rows.clone()))
            .collect()
    }

    /// Reads of the transaction: its snapshot with its own writes over it.
    pub fn view(&self) -> Arc<dyn EntityRead> {
        let created = self
            .definitions
            .keys()
            .filter(|name| self.created(name))
            .cloned()
            .collect();
        Arc::new(TxnView {
            snapshot: self.snapshot.clone(),
            writes: Arc::new(self.writes.clone()),
            created,
        })
    }
}

/// A snapshot with a transaction's writes laid over it.
struct TxnView {
    snapshot: Arc<dyn EntityRead>,
    writes: Arc<Writes>,
    /// Tables created in the transaction: the snapshot holds none of their rows.
    created: BTreeSet<String>,
}

/// An overlay entity as a read shows it: with the ETag first read, so that
/// later statements of the transaction still write conditionally on it.
fn shown(entity: &Entity, read: &Option<ETag>) -> Entity {
    let mut e = entity.clone();
    e.etag = read.clone();
    e
}

fn project(mut e: Entity, projection: Option<&[String]>) -> Entity {
    if let Some(p) = projection {
        e.properties.retain(|k, _| p.contains(k));
    }
    e
}

impl TxnView {
    /// Whether the transaction wrote this entity.
    fn wrote(&self, table: &str, key: &EntityKey) -> bool {
        self.writes
            .get(table)
            .is_some_and(|rows| wrote_row(rows, key))
    }

    /// Whether the transaction neither made nor wrote the table: reads of
    /// it are the snapshot's.
    fn untouched(&self, table: &str) -> bool {
        !self.created.contains(table) && !self.writes.contains_key(table)
    }
}

#[async_trait]
impl EntityRead for TxnView {
    async fn get(
        &self,
        table: &str,
        key: &EntityKey,
        projection: Option<&[String]>,
    ) -> StoreResult<Option<Entity>> {
        let encoded = encode_entity_key(&key.partition_key, &key.row_key);
        if let Some(written) = self.writes.get(table).and_then(|rows| rows.get(&encoded)) {
            let (read, new) = written.as_ref();
            return Ok(new.as_ref().map(|e| project(shown(e, read), projection)));
        }
        if self.created.contains(table) {
            return Ok(None);
        }
        self.snapshot.get(table, key, projection).await
    }

    /// The transaction's own writes answer for the keys they wrote; the
    /// snapshot for the others, all at once.
    async fn contains(&self, table: &str, keys: &[EntityKey]) -> StoreResult<Vec<bool>> {
        let Some(written) = self.writes.get(table) else {
            return match self.created.contains(table) {
                true => Ok(vec![false; keys.len()]),
                false => self.snapshot.contains(table, keys).await,
            };
        };
        let mut found = vec![false; keys.len()];
        let mut unwritten = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let encoded = encode_entity_key(&key.partition_key, &key.row_key);
            match written.get(&encoded) {
                Some(written) => found[i] = written.as_ref().1.is_some(),
                None => unwritten.push(i),
            }
        }
        if !unwritten.is_empty() && !self.created.contains(table) {
            let keys: Vec<EntityKey> = unwritten.iter().map(|&i| keys[i].clone()).collect();
            let in_snapshot = self.snapshot.contains(table, &keys).await?;
            for (i, present) in unwritten.into_iter().zip(in_snapshot) {
                found[i] = present;
            }
        }
        Ok(found)
    }

    async fn get_row(
        &self,
        table: &str,
        key: &EntityKey,
        rows: &mut EncodedRows,
    ) -> StoreResult<bool> {
        let untouched = !self.created.contains(table) && !self.wrote(table, key);
        if untouched {
            return self.snapshot.get_row(table, key, rows).await;
        }
        let entity = self.get(table, key, None).await?;
        Ok(rows.push_entities(entity.as_slice()) > 0)
    }

    /// The snapshot's rows when the transaction wrote nothing to the table;
    /// else its merged page (see [`TxnView::query`]).
    async fn query_rows(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
        rows: &mut EncodedRows,
    ) -> StoreResult<Option<Continuation>> {
        if self.untouched(table) {
            return self
                .snapshot
                .query_rows(table, query, continuation, rows)
                .await;
        }
        let page = self.query(table, query, continuation).await?;
        rows.push_entities(&page.entities);
        Ok(page.continuation)
    }

    /// The snapshot's, when the transaction wrote nothing to the table.
    async fn table_version(&self, table: &str) -> StoreResult<Option<u64>> {
        match self.untouched(table) {
            true => self.snapshot.table_version(table).await,
            false => Ok(None),
        }
    }

    /// The snapshot's page, with the transaction's rows in the span that page
    /// covers merged in (so a page may hold more entities than asked).
    async fn query(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
    ) -> StoreResult<Page> {
        let page = if self.created.contains(table) {
            query.check()?;
            Page {
                entities: Vec::new(),
                continuation: None,
            }
        } else {
            self.snapshot.query(table, query, continuation).await?
        };
        let Some(rows) = self.writes.get(table) else {
            return Ok(page);
        };
        let (mut lower, mut upper) = query.encoded_bounds(continuation)?;
        // The page covers the range up to (not including) the next key.
        if let Some(next) = &page.continuation {
            let next = next.decode()?;
            let next = encode_entity_key(&next.partition_key, &next.row_key);
            if query.reverse {
                lower = Bound::Excluded(next);
            } else {
                upper = Bound::Excluded(next);
            }
        }
        let overlay: Vec<(&Vec<u8>, &Written)> = rows.range((lower, upper)).collect();
        if overlay.is_empty() {
            return Ok(page);
        }
        let mut merged: BTreeMap<Vec<u8>, Entity> = page
            .entities
            .into_iter()
            .map(|e| (encode_entity_key(e.partition_key(), e.row_key()), e))
            .collect();
        for (k, written) in overlay {
            let (read, new) = written.as_ref();
            match new {
                Some(e) => {
                    merged.insert(
                        k.clone(),
                        project(shown(e, read), query.projection.as_deref()),
                    );
                }
                None => {
                    merged.remove(k);
                }
            }
        }
        let mut entities: Vec<Entity> = merged.into_values().collect();
        if query.reverse {
            entities.reverse();
        }
        Ok(Page {
            entities,
            continuation: page.continuation,
        })
    }
}

/// The rows of `writes`, as changes.
fn changes_of(writes: Writes) -> Vec<Change> {
    let mut out = Vec::new();
    for (table, rows) in writes {
        for (encoded, written) in rows {
            let (read, new) = Arc::unwrap_or_clone(written);
            let key = match &new {
                Some(e) => e.key.clone(),
                None => match crate::model::codec::key::decode_entity_key(&encoded) {
                    Ok((pk, rk)) => EntityKey::new(pk, rk),
                    Err(_) => continue,
                },
            };
            out.push(Change {
                table: table.clone(),
                key,
                creates: read.is_none() && new.is_some(),
                moved_to: None,
                read,
                new,
            });
        }
    }
    out
}
