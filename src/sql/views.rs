//! Views (`CREATE VIEW`, `DROP VIEW`). A view holds no rows: a query that
//! names one reads the view's query in its place, as a derived table
//! planned with the query around it, so that the outer query's key
//! predicates reach the scans of the tables the view reads.
//!
//! A view's query is kept as the text the rewrite made of it (as a
//! materialized view's). A view records the relations its query names, and
//! none of them can be dropped while it reads them, but with CASCADE, which
//! drops the view too.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    CreateView, Ident, ObjectName, Query, Statement, TableAlias, TableAliasColumnDef, TableFactor,
    VisitMut, VisitorMut,
};

use super::ddl::{define, exists, type_of_field, Relation};
use super::error::{Result, SqlError};
use super::names::{self, ColumnNames};
use super::session::{normalize, table_name, Output, Session};
use crate::catalog::{CatalogError, Column, Keys, PlainView, TableDef};

/// Views expanded in one statement beyond which a view is taken to read
/// itself through others.
const MAX_EXPANSIONS: usize = 1000;

/// `CREATE [OR REPLACE] [TEMPORARY] VIEW name [(columns)] AS query`.
pub async fn create(session: &mut Session, create: CreateView) -> Result<Output> {
    let name = table_name(&create.name)?;
    let current = session.table_def(&name);
    let replaced = match &current {
        Some(def) if create.or_replace && def.plain_view.is_some() => Some(def.clone()),
        Some(_) if create.or_replace => return Err(not_a("view", &name, None)),
        _ => None,
    };
    if replaced.is_none() && exists(session, current.is_some(), create.if_not_exists, &name)? {
        return Ok(Output::Command("CREATE VIEW".into()));
    }
    let names = ColumnNames::of(&Statement::Query(create.query.clone()));
    let mut query = create.query.to_string();
    let plan = match session.plan_query(&query).await {
        // Two columns of one name: planned under names of their own, the
        // view's columns named as PostgreSQL names them (or as listed).
        Err(SqlError::DataFusion(e)) if names::is_duplicate_name(&e) => {
            let mut renamed = Statement::Query(create.query.clone());
            names::name_each_column(&mut renamed);
            query = renamed.to_string();
            session.plan_query(&query).await?
        }
        planned => planned?,
    };
    let names = names.and_then(|n| n.resolve(plan.schema().fields().len()));
    let mut columns = Vec::with_capacity(plan.schema().fields().len());
    for (i, field) in plan.schema().fields().iter().enumerate() {
        let named = names.as_ref().and_then(|n| n[i].clone());
        let name = match create.columns.get(i) {
            Some(def) => normalize(&def.name),
            None => named.unwrap_or_else(|| field.name().clone()),
        };
        columns.push(Column::new(name, type_of_field(field)?));
    }
    if create.columns.len() > columns.len() {
        return Err(SqlError::value(
            "42601",
            "CREATE VIEW specifies more column names than columns",
        ));
    }
    let mut seen = BTreeSet::new();
    for column in &columns {
        if !seen.insert(column.name.as_str()) {
            return Err(SqlError::value(
                "42701",
                format!("column \"{}\" specified more than once", column.name),
            ));
        }
    }
    let mut reads = BTreeSet::new();
    let _ = datafusion::sql::sqlparser::ast::visit_relations(&create.query, |relation| {
        if let Some(read) = relation_name(relation) {
            if session.table_def(&read).is_some() {
                reads.insert(read);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    let through = reads_through_views(session, &reads);
    if let Some(old) = &replaced {
        kept_columns(&old.columns, &columns)?;
        if through.contains(&name) {
            return Err(SqlError::value(
                "42P17",
                format!("infinite recursion detected in rules for relation \"{name}\""),
            ));
        }
    }
    // A view of a temporary table is temporary too, as in PostgreSQL.
    let of_temporary = through.iter().any(|read| {
        session
            .table_def(read)
            .is_some_and(|d| d.temporary.is_some())
    });
    if of_temporary && !create.temporary {
        session.notice(format!("view \"{name}\" will be a temporary view"));
    }
    let temporary = match create.temporary || of_temporary {
        true => Some(session.own_temporary_table(&name)),
        false => replaced.as_ref().and_then(|old| old.temporary.clone()),
    };
    let def = TableDef {
        name: name.clone(),
        columns,
        keys: Keys::Generated,
        foreign_keys: Vec::new(),
        comment: replaced.as_ref().and_then(|old| old.comment.clone()),
        indexes: Vec::new(),
        view: None,
        checks: Vec::new(),
        plain_view: Some(PlainView {
            query,
            reads: reads.into_iter().collect(),
        }),
        grants: replaced
            .as_ref()
            .map(|old| old.grants.clone())
            .unwrap_or_default(),
        temporary,
        triggers_disabled: false,
    };
    define(session, &name, Some(def))?;
    Ok(Output::Command("CREATE VIEW".into()))
}

/// CREATE OR REPLACE VIEW keeps the view's columns, by name and type, and
/// may add more after them (as PostgreSQL).
fn kept_columns(old: &[Column], new: &[Column]) -> Result<()> {
    if new.len() < old.len() {
        return Err(SqlError::InvalidDefinition(
            "cannot drop columns from view".into(),
        ));
    }
    for (old, new) in old.iter().zip(new) {
        if old.name != new.name {
            return Err(SqlError::InvalidDefinition(format!(
                "cannot change name of view column \"{}\" to \"{}\"",
                old.name, new.name
            ))
            .explained(
                None,
                Some(
                    "Use ALTER VIEW ... RENAME COLUMN ... to change name of view column instead."
                        .into(),
                ),
            ));
        }
        if old.ty != new.ty {
            return Err(SqlError::InvalidDefinition(format!(
                "cannot change data type of view column \"{}\" from {} to {}",
                old.name,
                old.ty.pg_name(),
                new.ty.pg_name()
            )));
        }
    }
    Ok(())
}

/// Drops a relation and, with CASCADE, the views that read it (without,
/// PostgreSQL's 2BP01 when there are any).
pub(super) fn drop_with_dependents(
    session: &mut Session,
    name: &str,
    kind: &str,
    cascade: bool,
) -> Result<()> {
    let dependents = dependents(session, name);
    if !dependents.is_empty() && !cascade {
        let detail = dependents
            .iter()
            .map(|(view, read)| format!("view {view} depends on {} {read}", kind_of(session, read)))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(SqlError::Catalog(CatalogError::Dependent(format!(
            "cannot drop {kind} {name} because other objects depend on it"
        )))
        .explained(
            Some(detail),
            Some("Use DROP ... CASCADE to drop the dependent objects too.".into()),
        ));
    }
    for (view, _) in &dependents {
        session.notice(format!("drop cascades to view {view}"));
        define(session, view, None)?;
    }
    define(session, name, None)
}

/// The views, plain and materialized, whose own query reads relation
/// `name`.
pub(super) fn readers(session: &Session, name: &str) -> Vec<Arc<TableDef>> {
    session
        .tables()
        .into_iter()
        .filter(|def| {
            let plain =
                (def.plain_view.as_ref()).is_some_and(|p| p.reads.iter().any(|r| r == name));
            let materialized = (def.view.as_ref()).is_some_and(|v| v.base_tables().contains(&name));
            plain || materialized
        })
        .collect()
}

/// What PostgreSQL calls a relation in a dependency's DETAIL.
fn kind_of(session: &Session, name: &str) -> &'static str {
    session
        .table_def(name)
        .map_or("table", |def| Relation::of(&def).word())
}

/// The views that read `name`, directly or through other views, each with
/// the relation it reads; each view's own readers follow it.
fn dependents(session: &Session, name: &str) -> Vec<(String, String)> {
    fn readers_of(views: &[Arc<TableDef>], read: &str, found: &mut Vec<(String, String)>) {
        for view in views {
            let reads = view
                .plain_view
                .as_ref()
                .is_some_and(|p| p.reads.iter().any(|r| r == read));
            if reads && !found.iter().any(|(v, _)| *v == view.name) {
                found.push((view.name.clone(), read.to_owned()));
                readers_of(views, &view.name, found);
            }
        }
    }
    let views: Vec<Arc<TableDef>> = session
        .tables()
        .into_iter()
        .filter(|d| d.plain_view.is_some() && d.name != name)
        .collect();
    let mut found = Vec::new();
    readers_of(&views, name, &mut found);
    found
}

/// The relations `reads` name and those their views read, through every
/// view in between.
fn reads_through_views(session: &Session, reads: &BTreeSet<String>) -> BTreeSet<String> {
    let mut all = reads.clone();
    let mut pending: Vec<String> = reads.iter().cloned().collect();
    while let Some(name) = pending.pop() {
        let Some(def) = session.table_def(&name) else {
            continue;
        };
        for read in def.plain_view.iter().flat_map(|p| &p.reads) {
            if all.insert(read.clone()) {
                pending.push(read.clone());
            }
        }
    }
    all
}

/// PostgreSQL's error for a statement on one kind of relation given
/// another: `"v" is not a table`.
pub(super) fn not_a(kind: &str, name: &str, hint: Option<&str>) -> SqlError {
    SqlError::WrongObjectType(format!("\"{name}\" is not a {kind}"))
        .explained(None, hint.map(str::to_owned))
}

/// The name of a relation a query names, when it can be one of the
/// catalog's (unqualified, or in `public`).
fn relation_name(name: &ObjectName) -> Option<String> {
    let parts: Vec<&Ident> = name.0.iter().filter_map(|p| p.as_ident()).collect();
    match parts.as_slice() {
        [table] => Some(normalize(table)),
        [schema, table] if normalize(schema) == "public" => Some(normalize(table)),
        _ => None,
    }
}

/// Puts each view a statement names in its place: `FROM v [AS a]` becomes
/// `FROM (<v's query>) AS a(<v's columns>)`, the views its query names too.
/// `views` gives a view's definition by name. A name a WITH clause binds
/// is not a view there.
pub(super) fn expand(
    statement: &mut Statement,
    views: &dyn Fn(&str) -> Option<Arc<TableDef>>,
) -> Result<()> {
    let mut expansion = Expansion {
        views,
        bound: Vec::new(),
        expanded: 0,
    };
    match statement.visit(&mut expansion) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Expansion<'a> {
    views: &'a dyn Fn(&str) -> Option<Arc<TableDef>>,
    /// The names each enclosing query's WITH binds.
    bound: Vec<Vec<String>>,
    expanded: usize,
}

impl Expansion<'_> {
    /// The view a table factor names, with the query to read in its place.
    fn view_of(&self, factor: &TableFactor) -> Option<(Arc<TableDef>, String)> {
        let TableFactor::Table {
            name, args: None, ..
        } = factor
        else {
            return None;
        };
        let table = relation_name(name)?;
        if name.0.len() == 1 && self.bound.iter().flatten().any(|b| *b == table) {
            return None;
        }
        let def = (self.views)(&table)?;
        let query = def.plain_view.as_ref()?.query.clone();
        Some((def, query))
    }
}

impl VisitorMut for Expansion<'_> {
    type Break = SqlError;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<SqlError> {
        let bound = query
            .with
            .iter()
            .flat_map(|with| &with.cte_tables)
            .map(|cte| normalize(&cte.alias.name))
            .collect();
        self.bound.push(bound);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<SqlError> {
        self.bound.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<SqlError> {
        let Some((def, query)) = self.view_of(factor) else {
            return ControlFlow::Continue(());
        };
        self.expanded += 1;
        if self.expanded > MAX_EXPANSIONS {
            return ControlFlow::Break(SqlError::value(
                "42P17",
                format!(
                    "infinite recursion detected in rules for relation \"{}\"",
                    def.name
                ),
            ));
        }
        let subquery = match Session::parse(&query).map(|mut s| s.pop()) {
            Ok(Some(datafusion::sql::parser::Statement::Statement(s))) => match *s {
                Statement::Query(q) => q,
                _ => return ControlFlow::Break(broken(&def.name)),
            },
            _ => return ControlFlow::Break(broken(&def.name)),
        };
        let TableFactor::Table { alias, .. } = factor else {
            return ControlFlow::Continue(());
        };
        let mut alias = alias.take().unwrap_or_else(|| TableAlias {
            explicit: true,
            name: Ident::with_quote('"', &def.name),
            columns: Vec::new(),
            at: None,
        });
        // An alias may rename the first columns only.
        for column in def.columns.iter().skip(alias.columns.len()) {
            alias.columns.push(TableAliasColumnDef {
                name: Ident::with_quote('"', &column.name),
                data_type: None,
            });
        }
        *factor = TableFactor::Derived {
            lateral: false,
            subquery,
            alias: Some(alias),
            sample: None,
        };
        ControlFlow::Continue(())
    }
}

fn broken(view: &str) -> SqlError {
    SqlError::Internal(format!("the query of view \"{view}\" cannot be read"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::rewrite::tests::statement;

    fn view(name: &str, query: &str, columns: &[&str]) -> Arc<TableDef> {
        Arc::new(TableDef {
            name: name.into(),
            columns: columns
                .iter()
                .map(|c| Column::new(*c, crate::catalog::SqlType::Int4))
                .collect(),
            keys: Keys::Generated,
            foreign_keys: Vec::new(),
            comment: None,
            indexes: Vec::new(),
            view: None,
            checks: Vec::new(),
            plain_view: Some(PlainView {
                query: query.into(),
                reads: Vec::new(),
            }),
            grants: Vec::new(),
            temporary: None,
            triggers_disabled: false,
        })
    }

    fn expanded(sql: &str) -> Result<String> {
        let views = |name: &str| match name {
            "v" => Some(view("v", "SELECT a, b FROM t WHERE a > 0", &["a", "b"])),
            "w" => Some(view("w", "SELECT a FROM v", &["a"])),
            "loop" => Some(view("loop", "SELECT a FROM loop", &["a"])),
            _ => None,
        };
        let mut s = statement(sql);
        expand(&mut s, &views)?;
        Ok(s.to_string())
    }

    #[test]
    fn a_view_is_read_as_its_query_under_its_name_or_alias() {
        assert_eq!(
            expanded("SELECT * FROM v WHERE a = 1").unwrap(),
            r#"SELECT * FROM (SELECT a, b FROM t WHERE a > 0) AS "v" ("a", "b") WHERE a = 1"#
        );
        assert_eq!(
            expanded("SELECT x.p FROM public.v AS x(p) JOIN t ON t.a = x.p").unwrap(),
            r#"SELECT x.p FROM (SELECT a, b FROM t WHERE a > 0) AS x (p, "b") JOIN t ON t.a = x.p"#
        );
        // Views in views, in subqueries.
        assert_eq!(
            expanded("SELECT (SELECT count(*) FROM w)").unwrap(),
            r#"SELECT (SELECT count(*) FROM (SELECT a FROM (SELECT a, b FROM t WHERE a > 0) AS "v" ("a", "b")) AS "w" ("a"))"#
        );
    }

    #[test]
    fn names_a_with_clause_binds_and_other_schemas_are_not_views() {
        for sql in [
            "WITH v AS (SELECT 1 AS a) SELECT a FROM v",
            "SELECT * FROM other.v",
            "SELECT * FROM t",
        ] {
            assert_eq!(expanded(sql).unwrap(), statement(sql).to_string());
        }
    }

    #[test]
    fn a_view_that_reads_itself_is_an_error() {
        let e = expanded("SELECT * FROM loop").unwrap_err();
        assert_eq!(
            e.to_string(),
            "infinite recursion detected in rules for relation \"loop\""
        );
    }
}
