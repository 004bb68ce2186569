//! PostgreSQL's row values (records), which DataFusion holds as structs:
//! whole-row references (`row_to_json(t)`, `json_agg(t)`, `SELECT t FROM
//! t`) and `ROW(x, y)`, both made with [`RowValue`]; and comparisons of
//! rows, `(a, b) = (x, y)`, as the comparisons of their fields that
//! PostgreSQL makes of them ([`row_comparison`]).
//!
//! PostgreSQL reads a table's alias used as a value as the row of its
//! columns. DataFusion has no such reference, so each becomes
//! `table_row('a', t.a, 'b', t.b)`, in two steps around planning the
//! relations: [`mark_whole_rows`] puts a numbered place holder where a
//! select reads one of its FROM aliases as a value and says which FROM
//! lists the alias's columns; the session plans each of those FROM lists
//! alone (`WITH <the enclosing CTEs> SELECT * FROM <the select's FROM>`);
//! [`resolve_whole_rows`] writes the rows with the columns found. An alias
//! that is also a column's name stays a column, as in PostgreSQL, and so
//! does a reference whose FROM does not plan alone (one that reads an
//! outer query), which then fails to plan as it did.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{Array, StructArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::{exec_err, DFSchema, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Ident, Query, Select, SelectItem, SetExpr, Statement, TableFactor, TableWithJoins, Value,
    ValueWithSpan, VisitMut, VisitorMut, WildcardAdditionalOptions, With,
};

use super::rewrite::{and_all, call, value_expressions, OUTER_KEY};
use super::session::normalize;

/// The function `ROW(x, y)` becomes.
pub const ROW_VALUE: &str = "row_value";

/// The function a whole-row reference becomes: NULL where every column is
/// NULL, which is how a table's row reads on the NULL side of an outer
/// join (`a LEFT JOIN b ... WHERE b IS NULL`, `count(b)`).
pub const TABLE_ROW: &str = "table_row";

/// The place holder [`mark_whole_rows`] leaves, numbered.
const WHOLE_ROW: &str = "__tablegate_whole_row";

/// `row_value('a', x, 'b', y)`: a row of named values. Unlike DataFusion's
/// `named_struct`, each field keeps its value's declared type, so a json
/// column stays json in the row (and in `row_to_json`'s object). As
/// [`TABLE_ROW`], a row whose fields are all NULL is NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RowValue {
    name: &'static str,
    signature: Signature,
}

impl RowValue {
    pub fn both() -> [RowValue; 2] {
        [ROW_VALUE, TABLE_ROW].map(|name| RowValue {
            name,
            signature: Signature::variadic_any(Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for RowValue {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        exec_err!("{} takes its type from its arguments", self.name)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        if args.arg_fields.is_empty() || args.arg_fields.len() % 2 != 0 {
            return exec_err!("{} takes names and values in turn", self.name);
        }
        let fields = args
            .scalar_arguments
            .chunks(2)
            .zip(args.arg_fields.chunks(2))
            .map(|(names, values)| {
                let Some(name) = names[0].and_then(|n| n.try_as_str().flatten()) else {
                    return exec_err!("{} takes constant names", self.name);
                };
                let value = &values[1];
                Ok(Field::new(name, value.data_type().clone(), true)
                    .with_metadata(value.metadata().clone()))
            })
            .collect::<DfResult<Fields>>()?;
        Ok(Arc::new(Field::new(
            self.name,
            DataType::Struct(fields),
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let DataType::Struct(fields) = args.return_type() else {
            return exec_err!("{} makes a struct", self.name);
        };
        let values: Vec<ColumnarValue> = args.args.chunks(2).map(|c| c[1].clone()).collect();
        let arrays = ColumnarValue::values_to_arrays(&values)?;
        let nulls = (self.name == TABLE_ROW).then(|| {
            let rows = arrays.first().map_or(0, |a| a.len());
            NullBuffer::from_iter((0..rows).map(|i| arrays.iter().any(|a| a.is_valid(i))))
        });
        Ok(ColumnarValue::Array(Arc::new(StructArray::try_new(
            fields.clone(),
            arrays,
            nulls,
        )?)))
    }
}

/// `ROW(x, y)`: a row whose fields are named `f1`, `f2`, as PostgreSQL
/// names an anonymous record's.
pub fn row_constructor(values: Vec<Expr>) -> Expr {
    let args = values
        .into_iter()
        .enumerate()
        .flat_map(|(i, value)| [text(&format!("f{}", i + 1)), value])
        .collect();
    call(ROW_VALUE, args)
}

/// `row IS NULL` (`IS NOT NULL`) of a row made here, as PostgreSQL tests a
/// row: every field NULL (every field not NULL).
pub fn row_nullness(expr: &mut Expr) {
    let (row, is_null) = match expr {
        Expr::IsNull(row) => (row, true),
        Expr::IsNotNull(row) => (row, false),
        _ => return,
    };
    let Expr::Function(f) = row.as_ref() else {
        return;
    };
    let name = f.name.to_string();
    if name != ROW_VALUE && name != TABLE_ROW {
        return;
    }
    let FunctionArguments::List(list) = &f.args else {
        return;
    };
    let tests: Vec<Expr> = list
        .args
        .iter()
        .skip(1)
        .step_by(2)
        .filter_map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) => Some(match is_null {
                true => Expr::IsNull(Box::new(value.clone())),
                false => Expr::IsNotNull(Box::new(value.clone())),
            }),
            _ => None,
        })
        .collect();
    if let Some(all) = and_all(tests) {
        *expr = Expr::Nested(Box::new(all));
    }
}

/// A comparison of two rows of as many fields, `(a, b) < (x, y)`, or a row
/// in a list of rows, `(a, b) IN ((1, 2), (3, 4))`, as the comparisons of
/// their fields, which is how PostgreSQL defines it: `=` holds where every
/// pair is equal, `<>` where one pair differs, and `<`, `<=`, `>`, `>=`
/// are decided by the first pair that is not equal (`a < x OR (a = x AND
/// b < y)`, with `a <= x` beside it for the scan's range); a NULL in a pair
/// that decides makes the answer NULL, as the AND and OR of the
/// comparisons make it. DataFusion compared the rows as
/// structs, a NULL field as a value (`(1, NULL) = (1, 2)` was false, not
/// NULL), and a filter on the key columns written as a row read the whole
/// table.
pub fn row_comparison(expr: &mut Expr) {
    match expr {
        Expr::BinaryOp { left, op, right } => {
            let (Expr::Tuple(left), Expr::Tuple(right)) = (left.as_ref(), right.as_ref()) else {
                return;
            };
            if let Some(compared) = compare_rows(left, op, right) {
                *expr = Expr::Nested(Box::new(compared));
            }
        }
        Expr::InList {
            expr: row,
            list,
            negated,
        } => {
            let Expr::Tuple(row) = row.as_ref() else {
                return;
            };
            let equal: Option<Vec<Expr>> = list
                .iter()
                .map(|item| match item {
                    Expr::Tuple(item) => compare_rows(row, &BinaryOperator::Eq, item),
                    _ => None,
                })
                .collect();
            let Some(any) = equal.and_then(either) else {
                return;
            };
            let any = Expr::Nested(Box::new(any));
            *expr = match negated {
                true => Expr::UnaryOp {
                    op: datafusion::sql::sqlparser::ast::UnaryOperator::Not,
                    expr: Box::new(any),
                },
                false => any,
            };
        }
        _ => {}
    }
}

/// `left op right` as comparisons of their fields; `None` for rows of
/// different lengths (left for the planner to refuse) or another operator.
fn compare_rows(left: &[Expr], op: &BinaryOperator, right: &[Expr]) -> Option<Expr> {
    use BinaryOperator::*;
    if left.len() != right.len() || left.is_empty() {
        return None;
    }
    let pair = |i: usize, op: BinaryOperator| {
        Expr::Nested(Box::new(Expr::BinaryOp {
            left: Box::new(left[i].clone()),
            op,
            right: Box::new(right[i].clone()),
        }))
    };
    let pairs = 0..left.len();
    match op {
        Eq => and_all(pairs.map(|i| pair(i, Eq)).collect()),
        NotEq => either(pairs.map(|i| pair(i, NotEq)).collect()),
        Lt | LtEq | Gt | GtEq => {
            let (strict, bound) = if matches!(op, Lt | LtEq) {
                (Lt, LtEq)
            } else {
                (Gt, GtEq)
            };
            // From the last pair back: the last is compared with `op`
            // itself, each before it decides where its fields differ.
            let last = left.len() - 1;
            let decided = (0..last).rev().fold(pair(last, op.clone()), |after, i| {
                let equal_then = Expr::BinaryOp {
                    left: Box::new(pair(i, Eq)),
                    op: And,
                    right: Box::new(after),
                };
                Expr::Nested(Box::new(Expr::BinaryOp {
                    left: Box::new(pair(i, strict.clone())),
                    op: Or,
                    right: Box::new(Expr::Nested(Box::new(equal_then))),
                }))
            });
            if last == 0 {
                return Some(decided);
            }
            // The first fields' bound, which the comparison implies (and
            // which is NULL where a NULL makes it NULL): the scan's range
            // of keys, for a key read from where the last page ended.
            and_all(vec![pair(0, bound), decided])
        }
        _ => None,
    }
}

/// The OR of some conditions; `None` for none.
fn either(conditions: Vec<Expr>) -> Option<Expr> {
    conditions.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::Or,
        right: Box::new(b),
    })
}

fn text(s: &str) -> Expr {
    Expr::Value(ValueWithSpan::from(Value::SingleQuotedString(s.to_owned())))
}

/// What [`mark_whole_rows`] found: for each place holder, the alias it
/// stands for and the query listing the columns of its select's FROM.
#[derive(Default)]
pub struct WholeRows {
    references: Vec<Reference>,
    /// `WITH ... SELECT * FROM ...`, one for each select with references.
    pub from_lists: Vec<Query>,
}

struct Reference {
    alias: Ident,
    /// Which of [`WholeRows::from_lists`] has the alias's columns.
    from_list: usize,
    /// The columns of a subquery in FROM that lists them by name, for when
    /// its FROM list does not plan alone (the subquery reads an outer
    /// query's columns, as in `(SELECT json_agg(x) FROM (SELECT ... WHERE
    /// c.parent = p.id) x)`).
    listed: Option<Vec<String>>,
}

impl WholeRows {
    pub fn is_empty(&self) -> bool {
        self.references.is_empty()
    }
}

/// The columns of a planned FROM list: its relations' columns, each
/// qualified by its relation's name.
pub fn from_list_columns(plan: &LogicalPlan) -> Arc<DFSchema> {
    match plan {
        LogicalPlan::Projection(p) => p.input.schema().clone(),
        other => other.schema().clone(),
    }
}

/// The name a FROM item's columns are qualified with, if it has one.
fn relation_name(factor: &TableFactor) -> Option<&Ident> {
    match factor {
        TableFactor::Table { name, alias, .. } => match alias {
            Some(alias) => Some(&alias.name),
            None => name.0.last().and_then(|part| part.as_ident()),
        },
        TableFactor::Derived { alias, .. }
        | TableFactor::TableFunction { alias, .. }
        | TableFactor::Function { alias, .. }
        | TableFactor::UNNEST { alias, .. } => alias.as_ref().map(|a| &a.name),
        _ => None,
    }
}

/// The FROM items of a FROM list that have names, by their names.
fn named_relations<'a>(from: &'a [TableWithJoins], named: &mut Vec<(String, &'a TableFactor)>) {
    for table in from {
        let factors =
            std::iter::once(&table.relation).chain(table.joins.iter().map(|j| &j.relation));
        for factor in factors {
            match factor {
                TableFactor::NestedJoin {
                    table_with_joins,
                    alias: None,
                } => named_relations(std::slice::from_ref(table_with_joins), named),
                factor => named.extend(relation_name(factor).map(|n| (normalize(n), factor))),
            }
        }
    }
}

/// The columns of a subquery in FROM as its text names them: its alias's
/// column list, or else its select list when every item has a name there.
fn listed_columns(factor: &TableFactor) -> Option<Vec<String>> {
    let TableFactor::Derived {
        subquery, alias, ..
    } = factor
    else {
        return None;
    };
    let named = alias.as_ref().map(|a| &a.columns).filter(|c| !c.is_empty());
    if let Some(columns) = named {
        return Some(columns.iter().map(|c| normalize(&c.name)).collect());
    }
    named_columns(subquery)
}

/// A query's columns when its select list names every one (`a`, `t.b`, `x
/// AS c`), leaving out those added to move outer keys out of it.
pub(super) fn named_columns(subquery: &Query) -> Option<Vec<String>> {
    let SetExpr::Select(select) = subquery.body.as_ref() else {
        return None;
    };
    select
        .projection
        .iter()
        .filter(|item| {
            !matches!(item, SelectItem::ExprWithAlias { alias, .. } if alias.value.starts_with(OUTER_KEY))
        })
        .map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(normalize(alias)),
            SelectItem::UnnamedExpr(Expr::Identifier(column)) => Some(normalize(column)),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                parts.last().map(normalize)
            }
            _ => None,
        })
        .collect()
}

/// Puts a place holder where a select reads one of its FROM aliases as a
/// value (in its select list, WHERE or HAVING, not in its subqueries,
/// which have FROMs of their own). Subqueries are marked before the
/// queries around them.
pub fn mark_whole_rows(statement: &mut Statement) -> WholeRows {
    let mut marker = Marker::default();
    let _ = statement.visit(&mut marker);
    marker.found
}

#[derive(Default)]
struct Marker {
    /// The CTEs of the queries around the one visited, outermost first.
    scopes: Vec<Option<With>>,
    found: WholeRows,
}

impl VisitorMut for Marker {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.scopes.push(query.with.clone());
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        mark_selects(query.body.as_mut(), &self.scopes, &mut self.found);
        self.scopes.pop();
        ControlFlow::Continue(())
    }
}

fn mark_selects(body: &mut SetExpr, scopes: &[Option<With>], found: &mut WholeRows) {
    match body {
        SetExpr::Select(select) => mark_select(select, scopes, found),
        SetExpr::SetOperation { left, right, .. } => {
            mark_selects(left, scopes, found);
            mark_selects(right, scopes, found);
        }
        _ => {}
    }
}

fn mark_select(select: &mut Select, scopes: &[Option<With>], found: &mut WholeRows) {
    let mut named = Vec::new();
    named_relations(&select.from, &mut named);
    if named.is_empty() {
        return;
    }
    let named: Vec<(String, Option<Vec<String>>)> = named
        .into_iter()
        .map(|(name, factor)| (name, listed_columns(factor)))
        .collect();
    let from_list = found.from_lists.len();
    let mut marked = false;
    for expr in value_expressions(select) {
        // `t.a[1]` is a compound access whose root is `t`: a qualifier,
        // not a value.
        let mut qualifiers = std::collections::HashSet::new();
        visit_outside_subqueries(expr, |e| {
            if let Expr::CompoundFieldAccess { root, .. } = e {
                qualifiers.insert(std::ptr::from_ref(root.as_ref()));
            }
            if qualifiers.contains(&std::ptr::from_ref(&*e)) {
                return;
            }
            let Expr::Identifier(ident) = e else { return };
            let name = normalize(ident);
            let Some((_, listed)) = named.iter().find(|(n, _)| *n == name) else {
                return;
            };
            let number = Value::Number(found.references.len().to_string(), false);
            found.references.push(Reference {
                alias: ident.clone(),
                from_list,
                listed: listed.clone(),
            });
            *e = call(WHOLE_ROW, vec![Expr::value(number)]);
            marked = true;
        });
    }
    if marked {
        found.from_lists.push(from_list_query(select, scopes));
    }
}

/// Calls `visit` on each expression of `node` (an expression, a SELECT)
/// outside its subqueries.
pub(super) fn visit_outside_subqueries<N: VisitMut>(node: &mut N, visit: impl FnMut(&mut Expr)) {
    /// How many subqueries deep the visit is.
    struct Outside<F> {
        depth: usize,
        visit: F,
    }
    impl<F: FnMut(&mut Expr)> VisitorMut for Outside<F> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if self.depth == 0 {
                (self.visit)(expr);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Outside { depth: 0, visit });
}

/// `WITH <every enclosing CTE> SELECT * FROM <the select's FROM>`.
fn from_list_query(select: &Select, scopes: &[Option<With>]) -> Query {
    let with = scopes.iter().flatten().fold(None::<With>, |all, with| {
        Some(match all {
            None => with.clone(),
            Some(mut all) => {
                all.recursive |= with.recursive;
                all.cte_tables.extend(with.cte_tables.iter().cloned());
                all
            }
        })
    });
    let mut listing = Select::clone(select);
    listing.projection = vec![SelectItem::Wildcard(WildcardAdditionalOptions::default())];
    listing.selection = None;
    listing.group_by = datafusion::sql::sqlparser::ast::GroupByExpr::Expressions(vec![], vec![]);
    listing.having = None;
    listing.distinct = None;
    listing.sort_by = vec![];
    listing.named_window = vec![];
    listing.qualify = None;
    Query {
        with,
        body: Box::new(SetExpr::Select(Box::new(listing))),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: vec![],
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: vec![],
    }
}

/// Replaces each place holder by the row of its alias's columns, found in
/// `columns` (one schema for each of `found.from_lists`, `None` where it did
/// not plan), or by the alias again where there is no such row.
pub fn resolve_whole_rows(
    statement: &mut Statement,
    found: &WholeRows,
    columns: &[Option<Arc<DFSchema>>],
) {
    let _ = visit_expressions_mut(statement, |e| {
        let Some(number) = place_holder(e) else {
            return ControlFlow::<()>::Continue(());
        };
        let reference = &found.references[number];
        let alias = &reference.alias;
        let row = match (columns[reference.from_list].as_deref(), &reference.listed) {
            (Some(schema), _) => whole_row(alias, schema),
            // A column of the alias's name reads as the column.
            (None, Some(listed)) if !listed.contains(&normalize(alias)) => {
                Some(row_of(alias, listed.iter()))
            }
            (None, _) => None,
        };
        *e = row.unwrap_or_else(|| Expr::Identifier(alias.clone()));
        ControlFlow::Continue(())
    });
    // Children first: a tested row is made by now.
    let _ = visit_expressions_mut(statement, |e| {
        row_nullness(e);
        ControlFlow::<()>::Continue(())
    });
}

fn place_holder(e: &Expr) -> Option<usize> {
    let Expr::Function(f) = e else { return None };
    if f.name.to_string() != WHOLE_ROW {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// `table_row('a', t.a, ...)` over the columns qualified by `alias`, or
/// `None` when the alias names a column too (it reads as the column) or
/// has no columns.
fn whole_row(alias: &Ident, schema: &DFSchema) -> Option<Expr> {
    let name = normalize(alias);
    if schema.fields().iter().any(|f| *f.name() == name) {
        return None;
    }
    let columns: Vec<&String> = schema
        .iter()
        .filter(|(qualifier, _)| qualifier.is_some_and(|q| q.table() == name))
        .map(|(_, field)| field.name())
        .filter(|column| !column.starts_with(OUTER_KEY))
        .collect();
    (!columns.is_empty()).then(|| row_of(alias, columns.into_iter()))
}

/// `table_row('a', t.a, ...)`.
fn row_of<'a>(alias: &Ident, columns: impl Iterator<Item = &'a String>) -> Expr {
    let mut args = Vec::new();
    for column in columns {
        args.push(text(column));
        args.push(Expr::CompoundIdentifier(vec![
            alias.clone(),
            Ident::with_quote('"', column),
        ]));
    }
    call(TABLE_ROW, args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::rewrite::tests::statement;

    #[test]
    fn each_select_marks_its_own_aliases_and_lists_its_from() {
        let mut s = statement(
            "WITH w AS (SELECT 1 AS a) \
             SELECT row_to_json(t), (SELECT count(x) FROM u x WHERE x IS NOT NULL), t.k, k, t.a[1] \
             FROM t JOIN w ON true",
        );
        let found = mark_whole_rows(&mut s);
        assert_eq!(
            s.to_string(),
            "WITH w AS (SELECT 1 AS a) \
             SELECT row_to_json(__tablegate_whole_row(2)), \
             (SELECT count(__tablegate_whole_row(0)) FROM u x WHERE __tablegate_whole_row(1) IS NOT NULL), \
             t.k, k, t.a[1] FROM t JOIN w ON true"
        );
        let lists: Vec<String> = found.from_lists.iter().map(|q| q.to_string()).collect();
        assert_eq!(
            lists,
            [
                "WITH w AS (SELECT 1 AS a) SELECT * FROM u x",
                "WITH w AS (SELECT 1 AS a) SELECT * FROM t JOIN w ON true",
            ]
        );
        // No columns for the inner list: `x` is itself again; the outer
        // list's columns make `t` a row.
        let schema = DFSchema::try_from_qualified_schema(
            "t",
            &datafusion::arrow::datatypes::Schema::new(vec![
                Field::new("k", DataType::Int32, true),
                Field::new("v", DataType::Utf8, true),
            ]),
        )
        .unwrap();
        resolve_whole_rows(&mut s, &found, &[None, Some(Arc::new(schema))]);
        assert_eq!(
            s.to_string(),
            "WITH w AS (SELECT 1 AS a) \
             SELECT row_to_json(table_row('k', t.\"k\", 'v', t.\"v\")), \
             (SELECT count(x) FROM u x WHERE x IS NOT NULL), t.k, k, t.a[1] FROM t JOIN w ON true"
        );
    }

    #[test]
    fn a_subquery_in_from_lists_its_columns_by_name() {
        let mut s = statement("SELECT json_agg(x) FROM (SELECT a, t.b, c + 1 AS \"C\" FROM t) x");
        let found = mark_whole_rows(&mut s);
        resolve_whole_rows(&mut s, &found, &[None]);
        assert_eq!(
            s.to_string(),
            "SELECT json_agg(table_row('a', x.\"a\", 'b', x.\"b\", 'C', x.\"C\")) \
             FROM (SELECT a, t.b, c + 1 AS \"C\" FROM t) x"
        );
    }
}
