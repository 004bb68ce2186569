//! Foreign keys. A row a statement writes must name a row of the referenced
//! table by that table's primary key (unless one of its referencing columns
//! is NULL: MATCH SIMPLE); a referenced row a statement deletes, or gives
//! another key, takes the constraint's action on the rows that reference
//! it: refused (NO ACTION, RESTRICT), deleted or given the new key with it
//! (CASCADE), or given NULLs or their defaults (SET NULL, SET DEFAULT).
//!
//! Both checks read the tables as the statement leaves them: its view (a
//! transaction block's own writes included) under the statement's changes.
//! The rows an action changes are found and changed by an UPDATE or DELETE
//! of the referencing table run as the statement's part, so their own
//! constraints hold; their changes join the statement's, which commit
//! together in one atomic write. A constraint declared `INITIALLY
//! DEFERRED` is checked at COMMIT in a transaction block (its actions still
//! run with the statement, as in PostgreSQL).
//!
//! What PostgreSQL does and this does not: a transaction that inserts a row
//! referencing a row another one deletes at the same time can commit with
//! it, since each checked a snapshot (PostgreSQL locks the referenced row);
//! and the UPDATE or DELETE of an action needs the session's privileges on
//! the referencing table (PostgreSQL's run as the table's owner).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use datafusion::sql::parser::Statement as DfStatement;

use super::convert::{RowDecoder, RowSink};
use super::dml::{plan_changes, quote};
use super::error::{Result, SqlError};
use super::provider::{dml_table_name, parse_row_identity, ROW_COLUMN};
use super::session::Session;
use super::txn::Change;
use crate::catalog::{
    encode_component, join_components, Column, ForeignKey, Keys, RefAction, Row, SqlType, TableDef,
};
use crate::model::{EntityKey, Value, ValueRef};
use crate::store::{
    bulk_ranges, on_threads, EncodedRows, EntityRead, LoadRows, ROWS_PER_SPILLED_PART,
};

/// Referenced rows looked up by one statement's query at most.
const KEYS_PER_QUERY: usize = 500;

/// Whether a column of type `own` may reference a key column of type
/// `theirs`: their values are looked up as that key's values.
pub fn comparable(own: SqlType, theirs: SqlType) -> bool {
    let integer = |t| matches!(t, SqlType::Int2 | SqlType::Int4 | SqlType::Int8);
    let text = |t| matches!(t, SqlType::Text | SqlType::Varchar(_));
    own == theirs || (integer(own) && integer(theirs)) || (text(own) && text(theirs))
}

/// Carries out the actions of the referenced rows `changes` remove (adding
/// the changes they make) and checks that every row written references
/// rows that exist. `table` is the statement's table.
pub(super) async fn enforce(
    session: &Session,
    table: &TableDef,
    mut changes: Vec<Change>,
) -> Result<Vec<Change>> {
    let removes = changes.iter().any(|c| c.new.is_none());
    if (table.foreign_keys.is_empty() && !removes) || replicating(session) {
        return Ok(changes);
    }
    let tables = session.tables();
    if removes {
        let mut next = 0;
        while next < changes.len() {
            let end = changes.len();
            let more = take_actions(session, &tables, &changes, next..end).await?;
            changes.extend(more);
            next = end;
        }
    }
    let view = session.current_view();
    check_references(&*view, &tables, &changes, |fk| !waits(session, fk)).await?;
    Ok(changes)
}

/// SET CONSTRAINTS' choices in a transaction block: whether its
/// deferrable foreign keys wait for COMMIT (all of them, or by name).
#[derive(Debug, Default, Clone)]
pub struct ConstraintModes {
    all: Option<bool>,
    named: HashMap<String, bool>,
}

impl ConstraintModes {
    /// Whether the constraint's checks wait for COMMIT.
    fn defers(&self, fk: &ForeignKey) -> bool {
        fk.deferrable
            && (self.named.get(&fk.name).copied())
                .or(self.all)
                .unwrap_or(fk.deferred)
    }
}

/// Whether a foreign key's checks wait for the end of the transaction
/// (in one, the key deferrable, and deferred by its declaration or by SET
/// CONSTRAINTS).
fn waits(session: &Session, fk: &ForeignKey) -> bool {
    session
        .txn
        .as_ref()
        .is_some_and(|txn| txn.constraint_modes.defers(fk))
}

/// `SET CONSTRAINTS {ALL | name, ...} {DEFERRED | IMMEDIATE}` in a
/// transaction block: the named foreign keys (deferrable ones) wait for
/// COMMIT from now on, or are checked at each statement again, the rows
/// written so far first (23503 here, as in PostgreSQL).
pub(super) async fn set_constraints(
    session: &mut Session,
    names: Option<Vec<String>>,
    deferred: bool,
) -> Result<()> {
    let tables = session.tables();
    let Some(txn) = session.txn.as_mut() else {
        return Ok(());
    };
    let mut chosen: Vec<String> = Vec::new();
    match &names {
        None => {
            txn.constraint_modes = ConstraintModes {
                all: Some(deferred),
                named: HashMap::new(),
            }
        }
        Some(names) => {
            for name in names {
                let fk = (tables.iter().flat_map(|t| &t.foreign_keys)).find(|fk| &fk.name == name);
                match fk {
                    Some(fk) if fk.deferrable => chosen.push(name.clone()),
                    Some(_) => {
                        return Err(SqlError::value(
                            "55000",
                            format!("constraint \"{name}\" is not deferrable"),
                        ))
                    }
                    // A primary key, unique index or CHECK: checked at
                    // each statement whatever it says, as PostgreSQL lets
                    // it be named.
                    None if tables.iter().any(|t| has_constraint(t, name)) => {}
                    None => {
                        return Err(SqlError::value(
                            "42704",
                            format!("constraint \"{name}\" does not exist"),
                        ))
                    }
                }
            }
            for name in &chosen {
                txn.constraint_modes.named.insert(name.clone(), deferred);
            }
        }
    }
    if deferred {
        return Ok(());
    }
    let changes = txn.changes();
    let now_immediate =
        |fk: &ForeignKey| fk.deferrable && names.as_ref().is_none_or(|_| chosen.contains(&fk.name));
    session.refresh_view();
    check_pending(session, &tables, &changes, now_immediate).await
}

/// Whether a table has a constraint (other than a foreign key) of that
/// name: its primary key, a unique index or a CHECK.
fn has_constraint(table: &TableDef, name: &str) -> bool {
    super::pg_catalog::constraints_of(table)
        .iter()
        .any(|c| c.name == name)
}

/// At COMMIT of a block: the deferrable constraints (those that held at
/// each statement hold still), over every row the block wrote
/// (`written`), in its view.
pub(super) async fn check_deferred(
    session: &Session,
    written: impl FnOnce() -> Vec<Change>,
) -> Result<()> {
    let tables = session.tables();
    let deferrable = tables
        .iter()
        .any(|t| t.foreign_keys.iter().any(|fk| fk.deferrable));
    if !deferrable {
        return Ok(());
    }
    check_pending(session, &tables, &written(), |fk| fk.deferrable).await
}

/// The checks of the foreign keys `applies` chooses that waited: of the
/// rows written (`changes`), and of the referenced rows they removed.
async fn check_pending(
    session: &Session,
    tables: &[Arc<TableDef>],
    changes: &[Change],
    applies: impl Fn(&ForeignKey) -> bool,
) -> Result<()> {
    if replicating(session) {
        return Ok(());
    }
    let view = session.current_view();
    check_references(&*view, tables, changes, &applies).await?;
    for (child, fk) in referencing(tables) {
        let parent = definition(tables, &fk.table)?;
        if !applies(fk) || parent.triggers_disabled {
            continue;
        }
        let removed: Vec<&EntityKey> = changes
            .iter()
            .filter(|c| c.table == fk.table && c.new.is_none())
            .map(|c| &c.key)
            .collect();
        for keys in removed.chunks(KEYS_PER_QUERY) {
            let olds = keys
                .iter()
                .map(|key| referenced_values(parent, fk, key))
                .collect::<Result<Vec<_>>>()?;
            let found = referencing_rows(session, child, fk, &olds).await?;
            if let Some((key, _)) = found.first() {
                return Err(still_referenced(&*view, parent, child, fk, key).await);
            }
        }
    }
    Ok(())
}

/// `SET session_replication_role = replica`: as in PostgreSQL, a session
/// that applies rows a replica receives runs no foreign key's check or
/// action.
fn replicating(session: &Session) -> bool {
    session
        .settings()
        .get("session_replication_role")
        .as_deref()
        == Some("replica")
}

/// Every foreign key of `tables`, with its table.
fn referencing(tables: &[Arc<TableDef>]) -> impl Iterator<Item = (&TableDef, &ForeignKey)> {
    tables
        .iter()
        .flat_map(|t| t.foreign_keys.iter().map(move |fk| (t.as_ref(), fk)))
}

fn definition<'a>(tables: &'a [Arc<TableDef>], name: &str) -> Result<&'a TableDef> {
    tables
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.as_ref())
        .ok_or_else(|| SqlError::Internal(format!("a foreign key references {name:?}, unknown")))
}

/// The changes the actions of the rows `changes[range]` remove make.
async fn take_actions(
    session: &Session,
    tables: &[Arc<TableDef>],
    changes: &[Change],
    range: std::ops::Range<usize>,
) -> Result<Vec<Change>> {
    // The rows the statement removes or writes already, which actions do
    // not change again.
    let touched: HashSet<(&str, &EntityKey)> =
        changes.iter().map(|c| (c.table.as_str(), &c.key)).collect();
    let mut made: Vec<Change> = Vec::new();
    // A row neither the statement nor an earlier action changes.
    let untouched = |made: &[Change], table: &str, key: &EntityKey| {
        !touched.contains(&(table, key)) && !made.iter().any(|m| m.table == table && &m.key == key)
    };
    for (child, fk) in referencing(tables) {
        let removed: Vec<&Change> = changes[range.clone()]
            .iter()
            .filter(|c| c.table == fk.table && c.new.is_none())
            .collect();
        let parent = definition(tables, &fk.table)?;
        if removed.is_empty() || parent.triggers_disabled {
            continue;
        }
        let (deleted, moved): (Vec<&Change>, Vec<&Change>) =
            removed.into_iter().partition(|c| c.moved_to.is_none());
        for (rows, action) in [(deleted, fk.on_delete), (moved, fk.on_update)] {
            for chunk in rows.chunks(KEYS_PER_QUERY) {
                let olds = chunk
                    .iter()
                    .map(|c| referenced_values(parent, fk, &c.key))
                    .collect::<Result<Vec<_>>>()?;
                let table = quote(&child.name);
                let update = |set: String, olds: &[Vec<Value>]| {
                    format!(
                        "UPDATE {table} SET {set} WHERE {}",
                        matching(child, fk, olds)
                    )
                };
                // The statements that carry the action out.
                let statements = match action {
                    RefAction::NoAction if waits(session, fk) => Vec::new(),
                    RefAction::NoAction | RefAction::Restrict => {
                        let found = referencing_rows(session, child, fk, &olds).await?;
                        let left = found
                            .iter()
                            .find(|(key, _)| untouched(&made, &child.name, key));
                        if let Some((key, _)) = left {
                            let view = session.current_view();
                            return Err(still_referenced(&*view, parent, child, fk, key).await);
                        }
                        Vec::new()
                    }
                    RefAction::Cascade if chunk[0].moved_to.is_none() => {
                        vec![format!(
                            "DELETE FROM {table} WHERE {}",
                            matching(child, fk, &olds)
                        )]
                    }
                    // Each moved row's referencing rows take its new key.
                    RefAction::Cascade => (chunk.iter().zip(&olds))
                        .map(|(change, old)| {
                            let new_key = change.moved_to.as_ref().expect("a moved row");
                            let new = referenced_values(parent, fk, new_key)?;
                            let set = assignments(fk, |i| {
                                literal(&new[i], column_type(child, &fk.columns[i]))
                            });
                            Ok(update(set, std::slice::from_ref(old)))
                        })
                        .collect::<Result<Vec<_>>>()?,
                    RefAction::SetNull => vec![update(assignments(fk, |_| "NULL".into()), &olds)],
                    RefAction::SetDefault => {
                        vec![update(assignments(fk, |_| "DEFAULT".into()), &olds)]
                    }
                };
                for sql in statements {
                    let list = run(session, &sql).await?;
                    let list: Vec<Change> = (list.into_iter())
                        .filter(|c| untouched(&made, &c.table, &c.key))
                        .collect();
                    made.extend(list);
                }
            }
        }
    }
    Ok(made)
}

/// The changes of an UPDATE or DELETE an action runs.
async fn run(session: &Session, sql: &str) -> Result<Vec<Change>> {
    let Some(DfStatement::Statement(statement)) = Session::parse(sql)?.pop() else {
        return Err(SqlError::Internal(format!("no statement in {sql}")));
    };
    let (changes, _, _) = plan_changes(session, &statement, None, None).await?;
    Ok(changes)
}

/// `a = <value>, b = <value>` of the referencing columns.
fn assignments(fk: &ForeignKey, value: impl Fn(usize) -> String) -> String {
    fk.columns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{} = {}", quote(c), value(i)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The condition that the referencing columns hold one of `olds`.
fn matching(child: &TableDef, fk: &ForeignKey, olds: &[Vec<Value>]) -> String {
    let one = |values: &Vec<Value>| {
        let terms: Vec<String> = fk
            .columns
            .iter()
            .zip(values)
            .map(|(c, v)| format!("{} = {}", quote(c), literal(v, column_type(child, c))))
            .collect();
        format!("({})", terms.join(" AND "))
    };
    olds.iter().map(one).collect::<Vec<_>>().join(" OR ")
}

fn column_type(def: &TableDef, column: &str) -> SqlType {
    def.column_index(column)
        .map_or(SqlType::Text, |i| def.columns[i].ty)
}

/// A value as an SQL literal of type `ty`.
fn literal(value: &Value, ty: SqlType) -> String {
    let mut text = value.to_string().replace('\'', "''");
    if matches!(value, Value::DateTime(_)) && ty == SqlType::Timestamptz {
        text.push_str("+00");
    }
    format!("'{text}'::{}", ty.pg_name())
}

/// The referenced columns' values of the referenced row with key `key`.
fn referenced_values(parent: &TableDef, fk: &ForeignKey, key: &EntityKey) -> Result<Vec<Value>> {
    let parts = parent.key_parts(key)?;
    fk.referenced
        .iter()
        .map(|name| {
            let i = parent
                .column_index(name)
                .ok_or_else(|| SqlError::undefined_column_of(name, &parent.name))?;
            parts
                .value(i)
                .cloned()
                .ok_or_else(|| SqlError::Internal(format!("key column {name:?} not in the key")))
        })
        .collect()
}

/// The rows of `child` whose referencing columns hold one of `olds`: their
/// keys, with the ETags read.
async fn referencing_rows(
    session: &Session,
    child: &TableDef,
    fk: &ForeignKey,
    olds: &[Vec<Value>],
) -> Result<Vec<(EntityKey, Option<crate::model::ETag>)>> {
    let sql = format!(
        "SELECT {} FROM {} WHERE {}",
        quote(ROW_COLUMN),
        quote(&dml_table_name(&child.name)),
        matching(child, fk, olds)
    );
    let rows = session.query_text_rows(&sql).await?;
    rows.iter()
        .map(|row| {
            parse_row_identity(row)
                .ok_or_else(|| SqlError::Internal(format!("malformed row column {row:?}")))
        })
        .collect()
}

/// 23503 for a referenced row removed while the row `key` of `child`
/// references it.
async fn still_referenced(
    view: &dyn EntityRead,
    parent: &TableDef,
    child: &TableDef,
    fk: &ForeignKey,
    key: &EntityKey,
) -> SqlError {
    let values = match view.get(&child.name, key, None).await {
        Ok(Some(entity)) => child
            .entity_to_row(&entity)
            .ok()
            .map(|row| referencing_values(child, fk, &row)),
        _ => None,
    };
    let error = SqlError::value(
        "23503",
        format!(
            "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
            parent.name, fk.name, child.name
        ),
    );
    let detail = values.flatten().map(|values| {
        format!(
            "Key ({})=({}) is still referenced from table \"{}\".",
            fk.referenced.join(", "),
            texts(&values),
            child.name
        )
    });
    error.explained(detail, None)
}

/// The referencing columns' values of a row, or `None` if one is NULL.
fn referencing_values(child: &TableDef, fk: &ForeignKey, row: &Row) -> Option<Vec<Value>> {
    fk.columns
        .iter()
        .map(|c| child.column_index(c).and_then(|i| row[i].clone()))
        .collect()
}

fn texts(values: &[impl std::fmt::Display]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that every row `changes` write references rows that exist, for
/// the foreign keys `applies` takes: in the statement's own changes, or
/// else in `view`.
async fn check_references(
    view: &dyn EntityRead,
    tables: &[Arc<TableDef>],
    changes: &[Change],
    applies: impl Fn(&ForeignKey) -> bool,
) -> Result<()> {
    let own: HashMap<(&str, &EntityKey), bool> = changes
        .iter()
        .map(|c| ((c.table.as_str(), &c.key), c.new.is_some()))
        .collect();
    let mut found: HashSet<(String, EntityKey)> = HashSet::new();
    // Each referencing table's foreign keys, worked out once.
    let mut checked: HashMap<&str, Vec<(&ForeignKey, References)>> = HashMap::new();
    for change in changes {
        let Some(entity) = &change.new else { continue };
        let Ok(child) = definition(tables, &change.table) else {
            continue;
        };
        if child.triggers_disabled || !child.foreign_keys.iter().any(&applies) {
            continue;
        }
        let row = child.entity_to_row(entity)?;
        let fks = match checked.entry(child.name.as_str()) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(new) => new.insert(
                (child.foreign_keys.iter())
                    .filter(|fk| applies(fk))
                    .map(|fk| {
                        Ok((
                            fk,
                            References::new(child, fk, definition(tables, &fk.table)?)?,
                        ))
                    })
                    .collect::<Result<_>>()?,
            ),
        };
        for (fk, references) in fks.iter() {
            let Some(values) = references.values(&row) else {
                continue;
            };
            let present = match references.key(&values) {
                None => false,
                Some(key) => match own.get(&(fk.table.as_str(), &key)) {
                    Some(&exists) => exists,
                    None if found.contains(&(fk.table.clone(), key.clone())) => true,
                    None => {
                        let exists = view.get(&fk.table, &key, Some(&[])).await?.is_some();
                        if exists {
                            found.insert((fk.table.clone(), key));
                        }
                        exists
                    }
                },
            };
            if !present {
                return Err(not_present(child, fk, &texts(&values)));
            }
        }
    }
    Ok(())
}

/// A referencing value as a value of the referenced column's type
/// ([`comparable`] types), if it is one.
fn as_type(value: &Value, ty: SqlType) -> Option<Value> {
    match (value, ty) {
        (Value::Int32(v), SqlType::Int8) => Some(Value::Int64(i64::from(*v))),
        (Value::Int64(v), SqlType::Int2 | SqlType::Int4) => {
            i32::try_from(*v).ok().map(Value::Int32)
        }
        (Value::Int32(v), SqlType::Int2) => i16::try_from(*v).ok().map(|_| Value::Int32(*v)),
        _ => Some(value.clone()),
    }
}

/// 23503 for a row written that references no row: its referencing
/// columns' values are `values`, written as text.
fn not_present(child: &TableDef, fk: &ForeignKey, values: &str) -> SqlError {
    SqlError::value(
        "23503",
        format!(
            "insert or update on table \"{}\" violates foreign key constraint \"{}\"",
            child.name, fk.name
        ),
    )
    .explained(
        Some(format!(
            "Key ({})=({values}) is not present in table \"{}\".",
            fk.columns.join(", "),
            fk.table
        )),
        None,
    )
}

/// Refuses a foreign key added to `child` that a row of it breaks
/// (`ALTER TABLE ... ADD FOREIGN KEY` without `NOT VALID`).
pub(super) async fn held_by_rows(
    session: &Session,
    child: &TableDef,
    fk: &ForeignKey,
) -> Result<()> {
    let own = |c: &String| format!("c.{}", quote(c));
    let not_null: Vec<String> = fk
        .columns
        .iter()
        .map(|c| format!("{} IS NOT NULL", own(c)))
        .collect();
    let same: Vec<String> = (fk.columns.iter().zip(&fk.referenced))
        .map(|(c, r)| format!("p.{} = {}", quote(r), own(c)))
        .collect();
    let sql = format!(
        "SELECT {} FROM {} AS c WHERE {} AND NOT EXISTS (SELECT 1 FROM {} AS p WHERE {}) LIMIT 1",
        fk.columns.iter().map(own).collect::<Vec<_>>().join(", "),
        quote(&child.name),
        not_null.join(" AND "),
        quote(&fk.table),
        same.join(" AND ")
    );
    match session.query_text_rows(&sql).await?.first() {
        None => Ok(()),
        Some(row) => Err(not_present(child, fk, &row.replace('\t', ", "))),
    }
}

/// Before table `name` is dropped: the foreign keys of other tables (not
/// dropped with it, `dropping`) that reference it are refused, or dropped
/// with it (`cascade`).
pub(super) fn drop_references(
    session: &mut Session,
    name: &str,
    dropping: &[String],
    cascade: bool,
) -> Result<()> {
    let referencing: Vec<Arc<TableDef>> = session
        .tables()
        .into_iter()
        .filter(|t| t.name != name && !dropping.contains(&t.name))
        .filter(|t| t.foreign_keys.iter().any(|fk| fk.table == name))
        .collect();
    let constraints = |t: &TableDef| -> Vec<String> {
        (t.foreign_keys.iter())
            .filter(|fk| fk.table == name)
            .map(|fk| fk.name.clone())
            .collect()
    };
    if referencing.is_empty() {
        return Ok(());
    }
    if !cascade {
        let detail: Vec<String> = referencing
            .iter()
            .flat_map(|t| {
                constraints(t)
                    .into_iter()
                    .map(|c| format!("constraint {c} on table {} depends on table {name}", t.name))
            })
            .collect();
        return Err(
            SqlError::Catalog(crate::catalog::CatalogError::Dependent(format!(
                "cannot drop table {name} because other objects depend on it"
            )))
            .explained(
                Some(detail.join("\n")),
                Some("Use DROP ... CASCADE to drop the dependent objects too.".into()),
            ),
        );
    }
    for table in referencing {
        for constraint in constraints(&table) {
            session.notice(format!(
                "drop cascades to constraint {constraint} on table {}",
                table.name
            ));
        }
        let mut def = (*table).clone();
        def.foreign_keys.retain(|fk| fk.table != name);
        super::ddl::define(session, &table.name, Some(def))?;
    }
    Ok(())
}

/// The tables a TRUNCATE of `names` empties: with `cascade`, also those
/// that reference them, and theirs; without, a table referenced by one not
/// truncated with it is refused.
pub(super) fn truncated_with(
    session: &Session,
    mut names: Vec<String>,
    cascade: bool,
) -> Result<Vec<String>> {
    let tables = session.tables();
    let mut next = 0;
    while next < names.len() {
        let name = names[next].clone();
        next += 1;
        for (child, _) in referencing(&tables).filter(|(_, fk)| fk.table == name) {
            if names.contains(&child.name) {
                continue;
            }
            if !cascade {
                return Err(SqlError::value(
                    "0A000",
                    "cannot truncate a table referenced in a foreign key constraint",
                )
                .explained(
                    Some(format!("Table \"{}\" references \"{name}\".", child.name)),
                    Some(format!(
                        "Truncate table \"{}\" at the same time, or use TRUNCATE ... CASCADE.",
                        child.name
                    )),
                ));
            }
            session.notice(format!("truncate cascades to table \"{}\"", child.name));
            names.push(child.name.clone());
        }
    }
    Ok(names)
}

/// What a foreign key names in a referencing row: which of its columns
/// hold the referencing values, and how they make the referenced row's
/// key.
struct References<'a> {
    /// The referencing columns, in the foreign key's order.
    columns: Vec<usize>,
    /// For each column of the referenced table's PartitionKey, then of its
    /// RowKey: which referencing value it takes, and the column. `None`
    /// when the values name no key of it.
    partition: Option<Vec<(usize, &'a Column)>>,
    row: Option<Vec<(usize, &'a Column)>>,
}

impl<'a> References<'a> {
    fn new(child: &TableDef, fk: &ForeignKey, parent: &'a TableDef) -> Result<Self> {
        let columns = (fk.columns.iter())
            .map(|c| {
                child
                    .column_index(c)
                    .ok_or_else(|| SqlError::undefined_column(c.clone()))
            })
            .collect::<Result<_>>()?;
        let (partition, row) = parent.key_columns();
        let sources = |key_columns: &[usize]| -> Option<Vec<(usize, &'a Column)>> {
            (key_columns.iter())
                .map(|&k| {
                    let column = &parent.columns[k];
                    let source = fk.referenced.iter().position(|r| *r == column.name)?;
                    Some((source, column))
                })
                .collect()
        };
        let keyed = matches!(parent.keys, Keys::Columns { .. });
        Ok(References {
            columns,
            partition: sources(partition).filter(|_| keyed),
            row: sources(row).filter(|_| keyed),
        })
    }

    /// The referencing values of a row, or `None` if one is NULL.
    fn values<'r>(&self, row: &'r Row) -> Option<Vec<&'r Value>> {
        self.columns.iter().map(|&i| row[i].as_ref()).collect()
    }

    /// The key of the referenced row `values` name, if they can name one.
    fn key(&self, values: &[&Value]) -> Option<EntityKey> {
        let encode = |sources: &Option<Vec<(usize, &Column)>>| -> Option<String> {
            let components = (sources.as_ref()?.iter())
                .map(|&(source, column)| {
                    let value = as_type(values[source], column.ty)?;
                    encode_component(&column.name, column.ty, &value).ok()
                })
                .collect::<Option<Vec<String>>>()?;
            Some(join_components(&components))
        };
        Some(EntityKey::new(encode(&self.partition)?, encode(&self.row)?))
    }
}

/// Rows of a COPY's part as its foreign keys' check reads them: only the
/// referencing columns, decoded straight from each row's key and record
/// ([`RowDecoder`]; no entity of all its properties), each row handed to
/// `each` once read.
struct ReferencingRows<'a, F> {
    /// The table column of each decoded column.
    columns: &'a [usize],
    /// A row of the table's width, NULL but for the decoded columns.
    row: Row,
    each: F,
}

impl<'a, F: FnMut(&Row) -> Result<()>> ReferencingRows<'a, F> {
    fn new(child: &TableDef, columns: &'a [usize], each: F) -> Self {
        ReferencingRows {
            columns,
            row: vec![None; child.columns.len()],
            each,
        }
    }
}

impl<F: FnMut(&Row) -> Result<()>> RowSink for ReferencingRows<'_, F> {
    type Error = SqlError;

    fn value(&mut self, column: usize, value: Option<ValueRef>) -> Result<()> {
        self.row[self.columns[column]] = value.map(ValueRef::to_value);
        Ok(())
    }

    fn row_done(&mut self) -> Result<()> {
        (self.each)(&self.row)
    }
}

/// The keys of one table a foreign key names, each with the row (its
/// place along the load's parts) that names it.
#[derive(Clone, Default)]
struct NamedKeys {
    keys: Vec<EntityKey>,
    rows: Vec<usize>,
}

/// A COPY's part has its keys named on more than one core when each has at
/// least this many rows.
const ROWS_A_THREAD_AT_LEAST: usize = 16_384;

/// Keys a COPY names, over all its foreign keys, that are looked up
/// together: a lookup walks the referenced table's records up to its last
/// key (see `EntityRead::contains`), so the more keys a walk finds the
/// less each costs. Checked after each part, so one part's keys more may
/// be held.
const KEYS_LOOKED_UP_TOGETHER: usize = 1_000_000;

/// Checks that every row a COPY loads into `child` references rows that
/// exist: in the view, or (a table referencing itself) among the rows
/// loaded. In a transaction block the deferred constraints wait for
/// COMMIT.
pub(super) async fn check_loaded(
    session: &Session,
    child: &TableDef,
    rows: &LoadRows,
) -> Result<()> {
    let fks: Vec<&ForeignKey> = (child.foreign_keys.iter())
        .filter(|fk| !waits(session, fk))
        .collect();
    if fks.is_empty() || child.triggers_disabled || replicating(session) {
        return Ok(());
    }
    let tables = session.tables();
    let view = session.current_view();
    let references: Vec<References> = (fks.iter())
        .map(|fk| References::new(child, fk, definition(&tables, &fk.table)?))
        .collect::<Result<_>>()?;
    let mut columns: Vec<usize> = references.iter().flat_map(|r| r.columns.clone()).collect();
    columns.sort_unstable();
    columns.dedup();
    let decoder = RowDecoder::new(child, &columns);
    // The referencing values of the load's row `row`, for an error.
    let values_at = |row: usize, n: usize| -> Result<Vec<Value>> {
        let mut first = 0;
        let mut values = Vec::new();
        for part in rows.parts(ROWS_PER_SPILLED_PART) {
            let part = part?;
            if row < first + part.len() {
                let mut sink = ReferencingRows::new(child, &columns, |row: &Row| {
                    let named = references[n].values(row).unwrap_or_default();
                    values = named.into_iter().cloned().collect();
                    Ok(())
                });
                let at = row - first;
                decoder.decode_range_into(child, &part, at..at + 1, &mut sink)?;
                break;
            }
            first += part.len();
        }
        Ok(values)
    };
    // The keys each foreign key names in `rows` of a part whose first row
    // is the load's row `first`. A key the row before named too is left
    // out: loads often come sorted by what they reference (TPC-H's
    // `lineitem` by `l_orderkey`).
    let named_keys = |part: &EncodedRows, rows: Range<usize>, first: usize| -> Result<_> {
        let mut named = vec![NamedKeys::default(); fks.len()];
        let mut at = first + rows.start;
        let mut sink = ReferencingRows::new(child, &columns, |row: &Row| {
            for ((fk, references), named) in fks.iter().zip(&references).zip(&mut named) {
                let Some(referencing) = references.values(row) else {
                    continue;
                };
                let Some(key) = references.key(&referencing) else {
                    return Err(not_present(child, fk, &texts(&referencing)));
                };
                if named.keys.last() != Some(&key) {
                    named.keys.push(key);
                    named.rows.push(at);
                }
            }
            at += 1;
            Ok(())
        });
        decoder.decode_range_into(child, part, rows, &mut sink)?;
        Ok(named)
    };
    // Keys of the table itself not found in the view, with the foreign
    // key and the first row that named them: the load may hold them.
    let mut own_missing: HashMap<EntityKey, (usize, usize)> = HashMap::new();
    let mut named = vec![NamedKeys::default(); fks.len()];
    let mut first = 0;
    let mut parts = rows.parts(ROWS_PER_SPILLED_PART).peekable();
    while let Some(part) = parts.next() {
        let part = part?;
        // Named on each core, each core over its own range of rows.
        let ranges = bulk_ranges(part.len(), ROWS_A_THREAD_AT_LEAST);
        for named_in_range in on_threads(ranges, |rows| named_keys(&part, rows, first)) {
            for (all, some) in named.iter_mut().zip(named_in_range?) {
                all.keys.extend(some.keys);
                all.rows.extend(some.rows);
            }
        }
        first += part.len();
        let held: usize = named.iter().map(|named| named.keys.len()).sum();
        if held < KEYS_LOOKED_UP_TOGETHER && parts.peek().is_some() {
            continue;
        }
        let named = std::mem::replace(&mut named, vec![NamedKeys::default(); fks.len()]);
        // The first row naming a key that is not there, as PostgreSQL,
        // checking row by row, would report.
        let mut first_missing: Option<(usize, usize)> = None;
        for (n, (fk, named)) in fks.iter().zip(named).enumerate() {
            let present = view.contains(&fk.table, &named.keys).await?;
            for ((key, row), present) in named.keys.into_iter().zip(named.rows).zip(present) {
                if present {
                    continue;
                }
                if fk.table == child.name {
                    own_missing.entry(key).or_insert((n, row));
                } else if first_missing.is_none_or(|(earliest, _)| row < earliest) {
                    first_missing = Some((row, n));
                }
            }
        }
        if let Some((row, n)) = first_missing {
            return Err(not_present(child, fks[n], &texts(&values_at(row, n)?)));
        }
    }
    if own_missing.is_empty() {
        return Ok(());
    }
    rows.for_each_part(ROWS_PER_SPILLED_PART, |part| -> Result<()> {
        for row in part.iter() {
            own_missing.remove(&EntityKey::new(row.partition_key, row.row_key));
        }
        Ok(())
    })?;
    match own_missing.into_values().min_by_key(|&(_, row)| row) {
        None => Ok(()),
        Some((n, row)) => Err(not_present(child, fks[n], &texts(&values_at(row, n)?))),
    }
}
