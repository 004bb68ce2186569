//! `RENAME` of a column, a constraint, an index, a table or a view.
//!
//! What names a column is renamed with it: the table's indexes, foreign
//! keys and CHECK conditions, other tables' foreign keys that reference
//! it, and the sequence it owns. A row's properties are named after its
//! columns, so a column held as a property is renamed in every row (the
//! rows are written again, as DROP COLUMN writes them); key columns are
//! encoded by position and their rows stay as they are. An index keeps
//! its entries under its new name (`IndexDef::stored_as`). A table's rows
//! are in a store table of its name: a renamed table's are written again
//! under the new one.
//!
//! Views are kept as the text of their query, which names tables and
//! columns: a table or column a view reads keeps its name (the view would
//! no longer read).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr as AstExpr, Ident, ObjectName};

use std::sync::Arc;

use super::ddl::Relation;
use super::ddl::{
    define, free_index_storage_in, held_index_storage, name_taken, rewrite_rows, table_of_index,
};
use super::error::{Result, SqlError};
use super::pg_catalog::{primary_key_name, quote_ident};
use super::session::{table_name, Output, Session};
use crate::catalog::{CatalogError, ForeignKey, TableDef};

/// Renames column `old` of `def` to `new` with what names it (the other
/// tables' foreign keys are defined again here). Returns whether the
/// rows must be written again: the column is one of their properties.
pub(super) async fn rename_column(
    session: &mut Session,
    def: &mut TableDef,
    old: &str,
    new: &str,
) -> Result<bool> {
    let i = def
        .column_index(old)
        .ok_or_else(|| SqlError::undefined_column(old))?;
    if def.column_index(new).is_some() {
        return Err(SqlError::value(
            "42701",
            format!(
                "column \"{new}\" of relation \"{}\" already exists",
                def.name
            ),
        ));
    }
    not_read_by_a_view(session, &def.name, &format!("column \"{old}\" of table"))?;
    let renamed = |name: &mut String| {
        if name == old {
            *name = new.to_owned();
        }
    };
    def.columns[i].name = new.to_owned();
    for index in &mut def.indexes {
        index.columns.iter_mut().for_each(renamed);
    }
    for fk in &mut def.foreign_keys {
        fk.columns.iter_mut().for_each(renamed);
        if fk.table == def.name {
            fk.referenced.iter_mut().for_each(renamed);
        }
    }
    for check in &mut def.checks {
        check.expr = renamed_in_condition(&check.expr, old, new)?;
    }
    redefine_references(session, &def.name, |fk| {
        fk.referenced.iter_mut().for_each(renamed)
    })?;
    let table = def.name.clone();
    move_sequence_owners(session, |(t, c)| {
        (*t == table && c == old).then(|| (t.clone(), new.to_owned()))
    })
    .await?;
    Ok(def.columns[i].system.is_none() && !def.is_key_column(i))
}

/// A CHECK condition with column `old` called `new`.
fn renamed_in_condition(condition: &str, old: &str, new: &str) -> Result<String> {
    let mut expr = super::rewrite::parse_expr(condition).ok_or_else(|| {
        SqlError::Internal(format!("the stored condition {condition:?} does not parse"))
    })?;
    let _ = visit_expressions_mut(&mut expr, |e| {
        let column = match e {
            AstExpr::Identifier(ident) => Some(ident),
            AstExpr::CompoundIdentifier(parts) => parts.last_mut(),
            _ => None,
        };
        if let Some(column) = column.filter(|c| super::session::normalize(c) == old) {
            *column = identifier(new);
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(expr.to_string())
}

/// A name as SQL writes it: quoted only when it must be.
fn identifier(name: &str) -> Ident {
    let quoted = quote_ident(name);
    match quoted.starts_with('"') {
        true => Ident::with_quote('"', name),
        false => Ident::new(name),
    }
}

/// `ALTER TABLE t RENAME CONSTRAINT old TO new`: a CHECK, a foreign key or
/// a UNIQUE constraint (whose index is renamed with it).
pub(super) fn rename_constraint(
    session: &Session,
    def: &mut TableDef,
    old: &str,
    new: &str,
) -> Result<()> {
    let table = def.name.clone();
    let taken = def.checks.iter().any(|c| c.name == new)
        || def.foreign_keys.iter().any(|f| f.name == new)
        || def.indexes.iter().any(|i| i.constraint && i.name == new)
        || primary_key_name(&table) == new;
    let already = || {
        SqlError::value(
            "42710",
            format!("constraint \"{new}\" for relation \"{table}\" already exists"),
        )
    };
    if let Some(check) = def.checks.iter_mut().find(|c| c.name == old) {
        if taken {
            return Err(already());
        }
        check.name = new.to_owned();
    } else if let Some(fk) = def.foreign_keys.iter_mut().find(|f| f.name == old) {
        if taken {
            return Err(already());
        }
        fk.name = new.to_owned();
    } else if def.indexes.iter().any(|i| i.constraint && i.name == old) {
        if taken {
            return Err(already());
        }
        rename_index_of(session, def, old, new)?;
    } else if primary_key_name(&table) == old {
        return Err(primary_key_keeps_its_name(&table));
    } else {
        return Err(SqlError::value(
            "42704",
            format!("constraint \"{old}\" for table \"{table}\" does not exist"),
        ));
    }
    Ok(())
}

/// `ALTER INDEX old RENAME TO new`.
pub(super) fn rename_index(
    session: &mut Session,
    old: &ObjectName,
    new: &ObjectName,
) -> Result<Output> {
    let (old, new) = (table_name(old)?, table_name(new)?);
    let Some(table) = table_of_index(session, &old) else {
        if let Some(def) = (session.tables().iter()).find(|d| primary_key_name(&d.name) == old) {
            return Err(primary_key_keeps_its_name(&def.name));
        }
        return Err(CatalogError::TableNotFound(old).into());
    };
    let mut def = (*table).clone();
    rename_index_of(session, &mut def, &old, &new)?;
    define(session, &table.name, Some(def))?;
    Ok(Output::Command("ALTER INDEX".into()))
}

/// Renames index `old` of `def`; its entries stay in their store table.
fn rename_index_of(session: &Session, def: &mut TableDef, old: &str, new: &str) -> Result<()> {
    if name_taken(session, new) {
        return Err(CatalogError::TableExists(new.to_owned()).into());
    }
    let index = (def.indexes.iter_mut())
        .find(|i| i.name == old)
        .expect("the table has the index");
    index.stored_as.get_or_insert_with(|| old.to_owned());
    index.name = new.to_owned();
    Ok(())
}

fn primary_key_keeps_its_name(table: &str) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "the primary key of \"{table}\" is named after its table and cannot be renamed"
    ))
}

/// `ALTER TABLE r RENAME TO new`. A view holds no rows: its definition
/// takes the new name. A table's rows are stored under its name: they are
/// written again into a table of the new name (up to 1,000,000, in the
/// statement's one atomic write, as the other rewrites), each index's
/// entries into a store table of their own, and the old table goes. The
/// foreign keys that reference it, and the sequences its columns own,
/// follow it. A relation that a view reads keeps its name (the view's
/// query names it), and so does a materialized view (its query makes its
/// rows under its name).
pub(super) async fn rename_relation(
    session: &mut Session,
    def: &Arc<TableDef>,
    new: &str,
) -> Result<()> {
    if def.view.is_some() {
        return Err(SqlError::FeatureNotSupported(format!(
            "renaming materialized view \"{}\" is not supported",
            def.name
        )));
    }
    if name_taken(session, new) {
        return Err(CatalogError::TableExists(new.to_owned()).into());
    }
    not_read_by_a_view(session, &def.name, Relation::of(def).word())?;
    let old = def.name.clone();
    let mut renamed = (**def).clone();
    renamed.name = new.to_owned();
    for fk in renamed.foreign_keys.iter_mut().filter(|fk| fk.table == old) {
        fk.table = new.to_owned();
    }
    if !def.holds_rows() {
        define(session, &old, None)?;
        return define(session, new, Some(renamed));
    }
    let mut held = held_index_storage(session);
    for index in &mut renamed.indexes {
        index.stored_as = free_index_storage_in(&held, &index.name);
        held.insert(index.store_table());
    }
    redefine_references(session, &old, |fk| fk.table = new.to_owned())?;
    let sources = (0..renamed.columns.len()).map(Some).collect();
    define(session, new, Some(renamed.clone()))?;
    rewrite_rows(session, def, &renamed, sources, |_, value| Ok(value)).await?;
    define(session, &old, None)?;
    move_sequence_owners(session, |(t, c)| {
        (*t == old).then(|| (new.to_owned(), c.clone()))
    })
    .await
}

/// Gives each sequence whose owner (table, column) `moved` maps to another
/// that owner, at once (sequences are not transactional); the transaction
/// gives the old owner back if it does not commit.
async fn move_sequence_owners(
    session: &mut Session,
    moved: impl Fn(&(String, String)) -> Option<(String, String)>,
) -> Result<()> {
    let sequences = session.engine().catalog.sequences.list();
    for sequence in sequences {
        let Some(owner) = &sequence.def.owned_by else {
            continue;
        };
        let Some(new_owner) = moved(owner) else {
            continue;
        };
        let mut def = sequence.def.clone();
        def.owned_by = Some(new_owner);
        session.engine().catalog.sequences.alter(def).await?;
        let changes = &mut session.transaction()?.sequences;
        changes
            .owners
            .push((sequence.def.name.clone(), owner.clone()));
    }
    Ok(())
}

/// Defines again each other table whose foreign keys reference `table`,
/// with `change` made to those foreign keys.
fn redefine_references(
    session: &mut Session,
    table: &str,
    change: impl Fn(&mut ForeignKey),
) -> Result<()> {
    for other in session.tables() {
        if other.name == table || !other.foreign_keys.iter().any(|fk| fk.table == table) {
            continue;
        }
        let mut other = (*other).clone();
        other
            .foreign_keys
            .iter_mut()
            .filter(|fk| fk.table == table)
            .for_each(&change);
        let name = other.name.clone();
        define(session, &name, Some(other))?;
    }
    Ok(())
}

/// Refuses to rename `what` relation `name` (or a column of it) while a
/// view reads it: the view's query names it.
fn not_read_by_a_view(session: &Session, name: &str, what: &str) -> Result<()> {
    let Some(view) = super::views::readers(session, name).into_iter().next() else {
        return Ok(());
    };
    Err(SqlError::FeatureNotSupported(format!(
        "cannot rename {what} \"{name}\": view \"{}\" reads it",
        view.name
    ))
    .explained(
        None,
        Some("Drop the view, rename, and create the view again.".into()),
    ))
}
