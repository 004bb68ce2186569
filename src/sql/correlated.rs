//! Scalar subqueries that read the outer row in ways DataFusion cannot
//! decorrelate, made into ones it can. Two shapes:
//!
//! - The first row's value, `(SELECT e.amt FROM events e WHERE e.grp =
//!   o.grp ORDER BY e.at DESC LIMIT 1)`: a LIMIT in a correlated subquery
//!   does not decorrelate. It is the same as the aggregate
//!   `first_value(e.amt ORDER BY e.at DESC)` over the same rows: NULL when
//!   there are none, the first row's value (NULL too) otherwise.
//! - An aggregate over rows compared with the outer row other than by
//!   equality, `(SELECT count(*) FROM events e WHERE e.at <= o.at)`:
//!   DataFusion decorrelates equalities only. The subquery reads its own
//!   copy of the outer table instead, that copy's row found by the outer
//!   row's primary key: `(SELECT count(*) FROM events e, orders __outer_o
//!   WHERE e.at <= __outer_o.at AND __outer_o.id = o.id)`. The rows
//!   aggregated are the same; the only correlation left is the key's
//!   equality, which decorrelates to a join on the key.
//!
//!   When the subquery's value also reads the outer row outside its
//!   aggregates (`(SELECT max(e.amt) - o.amt FROM ...)`), each aggregate
//!   becomes a subquery of its own first (`(SELECT max(e.amt) FROM ...) -
//!   o.amt`): an aggregate without GROUP BY gives one row whatever it
//!   reads, so the value is the same.
//!
//! This needs each table's primary key and columns, so it runs where the
//! catalog is known, before planning.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, Expr, Ident, LimitClause, ObjectName, OrderByKind,
    Query, Select, SelectItem, SetExpr, Statement, TableAlias, TableFactor, TableWithJoins, Value,
    VisitMut, VisitorMut,
};

use super::records::visit_outside_subqueries;
use super::rewrite::{aggregates, and_all, conjuncts, factors, inner_names, parse_expr, ungrouped};
use super::session::{normalize, table_name};

/// What the rewrite needs of a table.
pub struct Shape {
    /// Its primary key columns; empty for a table without one.
    pub keys: Vec<String>,
    pub columns: Vec<String>,
}

/// Rewrites the statement's scalar subqueries of the two shapes; `tables`
/// gives a table's shape, `None` for no table of that name.
pub fn rewrite(statement: &mut Statement, tables: &dyn Fn(&str) -> Option<Shape>) {
    let mut visitor = Scopes {
        tables,
        scopes: Vec::new(),
        ctes: HashSet::new(),
        copies: 0,
    };
    let _ = statement.visit(&mut visitor);
}

struct Scopes<'a> {
    tables: &'a dyn Fn(&str) -> Option<Shape>,
    /// For each query being visited, innermost last: the tables of its
    /// FROM list by the name it reads them with.
    scopes: Vec<HashMap<String, String>>,
    /// The names WITH gives, which are not the catalog's tables.
    ctes: HashSet<String>,
    copies: usize,
}

impl VisitorMut for Scopes<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            self.ctes
                .extend(with.cte_tables.iter().map(|c| normalize(&c.alias.name)));
        }
        let scope = match query.body.as_ref() {
            SetExpr::Select(select) => tables_of(&select.from, &self.ctes),
            _ => HashMap::new(),
        };
        self.scopes.push(scope);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.scopes.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Subquery(subquery) = expr else {
            return ControlFlow::Continue(());
        };
        let Some(outer) = self.scopes.last() else {
            return ControlFlow::Continue(());
        };
        let outer = outer.clone();
        first_row_as_aggregate(subquery, &outer);
        if let Some(apart) = aggregates_apart(subquery, &outer) {
            // Visited next, its subqueries each in turn.
            *expr = apart;
            return ControlFlow::Continue(());
        }
        self.copy_outer_rows(subquery, &outer);
        ControlFlow::Continue(())
    }
}

/// The plain tables of a FROM list, by the name columns qualify them with.
fn tables_of(from: &[TableWithJoins], ctes: &HashSet<String>) -> HashMap<String, String> {
    let mut tables = HashMap::new();
    for factor in factors(from) {
        if let TableFactor::Table { name, alias, .. } = factor {
            let Ok(table) = table_name(name) else {
                continue;
            };
            if ctes.contains(&table) {
                continue;
            }
            let read_as = match alias {
                Some(alias) => normalize(&alias.name),
                None => table.clone(),
            };
            tables.insert(read_as, table);
        }
    }
    tables
}

/// The outer table a column names, if it is `t.c` with `t` one of
/// `outer`'s and none of `inner`'s.
fn outer_table<'a>(
    expr: &Expr,
    inner: &[String],
    outer: &'a HashMap<String, String>,
) -> Option<&'a str> {
    let Expr::CompoundIdentifier(parts) = expr else {
        return None;
    };
    let [table, _] = parts.as_slice() else {
        return None;
    };
    let table = normalize(table);
    if inner.contains(&table) {
        return None;
    }
    outer.get_key_value(&table).map(|(k, _)| k.as_str())
}

/// The outer tables an expression reads.
fn outer_reads(expr: &Expr, inner: &[String], outer: &HashMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
        if let Some(table) = outer_table(e, inner, outer) {
            found.push(table.to_owned());
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// `(SELECT x FROM ... ORDER BY o LIMIT 1)` reading the outer row as
/// `(SELECT first_value(x ORDER BY o) FROM ...)`.
fn first_row_as_aggregate(query: &mut Query, outer: &HashMap<String, String>) {
    let one = matches!(
        &query.limit_clause,
        Some(LimitClause::LimitOffset { limit: Some(Expr::Value(v)), offset: None, limit_by })
            if limit_by.is_empty() && matches!(&v.value, Value::Number(n, _) if n == "1")
    );
    let Some(OrderByKind::Expressions(order)) = query.order_by.as_ref().map(|o| &o.kind) else {
        return;
    };
    if !one || query.fetch.is_some() || order.is_empty() {
        return;
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    if !ungrouped(select) || select.having.is_some() || select.distinct.is_some() {
        return;
    }
    let inner = inner_names(select);
    let correlated = select
        .selection
        .as_ref()
        .is_some_and(|s| !outer_reads(s, &inner, outer).is_empty());
    let [item] = select.projection.as_mut_slice() else {
        return;
    };
    let value = match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return,
    };
    if inner.is_empty() || !correlated || aggregates(value) {
        return;
    }
    let order: Vec<String> = order.iter().map(|o| o.to_string()).collect();
    let sql = format!("first_value({value} ORDER BY {})", order.join(", "));
    let Some(first) = parse_expr(&sql) else {
        return;
    };
    *value = first;
    query.order_by = None;
    query.limit_clause = None;
}

impl Scopes<'_> {
    /// An aggregate subquery that reads the outer row other than in
    /// `inner = outer` conditions reads a copy of each outer table it
    /// reads, that copy's row found by the outer row's primary key.
    fn copy_outer_rows(&mut self, query: &mut Query, outer: &HashMap<String, String>) {
        if query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
            return;
        }
        let SetExpr::Select(select) = query.body.as_mut() else {
            return;
        };
        let inner = inner_names(select);
        let [SelectItem::UnnamedExpr(value) | SelectItem::ExprWithAlias { expr: value, .. }] =
            select.projection.as_slice()
        else {
            return;
        };
        if !ungrouped(select) || inner.is_empty() || !aggregates(value) {
            return;
        }
        // Which outer tables it reads, and whether only in equalities.
        let mut read = outer_reads(value, &inner, outer);
        let mut undecorrelated = !read.is_empty();
        let mut conditions = Vec::new();
        if let Some(selection) = select.selection.clone() {
            conjuncts(selection, &mut conditions);
        }
        for condition in &conditions {
            let reads = outer_reads(condition, &inner, outer);
            if !reads.is_empty() && !joins_equal(condition, &inner, outer) {
                undecorrelated = true;
            }
            read.extend(reads);
        }
        read.sort();
        read.dedup();
        let keys: Option<Vec<Vec<String>>> = read
            .iter()
            .map(|t| {
                (self.tables)(&outer[t])
                    .map(|s| s.keys)
                    .filter(|k| !k.is_empty())
            })
            .collect();
        let (true, Some(keys)) = (undecorrelated, keys) else {
            return;
        };
        // A column named without its table would be the copy's too.
        if !self.qualify_inner_columns(select) {
            return;
        }
        self.copies += 1;
        let copy_of = |table: &str| format!("__tablegate_outer{}_{table}", self.copies);
        // Every read of an outer table reads its copy.
        let _ = visit_expressions_mut(select.as_mut(), |e| {
            if let Some(table) = outer_table(e, &inner, outer) {
                if let Expr::CompoundIdentifier(parts) = e {
                    parts[0] = Ident::with_quote('"', copy_of(table));
                }
            }
            ControlFlow::<()>::Continue(())
        });
        let mut conditions = Vec::new();
        if let Some(selection) = select.selection.take() {
            conjuncts(selection, &mut conditions);
        }
        for (table, keys) in read.iter().zip(&keys) {
            let copy = copy_of(table);
            select.from.push(TableWithJoins {
                relation: TableFactor::Table {
                    name: ObjectName::from(vec![Ident::with_quote('"', outer[table].clone())]),
                    alias: Some(TableAlias {
                        explicit: true,
                        at: None,
                        name: Ident::with_quote('"', copy.clone()),
                        columns: vec![],
                    }),
                    args: None,
                    with_hints: vec![],
                    version: None,
                    with_ordinality: false,
                    partitions: vec![],
                    json_path: None,
                    sample: None,
                    index_hints: vec![],
                },
                joins: vec![],
            });
            for key in keys {
                let column = |table: &str| {
                    Expr::CompoundIdentifier(vec![
                        Ident::with_quote('"', table),
                        Ident::with_quote('"', key.clone()),
                    ])
                };
                conditions.push(Expr::BinaryOp {
                    left: Box::new(column(&copy)),
                    op: BinaryOperator::Eq,
                    right: Box::new(column(table)),
                });
            }
        }
        select.selection = and_all(conditions);
    }

    /// Names the table of each column a subquery names without one, where
    /// one of its own tables has the column; false (nothing changed) when
    /// its FROM list is not plain tables, or two of them have the column.
    fn qualify_inner_columns(&self, select: &mut Select) -> bool {
        let mut columns: Vec<(String, Vec<String>)> = Vec::new();
        for factor in factors(&select.from) {
            let TableFactor::Table { name, alias, .. } = factor else {
                return false;
            };
            let Ok(table) = table_name(name) else {
                return false;
            };
            let Some(shape) = (self.tables)(&table) else {
                return false;
            };
            let read_as = alias.as_ref().map_or(table, |a| normalize(&a.name));
            columns.push((read_as, shape.columns));
        }
        let mut ambiguous = false;
        visit_outside_subqueries(select, |e| {
            let Expr::Identifier(ident) = e else {
                return;
            };
            let name = normalize(ident);
            let mut owners = columns.iter().filter(|(_, c)| c.contains(&name));
            match (owners.next(), owners.next()) {
                (Some((table, _)), None) => {
                    *e = Expr::CompoundIdentifier(vec![
                        Ident::with_quote('"', table.clone()),
                        ident.clone(),
                    ])
                }
                (Some(_), Some(_)) => ambiguous = true,
                (None, _) => {}
            }
        });
        !ambiguous
    }
}

/// An aggregate subquery whose value reads the outer row outside its
/// aggregates, as its value with each aggregate a subquery of its own over
/// the same rows.
fn aggregates_apart(query: &Query, outer: &HashMap<String, String>) -> Option<Expr> {
    if query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [SelectItem::UnnamedExpr(value) | SelectItem::ExprWithAlias { expr: value, .. }] =
        select.projection.as_slice()
    else {
        return None;
    };
    if !ungrouped(select) || select.having.is_some() || !aggregates(value) {
        return None;
    }
    let inner = inner_names(select);
    if inner.is_empty() {
        return None;
    }
    let mut outside = value.clone();
    let _ = visit_expressions_mut(&mut outside, |e| {
        if is_aggregate_call(e) {
            *e = Expr::Value(Value::Null.into());
        }
        ControlFlow::<()>::Continue(())
    });
    if outer_reads(&outside, &inner, outer).is_empty() {
        return None;
    }
    let mut apart = value.clone();
    let _ = visit_expressions_mut(&mut apart, |e| {
        if is_aggregate_call(e) {
            let mut alone = query.clone();
            if let SetExpr::Select(select) = alone.body.as_mut() {
                select.projection = vec![SelectItem::UnnamedExpr(e.clone())];
            }
            *e = Expr::Subquery(Box::new(alone));
        }
        ControlFlow::<()>::Continue(())
    });
    Some(Expr::Nested(Box::new(apart)))
}

/// A call of an aggregate function (not a window function).
fn is_aggregate_call(expr: &Expr) -> bool {
    matches!(expr, Expr::Function(f) if f.over.is_none()) && aggregates(expr)
}

/// `inner expression = outer column`, either way round: a condition
/// DataFusion decorrelates.
fn joins_equal(condition: &Expr, inner: &[String], outer: &HashMap<String, String>) -> bool {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = condition
    else {
        return false;
    };
    let plain = |column: &Expr, other: &Expr| {
        outer_table(column, inner, outer).is_some() && outer_reads(other, inner, outer).is_empty()
    };
    plain(left, right) || plain(right, left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::rewrite::tests::statement;

    fn rewritten(sql: &str) -> String {
        let mut s = statement(sql);
        let shape = |keys: &[&str], columns: &[&str]| Shape {
            keys: keys.iter().map(|k| k.to_string()).collect(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
        };
        let tables = |table: &str| match table {
            "ev" => Some(shape(&["id"], &["id", "at", "amt", "grp"])),
            "pairs" => Some(shape(&["a", "b"], &["a", "b"])),
            "other" => Some(shape(&[], &["at"])),
            _ => None,
        };
        rewrite(&mut s, &tables);
        s.to_string()
    }

    #[test]
    fn a_first_row_of_a_correlated_subquery_is_an_aggregate() {
        assert_eq!(
            rewritten("SELECT (SELECT e.amt FROM ev AS e WHERE e.grp = o.grp ORDER BY e.at DESC LIMIT 1) FROM ev AS o"),
            "SELECT (SELECT first_value(e.amt ORDER BY e.at DESC) FROM ev AS e WHERE e.grp = o.grp) FROM ev AS o"
        );
        // Not correlated, or more than one row: left to DataFusion.
        for sql in [
            "SELECT (SELECT e.amt FROM ev AS e ORDER BY e.at LIMIT 1) FROM ev AS o",
            "SELECT (SELECT e.amt FROM ev AS e WHERE e.grp = o.grp ORDER BY e.at LIMIT 2) FROM ev AS o",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }

    #[test]
    fn an_aggregate_compared_with_the_outer_row_reads_a_copy_of_it() {
        assert_eq!(
            rewritten("SELECT o.id, (SELECT count(*) FROM ev AS e WHERE e.at <= o.at AND e.grp = o.grp) FROM ev AS o"),
            "SELECT o.id, (SELECT count(*) FROM ev AS e, \"ev\" AS \"__tablegate_outer1_o\" \
             WHERE e.at <= \"__tablegate_outer1_o\".at AND e.grp = \"__tablegate_outer1_o\".grp \
             AND \"__tablegate_outer1_o\".\"id\" = \"o\".\"id\") FROM ev AS o"
        );
        assert_eq!(
            rewritten("SELECT (SELECT sum(e.amt) FROM ev AS e WHERE e.at < p.a) FROM pairs AS p"),
            "SELECT (SELECT sum(e.amt) FROM ev AS e, \"pairs\" AS \"__tablegate_outer1_p\" \
             WHERE e.at < \"__tablegate_outer1_p\".a AND \"__tablegate_outer1_p\".\"a\" = \"p\".\"a\" \
             AND \"__tablegate_outer1_p\".\"b\" = \"p\".\"b\") FROM pairs AS p"
        );
        // Columns named without their table are the subquery's own.
        assert_eq!(
            rewritten("SELECT (SELECT sum(amt) FROM ev AS e WHERE at < o.at) FROM ev AS o"),
            "SELECT (SELECT sum(\"e\".amt) FROM ev AS e, \"ev\" AS \"__tablegate_outer1_o\" \
             WHERE \"e\".at < \"__tablegate_outer1_o\".at AND \"__tablegate_outer1_o\".\"id\" = \"o\".\"id\") FROM ev AS o"
        );
        // Equalities alone decorrelate; a table without a key, or a CTE, cannot be copied.
        for sql in [
            "SELECT (SELECT count(*) FROM ev AS e WHERE e.grp = o.grp) FROM ev AS o",
            "SELECT (SELECT count(*) FROM ev AS e WHERE e.at < o.at) FROM other AS o",
            "WITH ev AS (SELECT 1 AS at) SELECT (SELECT count(*) FROM pairs AS e WHERE e.a < o.at) FROM ev AS o",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }

    #[test]
    fn a_value_reading_the_outer_row_outside_its_aggregates_takes_them_apart() {
        assert_eq!(
            rewritten(
                "SELECT (SELECT max(e.amt) - o.amt FROM ev AS e WHERE e.grp = o.grp) FROM ev AS o"
            ),
            "SELECT ((SELECT max(e.amt) FROM ev AS e WHERE e.grp = o.grp) - o.amt) FROM ev AS o"
        );
        assert_eq!(
            rewritten("SELECT (SELECT count(*) + o.id FROM ev AS e WHERE e.at < o.at) FROM ev AS o"),
            "SELECT ((SELECT count(*) FROM ev AS e, \"ev\" AS \"__tablegate_outer1_o\" \
             WHERE e.at < \"__tablegate_outer1_o\".at AND \"__tablegate_outer1_o\".\"id\" = \"o\".\"id\") + o.id) FROM ev AS o"
        );
    }
}
