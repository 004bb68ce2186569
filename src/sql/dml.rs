//! INSERT, UPDATE and DELETE.
//!
//! Each statement is rewritten into a SELECT that DataFusion plans and runs
//! over the table (so WHERE clauses with joins and subqueries, casts to the
//! column types and parameter types all come from the one query planner),
//! and whose rows become [`Change`]s: new entities keyed from their key
//! columns, conditional on the ETag each row was read at.
//!
//! - INSERT: `SELECT <each column, cast to its type> FROM (<VALUES or query>) AS src(...)`
//! - UPDATE: `SELECT <new values>, <old key columns>, <ETag> FROM <table> WHERE ...`
//! - DELETE: `SELECT <key columns>, <ETag> FROM <table> WHERE ...`
//! - MERGE: `SELECT <each column's value under the WHEN clause that
//!   applies>, <that clause's number>, <ETag> FROM <source> LEFT JOIN
//!   <table> ON ...`
//!
//! A row whose key columns change is deleted under its old key and inserted
//! under the new one.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::metadata::ScalarAndMetadata;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ParamValues, ScalarValue};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::execution_props::ExecutionProps;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{ColumnarValue, Expr, Volatility};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::{create_physical_expr, PhysicalExpr};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, ConflictTarget, Delete, Expr as AstExpr, FromTable, Insert, Merge,
    MergeAction, MergeClauseKind, MergeInsertKind, OnConflictAction, OnInsert, SelectItem, SetExpr,
    Statement, TableFactor, TableObject, TableWithJoins, Update,
};
use futures::TryStreamExt;

use super::checks::{naming_failing_row, Checks};
use super::convert::batch_to_rows;
use super::error::{Result, SqlError};
use super::fastpath::literal_scalar;
use super::floats::check_real_range;
use super::provider::{dml_table_name, parse_row_identity, ROW_COLUMN};
use super::session::{normalize, table_name, Output, Session};
use super::time_zone::SessionZone;
use super::txn::Change;
use super::types::{arrow_type, cast_input, cast_name};
use super::writing_ctes;
use crate::catalog::{Row, TableDef};
use crate::model::ETag;

/// INSERT, UPDATE, DELETE or MERGE, also after a WITH whose parts only
/// read (a WITH with writing parts runs part by part, see
/// [`super::writing_ctes`]).
pub fn is_dml(statement: &Statement) -> bool {
    match statement {
        Statement::Insert(_)
        | Statement::Update(_)
        | Statement::Delete(_)
        | Statement::Merge(_) => true,
        Statement::Query(query) => {
            writing_ctes::dml_body(query).is_some() && !writing_ctes::has_writing_ctes(query)
        }
        _ => false,
    }
}

/// Select items with unique names (`AS "__0"`, ...), as DataFusion requires.
fn aliased(items: &[String]) -> String {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| format!("{item} AS \"__{i}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `INSERT ... ON CONFLICT`.
pub fn is_upsert(statement: &Statement) -> bool {
    match statement {
        Statement::Insert(i) => i.on.is_some(),
        Statement::Query(query) => writing_ctes::dml_body(query).is_some_and(is_upsert),
        _ => false,
    }
}

/// An identifier quoted, as SQL text.
pub(super) fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// A SELECT that computes a DML statement's rows, and what they mean.
struct Rewrite {
    def: Arc<TableDef>,
    sql: String,
    /// Table columns the first output columns hold, in order.
    columns: Vec<usize>,
    /// For UPDATE and DELETE: the last column holds each row's key and ETag.
    with_row: bool,
    /// Types of parameters that appear alone where a column value goes.
    hints: HashMap<usize, DataType>,
    returning: Option<Vec<SelectItem>>,
    /// The name the statement gives the table (its alias), for RETURNING.
    alias: String,
    on_conflict: Conflict,
    /// The constraints whose conflicts `on_conflict` settles.
    arbiters: Arbiters,
    kind: Kind,
    /// For MERGE: what each WHEN clause does, in order.
    merged: Vec<Kind>,
    /// For an INSERT whose rows need no query plan (the prepared
    /// single-row insert): its rows are built without planning the SELECT.
    direct: Option<DirectRows>,
}

/// The rows of an INSERT that needs no query plan.
struct DirectRows {
    /// Each row's value sources, by output column.
    rows: Vec<Vec<Direct>>,
    /// The schema of the batch they are made into (the output columns in
    /// their Arrow types), made once.
    schema: SchemaRef,
}

/// A value of an INSERT row that needs no query plan.
#[derive(Clone)]
enum Direct {
    /// `$n`, 1-based.
    Param(usize),
    /// A literal: an integer, a string or a boolean.
    Value(ScalarValue),
    Null,
    /// A value that reads no table but depends on the execution: on its
    /// parameters or its start time (`$1 + 1`, `now()`), already cast to its
    /// column's type: simplified and evaluated alone at each execution.
    Expr(Expr),
    /// A volatile value that depends on nothing else (`nextval('s')`, a
    /// `serial` column's default, `random()`): compiled when the statement
    /// is prepared, evaluated at each execution.
    Volatile(Arc<dyn PhysicalExpr>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Insert,
    Update,
    Delete,
    /// Each row is changed as its WHEN clause says, in
    /// [`Rewrite::merged`]; a row no clause takes is left as it is.
    Merge,
}

/// What INSERT does with a row whose key exists.
#[derive(Clone, PartialEq)]
enum Conflict {
    Error,
    DoNothing,
    /// `DO UPDATE SET ... [WHERE ...]`: the assignments, by column, and the condition.
    DoUpdate {
        assignments: Vec<(usize, String)>,
        selection: Option<String>,
    },
}

/// The constraints an INSERT's ON CONFLICT settles conflicts with (PostgreSQL's
/// arbiters): the primary key, and unique indexes by name. A conflict with
/// another is an error.
#[derive(Default)]
struct Arbiters {
    key: bool,
    indexes: Vec<String>,
}

impl Arbiters {
    /// The primary key alone.
    fn key() -> Arbiters {
        Arbiters {
            key: true,
            indexes: Vec::new(),
        }
    }

    /// The arbiters ON CONFLICT names: the key's columns, a unique index's,
    /// a constraint by name, or (without a target) every one.
    fn of(def: &TableDef, target: Option<&ConflictTarget>) -> Result<Arbiters> {
        let unique = || (def.indexes.iter()).filter(|i| i.unique && !i.building);
        let (p, r) = def.key_columns();
        let key: HashSet<usize> = p.iter().chain(r).copied().collect();
        let index_named = |name: &str| Arbiters {
            key: false,
            indexes: vec![name.to_owned()],
        };
        let found = match target {
            None => Some(Arbiters {
                key: true,
                indexes: unique().map(|i| i.name.clone()).collect(),
            }),
            Some(ConflictTarget::Columns(columns)) => {
                let named: Option<Vec<usize>> = (columns.iter())
                    .map(|c| def.column_index(&normalize(c)))
                    .collect();
                let named: HashSet<usize> = named.unwrap_or_default().into_iter().collect();
                let same = |i: &&crate::catalog::IndexDef| {
                    let of_index: HashSet<usize> = i
                        .columns
                        .iter()
                        .filter_map(|c| def.column_index(c))
                        .collect();
                    of_index == named && i.columns.len() == columns.len()
                };
                if named == key && columns.len() == key.len() {
                    Some(Arbiters::key())
                } else {
                    unique().find(same).map(|i| index_named(&i.name))
                }
            }
            Some(ConflictTarget::OnConstraint(name)) => {
                let name = super::session::table_name(name)?;
                if name == format!("{}_pkey", def.name) {
                    Some(Arbiters::key())
                } else {
                    unique()
                        .find(|i| i.name == name)
                        .map(|i| index_named(&i.name))
                }
            }
        };
        found.ok_or_else(|| {
            SqlError::value(
                "42P10",
                "there is no unique or exclusion constraint matching the ON CONFLICT specification",
            )
        })
    }
}

/// Whether a row's values are held in an arbiter unique index.
enum Held {
    No,
    /// By an earlier row of the statement.
    Earlier,
    /// By this row of the table.
    By(crate::model::Entity),
}

/// Whether the values `entity` would be indexed under in one of the
/// arbiter indexes are held: by a row of the table (read through the
/// index's entry), or by an earlier row of the statement (`seen`).
async fn held_by_index(
    session: &Session,
    view: &dyn crate::store::EntityRead,
    def: &TableDef,
    arbiters: &Arbiters,
    entity: &crate::model::Entity,
    seen: &mut HashSet<(String, crate::model::EntityKey)>,
) -> Result<Held> {
    for index in def
        .indexes
        .iter()
        .filter(|i| arbiters.indexes.contains(&i.name))
    {
        // A row with a NULL in the index's columns is not indexed.
        let Some(entry) = index.entry(def, entity)? else {
            continue;
        };
        if !seen.insert((index.name.clone(), entry.key.clone())) {
            return Ok(Held::Earlier);
        }
        if let Some(existing) = unique_holder(session, view, def, index, &entry.key).await? {
            return Ok(Held::By(existing));
        }
    }
    Ok(Held::No)
}

/// The row of `def` holding `entry` in the unique index `index`, as the
/// statement sees the table: through the store's index, or the entries of
/// the rows the open transaction block wrote, which the store's index
/// holds only from its commit. Either names a row, taken only if it still
/// makes that entry (the block may have written it again since).
async fn unique_holder(
    session: &Session,
    view: &dyn crate::store::EntityRead,
    def: &TableDef,
    index: &crate::catalog::IndexDef,
    entry: &crate::model::EntityKey,
) -> Result<Option<crate::model::Entity>> {
    let store_table = index.store_table();
    // An index the block made has no store table before its commit.
    let stored = match view.get(&store_table, entry, None).await {
        Err(crate::store::StoreError::TableNotFound(_)) => None,
        found => found?,
    };
    let stored = stored.as_ref().and_then(crate::catalog::base_key);
    let written = session.written_unique_entry(&store_table, entry);
    for base in stored.into_iter().chain(written) {
        if let Some(row) = view.get(&def.name, &base, None).await? {
            if index.entry(def, &row)?.is_some_and(|e| &e.key == entry) {
                return Ok(Some(row));
            }
        }
    }
    Ok(None)
}

/// In a transaction block, PostgreSQL reports a row written with values a
/// unique index holds for another row at the statement, not at COMMIT:
/// the unique indexes that are not the statement's arbiters are looked up
/// for it. `own` is the key the row had before (an UPDATE's), whose entry
/// is its own.
async fn check_unique_in_block(
    session: &Session,
    view: &dyn crate::store::EntityRead,
    def: &TableDef,
    arbiters: &Arbiters,
    entity: &crate::model::Entity,
    own: Option<&crate::model::EntityKey>,
) -> Result<()> {
    for index in def
        .indexes
        .iter()
        .filter(|i| i.unique && !arbiters.indexes.contains(&i.name))
    {
        let Some(entry) = index.entry(def, entity)? else {
            continue;
        };
        let holder = unique_holder(session, view, def, index, &entry.key).await?;
        if holder.is_some_and(|row| Some(&row.key) != own) {
            return Err(
                crate::catalog::unique_violation(def, index, &entry.key.partition_key).into(),
            );
        }
    }
    Ok(())
}

/// `$n` if the expression is exactly a parameter.
fn placeholder_index(expr: &AstExpr) -> Option<usize> {
    match expr {
        AstExpr::Value(v) => match &v.value {
            datafusion::sql::sqlparser::ast::Value::Placeholder(p) => {
                p.strip_prefix('$')?.parse().ok()
            }
            _ => None,
        },
        AstExpr::Nested(e) => placeholder_index(e),
        _ => None,
    }
}

fn has_subquery(expr: &AstExpr) -> bool {
    datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
        if super::rewrite::is_subquery(e) {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .is_break()
}

fn is_default(expr: &AstExpr) -> bool {
    matches!(expr, AstExpr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// `CAST((expr) AS type)` for a column.
fn cast_to(def: &TableDef, column: usize, expr: &str) -> String {
    format!("CAST(({expr}) AS {})", cast_name(def.columns[column].ty))
}

/// A value expression for a column. A string literal for a bytea column is
/// read in PostgreSQL's bytea input format (`'\\xdeadbeef'`, or escapes),
/// not as the bytes of its text.
fn value_sql(def: &TableDef, column: usize, expr: &AstExpr) -> String {
    if def.columns[column].ty == crate::catalog::SqlType::Bytea {
        if let AstExpr::Value(v) = expr {
            if let datafusion::sql::sqlparser::ast::Value::SingleQuotedString(text) = &v.value {
                let bytes = bytea_input(text);
                return format!(
                    "X'{}'",
                    bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
                );
            }
        }
    }
    cast_to(def, column, &expr.to_string())
}

/// PostgreSQL's bytea input: `\x` followed by hex digits, or text where `\\`
/// is a backslash and `\nnn` an octal byte.
pub(super) fn bytea_input(text: &str) -> Vec<u8> {
    if let Some(hex) = text.strip_prefix("\\x") {
        let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if let Some(bytes) = digits
            .chunks(2)
            .map(|pair| {
                std::str::from_utf8(pair)
                    .ok()
                    .and_then(|p| u8::from_str_radix(p, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
        {
            return bytes;
        }
    }
    let raw = text.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match (raw[i], raw.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b'\\', Some(_))
                if raw
                    .get(i + 1..i + 4)
                    .is_some_and(|d| d.iter().all(|d| (b'0'..=b'7').contains(d))) =>
            {
                let octal = std::str::from_utf8(&raw[i + 1..i + 4])
                    .ok()
                    .and_then(|o| u8::from_str_radix(o, 8).ok());
                out.push(octal.unwrap_or(b'\\'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn default_of(session: &Session, def: &TableDef, column: usize) -> String {
    let c = &def.columns[column];
    match &c.default {
        Some(default) => {
            let types = &session.engine().catalog.types;
            cast_to(
                def,
                column,
                &super::rewrite::rewrite_expression(default, types),
            )
        }
        None => cast_to(def, column, "NULL"),
    }
}

fn writable_column(def: &TableDef, name: &str) -> Result<usize> {
    let i = def
        .column_index(name)
        .ok_or_else(|| SqlError::undefined_column_of(name, &def.name))?;
    if let Some(field) = def.columns[i].system {
        return Err(crate::catalog::RowError::ReadOnly {
            column: name.to_owned(),
            field,
        }
        .into());
    }
    Ok(i)
}

/// Refuses a value other than DEFAULT given to a `GENERATED ALWAYS AS
/// IDENTITY` column (428C9, as PostgreSQL does; VALUES may say DEFAULT).
fn given_identities(
    def: &TableDef,
    targets: &[usize],
    source: Option<&datafusion::sql::sqlparser::ast::Query>,
) -> Result<()> {
    for (j, &i) in targets.iter().enumerate() {
        if def.columns[i].identity != Some(crate::catalog::Identity::Always) {
            continue;
        }
        let all_default = match source.map(|q| q.body.as_ref()) {
            None => true,
            Some(SetExpr::Values(values)) => values
                .rows
                .iter()
                .all(|row| row.get(j).is_none_or(is_default)),
            Some(_) => false,
        };
        if !all_default {
            return Err(SqlError::value(
                "428C9",
                format!(
                    "cannot insert a non-DEFAULT value into column \"{}\"",
                    def.columns[i].name
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses the writes of INSERT, UPDATE, DELETE and COPY to a
/// materialized view (only its base tables' writes and REFRESH change it)
/// and to a view (which holds no rows).
/// `writing` says what the statement does, as PostgreSQL's message says
/// it (`insert into`, `copy to`).
pub(super) fn writable(def: &TableDef, writing: &str) -> Result<()> {
    if def.view.is_some() {
        return Err(SqlError::WrongObjectType(format!(
            "cannot change materialized view {:?}",
            def.name
        )));
    }
    if def.plain_view.is_some() {
        return Err(SqlError::FeatureNotSupported(format!(
            "cannot {writing} view \"{}\"",
            def.name
        ))
        .explained(
            Some("Views are not updatable in tablegate.".into()),
            Some("Write to the tables the view reads.".into()),
        ));
    }
    Ok(())
}

/// The table a write names, which it may write.
fn written_table(session: &Session, name: &str, writing: &str) -> Result<Arc<TableDef>> {
    let def = session.table(name)?;
    writable(&def, writing)?;
    Ok(def)
}

fn rewrite_insert(session: &Session, insert: &Insert) -> Result<Rewrite> {
    let TableObject::TableName(name) = &insert.table else {
        return Err(SqlError::FeatureNotSupported(
            "INSERT into a table function is not supported".into(),
        ));
    };
    let table = table_name(name)?;
    let def = written_table(session, &table, "insert into")?;
    let targets: Vec<usize> = if insert.columns.is_empty() {
        // Without a column list, VALUES or a SELECT may fill only the
        // first columns (the rest take their defaults), as in PostgreSQL.
        let width = insert.source.as_ref().and_then(|q| source_width(&q.body));
        (0..def.columns.len())
            .filter(|&i| def.columns[i].system.is_none())
            .take(width.unwrap_or(usize::MAX))
            .collect()
    } else {
        insert
            .columns
            .iter()
            .map(|c| {
                let ident =
                    c.0.last()
                        .and_then(|p| p.as_ident())
                        .ok_or_else(|| SqlError::Syntax(format!("invalid column {c}")))?;
                writable_column(&def, &normalize(ident))
            })
            .collect::<Result<_>>()?
    };
    given_identities(&def, &targets, insert.source.as_deref())?;
    let mut hints = HashMap::new();
    let direct = direct_rows(session, &def, &targets, insert);
    let source = match &insert.source {
        None => "VALUES (NULL)".to_owned(),
        Some(query) => match query.body.as_ref() {
            SetExpr::Values(values) if query.order_by.is_none() && query.limit_clause.is_none() => {
                // DataFusion does not run a subquery inside VALUES (an
                // internal error); rows of SELECTs do.
                let subquery = values.rows.iter().any(|row| row.iter().any(has_subquery));
                let rows: Vec<Vec<String>> = values
                    .rows
                    .iter()
                    .map(|row| {
                        if row.len() != targets.len() {
                            return Err(SqlError::Syntax(format!(
                                "INSERT has {} target columns but {} expressions",
                                targets.len(),
                                row.len()
                            )));
                        }
                        Ok(row
                            .iter()
                            .zip(&targets)
                            .map(|(expr, &column)| {
                                if let Some(n) = placeholder_index(expr) {
                                    hints.insert(n, arrow_type(def.columns[column].ty));
                                }
                                if is_default(expr) {
                                    default_of(session, &def, column)
                                } else {
                                    value_sql(&def, column, expr)
                                }
                            })
                            .collect())
                    })
                    .collect::<Result<_>>()?;
                if subquery {
                    let selects: Vec<String> = rows
                        .iter()
                        .map(|items| {
                            let named: Vec<String> = items
                                .iter()
                                .enumerate()
                                .map(|(j, item)| format!("{item} AS {}", quote(&format!("c{j}"))))
                                .collect();
                            format!("SELECT {}", named.join(", "))
                        })
                        .collect();
                    selects.join(" UNION ALL ")
                } else {
                    let rows: Vec<String> = rows
                        .iter()
                        .map(|items| format!("({})", items.join(", ")))
                        .collect();
                    format!("VALUES {}", rows.join(", "))
                }
            }
            _ => query.to_string(),
        },
    };
    let source_columns: Vec<String> = if insert.source.is_none() {
        vec![quote("c0")]
    } else {
        (0..targets.len())
            .map(|j| quote(&format!("c{j}")))
            .collect()
    };
    let columns: Vec<usize> = (0..def.columns.len())
        .filter(|&i| def.columns[i].system.is_none())
        .collect();
    let select: Vec<String> = columns
        .iter()
        .map(|&i| match targets.iter().position(|&t| t == i) {
            Some(j) if insert.source.is_some() => {
                cast_to(&def, i, &format!("__src.{}", quote(&format!("c{j}"))))
            }
            _ => default_of(session, &def, i),
        })
        .collect();
    let sql = format!(
        "SELECT {} FROM ({source}) AS __src({})",
        aliased(&select),
        source_columns.join(", ")
    );
    let direct = direct.map(|rows| DirectRows {
        rows,
        schema: columns_schema(&def, &columns),
    });
    let mut arbiters = Arbiters::default();
    let on_conflict = match &insert.on {
        None => Conflict::Error,
        Some(OnInsert::OnConflict(c)) => {
            arbiters = Arbiters::of(&def, c.conflict_target.as_ref())?;
            match &c.action {
                OnConflictAction::DoNothing => Conflict::DoNothing,
                OnConflictAction::DoUpdate(_) if c.conflict_target.is_none() => {
                    return Err(SqlError::value(
                        "42601",
                        "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                    )
                    .explained(None, Some("For example, ON CONFLICT (column_name).".into())));
                }
                OnConflictAction::DoUpdate(update) => {
                    let mut assignments = Vec::new();
                    for a in &update.assignments {
                        let AssignmentTarget::ColumnName(name) = &a.target else {
                            return Err(SqlError::FeatureNotSupported(
                                "tuple assignments are not supported".into(),
                            ));
                        };
                        let ident =
                            name.0.last().and_then(|p| p.as_ident()).ok_or_else(|| {
                                SqlError::Syntax(format!("invalid column {name}"))
                            })?;
                        let column = writable_column(&def, &normalize(ident))?;
                        if let Some(n) = placeholder_index(&a.value) {
                            hints.insert(n, arrow_type(def.columns[column].ty));
                        }
                        assignments.push((column, value_sql(&def, column, &a.value)));
                    }
                    Conflict::DoUpdate {
                        assignments,
                        selection: update.selection.as_ref().map(|s| s.to_string()),
                    }
                }
            }
        }
        Some(other) => {
            return Err(SqlError::FeatureNotSupported(format!(
                "INSERT ... {other} is not supported"
            )))
        }
    };
    Ok(Rewrite {
        alias: def.name.clone(),
        def,
        sql,
        columns,
        with_row: false,
        hints,
        returning: insert.returning.clone(),
        on_conflict,
        arbiters,
        kind: Kind::Insert,
        merged: Vec::new(),
        direct,
    })
}

/// How many columns an INSERT's source gives, when its text tells (not
/// through a wildcard).
fn source_width(body: &SetExpr) -> Option<usize> {
    match body {
        SetExpr::Values(values) => values.rows.first().map(|row| row.len()),
        SetExpr::Select(select) => {
            let wildcard = select.projection.iter().any(|item| {
                matches!(
                    item,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                )
            });
            (!wildcard).then_some(select.projection.len())
        }
        SetExpr::Query(query) => source_width(&query.body),
        SetExpr::SetOperation { left, .. } => source_width(left),
        _ => None,
    }
}

/// The rows of an INSERT as [`Direct`] values by output column, when no
/// value reads a table.
fn direct_rows(
    session: &Session,
    def: &TableDef,
    targets: &[usize],
    insert: &Insert,
) -> Option<Vec<Vec<Direct>>> {
    let query = insert.source.as_ref()?;
    let SetExpr::Values(values) = query.body.as_ref() else {
        return None;
    };
    if query.with.is_some() || query.order_by.is_some() || query.limit_clause.is_some() {
        return None;
    }
    let columns = (0..def.columns.len()).filter(|&i| def.columns[i].system.is_none());
    let mut position = vec![None; def.columns.len()];
    for (j, &t) in targets.iter().enumerate() {
        position[t] = Some(j);
    }
    values
        .rows
        .iter()
        .map(|row| {
            if row.len() != targets.len() {
                return None;
            }
            columns
                .clone()
                .map(|i| {
                    let expr = position[i].map(|j| &row[j]);
                    match expr {
                        Some(e) if !is_default(e) => match e {
                            AstExpr::Value(v)
                                if matches!(
                                    v.value,
                                    datafusion::sql::sqlparser::ast::Value::Null
                                ) =>
                            {
                                Some(Direct::Null)
                            }
                            e => placeholder_index(e)
                                .map(Direct::Param)
                                .or_else(|| {
                                    // A string for a bytea column is read in
                                    // bytea's input format (by `value_sql`).
                                    let bytea = def.columns[i].ty == crate::catalog::SqlType::Bytea;
                                    literal_scalar(e).filter(|_| !bytea).map(Direct::Value)
                                })
                                .or_else(|| standalone(session, &value_sql(def, i, e))),
                        },
                        _ if def.columns[i].default.is_none() => Some(Direct::Null),
                        _ => standalone(session, &default_of(session, def, i)),
                    }
                })
                .collect()
        })
        .collect()
}

/// `sql` as a [`Direct::Expr`], if it is an expression that reads no table.
fn standalone(session: &Session, sql: &str) -> Option<Direct> {
    let expr = session
        .context()
        .parse_sql_expr(sql, &DFSchema::empty())
        .ok()?;
    let reads = expr
        .exists(|e| {
            Ok(matches!(
                e,
                Expr::Column(_)
                    | Expr::OuterReferenceColumn(..)
                    | Expr::ScalarSubquery(_)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::SetComparison(_)
                    | Expr::AggregateFunction(_)
                    | Expr::WindowFunction(_)
            ))
        })
        .unwrap_or(true);
    if reads {
        return None;
    }
    let per_execution = expr
        .exists(|e| {
            Ok(match e {
                Expr::Placeholder(_) | Expr::ScalarVariable(..) => true,
                Expr::ScalarFunction(f) => f.func.signature().volatility == Volatility::Stable,
                _ => false,
            })
        })
        .unwrap_or(true);
    if per_execution {
        return Some(Direct::Expr(expr));
    }
    // Folded or compiled once; a value that fails here (`'x'::int`) fails
    // when it is evaluated, at each execution, as in PostgreSQL.
    let folded = fold(&simplifier(None), expr.clone(), &session.settings().zone());
    Some(match folded {
        Ok(Folded::Constant(value)) => Direct::Value(value),
        Ok(Folded::Compiled(physical)) => Direct::Volatile(physical),
        Err(_) => Direct::Expr(expr),
    })
}

/// A simplifier of expressions that read no column, with the start time
/// that `now()` folds to.
fn simplifier(started: Option<chrono::DateTime<chrono::Utc>>) -> ExprSimplifier {
    ExprSimplifier::new(
        SimplifyContext::builder()
            .with_schema(Arc::new(DFSchema::empty()))
            .with_query_execution_start_time(started)
            .build(),
    )
}

/// An expression that reads no column, simplified.
enum Folded {
    Constant(ScalarValue),
    /// What folding leaves: volatile functions, such as `random()`.
    Compiled(Arc<dyn PhysicalExpr>),
}

fn fold(
    simplifier: &ExprSimplifier,
    expr: Expr,
    zone: &SessionZone,
) -> datafusion::error::Result<Folded> {
    let schema = DFSchema::empty();
    let coerced = simplifier.coerce(expr, &schema)?;
    let expr = super::casts::postgres_casts(coerced, &schema, zone)?.data;
    let expr = simplifier.simplify(expr)?;
    if let Expr::Literal(value, _) = expr {
        return Ok(Folded::Constant(value));
    }
    Ok(Folded::Compiled(create_physical_expr(
        &expr,
        &schema,
        &ExecutionProps::new(),
        &Default::default(),
    )?))
}

/// The value of an expression that reads no column.
fn evaluate_alone(physical: &dyn PhysicalExpr) -> datafusion::error::Result<ScalarValue> {
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        Vec::new(),
        &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    Ok(match physical.evaluate(&one_row)? {
        ColumnarValue::Scalar(value) => value,
        ColumnarValue::Array(array) => ScalarValue::try_from_array(&array, 0)?,
    })
}

/// Parameter `$n` (1-based) of an execution.
fn param(values: &[ScalarAndMetadata], n: usize) -> Result<ScalarValue> {
    n.checked_sub(1)
        .and_then(|i| values.get(i))
        .map(|v| v.value.clone())
        .ok_or_else(|| SqlError::value("08P01", format!("no value supplied for parameter ${n}")))
}

/// Evaluates the [`Direct::Expr`] values of one execution: with its
/// parameters, and `now()` at the time the first one is evaluated.
struct Evaluator<'a> {
    values: &'a [ScalarAndMetadata],
    /// The session's.
    zone: &'a SessionZone,
    /// Made for the first expression only: a statement of parameters and
    /// literals needs none.
    simplifier: std::cell::OnceCell<ExprSimplifier>,
}

impl<'a> Evaluator<'a> {
    fn new(values: &'a [ScalarAndMetadata], zone: &'a SessionZone) -> Self {
        Evaluator {
            values,
            zone,
            simplifier: std::cell::OnceCell::new(),
        }
    }

    fn evaluate(&self, expr: &Expr) -> Result<ScalarValue> {
        let expr = expr
            .clone()
            .transform_up(|e| match e {
                Expr::Placeholder(p) => {
                    let n = p.id.strip_prefix('$').and_then(|n| n.parse().ok());
                    let value = param(self.values, n.unwrap_or(0))
                        .map_err(datafusion::error::DataFusionError::from)?;
                    Ok(Transformed::yes(Expr::Literal(value, None)))
                }
                e => Ok(Transformed::no(e)),
            })?
            .data;
        let simplifier = self
            .simplifier
            .get_or_init(|| simplifier(Some(chrono::Utc::now())));
        Ok(match fold(simplifier, expr, self.zone)? {
            Folded::Constant(value) => value,
            Folded::Compiled(physical) => evaluate_alone(physical.as_ref())?,
        })
    }
}

/// The rows of a [`Direct`] INSERT as a batch of the output columns, each
/// parameter cast to its column's type as the planned SELECT would.
fn direct_batch(
    direct: &DirectRows,
    params: Option<&ParamValues>,
    zone: &SessionZone,
) -> Result<RecordBatch> {
    use datafusion::arrow::compute::concat;
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    let values = match params {
        Some(ParamValues::List(values)) => values.as_slice(),
        _ => &[],
    };
    let evaluator = Evaluator::new(values, zone);
    let rows = &direct.rows;
    let fields = direct.schema.fields();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(fields.len());
    for (j, field) in fields.iter().enumerate() {
        let cells = rows
            .iter()
            .map(|row| {
                let scalar = match &row[j] {
                    Direct::Null => ScalarValue::Null,
                    Direct::Value(value) => value.clone(),
                    Direct::Expr(expr) => evaluator.evaluate(expr)?,
                    Direct::Volatile(physical) => evaluate_alone(physical.as_ref())?,
                    &Direct::Param(n) => param(values, n)?,
                };
                cast_to_column(&scalar.to_array()?, field.data_type(), &options, zone)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        arrays.push(match cells.as_slice() {
            [one] => one.clone(),
            many => concat(&many.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?,
        });
    }
    column_batch(direct.schema.clone(), arrays, rows.len())
}

/// `array` cast to a column's Arrow type (itself when it has that type),
/// refusing a value a `real` cannot hold; an instant's text without a zone
/// is read in `zone`.
fn cast_to_column(
    array: &ArrayRef,
    target: &DataType,
    options: &CastOptions,
    zone: &SessionZone,
) -> Result<ArrayRef> {
    if array.data_type() == target {
        return Ok(array.clone());
    }
    let cast = cast_input(array, target, options, zone)?;
    if target == &DataType::Float32 {
        check_real_range(array, &cast)?;
    }
    Ok(cast)
}

/// The schema of a batch holding the given table columns, in their Arrow
/// types, named `c0`, `c1`, ...
fn columns_schema(def: &TableDef, columns: &[usize]) -> SchemaRef {
    let fields: Vec<_> = columns
        .iter()
        .enumerate()
        .map(|(j, &i)| {
            datafusion::arrow::datatypes::Field::new(
                format!("c{j}"),
                arrow_type(def.columns[i].ty),
                true,
            )
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// A batch of `arrays` under `schema` (of [`columns_schema`]).
fn column_batch(schema: SchemaRef, arrays: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
    let options = datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(schema, arrays, &options)?)
}

/// The table, its alias and the other FROM items of an UPDATE or DELETE.
fn target(relation: &TableWithJoins) -> Result<(String, String, String)> {
    let (table, alias) = target_table(&relation.relation)?;
    let joins: Vec<String> = relation.joins.iter().map(|j| j.to_string()).collect();
    Ok((table, alias, joins.join(" ")))
}

/// The table an UPDATE, DELETE or MERGE writes, and its alias.
fn target_table(factor: &TableFactor) -> Result<(String, String)> {
    let TableFactor::Table { name, alias, .. } = factor else {
        return Err(SqlError::FeatureNotSupported(
            "UPDATE, DELETE and MERGE need a table name".into(),
        ));
    };
    let table = table_name(name)?;
    let alias = alias
        .as_ref()
        .map(|a| normalize(&a.name))
        .unwrap_or_else(|| table.clone());
    Ok((table, alias))
}

/// The SELECT that reads the rows an UPDATE or DELETE touches, with their ETags.
fn scan_sql(
    select: &[String],
    table: &str,
    alias: &str,
    joins: &str,
    from: &[TableWithJoins],
    selection: Option<&AstExpr>,
) -> String {
    let from: String = from.iter().map(|t| format!(", {t}")).collect();
    let selection = selection.map(|s| format!(" WHERE {s}")).unwrap_or_default();
    format!(
        "SELECT {} FROM {} AS {} {joins}{from}{selection}",
        aliased(select),
        quote(&dml_table_name(table)),
        quote(alias)
    )
}

/// `column = value` of an UPDATE or a MERGE: the column, and the value's
/// SQL cast to the column's type (its default for `DEFAULT`); a parameter
/// that is the whole value takes the column's type.
fn assignment(
    session: &Session,
    def: &TableDef,
    a: &datafusion::sql::sqlparser::ast::Assignment,
    hints: &mut HashMap<usize, DataType>,
) -> Result<(usize, String)> {
    let AssignmentTarget::ColumnName(name) = &a.target else {
        return Err(SqlError::FeatureNotSupported(
            "tuple assignments are not supported".into(),
        ));
    };
    let ident = name
        .0
        .last()
        .and_then(|p| p.as_ident())
        .ok_or_else(|| SqlError::Syntax(format!("invalid column {name}")))?;
    let column = writable_column(def, &normalize(ident))?;
    if let Some(n) = placeholder_index(&a.value) {
        hints.insert(n, arrow_type(def.columns[column].ty));
    }
    let value = match is_default(&a.value) {
        true => default_of(session, def, column),
        false if def.columns[column].identity == Some(crate::catalog::Identity::Always) => {
            return Err(SqlError::value(
                "428C9",
                format!(
                    "column \"{}\" can only be updated to DEFAULT",
                    def.columns[column].name
                ),
            ));
        }
        false => value_sql(def, column, &a.value),
    };
    Ok((column, value))
}

fn rewrite_update(session: &Session, update: &Update) -> Result<Rewrite> {
    let (table, alias, joins) = target(&update.table)?;
    let def = written_table(session, &table, "update")?;
    let mut assigned: HashMap<usize, String> = HashMap::new();
    let mut hints = HashMap::new();
    for a in &update.assignments {
        let (column, value) = assignment(session, &def, a, &mut hints)?;
        assigned.insert(column, value);
    }
    let columns: Vec<usize> = (0..def.columns.len())
        .filter(|&i| def.columns[i].system.is_none())
        .collect();
    let mut select: Vec<String> = columns
        .iter()
        .map(|i| {
            assigned
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("{}.{}", quote(&alias), quote(&def.columns[*i].name)))
        })
        .collect();
    select.push(format!("{}.{}", quote(&alias), quote(ROW_COLUMN)));
    let from: &[TableWithJoins] = match &update.from {
        Some(
            datafusion::sql::sqlparser::ast::UpdateTableFromKind::BeforeSet(f)
            | datafusion::sql::sqlparser::ast::UpdateTableFromKind::AfterSet(f),
        ) => f,
        None => &[],
    };
    let sql = scan_sql(
        &select,
        &table,
        &alias,
        &joins,
        from,
        update.selection.as_ref(),
    );
    Ok(Rewrite {
        def,
        sql,
        columns,
        with_row: true,
        hints,
        returning: update.returning.clone(),
        alias,
        on_conflict: Conflict::Error,
        arbiters: Arbiters::default(),
        kind: Kind::Update,
        merged: Vec::new(),
        direct: None,
    })
}

fn rewrite_delete(session: &Session, delete: &Delete) -> Result<Rewrite> {
    let tables = match &delete.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    let [relation] = tables.as_slice() else {
        return Err(SqlError::FeatureNotSupported(
            "DELETE from several tables is not supported".into(),
        ));
    };
    let (table, alias, joins) = target(relation)?;
    let def = written_table(session, &table, "delete from")?;
    // With RETURNING every column is read; otherwise only the keys.
    let columns: Vec<usize> = if delete.returning.is_some() {
        (0..def.columns.len())
            .filter(|&i| def.columns[i].system.is_none())
            .collect()
    } else {
        let (p, r) = def.key_columns();
        p.iter().chain(r).copied().collect()
    };
    let mut select: Vec<String> = columns
        .iter()
        .map(|&i| format!("{}.{}", quote(&alias), quote(&def.columns[i].name)))
        .collect();
    select.push(format!("{}.{}", quote(&alias), quote(ROW_COLUMN)));
    let using = delete.using.as_deref().unwrap_or_default();
    let sql = scan_sql(
        &select,
        &table,
        &alias,
        &joins,
        using,
        delete.selection.as_ref(),
    );
    Ok(Rewrite {
        def,
        sql,
        columns,
        with_row: true,
        hints: HashMap::new(),
        returning: delete.returning.clone(),
        alias,
        on_conflict: Conflict::Error,
        arbiters: Arbiters::default(),
        kind: Kind::Delete,
        merged: Vec::new(),
        direct: None,
    })
}

/// `MERGE INTO t USING s ON ... WHEN [NOT] MATCHED [AND ...] THEN ...`:
/// the source joined with the table's rows (`LEFT JOIN`, so a source row
/// without one is there, NOT MATCHED), each row numbered with the first
/// clause whose kind and condition hold (0 for none), and its columns'
/// values as that clause makes them: an UPDATE's assignments over the
/// table's row, an INSERT's values (or the columns' defaults), the row as
/// it is for a DELETE.
fn rewrite_merge(session: &Session, merge: &Merge) -> Result<Rewrite> {
    let (table, alias) = target_table(&merge.table)?;
    let def = written_table(session, &table, "merge into")?;
    let columns: Vec<usize> = (0..def.columns.len())
        .filter(|&i| def.columns[i].system.is_none())
        .collect();
    let own = |column: usize| format!("{}.{}", quote(&alias), quote(&def.columns[column].name));
    // Where a writable column is among `columns`.
    let slot = |column: usize| {
        columns
            .iter()
            .position(|&c| c == column)
            .ok_or_else(|| SqlError::Internal(format!("column {column} is not written")))
    };
    let matched = format!("{}.{} IS NOT NULL", quote(&alias), quote(ROW_COLUMN));
    let mut clause_tests = Vec::new();
    // Each clause's value of each column.
    let mut values: Vec<Vec<String>> = Vec::new();
    let mut merged = Vec::new();
    let mut hints = HashMap::new();
    for (n, clause) in merge.clauses.iter().enumerate() {
        let kind_test = match clause.clause_kind {
            MergeClauseKind::Matched => matched.clone(),
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => {
                format!("NOT ({matched})")
            }
            MergeClauseKind::NotMatchedBySource => {
                return Err(SqlError::FeatureNotSupported(
                    "WHEN NOT MATCHED BY SOURCE is not supported".into(),
                ))
            }
        };
        let test = match &clause.predicate {
            Some(p) => format!("{kind_test} AND ({p})"),
            None => kind_test,
        };
        let mut row: Vec<String> = columns.iter().map(|&c| own(c)).collect();
        // A row the clause takes is left as it is: its number is 0.
        let number = match does_nothing(&clause.action) {
            true => 0,
            false => n + 1,
        };
        clause_tests.push(format!("WHEN {test} THEN {number}"));
        let kind = match &clause.action {
            action if does_nothing(action) => Kind::Update,
            MergeAction::Update(update) => {
                for a in &update.assignments {
                    let (column, value) = assignment(session, &def, a, &mut hints)?;
                    row[slot(column)?] = value;
                }
                Kind::Update
            }
            MergeAction::Delete { .. } => Kind::Delete,
            MergeAction::Insert(insert) => {
                let MergeInsertKind::Values(given) = &insert.kind else {
                    return Err(SqlError::FeatureNotSupported(
                        "MERGE's INSERT needs VALUES".into(),
                    ));
                };
                let [given] = given.rows.as_slice() else {
                    return Err(SqlError::Syntax(
                        "MERGE's INSERT takes one row of VALUES".into(),
                    ));
                };
                let targets: Vec<usize> = match insert.columns.is_empty() {
                    true => columns.clone(),
                    false => insert
                        .columns
                        .iter()
                        .map(|name| match name.0.last().and_then(|p| p.as_ident()) {
                            Some(ident) => writable_column(&def, &normalize(ident)),
                            None => Err(SqlError::Syntax(format!("invalid column {name}"))),
                        })
                        .collect::<Result<_>>()?,
                };
                if given.len() != targets.len() {
                    return Err(SqlError::Syntax(format!(
                        "INSERT has {} target columns and {} values",
                        targets.len(),
                        given.len()
                    )));
                }
                row = columns
                    .iter()
                    .map(|&c| default_of(session, &def, c))
                    .collect();
                for (&column, value) in targets.iter().zip(given.iter()) {
                    if let Some(p) = placeholder_index(value) {
                        hints.insert(p, arrow_type(def.columns[column].ty));
                    }
                    if !is_default(value) {
                        row[slot(column)?] = value_sql(&def, column, value);
                    }
                }
                Kind::Insert
            }
        };
        merged.push(kind);
        values.push(row);
    }
    let clause = format!("CASE {} ELSE 0 END", clause_tests.join(" "));
    let mut select: Vec<String> = (0..columns.len())
        .map(|at| {
            let arms: Vec<String> = values
                .iter()
                .enumerate()
                .map(|(n, row)| format!("WHEN {} THEN {}", n + 1, row[at]))
                .collect();
            format!("CASE {clause} {} END", arms.join(" "))
        })
        .collect();
    select.push(clause);
    select.push(format!("{}.{}", quote(&alias), quote(ROW_COLUMN)));
    let sql = format!(
        "SELECT {} FROM {} LEFT JOIN {} AS {} ON {}",
        aliased(&select),
        merge.source,
        quote(&dml_table_name(&table)),
        quote(&alias),
        merge.on
    );
    Ok(Rewrite {
        def,
        sql,
        columns,
        with_row: true,
        hints,
        returning: None,
        alias,
        on_conflict: Conflict::Error,
        arbiters: Arbiters::default(),
        kind: Kind::Merge,
        merged,
        direct: None,
    })
}

/// What MERGE's `THEN DO NOTHING` is read as: the parser knows only
/// UPDATE, DELETE and INSERT there, so it is written as an UPDATE (of a
/// MATCHED clause) or an INSERT (of a NOT MATCHED one) of this column,
/// which no table may have (see [`readable_merge`]).
const DO_NOTHING: &str = "__tablegate_do_nothing";

/// The text with each `THEN DO NOTHING` (of MERGE's clauses) written so
/// that the parser reads it (see [`DO_NOTHING`]).
pub fn readable_merge(sql: &str) -> std::borrow::Cow<'_, str> {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let has = |word: &str| {
        sql.as_bytes()
            .windows(word.len())
            .any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
    };
    if !has("nothing") || !has("merge") {
        return sql.into();
    }
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let Ok(mut tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return sql.into();
    };
    let is = |token: &Token, keyword: &str| matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(keyword));
    let words: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
        .collect();
    let mut found = false;
    for (at, w) in words.windows(3).enumerate() {
        if is(&tokens[w[0]], "then") && is(&tokens[w[1]], "do") && is(&tokens[w[2]], "nothing") {
            // The clause's kind: the words after the WHEN before it.
            let word =
                |i: usize, keyword: &str| words.get(i).is_some_and(|&t| is(&tokens[t], keyword));
            let when = (0..at)
                .rev()
                .find(|&i| word(i, "when") && (word(i + 1, "matched") || word(i + 2, "matched")));
            let not_matched = when.is_some_and(|i| {
                word(i + 1, "not") && !(word(i + 3, "by") && word(i + 4, "source"))
            });
            let nothing = match not_matched {
                true => format!("INSERT (\"{DO_NOTHING}\") VALUES (NULL)"),
                false => format!("UPDATE SET \"{DO_NOTHING}\" = NULL"),
            };
            tokens[w[1]] = Token::make_word(&nothing, None);
            for t in &mut tokens[w[1] + 1..=w[2]] {
                *t = Token::make_word("", None);
            }
            found = true;
        }
    }
    match found {
        true => tokens
            .iter()
            .map(|t| t.to_string())
            .collect::<String>()
            .into(),
        false => sql.into(),
    }
}

/// Whether a MERGE clause's action stands for `DO NOTHING`.
fn does_nothing(action: &MergeAction) -> bool {
    let nothing = format!("\"{DO_NOTHING}\"");
    match action {
        MergeAction::Update(update) => {
            matches!(update.assignments.as_slice(), [a] if a.target.to_string() == nothing)
        }
        MergeAction::Insert(insert) => {
            matches!(insert.columns.as_slice(), [c] if c.to_string() == nothing)
        }
        MergeAction::Delete { .. } => false,
    }
}

/// A prepared statement's rewrite, kept while the definition of its table
/// stands: a rewrite is made from the statement and that definition alone.
#[derive(Default)]
pub struct KeptRewrite(std::sync::Mutex<Option<Arc<Rewrite>>>);

impl Clone for KeptRewrite {
    fn clone(&self) -> Self {
        KeptRewrite(std::sync::Mutex::new(self.kept()))
    }
}

impl KeptRewrite {
    fn kept(&self) -> Option<Arc<Rewrite>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn rewrite(&self, session: &Session, statement: &Statement) -> Result<Arc<Rewrite>> {
        if let Some(kept) = self.kept() {
            let current = session.table_def(&kept.def.name);
            if current.is_some_and(|def| Arc::ptr_eq(&def, &kept.def)) {
                return Ok(kept);
            }
        }
        let fresh = Arc::new(rewrite(session, statement)?);
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(fresh.clone());
        Ok(fresh)
    }
}

fn rewrite(session: &Session, statement: &Statement) -> Result<Rewrite> {
    match statement {
        Statement::Insert(i) => rewrite_insert(session, i),
        Statement::Update(u) => rewrite_update(session, u),
        Statement::Delete(d) => rewrite_delete(session, d),
        Statement::Merge(m) => rewrite_merge(session, m),
        // `WITH ... INSERT/UPDATE/DELETE/MERGE`: the rows' SELECT under the same WITH.
        Statement::Query(query) if query.with.is_some() => {
            let (Some(with), Some(body)) = (&query.with, writing_ctes::dml_body(query)) else {
                return Err(SqlError::Internal(format!("not a DML statement: {query}")));
            };
            let mut rewrite = rewrite(session, body)?;
            rewrite.sql = format!("{with} {}", rewrite.sql);
            rewrite.direct = None;
            Ok(rewrite)
        }
        other => Err(SqlError::FeatureNotSupported(format!(
            "not a DML statement: {other}"
        ))),
    }
}

/// The SELECT of the RETURNING clause, over a relation named like the table.
fn returning_sql(items: &[SelectItem], source: &str, alias: &str) -> String {
    let items: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    format!(
        "SELECT {} FROM {} AS {}",
        items.join(", "),
        quote(source),
        quote(alias)
    )
}

/// Parameter types and the result columns of a DML statement, for Describe.
pub async fn describe(
    session: &Session,
    statement: &Statement,
) -> Result<(Vec<Option<DataType>>, Option<SchemaRef>)> {
    let rewrite = rewrite(session, statement)?;
    let plan = session.plan_query(&rewrite.sql).await?;
    let mut params = super::parameters::types(&plan)?;
    if let Some(&last) = rewrite.hints.keys().max() {
        params.resize(params.len().max(last), None);
    }
    // A parameter alone where a column value goes takes the column's type,
    // as in PostgreSQL. A direct INSERT's parameters are its values as
    // they are sent (no cast at each execution); a planned statement's
    // keep the plan's types where it has them.
    for (i, param) in params.iter_mut().enumerate() {
        let hint = rewrite.hints.get(&(i + 1));
        if param.is_none() || (rewrite.direct.is_some() && hint.is_some()) {
            *param = hint.cloned();
        }
    }
    let result = match &rewrite.returning {
        Some(items) => {
            let plan = session
                .plan_query(&returning_sql(items, &rewrite.def.name, &rewrite.alias))
                .await?;
            Some(Arc::new(plan.schema().as_arrow().clone()))
        }
        None => None,
    };
    Ok((params, result))
}

/// The changes a DML statement makes, and what it answers. A prepared
/// statement passes where its rewrite is kept.
pub async fn plan_changes(
    session: &Session,
    statement: &Statement,
    kept: Option<&KeptRewrite>,
    params: Option<ParamValues>,
) -> Result<(Vec<Change>, Output, Arc<TableDef>)> {
    let rewrite = match kept {
        Some(kept) => kept.rewrite(session, statement)?,
        None => Arc::new(rewrite(session, statement)?),
    };
    let def = rewrite.def.clone();
    // The privilege of each change the statement may make: its kind's,
    // or each MERGE clause's.
    let kinds = match rewrite.kind {
        Kind::Merge => rewrite.merged.as_slice(),
        _ => std::slice::from_ref(&rewrite.kind),
    };
    for kind in kinds {
        use crate::catalog::Privilege;
        let privilege = match kind {
            Kind::Insert => Privilege::Insert,
            Kind::Update => Privilege::Update,
            Kind::Delete | Kind::Merge => Privilege::Delete,
        };
        session.require(&def, privilege)?;
    }
    let mut stream: datafusion::physical_plan::SendableRecordBatchStream = match &rewrite.direct {
        Some(direct) => {
            let started = (std::time::SystemTime::now(), std::time::Instant::now());
            let zone = session.settings().zone();
            let batch = direct_batch(direct, params.as_ref(), &zone)?;
            session.log_unplanned(started, direct.rows.len() as u64);
            let schema = batch.schema();
            Box::pin(MemoryStream::try_new(vec![batch], schema, None)?)
        }
        None => {
            let mut plan = session.plan_query(&rewrite.sql).await?;
            if let Some(params) = params {
                plan = session.bind(plan, params)?;
            }
            session.require_reads(&plan, Some(&def.name))?;
            let frame = session.context().execute_logical_plan(plan).await?;
            session.execute_watched(frame).await?
        }
    };

    let mut changes = Vec::new();
    let mut returned: Vec<Row> = Vec::new();
    let mut seen = HashSet::new();
    let mut count = 0usize;
    let mut conflicts: Vec<(Row, crate::model::Entity)> = Vec::new();
    let mut seen_entries = HashSet::new();
    let checks = Checks::of(session, &def)?;
    // What the statement's rows are checked against: the table before it.
    let view = session.current_view();
    let zone = session.settings().zone();
    while let Some(batch) = stream.try_next().await? {
        let cast = cast_columns(&def, &rewrite.columns, &batch, &zone)?;
        let verdicts = match (&checks, rewrite.kind) {
            (Some(checks), Kind::Insert | Kind::Update | Kind::Merge) => {
                Some(checks.judge(&rewrite.columns, &cast)?)
            }
            _ => None,
        };
        let rows = batch_to_rows(&def, &rewrite.columns, &cast)?;
        // UPDATE, DELETE and MERGE read each row's key and ETag in a last
        // column (NULL for MERGE's source rows without one).
        type Identity = Option<(crate::model::EntityKey, Option<ETag>)>;
        let identities: Option<Vec<Identity>> = if rewrite.with_row {
            let column = batch.column(batch.num_columns() - 1);
            let values = column
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| SqlError::Internal("the row column is not text".into()))?;
            Some(
                (0..values.len())
                    .map(|i| {
                        if values.is_null(i) {
                            return Ok(None);
                        }
                        parse_row_identity(values.value(i))
                            .map(Some)
                            .ok_or_else(|| {
                                SqlError::Internal(format!(
                                    "malformed row column {:?}",
                                    values.value(i)
                                ))
                            })
                    })
                    .collect::<Result<_>>()?,
            )
        } else {
            None
        };
        // MERGE: the number of the clause each row takes, before the row column.
        let clauses = match rewrite.kind {
            Kind::Merge => {
                let column = batch.column(batch.num_columns() - 2);
                let numbers = cast_with_options(column, &DataType::Int64, &CastOptions::default())?;
                numbers.as_any().downcast_ref::<Int64Array>().cloned()
            }
            _ => None,
        };
        for (r, row) in rows.into_iter().enumerate() {
            let (old, read) = match identities.as_ref().and_then(|ids| ids[r].as_ref()) {
                Some((key, etag)) => (Some(key.clone()), etag.clone()),
                None => (None, None),
            };
            let kind = match (&clauses, rewrite.kind) {
                (Some(clauses), Kind::Merge) => match clauses.value(r) {
                    0 => continue,
                    n => rewrite.merged[n as usize - 1],
                },
                (_, kind) => kind,
            };
            // MERGE changes a row of the table once at most.
            let again = || match rewrite.kind {
                Kind::Merge => Err(SqlError::value(
                    "21000",
                    "MERGE command cannot affect row a second time",
                )),
                _ => Ok(()),
            };
            match kind {
                Kind::Insert => {
                    def.check_row(&row).map_err(|e| {
                        naming_failing_row(e, &def, &rewrite.columns, &cast, r, &zone)
                    })?;
                    verdicts.as_ref().map_or(Ok(()), |v| v.pass(r))?;
                    let key = def.entity_key(&row)?;
                    // A row whose unique index values an arbiter index holds
                    // already (or an earlier row of the statement) takes
                    // ON CONFLICT's action.
                    if !rewrite.arbiters.indexes.is_empty() {
                        let entity = def.row_to_entity(key.clone(), &row)?;
                        match held_by_index(
                            session,
                            &*view,
                            &def,
                            &rewrite.arbiters,
                            &entity,
                            &mut seen_entries,
                        )
                        .await?
                        {
                            Held::No => {}
                            Held::Earlier if rewrite.on_conflict == Conflict::DoNothing => continue,
                            Held::Earlier => {
                                return Err(SqlError::value(
                                    "21000",
                                    "ON CONFLICT DO UPDATE command cannot affect row a second time",
                                ))
                            }
                            Held::By(existing) => {
                                if let Conflict::DoUpdate { .. } = rewrite.on_conflict {
                                    conflicts.push((row, existing));
                                }
                                continue;
                            }
                        }
                    }
                    // The key's conflicts take ON CONFLICT's action when the
                    // key is an arbiter; else they are errors.
                    let on_key_conflict = match rewrite.arbiters.key {
                        true => &rewrite.on_conflict,
                        false => &Conflict::Error,
                    };
                    if !seen.insert(key.clone()) {
                        if *on_key_conflict == Conflict::DoNothing {
                            continue;
                        }
                        return Err(SqlError::UniqueViolation {
                            table: def.name.clone(),
                            key: def.describe_key(&key),
                        });
                    }
                    // Outside a transaction a conflicting insert fails at
                    // commit; inside one, PostgreSQL reports it at once.
                    let check = *on_key_conflict != Conflict::Error || session.in_transaction();
                    if check {
                        if let Some(existing) = view.get(&def.name, &key, None).await? {
                            match on_key_conflict {
                                Conflict::DoNothing => continue,
                                Conflict::DoUpdate { .. } => {
                                    conflicts.push((row, existing));
                                    continue;
                                }
                                Conflict::Error => {
                                    return Err(SqlError::UniqueViolation {
                                        table: def.name.clone(),
                                        key: def.describe_key(&key),
                                    })
                                }
                            }
                        }
                    }
                    let entity = def.row_to_entity(key.clone(), &row)?;
                    if session.in_transaction() {
                        let arbiters = &rewrite.arbiters;
                        check_unique_in_block(session, &*view, &def, arbiters, &entity, None)
                            .await?;
                    }
                    changes.push(Change {
                        table: def.name.clone(),
                        key,
                        read: None,
                        new: Some(entity),
                        creates: true,
                        moved_to: None,
                    });
                }
                Kind::Update => {
                    let old =
                        old.ok_or_else(|| SqlError::Internal("UPDATE without row keys".into()))?;
                    if !seen.insert(old.clone()) {
                        again()?;
                        continue;
                    }
                    def.check_row(&row).map_err(|e| {
                        naming_failing_row(e, &def, &rewrite.columns, &cast, r, &zone)
                    })?;
                    verdicts.as_ref().map_or(Ok(()), |v| v.pass(r))?;
                    // A row without a primary key keeps its generated key.
                    let key = match def.keys {
                        crate::catalog::Keys::Generated => old.clone(),
                        crate::catalog::Keys::Columns { .. } => def.entity_key(&row)?,
                    };
                    let entity = def.row_to_entity(key, &row)?;
                    if session.in_transaction() {
                        let (arbiters, own) = (&rewrite.arbiters, Some(&old));
                        check_unique_in_block(session, &*view, &def, arbiters, &entity, own)
                            .await?;
                    }
                    changes.extend(Change::rewrite(&def.name, old, read, entity));
                }
                Kind::Delete => {
                    let key =
                        old.ok_or_else(|| SqlError::Internal("DELETE without row keys".into()))?;
                    if !seen.insert(key.clone()) {
                        again()?;
                        continue;
                    }
                    changes.push(Change {
                        table: def.name.clone(),
                        key,
                        read,
                        new: None,
                        creates: false,
                        moved_to: None,
                    });
                }
                Kind::Merge => {
                    return Err(SqlError::Internal("a MERGE clause that is a MERGE".into()))
                }
            }
            count += 1;
            if rewrite.returning.is_some() {
                returned.push(row);
            }
        }
    }

    if let Conflict::DoUpdate {
        assignments,
        selection,
    } = &rewrite.on_conflict
    {
        for (row, change) in upsert(
            &rewrite,
            assignments,
            selection.as_deref(),
            conflicts,
            checks.as_ref(),
            &session.settings().zone(),
        )
        .await?
        {
            changes.extend(change);
            count += 1;
            if rewrite.returning.is_some() {
                returned.push(row);
            }
        }
    }

    let tag = match rewrite.kind {
        Kind::Insert => "INSERT 0".to_owned(),
        Kind::Update => "UPDATE".to_owned(),
        Kind::Delete => "DELETE".to_owned(),
        Kind::Merge => "MERGE".to_owned(),
    };
    let output = match &rewrite.returning {
        None => Output::Command(format!("{tag} {count}")),
        Some(items) => returning(&rewrite, items, returned, tag).await?,
    };
    session.require_partitions(
        &rewrite.def,
        changes.iter().map(|c| c.key.partition_key.as_str()),
    )?;
    Ok((changes, output, rewrite.def.clone()))
}

/// The rows of ON CONFLICT DO UPDATE: each existing row with the assignments
/// applied, where `excluded` is the row proposed for insertion. Evaluated in a
/// context of its own over the two rows, like RETURNING.
async fn upsert(
    rewrite: &Rewrite,
    assignments: &[(usize, String)],
    selection: Option<&str>,
    conflicts: Vec<(Row, crate::model::Entity)>,
    checks: Option<&Checks>,
    zone: &SessionZone,
) -> Result<Vec<(Row, Vec<Change>)>> {
    use super::convert::entities_to_batch;
    if conflicts.is_empty() {
        return Ok(Vec::new());
    }
    let def = &rewrite.def;
    let all: Vec<usize> = (0..def.columns.len()).collect();
    let mut fields: Vec<_> = def.columns.iter().map(super::types::arrow_field).collect();
    fields.push(datafusion::arrow::datatypes::Field::new(
        "__n",
        DataType::Int64,
        false,
    ));
    let schema = Arc::new(Schema::new(fields));
    let numbers =
        || -> ArrayRef { Arc::new(Int64Array::from_iter_values(0..conflicts.len() as i64)) };
    let batch_of = |entities: &[crate::model::Entity]| -> Result<RecordBatch> {
        let table_schema = Arc::new(Schema::new(schema.fields()[..def.columns.len()].to_vec()));
        let batch = entities_to_batch(def, &all, table_schema, entities)?;
        let mut columns = batch.columns().to_vec();
        columns.push(numbers());
        Ok(RecordBatch::try_new(schema.clone(), columns)?)
    };
    let proposed: Vec<crate::model::Entity> = conflicts
        .iter()
        .map(|(row, existing)| def.row_to_entity(existing.key.clone(), row))
        .collect::<std::result::Result<_, _>>()?;
    let existing: Vec<crate::model::Entity> = conflicts.iter().map(|(_, e)| e.clone()).collect();

    let ctx = datafusion::prelude::SessionContext::new_with_config(
        datafusion::prelude::SessionConfig::new()
            .set_str("datafusion.sql_parser.dialect", "postgres"),
    );
    ctx.register_table(
        "excluded",
        Arc::new(MemTable::try_new(
            schema.clone(),
            vec![vec![batch_of(&proposed)?]],
        )?),
    )?;
    ctx.register_table(
        rewrite.alias.as_str(),
        Arc::new(MemTable::try_new(
            schema.clone(),
            vec![vec![batch_of(&existing)?]],
        )?),
    )?;
    let alias = quote(&rewrite.alias);
    let columns: Vec<usize> = (0..def.columns.len())
        .filter(|&i| def.columns[i].system.is_none())
        .collect();
    let mut select: Vec<String> = columns
        .iter()
        .map(|i| match assignments.iter().find(|(c, _)| c == i) {
            Some((_, value)) => value.clone(),
            None => format!("{alias}.{}", quote(&def.columns[*i].name)),
        })
        .collect();
    select.push(format!("{alias}.\"__n\""));
    let filter = selection.map(|s| format!(" WHERE {s}")).unwrap_or_default();
    let sql = format!(
        "SELECT {} FROM {alias} JOIN excluded ON {alias}.\"__n\" = excluded.\"__n\"{filter}",
        aliased(&select)
    );
    let statement = Session::parse(&sql)?
        .pop()
        .ok_or_else(|| SqlError::Syntax("empty upsert".into()))?;
    let plan = ctx.state().statement_to_plan(statement).await?;
    let batches = ctx.execute_logical_plan(plan).await?.collect().await?;

    let mut out = Vec::new();
    for batch in batches {
        let cast = cast_columns(def, &columns, &batch, zone)?;
        let verdicts = checks.map(|c| c.judge(&columns, &cast)).transpose()?;
        let rows = batch_to_rows(def, &columns, &cast)?;
        let numbers = batch
            .column(columns.len())
            .as_any()
            .downcast_ref::<Int64Array>()
            .cloned();
        for (r, row) in rows.into_iter().enumerate() {
            let n = numbers.as_ref().map(|a| a.value(r) as usize).unwrap_or(r);
            let old = &conflicts[n].1;
            def.check_row(&row)
                .map_err(|e| naming_failing_row(e, def, &columns, &cast, r, zone))?;
            verdicts.as_ref().map_or(Ok(()), |v| v.pass(r))?;
            let key = def.entity_key(&row)?;
            let entity = def.row_to_entity(key, &row)?;
            let changes = Change::rewrite(&def.name, old.key.clone(), old.etag.clone(), entity);
            out.push((row, changes));
        }
    }
    Ok(out)
}

/// The batch's first columns, cast to the Arrow types of the given table
/// columns (an instant's text without a zone read in `zone`).
fn cast_columns(
    def: &TableDef,
    columns: &[usize],
    batch: &RecordBatch,
    zone: &SessionZone,
) -> Result<RecordBatch> {
    let typed = batch.num_columns() == columns.len()
        && (columns.iter().zip(batch.columns()))
            .all(|(&i, array)| array.data_type() == &arrow_type(def.columns[i].ty));
    if typed {
        // A direct INSERT's batch, made in these types.
        return Ok(batch.clone());
    }
    let schema = columns_schema(def, columns);
    let mut arrays = Vec::with_capacity(columns.len());
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        arrays.push(cast_to_column(
            array,
            field.data_type(),
            &Default::default(),
            zone,
        )?);
    }
    column_batch(schema, arrays, batch.num_rows())
}

/// Evaluates RETURNING over the rows written (or deleted).
async fn returning(
    rewrite: &Rewrite,
    items: &[SelectItem],
    rows: Vec<Row>,
    tag: String,
) -> Result<Output> {
    use super::convert::entities_to_batch;
    let def = &rewrite.def;
    let schema = Arc::new(Schema::new(
        def.columns
            .iter()
            .map(super::types::arrow_field)
            .collect::<Vec<_>>(),
    ));
    let mut entities = Vec::with_capacity(rows.len());
    for row in &rows {
        let key = def.entity_key(row)?;
        entities.push(def.row_to_entity(key, row)?);
    }
    let all: Vec<usize> = (0..def.columns.len()).collect();
    let batch = entities_to_batch(def, &all, schema.clone(), &entities)?;
    // RETURNING sees only the row: evaluate it in a context of its own.
    let table = MemTable::try_new(schema, vec![vec![batch]])?;
    let ctx = datafusion::prelude::SessionContext::new_with_config(
        datafusion::prelude::SessionConfig::new()
            .set_str("datafusion.sql_parser.dialect", "postgres"),
    );
    ctx.register_table(rewrite.alias.as_str(), Arc::new(table))?;
    let statement = Session::parse(&returning_sql(items, &rewrite.alias, &rewrite.alias))?
        .pop()
        .ok_or_else(|| SqlError::Syntax("empty RETURNING".into()))?;
    let plan = ctx.state().statement_to_plan(statement).await?;
    let frame = ctx.execute_logical_plan(plan).await?;
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await?;
    let stream = MemoryStream::try_new(batches, schema.clone(), None)?;
    Ok(Output::Rows {
        schema,
        stream: Box::pin(stream),
        tag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_do_nothing_is_written_as_the_parser_reads_it() {
        let sql = "MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN\n  DO NOTHING WHEN NOT MATCHED THEN do  nothing";
        assert_eq!(
            readable_merge(sql),
            "MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN\n  UPDATE SET \"__tablegate_do_nothing\" = NULL \
             WHEN NOT MATCHED THEN INSERT (\"__tablegate_do_nothing\") VALUES (NULL)"
        );
        // Other texts are left as they are, strings and ON CONFLICT too.
        for sql in [
            "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING",
            "SELECT 'merge then do nothing'",
            "SELECT CASE WHEN true THEN \"do\" END AS nothing FROM merge",
        ] {
            assert_eq!(readable_merge(sql), sql);
        }
    }
}
