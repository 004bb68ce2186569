//! PostgreSQL spellings DataFusion does not plan, rewritten into the ones it
//! does, each with the same meaning:
//!
//! - `current_user`, `session_user`, `user`, `current_role`,
//!   `current_catalog` and a bare `current_schema` (keywords that take no
//!   parentheses) become function calls, and `localtimestamp` `now()` as a
//!   timestamp;
//! - an interval's text written as PostgreSQL prints one (`interval '1 day
//!   01:30:00'`) is put in the words Arrow reads;
//! - a number with an exponent (`1.5e3`) is written in digits (`1500`),
//!   which DataFusion reads as a numeric, or made a double when no numeric
//!   of 38 digits holds it;
//! - a template of PostgreSQL's (`YYYY-MM-DD HH24:MI`) given to `to_date`
//!   or `to_timestamp` becomes the chrono format DataFusion's functions
//!   read, and `to_char` with a literal template calls tablegate's
//!   `to_char_template`;
//! - `substring(s from 'pattern')` (a text, not a position) becomes the
//!   first element of `regexp_match(s, 'pattern')`: the part the regular
//!   expression matches, or its first parenthesized part's;
//! - `x op ANY (subquery)` and `x op ALL (subquery)` become membership
//!   tests or comparisons with the subquery's bounds
//!   (`super::set_comparisons`);
//! - `OPERATOR(pg_catalog.~)` and the like become the plain operator;
//! - `COLLATE pg_catalog.default` (or `"default"`, `"C"`) is dropped: text
//!   compares by bytes, which is the C collation;
//! - `pg_catalog.f(...)` becomes `f(...)`, the functions being registered
//!   without a schema;
//! - casts to `pg_catalog.text`, `"char"`, `name`, `oid` and the other
//!   catalog types become casts to the SQL types that hold them;
//! - `'name'::regclass` (a literal or parameter) becomes the table's object
//!   id (an error if there is no such table, as in PostgreSQL), and
//!   `'name'::regnamespace` the schema's, while
//!   `oid_column::regclass` becomes the table's name, and
//!   `oid_column::regtype` the type's name (`::regnamespace` the
//!   schema's): a `regclass` compares as a
//!   number and prints as a name, and these are the two uses.
//!
//! - a scalar subquery that does not aggregate, `(SELECT x FROM t WHERE
//!   t.k = o.k)`, returns `single_value(x)`: DataFusion plans correlated
//!   scalar subqueries only around an aggregate, and this one gives exactly
//!   PostgreSQL's answer (the only row's value, NULL for none, an error for
//!   more than one).
//!
//! - `ARRAY(SELECT x FROM ... ORDER BY y)` becomes
//!   `coalesce((SELECT array_agg(x ORDER BY y) FROM ...), make_array())`:
//!   the rows' values in order, and an empty array for no rows.
//!
//! - `generate_subscripts(a, 1)` becomes `unnest(range(1, cardinality(a) +
//!   1))` (the length cast to bigint), which a select list unnests in step with `unnest(a)`, as
//!   PostgreSQL does;
//! - `generate_series(...)` in an expression (a select list's) becomes
//!   `unnest(generate_series(...))`: a row per value, as PostgreSQL's
//!   set-returning function gives, where DataFusion's returns one array;
//! - `information_schema._pg_expandarray(a)` becomes
//!   `unnest(_pg_expandarray(a))`, one `(x, n)` row per element,
//!   `pg_partition_ancestors(t)` no rows (no table is partitioned),
//!   and `(row).field` becomes `get_field(row, 'field')`;
//! - a column compared with an integer array literal (`polroles = '{0}'`)
//!   is compared with `make_array(0)`.
//!
//! - in a subquery, `x = ANY(o.a)` where `o.a` is an array column of a
//!   table `t` of the outer query becomes a join with `(SELECT DISTINCT
//!   unnest(a) AS v, a FROM t)` on `x = v`, correlated by `a = o.a`: the
//!   same rows, and an equality DataFusion can decorrelate.
//!
//! - a SELECT that reads, through an inner join, a catalog that never has
//!   rows (`pg_policy`, `pg_publication`, ...) and does not aggregate
//!   returns no rows: its WHERE becomes `false` and its select items that
//!   hold subqueries NULL, so that a subquery DataFusion cannot plan does
//!   not fail a query whose answer is known to be empty;
//! - `FETCH FIRST n ROWS ONLY` becomes `LIMIT n`;
//! - `ROW(x, y)` becomes `row_value('f1', x, 'f2', y)` (`super::records`);
//! - `percentile_disc(p) WITHIN GROUP (ORDER BY x)` becomes the element of
//!   `array_agg(x ORDER BY x)` (NULLs left out) at `ceil(p * count(x))`,
//!   `mode() WITHIN GROUP (ORDER BY x)` the most frequent value of that
//!   list (`super::ordered_sets`), and `json_agg(...)` `array_agg(...)`
//!   written as JSON;
//! - JSON's `->`, `->>`, `#>` and `#>>` become calls of the functions in
//!   `super::json`, and a cast to `json` or `jsonb` a call of its input
//!   function there (JSON is held as its text);
//! - a set-returning function in FROM that reads a table before it
//!   (`FROM t, jsonb_array_elements_text(t.tags) AS tag`) moves into that
//!   table: `(SELECT t.*, ... AS tag FROM t) AS t`;
//! - `FROM pg_catalog.generate_series(...)` loses the schema, its column is
//!   named by the table alias or else `generate_series`, and repeated
//!   unnamed select items (`SELECT NULL, NULL`) get distinct aliases (the
//!   client still sees PostgreSQL's names, taken before rewriting).
//!
//! Anything else is left for DataFusion, which reports what it cannot plan.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, CastKind, DataType, Expr, Function, FunctionArg,
    FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, ObjectName, ObjectNamePart, Query,
    Select, SelectItem, SetExpr, Statement, TableFactor, TableWithJoins, TimezoneInfo,
    UnaryOperator, Value,
};

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;

use super::functions::SINGLE_VALUE;
use super::templates::{chrono_format, ToChar};
use super::time_zone::SessionZone;

/// Functions that PostgreSQL calls without parentheses.
const KEYWORD_FUNCTIONS: &[(&str, &str)] = &[
    ("current_user", "current_user"),
    ("session_user", "session_user"),
    ("user", "current_user"),
    ("current_role", "current_user"),
    ("current_catalog", "current_database"),
    ("current_schema", "current_schema"),
];

/// `array_agg(x ORDER BY x) FILTER (WHERE x IS NOT NULL)`: the values an
/// ordered-set aggregate reads, in its order.
fn sorted_values(order: &datafusion::sql::sqlparser::ast::OrderByExpr) -> Expr {
    use datafusion::sql::sqlparser::ast::{FunctionArgumentClause, FunctionArgumentList};
    let value = order.expr.clone();
    let mut values = call("array_agg", vec![value.clone()]);
    if let Expr::Function(values) = &mut values {
        values.args = FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(value.clone()))],
            clauses: vec![FunctionArgumentClause::OrderBy(vec![order.clone()])],
        });
        values.filter = Some(Box::new(Expr::IsNotNull(Box::new(value))));
    }
    values
}

/// A LIKE pattern with escape character `escape` (none: `ESCAPE ''`)
/// written with the backslash as its escape character instead.
fn backslash_escaped(pattern: &str, escape: Option<char>) -> String {
    let mut escaped = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            if let Some(next) = chars.next() {
                escaped.push('\\');
                escaped.push(next);
            }
        } else if c == '\\' {
            escaped.push_str("\\\\");
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// The regular expression of a `SIMILAR TO` pattern, as PostgreSQL's
/// `similar_to_escape` makes it: `%` is `.*`, `_` is `.`, a `.`, `^` or `$`
/// is itself, the escape character makes the next character itself, the
/// rest (`|`, `*`, `+`, `?`, `{m,n}`, `( )`, `[...]`) is the regular
/// expression's; the whole text must match.
fn similar_to_regex(pattern: &str, escape: Option<char>) -> String {
    let mut regex = String::from("^(?:");
    let mut chars = pattern.chars();
    let mut in_brackets = false;
    while let Some(c) = chars.next() {
        match c {
            c if Some(c) == escape => {
                if let Some(next) = chars.next() {
                    regex.push_str(&regex_syntax_escape(next));
                }
            }
            '[' => {
                in_brackets = true;
                regex.push(c);
            }
            ']' => {
                in_brackets = false;
                regex.push(c);
            }
            c if in_brackets => regex.push(c),
            '%' => regex.push_str(".*"),
            '_' => regex.push('.'),
            '.' | '^' | '$' | '\\' => regex.push_str(&regex_syntax_escape(c)),
            c => regex.push(c),
        }
    }
    regex.push_str(")$");
    regex
}

/// A character as itself in a regular expression.
fn regex_syntax_escape(c: char) -> String {
    match c {
        c if c.is_ascii_punctuation() => format!("\\{c}"),
        c => c.to_string(),
    }
}

/// `[NOT] EXISTS (subquery)` in a select list, which DataFusion plans only
/// in a WHERE, as `(SELECT count(*) ...) > 0` (`= 0`): the subquery's own
/// rows counted when it is a plain SELECT of columns or constants (its
/// correlation with the outer row kept), else counted from it as a
/// derived table. Found in the item itself and in the NOT, AND / OR,
/// comparisons, parentheses, casts and CASE around it.
///
/// `x [NOT] IN (subquery)` there (and `x = ANY (subquery)`), which
/// DataFusion plans only in a WHERE too, is read as EXISTS tests with PostgreSQL's three values: true when
/// a row equals `x`; else NULL when `x` is NULL and there are rows, or
/// when a row is NULL; else false.
fn exists_counted(expr: &mut Expr) {
    match expr {
        // `x = ANY (subquery)` is `x IN (subquery)`.
        Expr::AnyOp { .. } => {
            if let Some(membership @ Expr::InSubquery { .. }) =
                super::set_comparisons::without_set_comparison(expr)
            {
                *expr = membership;
                exists_counted(expr);
            }
        }
        Expr::InSubquery {
            expr: tested,
            subquery,
            negated,
        } => {
            let rows = format!("SELECT 1 FROM ({subquery}) AS \"__tablegate_in\"(\"v\")");
            let sql = format!(
                "{not}(CASE WHEN EXISTS ({rows} WHERE \"__tablegate_in\".\"v\" = ({tested})) THEN true \
                 WHEN ({tested}) IS NULL AND EXISTS ({rows}) THEN NULL \
                 WHEN EXISTS ({rows} WHERE \"__tablegate_in\".\"v\" IS NULL) THEN NULL \
                 ELSE false END)",
                not = if *negated { "NOT " } else { "" },
            );
            if let Some(mut tests) = parse_expr(&sql) {
                exists_counted(&mut tests);
                *expr = tests;
            }
        }
        Expr::Exists { subquery, negated } => {
            if let Some(counted) = rows_counted(subquery) {
                *expr = Expr::BinaryOp {
                    left: Box::new(counted),
                    op: match negated {
                        true => BinaryOperator::Eq,
                        false => BinaryOperator::Gt,
                    },
                    right: Box::new(Expr::Value(Value::Number("0".into(), false).into())),
                };
            }
        }
        Expr::UnaryOp { expr: inner, .. }
        | Expr::Nested(inner)
        | Expr::Cast { expr: inner, .. }
        | Expr::IsNull(inner)
        | Expr::IsNotNull(inner)
        | Expr::IsTrue(inner)
        | Expr::IsFalse(inner) => exists_counted(inner),
        Expr::BinaryOp { left, right, .. } => {
            exists_counted(left);
            exists_counted(right);
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            for e in operand.iter_mut().chain(else_result.iter_mut()) {
                exists_counted(e);
            }
            for when in conditions {
                exists_counted(&mut when.condition);
                exists_counted(&mut when.result);
            }
        }
        _ => {}
    }
}

/// `(SELECT count(*) ...)` of a subquery's rows.
fn rows_counted(subquery: &Query) -> Option<Expr> {
    let parse = |sql: &str| {
        datafusion::sql::sqlparser::parser::Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .ok()?
            .parse_expr()
            .ok()
    };
    let plain_item = |item: &SelectItem| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            is_column(e) || matches!(e, Expr::Value(_))
        }
        _ => true,
    };
    let plain = subquery.with.is_none()
        && subquery.order_by.is_none()
        && subquery.limit_clause.is_none()
        && subquery.fetch.is_none()
        && matches!(subquery.body.as_ref(), SetExpr::Select(select)
            if select.distinct.is_none()
                && select.having.is_none()
                && matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty())
                && select.projection.iter().all(plain_item));
    if !plain {
        return parse(&format!("(SELECT count(*) FROM ({subquery}) AS __exists)"));
    }
    let mut counted = subquery.clone();
    if let SetExpr::Select(select) = counted.body.as_mut() {
        select.projection = vec![SelectItem::UnnamedExpr(parse("count(*)")?)];
    }
    Some(Expr::Subquery(Box::new(counted)))
}

/// An expression from its text, in PostgreSQL's dialect.
pub(super) fn parse_expr(sql: &str) -> Option<Expr> {
    datafusion::sql::sqlparser::parser::Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .ok()?
        .parse_expr()
        .ok()
}

pub(super) fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: argument_list(args),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// A call's arguments: these values, in order.
fn argument_list(args: Vec<Expr>) -> FunctionArguments {
    FunctionArguments::List(datafusion::sql::sqlparser::ast::FunctionArgumentList {
        duplicate_treatment: None,
        args: args
            .into_iter()
            .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
            .collect(),
        clauses: vec![],
    })
}

fn is_pg_catalog(part: &ObjectNamePart) -> bool {
    part.as_ident()
        .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog"))
}

/// The last part of a name of something in pg_catalog, written alone or
/// qualified by `pg_catalog` (which PostgreSQL searches first).
fn pg_catalog_name(name: &ObjectName) -> Option<&Ident> {
    match name.0.as_slice() {
        [part] => part.as_ident(),
        [schema, part] if is_pg_catalog(schema) => part.as_ident(),
        _ => None,
    }
}

/// The plain operator an `OPERATOR(pg_catalog.op)` names.
fn plain_operator(parts: &[String]) -> Option<BinaryOperator> {
    let op = match parts {
        [schema, op] if schema.eq_ignore_ascii_case("pg_catalog") => op.as_str(),
        [op] => op.as_str(),
        _ => return None,
    };
    Some(match op {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        _ => return None,
    })
}

/// The name of a type the parser does not know (`pg_catalog.text`,
/// `"char"`, `regclass`), without its schema.
fn custom_type(data_type: &DataType) -> Option<String> {
    match data_type {
        DataType::Custom(name, _) => name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| i.value.to_lowercase()),
        DataType::Regclass => Some("regclass".into()),
        _ => None,
    }
}

/// The SQL type that holds values of a catalog type (named with or without
/// `pg_catalog.`).
fn builtin(name: &str) -> Option<DataType> {
    Some(match name {
        "text" | "name" | "char" | "bpchar" | "varchar" => DataType::Text,
        "int2" | "smallint" => DataType::SmallInt(None),
        "int4" | "int" | "integer" | "oid" | "xid" | "cid" => DataType::Int(None),
        "int8" | "bigint" => DataType::BigInt(None),
        "bool" | "boolean" => DataType::Boolean,
        "float4" | "real" => DataType::Real,
        "float8" => DataType::DoublePrecision,
        "numeric" => DataType::Numeric(datafusion::sql::sqlparser::ast::ExactNumberInfo::None),
        "date" => DataType::Date,
        _ => return None,
    })
}

/// `typname[0]` as `substr(typname, 0 + 1, 1)`: PostgreSQL subscripts a
/// `name` as its characters from 0 (pg_dump reads `typname[0] = '_'`), and
/// pg_type's names are text here.
fn type_name_character(expr: &Expr) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{AccessExpr, Subscript};
    let Expr::CompoundFieldAccess { root, access_chain } = expr else {
        return None;
    };
    let name = match root.as_ref() {
        Expr::Identifier(name) => name,
        Expr::CompoundIdentifier(parts) => parts.last()?,
        _ => return None,
    };
    let [AccessExpr::Subscript(Subscript::Index { index })] = access_chain.as_slice() else {
        return None;
    };
    if !name.value.eq_ignore_ascii_case("typname") {
        return None;
    }
    parse_expr(&format!("substr({root}, ({index}) + 1, 1)"))
}

fn is_value(expr: &Expr) -> bool {
    matches!(expr, Expr::Value(_))
}

/// A series' second bound, a text, cast to the type of its first, a date
/// or time type, as PostgreSQL resolves the arguments' common type
/// (`generate_series('2024-01-01'::date, '2024-02-01', '1 day')`).
fn bound_typed_as(first: &Expr, second: &Expr) -> Option<Expr> {
    let ty = match first {
        Expr::Cast { data_type, .. } => data_type,
        Expr::TypedString(typed) => &typed.data_type,
        _ => return None,
    };
    let untyped =
        matches!(second, Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_)));
    (untyped && matches!(ty, DataType::Timestamp(..) | DataType::Date)).then(|| Expr::Cast {
        kind: CastKind::DoubleColon,
        expr: Box::new(second.clone()),
        data_type: ty.clone(),
        array: false,
        format: None,
    })
}

/// A text literal that is not a number (`'1 day'`) as an interval, as
/// PostgreSQL reads an untyped literal for `generate_series`' step.
fn interval_step_of(expr: &Expr) -> Option<Expr> {
    let Expr::Value(v) = expr else {
        return None;
    };
    match &v.value {
        Value::SingleQuotedString(text) if text.trim().parse::<f64>().is_err() => {
            parse_expr(&format!("CAST({expr} AS INTERVAL)"))
        }
        _ => None,
    }
}

/// Aggregate functions, whose presence makes a subquery return one row.
const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "array_agg",
    "string_agg",
    "bool_and",
    "bool_or",
    "every",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "json_agg",
    "jsonb_agg",
    "first_value",
    "last_value",
];

pub(super) fn aggregates(expr: &Expr) -> bool {
    let mut found = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
        if let Expr::Function(f) = e {
            let name = f.name.to_string().to_lowercase();
            if f.over.is_some() || AGGREGATES.contains(&name.as_str()) {
                found = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    found
}

/// Each table factor of a FROM list: an item's first relation, then its
/// joins'.
pub(super) fn factors(from: &[TableWithJoins]) -> impl Iterator<Item = &TableFactor> {
    from.iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
}

/// [`factors`], to change them.
pub(super) fn factors_mut(from: &mut [TableWithJoins]) -> impl Iterator<Item = &mut TableFactor> {
    from.iter_mut().flat_map(|t| {
        std::iter::once(&mut t.relation).chain(t.joins.iter_mut().map(|j| &mut j.relation))
    })
}

/// Whether a SELECT has no GROUP BY.
pub(super) fn ungrouped(select: &Select) -> bool {
    matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty())
}

/// The names a subquery's FROM clause gives its tables (aliases, or the
/// table names).
pub(super) fn inner_names(select: &Select) -> Vec<String> {
    let mut names = Vec::new();
    for factor in factors(&select.from) {
        match factor {
            TableFactor::Table { name, alias, .. } => {
                if let Some(last) = name.0.last().and_then(|p| p.as_ident()) {
                    names.push(last.value.to_lowercase());
                }
                if let Some(alias) = alias {
                    names.push(alias.name.value.to_lowercase());
                }
            }
            TableFactor::Derived {
                alias: Some(alias), ..
            } => names.push(alias.name.value.to_lowercase()),
            _ => return Vec::new(),
        }
    }
    names
}

/// Where an expression's columns come from: `Some(true)` when every one is
/// qualified by a table of the subquery (`inner`), `Some(false)` when every
/// one is qualified by another table, `None` otherwise (or without columns).
fn side(expr: &Expr, inner: &[String]) -> Option<bool> {
    side_of(expr, inner, None)
}

/// [`side`], with unqualified columns on side `unqualified` (`None`: on
/// neither).
fn side_of(expr: &Expr, inner: &[String], unqualified: Option<bool>) -> Option<bool> {
    let mut side = None;
    let mut mixed = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
        let this = match e {
            // `t.col` or `schema.t.col`: the table is the part before the column.
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                Some(inner.contains(&parts[parts.len() - 2].value.to_lowercase()))
            }
            Expr::Identifier(_) => unqualified,
            Expr::CompoundIdentifier(_) | Expr::Subquery(_) => None,
            _ => return ControlFlow::Continue(()),
        };
        match (this, side) {
            (Some(t), None) => side = Some(t),
            (Some(t), Some(s)) if t == s => {}
            _ => {
                mixed = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    if mixed {
        None
    } else {
        side
    }
}

fn only_outer(expr: &Expr, inner: &[String]) -> bool {
    side(expr, inner) == Some(false)
}

fn only_inner(expr: &Expr, inner: &[String]) -> bool {
    side(expr, inner) == Some(true)
}

/// Whether a condition equates an inner expression with an outer one:
/// the outer side, then the inner.
fn joins(c: &Expr, inner: &[String]) -> Option<(Expr, Expr)> {
    equated(c, inner, None)
}

/// `inner = outer` either way round, as (outer, inner): the inner side's
/// columns all qualified by `inner`'s tables, the outer side's by others;
/// unqualified columns on side `unqualified` (see [`side_of`]).
fn equated(c: &Expr, inner: &[String], unqualified: Option<bool>) -> Option<(Expr, Expr)> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = c
    else {
        return None;
    };
    match (
        side_of(left, inner, unqualified),
        side_of(right, inner, unqualified),
    ) {
        (Some(true), Some(false)) => Some(((**right).clone(), (**left).clone())),
        (Some(false), Some(true)) => Some(((**left).clone(), (**right).clone())),
        _ => None,
    }
}

/// In conditions that compare the outer row with the inner rows other than
/// by a join equality (`a.x <> t.y`), puts for an outer expression the inner
/// one a join equality equates it with (`c.oid = a.x`): the same wherever
/// the equality holds, and a condition DataFusion can decorrelate.
fn substitute_joined(conditions: &mut [Expr], inner: &[String]) {
    let joined: Vec<(String, Expr)> = conditions
        .iter()
        .filter_map(|c| joins(c, inner))
        .map(|(outer, with)| (outer.to_string(), with))
        .collect();
    if joined.is_empty() {
        return;
    }
    for c in conditions.iter_mut() {
        if joins(c, inner).is_some() || only_outer(c, inner) || only_inner(c, inner) {
            continue;
        }
        let _ = visit_expressions_mut(c, |e| {
            let text = e.to_string();
            if let Some((_, with)) = joined.iter().find(|(outer, _)| *outer == text) {
                *e = with.clone();
            }
            ControlFlow::<()>::Continue(())
        });
    }
}

pub(super) fn conjuncts(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner)
            if matches!(
                inner.as_ref(),
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) =>
        {
            conjuncts(*inner, out)
        }
        other => out.push(other),
    }
}

pub(super) fn and_all(mut exprs: Vec<Expr>) -> Option<Expr> {
    let first = exprs.pop()?;
    Some(
        exprs
            .into_iter()
            .rev()
            .fold(first, |acc, e| Expr::BinaryOp {
                left: Box::new(e),
                op: BinaryOperator::And,
                right: Box::new(acc),
            }),
    )
}

/// Wraps the expression of a scalar subquery that returns its rows as they
/// are (no grouping, DISTINCT, ORDER BY or LIMIT, and no aggregate: an
/// aggregate's conditions only get the outer side of a join equality put
/// for its outer expression, as below) in
/// `single_value`, and takes out the conditions of its WHERE that only test
/// the outer row: returned, to guard the whole subquery (`CASE WHEN cond
/// THEN (subquery) END`: a false or NULL condition leaves no rows, hence
/// NULL), since DataFusion decorrelates only conditions that join.
///
/// When the value also uses the outer row (`(SELECT f(o.x, t.y) FROM t
/// WHERE ...)`), which DataFusion cannot decorrelate, the subquery returns
/// its own columns in a struct and the value is computed outside:
/// `CASE WHEN s IS NOT NULL THEN f(o.x, get_field(s, 'c0')) END`, the
/// outside expression being returned with [`SUBQUERY`] standing for `s`.
fn single_value(query: &mut Query) -> (Option<Expr>, Option<Expr>) {
    if query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
        return (None, None);
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return (None, None);
    };
    if !ungrouped(select) || select.having.is_some() || select.distinct.is_some() {
        return (None, None);
    }
    let inner = inner_names(select);
    let [item] = select.projection.as_mut_slice() else {
        return (None, None);
    };
    let expr = match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return (None, None),
    };
    if aggregates(expr) {
        // An aggregate's rows are filtered all the same with the outer
        // side of a join equality in place of the outer expression, and
        // the comparison then one DataFusion can decorrelate.
        if let Some(selection) = select.selection.take() {
            let mut all = Vec::new();
            conjuncts(selection, &mut all);
            substitute_joined(&mut all, &inner);
            select.selection = and_all(all);
        }
        return (None, None);
    }
    let outside = if inner.is_empty() {
        None
    } else {
        pull_out(expr, &inner)
    };
    *expr = call(SINGLE_VALUE, vec![expr.clone()]);
    if inner.is_empty() {
        return (None, outside);
    }
    let Some(selection) = select.selection.take() else {
        return (None, outside);
    };
    let mut all = Vec::new();
    conjuncts(selection, &mut all);
    substitute_joined(&mut all, &inner);
    let (outer, kept): (Vec<Expr>, Vec<Expr>) =
        all.into_iter().partition(|c| only_outer(c, &inner));
    select.selection = and_all(kept);
    (and_all(outer), outside)
}

/// What stands for the subquery in the expression [`pull_out`] returns.
const SUBQUERY: &str = "__tablegate_subquery";

/// Replaces a subquery value that uses outer columns by a struct of the
/// inner columns it uses, and returns the value computed from that struct
/// (see [`single_value`]); `None` when the value uses no outer column or a
/// column whose table is not named.
fn pull_out(value: &mut Expr, inner: &[String]) -> Option<Expr> {
    let mut inner_columns: Vec<Expr> = Vec::new();
    let mut uses_outer = false;
    let mut unqualified = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(&*value, |e| {
        match e {
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                if inner.contains(&parts[parts.len() - 2].value.to_lowercase()) {
                    if !inner_columns.iter().any(|c| c.to_string() == e.to_string()) {
                        inner_columns.push(e.clone());
                    }
                } else {
                    uses_outer = true;
                }
            }
            Expr::Identifier(_) | Expr::Subquery(_) => unqualified = true,
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    if !uses_outer || unqualified {
        return None;
    }
    let text = |s: &str| Expr::Value(Value::SingleQuotedString(s.into()).into());
    let mut outside = value.clone();
    let _ = visit_expressions_mut(&mut outside, |e| {
        let shown = e.to_string();
        if let Some(i) = inner_columns.iter().position(|c| c.to_string() == shown) {
            *e = call(
                "get_field",
                vec![
                    Expr::Identifier(Ident::new(SUBQUERY)),
                    text(&format!("c{i}")),
                ],
            );
        }
        ControlFlow::<()>::Continue(())
    });
    let mut fields = Vec::new();
    for (i, column) in inner_columns.into_iter().enumerate() {
        fields.push(text(&format!("c{i}")));
        fields.push(column);
    }
    if fields.is_empty() {
        fields = vec![text("c0"), Expr::Value(Value::Boolean(true).into())];
    }
    *value = call("named_struct", fields);
    Some(outside)
}

fn case_when(condition: Expr, result: Expr) -> Expr {
    Expr::Case {
        case_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(
        ),
        end_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen { condition, result }],
        else_result: None,
    }
}

/// `ARRAY(subquery)` as an aggregate of the subquery's rows (or, over the
/// elements of one array, see [`elements_mapped`]); `None` when the
/// subquery is not one plain SELECT of one column without LIMIT.
fn array_of(query: &Query) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{FunctionArgumentClause, OrderByKind};
    if query.limit_clause.is_some() || query.fetch.is_some() {
        return None;
    }
    if let Some(mapped) = elements_mapped(query) {
        return Some(mapped);
    }
    let mut query = query.clone();
    let order = match query.order_by.take() {
        Some(o) => match o.kind {
            OrderByKind::Expressions(e) => e,
            OrderByKind::All(_) => return None,
        },
        None => Vec::new(),
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let [item] = select.projection.as_mut_slice() else {
        return None;
    };
    let (value, alias) = match item {
        SelectItem::UnnamedExpr(e) => (e, None),
        SelectItem::ExprWithAlias { expr: e, alias } => (e, Some(alias.value.clone())),
        _ => return None,
    };
    // `ORDER BY 1` or the alias name the selected value itself.
    let mut order = order;
    for o in &mut order {
        let names_value = match &o.expr {
            Expr::Value(v) => v.to_string() == "1",
            Expr::Identifier(i) => alias.as_deref() == Some(i.value.as_str()),
            _ => false,
        };
        if names_value {
            o.expr = value.clone();
        }
    }
    let mut aggregate = call("array_agg", vec![value.clone()]);
    if let (Expr::Function(f), false) = (&mut aggregate, order.is_empty()) {
        if let FunctionArguments::List(list) = &mut f.args {
            list.clauses.push(FunctionArgumentClause::OrderBy(order));
        }
    }
    *value = aggregate;
    Some(call(
        "coalesce",
        vec![Expr::Subquery(Box::new(query)), call("make_array", vec![])],
    ))
}

/// `ARRAY(SELECT f(x) FROM unnest(a) AS x WHERE p(x))` as
/// `array_transform(array_filter(a, x -> p(x)), x -> f(x))` (an empty
/// array for a NULL one): the elements of one array, kept and mapped in
/// their order, without a subquery, which DataFusion cannot plan when `a`
/// is a column of the outer row (psql's `\d+` reads `unnest(tc.reloptions)`
/// so).
fn elements_mapped(query: &Query) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{
        LambdaFunction, LambdaFunctionParameter, LambdaSyntax, OneOrManyWithParens,
    };
    if query.order_by.is_some() || query.with.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    let plain = from.joins.is_empty()
        && ungrouped(select)
        && select.having.is_none()
        && select.distinct.is_none();
    let [SelectItem::UnnamedExpr(value) | SelectItem::ExprWithAlias { expr: value, .. }] =
        select.projection.as_slice()
    else {
        return None;
    };
    let (array, alias) = match &from.relation {
        TableFactor::UNNEST {
            alias,
            array_exprs,
            with_offset: false,
            with_ordinality: false,
            ..
        } => match array_exprs.as_slice() {
            [array] => (array.clone(), alias.as_ref()?),
            _ => return None,
        },
        // `unnest(a)` as a table function (`pg_catalog.unnest(a)`, or as
        // `name_table_functions` writes it).
        TableFactor::Table {
            name,
            args: Some(datafusion::sql::sqlparser::ast::TableFunctionArgs { args, .. }),
            alias: Some(alias),
            ..
        }
        | TableFactor::Function {
            name,
            args,
            alias: Some(alias),
            with_ordinality: false,
            ..
        } if name
            .0
            .last()?
            .as_ident()?
            .value
            .eq_ignore_ascii_case("unnest") =>
        {
            match args.as_slice() {
                [FunctionArg::Unnamed(FunctionArgExpr::Expr(array))] => (array.clone(), alias),
                _ => return None,
            }
        }
        _ => return None,
    };
    if !plain || aggregates(value) {
        return None;
    }
    // The element is the alias, or its one column.
    let table = alias.name.value.to_lowercase();
    let column = match alias.columns.as_slice() {
        [] => table.clone(),
        [column] => column.name.value.to_lowercase(),
        _ => return None,
    };
    const ELEMENT: &str = "__tablegate_element";
    let element = |expr: &Expr| {
        let mut expr = expr.clone();
        let _ = visit_expressions_mut(&mut expr, |e| {
            let names_element = match e {
                Expr::Identifier(i) => i.value.to_lowercase() == column,
                Expr::CompoundIdentifier(parts) => matches!(parts.as_slice(),
                    [t, c] if t.value.to_lowercase() == table && c.value.to_lowercase() == column),
                _ => false,
            };
            if names_element {
                *e = Expr::Identifier(Ident::new(ELEMENT));
            }
            ControlFlow::<()>::Continue(())
        });
        Expr::Lambda(LambdaFunction {
            params: OneOrManyWithParens::One(LambdaFunctionParameter {
                name: Ident::new(ELEMENT),
                data_type: None,
            }),
            body: Box::new(expr),
            syntax: LambdaSyntax::Arrow,
        })
    };
    let mut elements = array;
    if let Some(condition) = &select.selection {
        elements = call("array_filter", vec![elements, element(condition)]);
    }
    let is_element =
        |e: &Expr| matches!(e, Expr::Identifier(i) if i.value.to_lowercase() == column);
    if !is_element(value) {
        elements = call("array_transform", vec![elements, element(value)]);
    }
    Some(call("coalesce", vec![elements, call("make_array", vec![])]))
}

/// The length of a `varchar(n)` or a `char(n)`.
fn text_length(ty: &DataType) -> Option<u32> {
    use crate::catalog::SqlType;
    match super::types::sql_type(ty).ok()? {
        SqlType::Varchar(n) => n,
        SqlType::Char(n) => Some(n),
        _ => None,
    }
}

/// `'{1,2}'` as `make_array(1, 2)`, for a literal of integers only.
fn integer_array(expr: &Expr) -> Option<Expr> {
    let Expr::Value(v) = expr else {
        return None;
    };
    let text = v.value.clone().into_string()?;
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let items: Vec<Expr> = if inner.trim().is_empty() {
        Vec::new()
    } else {
        inner
            .split(',')
            .map(|n| {
                n.trim()
                    .parse::<i64>()
                    .ok()
                    .map(|n| Expr::Value(Value::Number(n.to_string(), false).into()))
            })
            .collect::<Option<_>>()?
    };
    Some(call("make_array", items))
}

/// `localtimestamp`: the statement's start as a timestamp without time
/// zone (its wall time in the session's zone: see `wall_times`).
fn local_timestamp() -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(call("now", vec![])),
        data_type: DataType::Timestamp(None, TimezoneInfo::WithoutTimeZone),
        array: false,
        format: None,
    }
}

/// `localtime`: the time of day of `localtimestamp`.
fn local_time() -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(local_timestamp()),
        data_type: DataType::Time(None, TimezoneInfo::None),
        array: false,
        format: None,
    }
}

/// The most digits a `numeric` holds here (a 128-bit decimal's).
const NUMERIC_DIGITS: usize = 38;

/// A number literal written with an exponent, written out in digits
/// (`1.5e3` is `1500`, `1.50e1` is `15.0`: PostgreSQL's numeric of it),
/// when a numeric holds it. DataFusion reads the exponent into a negative
/// scale, which its arithmetic and the wire's numeric do not take. `None`
/// for a literal without an exponent, and for one no numeric holds
/// (`1e300`).
fn number_in_digits(text: &str) -> Option<String> {
    super::decimals::without_exponent(text, NUMERIC_DIGITS)
}

/// The arguments of a function call, when all are plain expressions.
pub(super) fn arguments(f: &Function) -> Vec<&Expr> {
    let FunctionArguments::List(list) = &f.args else {
        return Vec::new();
    };
    list.args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(arg)) => Some(arg),
            _ => None,
        })
        .collect::<Option<_>>()
        .unwrap_or_default()
}

/// `make_interval(years, months, weeks, days, hours, mins, secs)`, its
/// arguments by position or by name (`days => 3`), each missing one 0: the
/// sum of each argument times its unit (`interval '1 day' * CAST(3 AS
/// bigint)`; the seconds a double). `None` for an argument of another name.
fn made_interval(f: &Function) -> Option<Expr> {
    const UNITS: [(&str, &str); 7] = [
        ("years", "1 year"),
        ("months", "1 month"),
        ("weeks", "7 days"),
        ("days", "1 day"),
        ("hours", "1 hour"),
        ("mins", "1 minute"),
        ("secs", "1 second"),
    ];
    let interval = |text: &str| {
        Expr::Interval(datafusion::sql::sqlparser::ast::Interval {
            value: Box::new(Expr::Value(Value::SingleQuotedString(text.into()).into())),
            leading_field: None,
            leading_precision: None,
            last_field: None,
            fractional_seconds_precision: None,
        })
    };
    let mut terms: Vec<Expr> = Vec::new();
    let list = match &f.args {
        FunctionArguments::List(list) => list.args.as_slice(),
        _ => &[],
    };
    for (position, arg) in list.iter().enumerate() {
        let ((name, unit), value) = match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) => (UNITS.get(position)?, value),
            FunctionArg::Named {
                name,
                arg: FunctionArgExpr::Expr(value),
                ..
            }
            | FunctionArg::ExprNamed {
                name: Expr::Identifier(name),
                arg: FunctionArgExpr::Expr(value),
                ..
            } => {
                let unit = UNITS
                    .iter()
                    .find(|(n, _)| name.value.eq_ignore_ascii_case(n))?;
                (unit, value)
            }
            _ => return None,
        };
        terms.push(Expr::BinaryOp {
            left: Box::new(interval(unit)),
            op: BinaryOperator::Multiply,
            right: Box::new(Expr::Cast {
                kind: CastKind::Cast,
                expr: Box::new(value.clone()),
                data_type: match *name {
                    "secs" => DataType::DoublePrecision,
                    _ => DataType::BigInt(None),
                },
                array: false,
                format: None,
            }),
        });
    }
    let sum = terms.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::Plus,
        right: Box::new(b),
    });
    Some(Expr::Nested(Box::new(
        sum.unwrap_or_else(|| interval("0 seconds")),
    )))
}

/// The one argument of a function call.
fn only_argument(f: &Function) -> Option<&Expr> {
    match arguments(f).as_slice() {
        [arg] => Some(arg),
        _ => None,
    }
}

/// The one argument of `expr`, a function call.
fn only_argument_of(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::Function(f) => only_argument(f),
        _ => None,
    }
}

/// Whether `expr` calls the function `name` (without a schema).
fn is_call(expr: &Expr, name: &str) -> bool {
    matches!(expr, Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case(name))
}

/// `v` of `regclass(v)`, the rewrite of `v::regclass` for a value `v`.
fn regclass_of_value(expr: &Expr) -> Option<Expr> {
    if !is_call(expr, "regclass") {
        return None;
    }
    only_argument_of(expr).filter(|v| is_value(v)).cloned()
}

/// PostgreSQL's functions that DataFusion lacks or answers otherwise, written
/// with its own: `div(a, b)`, the quotient truncated toward zero (a
/// numeric), `make_timestamp(year, month, day, hour, min, sec)`,
/// `to_number`, `array_replace` and `generate_series` as PostgreSQL reads
/// them, `cardinality` an integer, and `array_length` and `array_upper`,
/// NULL for an empty array.
fn postgres_function(expr: &Expr) -> Option<Expr> {
    let Expr::Function(f) = expr else {
        return None;
    };
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let args: Vec<&Expr> = list
        .args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let sql = match (f.name.to_string().to_lowercase().as_str(), args.as_slice()) {
        ("div", [a, b]) => format!("trunc(CAST({a} AS NUMERIC) / CAST({b} AS NUMERIC))"),
        ("make_timestamp", [year, month, day, hour, min, sec]) => format!(
            "CAST(make_date({year}, {month}, {day}) AS TIMESTAMP) + ({hour}) * INTERVAL '1 hour' \
             + ({min}) * INTERVAL '1 minute' + CAST({sec} AS DOUBLE PRECISION) * INTERVAL '1 second'"
        ),
        // The digits, sign and decimal point of the text, as a numeric
        // with as many decimals as a literal template has after its `D`
        // or `.` (`to_number('1,234.50', '9G999D99')` is 1234.50).
        ("to_number", [text, template]) => {
            let scale = match template {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(t) => t
                        .to_uppercase()
                        .split_once(['D', '.'])
                        .map(|(_, decimals)| decimals.chars().filter(|c| matches!(c, '9' | '0')).count()),
                    _ => None,
                },
                _ => None,
            };
            let ty = match scale {
                Some(scale) => format!("NUMERIC(38, {scale})"),
                None => "NUMERIC".into(),
            };
            format!("CAST(regexp_replace({text}, '[^0-9.+-]', '', 'g') AS {ty})")
        }
        // PostgreSQL's replaces every element equal to `from`.
        ("array_replace", [array, from, to]) => format!("array_replace_all({array}, {from}, {to})"),
        // A step written as a text is an interval (`'1 day'`), a bound
        // written as a text takes the other's type.
        ("generate_series", [start, stop, step]) => {
            let typed_stop = bound_typed_as(start, stop);
            let interval_step = interval_step_of(step);
            if typed_stop.is_none() && interval_step.is_none() {
                return None;
            }
            let stop = typed_stop.unwrap_or_else(|| (*stop).clone());
            let step = interval_step.unwrap_or_else(|| (*step).clone());
            format!("generate_series({start}, {stop}, {step})")
        }
        // Arrays start at 1, and an empty one has no dimensions: its
        // length and upper bound are NULL. A bigint, as generate_series
        // takes it (pgJDBC's `generate_series(1, array_upper(a, 1))`).
        // An integer, as PostgreSQL's (DataFusion's is unsigned, which
        // goes to the wire as a numeric).
        ("cardinality", [array]) => format!("CAST(cardinality({array}) AS INTEGER)"),
        ("array_length" | "array_upper", [array, dimension]) => {
            format!("CAST(nullif(array_length({array}, {dimension}), 0) AS BIGINT)")
        }
        _ => return None,
    };
    parse_expr(&sql)
}

fn rewrite_expr(expr: &mut Expr) {
    super::records::row_nullness(expr);
    super::records::row_comparison(expr);
    super::date_fields::postgres_date_fields(expr);
    if let Some(written) = postgres_function(expr).or_else(|| type_name_character(expr)) {
        *expr = written;
    }
    match expr {
        // JSON's operators, as calls of tablegate's functions.
        Expr::BinaryOp { left, op, right }
            if matches!(
                op,
                BinaryOperator::Arrow
                    | BinaryOperator::LongArrow
                    | BinaryOperator::HashArrow
                    | BinaryOperator::HashLongArrow
            ) =>
        {
            let function = match op {
                BinaryOperator::Arrow => super::json::GET,
                BinaryOperator::LongArrow => super::json::GET_TEXT,
                BinaryOperator::HashArrow => super::json::GET_PATH,
                _ => super::json::GET_PATH_TEXT,
            };
            *expr = call(function, vec![(**left).clone(), (**right).clone()]);
        }
        // `x SIMILAR TO 'pattern'`, as the regular expression PostgreSQL
        // makes of the pattern (DataFusion read it as one already).
        Expr::SimilarTo {
            negated,
            expr: tested,
            pattern,
            escape_char,
        } => {
            let escape = match escape_char.as_ref().map(|v| &v.value) {
                None => Some('\\'),
                Some(Value::SingleQuotedString(e)) => e.chars().next(),
                Some(_) => return,
            };
            if let Expr::Value(v) = pattern.as_ref() {
                if let Value::SingleQuotedString(text) = &v.value {
                    let regex = Value::SingleQuotedString(similar_to_regex(text, escape));
                    *expr = Expr::BinaryOp {
                        left: tested.clone(),
                        op: match negated {
                            true => BinaryOperator::PGRegexNotMatch,
                            false => BinaryOperator::PGRegexMatch,
                        },
                        right: Box::new(Expr::Value(regex.into())),
                    };
                }
            }
        }
        // `LIKE 'a#_%' ESCAPE '#'`: the pattern with the backslash that
        // DataFusion's LIKE reads as its only escape character.
        Expr::Like {
            pattern,
            escape_char,
            ..
        }
        | Expr::ILike {
            pattern,
            escape_char,
            ..
        } => {
            let escape = match escape_char.as_ref().map(|v| &v.value) {
                Some(Value::SingleQuotedString(e)) if e != "\\" => e.chars().next(),
                _ => return,
            };
            if let Expr::Value(v) = pattern.as_mut() {
                if let Value::SingleQuotedString(text) = &mut v.value {
                    *text = backslash_escaped(text, escape);
                    *escape_char = None;
                }
            }
        }
        // `substring(s from 'pattern')`: the part of `s` the regular
        // expression matches, or its first parenthesized part's match.
        Expr::Substring {
            expr: text,
            substring_from: Some(from),
            substring_for: None,
            ..
        } if matches!(from.as_ref(), Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_))) =>
        {
            let matched = call("regexp_match", vec![(**text).clone(), (**from).clone()]);
            let first = Expr::Value(Value::Number("1".into(), false).into());
            *expr = call("array_element", vec![matched, first]);
        }
        // `U&'\0041'`: the text its escapes spell.
        Expr::Value(v) if matches!(v.value, Value::UnicodeStringLiteral(_)) => {
            if let Value::UnicodeStringLiteral(text) = &v.value {
                v.value = Value::SingleQuotedString(text.clone());
            }
        }
        // A text cast to `varchar(n)` or `char(n)` keeps its first n
        // characters, as PostgreSQL's explicit cast does (`character
        // varying` spelled as DataFusion reads it).
        Expr::Cast {
            expr: value,
            data_type,
            ..
        } if matches!(
            data_type,
            DataType::Varchar(_)
                | DataType::CharacterVarying(_)
                | DataType::CharVarying(_)
                | DataType::Char(_)
                | DataType::Character(_)
        ) =>
        {
            *data_type = match &*data_type {
                DataType::CharacterVarying(n) | DataType::CharVarying(n) => DataType::Varchar(*n),
                DataType::Character(n) => DataType::Char(*n),
                other => other.clone(),
            };
            if let Some(n) = text_length(data_type) {
                let text = Expr::Cast {
                    kind: CastKind::DoubleColon,
                    expr: value.clone(),
                    data_type: DataType::Text,
                    array: false,
                    format: None,
                };
                let length = Expr::Value(Value::Number(n.to_string(), false).into());
                **value = call("left", vec![text, length]);
            }
        }
        // `x AT TIME ZONE zone`, as PostgreSQL computes it.
        Expr::AtTimeZone {
            timestamp,
            time_zone,
        } => {
            *expr = call(
                super::functions::AT_TIME_ZONE,
                vec![(**timestamp).clone(), (**time_zone).clone()],
            );
        }
        // PostgreSQL's `@ x`, `|/ x` and `||/ x`.
        Expr::UnaryOp { op, expr: operand }
            if matches!(
                op,
                UnaryOperator::PGAbs | UnaryOperator::PGSquareRoot | UnaryOperator::PGCubeRoot
            ) =>
        {
            let function = match op {
                UnaryOperator::PGAbs => "abs",
                UnaryOperator::PGSquareRoot => "sqrt",
                _ => "cbrt",
            };
            *expr = call(function, vec![(**operand).clone()]);
        }
        // `~x`, an integer's bits flipped: `-1 - x` (which, unlike `-x - 1`,
        // does not overflow for the type's least value).
        Expr::UnaryOp {
            op: UnaryOperator::BitwiseNot,
            expr: operand,
        } => {
            *expr = Expr::Nested(Box::new(Expr::BinaryOp {
                left: Box::new(Expr::Value(Value::Number("-1".into(), false).into())),
                op: BinaryOperator::Minus,
                right: Box::new(Expr::Nested(operand.clone())),
            }));
        }
        // `interval '1 day 01:30:00'`, in the words Arrow reads.
        Expr::Interval(interval)
            if interval.leading_field.is_none() && interval.last_field.is_none() =>
        {
            if let Expr::Value(v) = interval.value.as_mut() {
                if let Value::SingleQuotedString(text) = &mut v.value {
                    *text = super::types::interval_input(text).into_owned();
                }
            }
        }
        // A number with an exponent: in digits, or else a double.
        Expr::Value(v) if matches!(&v.value, Value::Number(n, _) if n.contains(['e', 'E'])) => {
            let Value::Number(text, _) = &mut v.value else {
                unreachable!("matched a number");
            };
            match number_in_digits(text) {
                Some(digits) => *text = digits,
                None => {
                    let text = Value::SingleQuotedString(std::mem::take(text));
                    *expr = Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(Expr::Value(text.into())),
                        data_type: DataType::DoublePrecision,
                        array: false,
                        format: None,
                    };
                }
            }
        }
        Expr::Function(f)
            if f.name.to_string().eq_ignore_ascii_case("array")
                && matches!(f.args, FunctionArguments::Subquery(_)) =>
        {
            if let FunctionArguments::Subquery(query) = &f.args {
                if let Some(array) = array_of(query) {
                    *expr = array;
                }
            }
        }
        // `(row_value).field`, which DataFusion reads as `get_field`.
        Expr::CompoundFieldAccess { root, access_chain }
            if !matches!(
                root.as_ref(),
                Expr::Identifier(_) | Expr::CompoundIdentifier(_)
            ) && access_chain.iter().all(|a| {
                matches!(
                    a,
                    datafusion::sql::sqlparser::ast::AccessExpr::Dot(Expr::Identifier(_))
                )
            }) =>
        {
            let mut value = (**root).clone();
            for access in access_chain.iter() {
                if let datafusion::sql::sqlparser::ast::AccessExpr::Dot(Expr::Identifier(field)) =
                    access
                {
                    value = call(
                        "get_field",
                        vec![
                            value,
                            Expr::Value(Value::SingleQuotedString(field.value.clone()).into()),
                        ],
                    );
                }
            }
            *expr = value;
        }
        Expr::Subquery(query) => {
            let (condition, outside) = single_value(query);
            let mut value = expr.clone();
            if let Some(mut outside) = outside {
                let subquery = value.clone();
                let _ = visit_expressions_mut(&mut outside, |e| {
                    if matches!(e, Expr::Identifier(i) if i.value == SUBQUERY) {
                        *e = subquery.clone();
                    }
                    ControlFlow::<()>::Continue(())
                });
                value = case_when(Expr::IsNotNull(Box::new(subquery)), outside);
            }
            if let Some(condition) = condition {
                value = case_when(condition, value);
            }
            *expr = value;
        }
        Expr::Identifier(ident) if ident.quote_style.is_none() => {
            let name = ident.value.to_lowercase();
            if let Some((_, function)) = KEYWORD_FUNCTIONS.iter().find(|(k, _)| *k == name) {
                *expr = call(function, vec![]);
            } else if name == "localtime" {
                *expr = local_time();
            }
        }
        Expr::BinaryOp { left, op, right } => {
            if let BinaryOperator::PGCustomBinaryOperator(parts) = op {
                if let Some(plain) = plain_operator(parts) {
                    *op = plain;
                }
            }
            if matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq) {
                let is_column =
                    |e: &Expr| matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
                if is_column(left) {
                    if let Some(array) = integer_array(right) {
                        **right = array;
                    }
                } else if is_column(right) {
                    if let Some(array) = integer_array(left) {
                        **left = array;
                    }
                }
            }
        }
        Expr::Collate {
            expr: inner,
            collation,
        } => {
            let name = collation
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.clone())
                .unwrap_or_default();
            if name == "default" || name == "C" || name == "POSIX" {
                *expr = (**inner).clone();
            }
        }
        Expr::Function(f) => {
            if f.name.0.len() == 2
                && (is_pg_catalog(&f.name.0[0])
                    || f.name.0[0]
                        .as_ident()
                        .is_some_and(|i| i.value.eq_ignore_ascii_case("information_schema")))
            {
                f.name.0.remove(0);
            }
            let name = f.name.to_string().to_lowercase();
            // `ROW(x, y)`: a record whose fields are `f1`, `f2`.
            if name == "row" && f.over.is_none() {
                let values: Vec<Expr> = arguments(f).into_iter().cloned().collect();
                if !values.is_empty() {
                    *expr = super::records::row_constructor(values);
                    return;
                }
            }
            // `percentile_cont(ARRAY[0.25, 0.5]) WITHIN GROUP (...)`: the
            // array of each fraction's percentile.
            if let ("percentile_cont" | "percentile_disc", [Expr::Array(fractions)]) =
                (name.as_str(), arguments(f).as_slice())
            {
                let each = fractions
                    .elem
                    .iter()
                    .map(|fraction| {
                        let mut one = Expr::Function(Function {
                            args: argument_list(vec![fraction.clone()]),
                            ..f.clone()
                        });
                        rewrite_expr(&mut one);
                        one
                    })
                    .collect();
                *expr = call("make_array", each);
                return;
            }
            // Ordered-set aggregates over the values of `WITHIN GROUP (ORDER
            // BY x)` in order, NULLs left out: `percentile_disc(p)` is the
            // first at or past the fraction p, `mode()` the most frequent.
            if let ([order], None, None) = (f.within_group.as_slice(), &f.filter, &f.over) {
                let ordered = match (name.as_str(), arguments(f).as_slice()) {
                    ("percentile_disc", [fraction]) => {
                        let at = Expr::BinaryOp {
                            left: Box::new(Expr::Nested(Box::new((*fraction).clone()))),
                            op: BinaryOperator::Multiply,
                            right: Box::new(call("count", vec![order.expr.clone()])),
                        };
                        let position = Expr::Cast {
                            kind: CastKind::Cast,
                            expr: Box::new(call("ceil", vec![at])),
                            data_type: DataType::BigInt(None),
                            array: false,
                            format: None,
                        };
                        let one = Expr::Value(Value::Number("1".into(), false).into());
                        Some(call(
                            "array_element",
                            vec![sorted_values(order), call("greatest", vec![one, position])],
                        ))
                    }
                    ("mode", []) => Some(call(
                        super::ordered_sets::MOST_FREQUENT,
                        vec![sorted_values(order)],
                    )),
                    _ => None,
                };
                if let Some(ordered) = ordered {
                    *expr = ordered;
                    return;
                }
            }
            // `json_agg(x ...)` is `array_agg(to_json(x) ...)` (with its
            // ORDER BY, DISTINCT and FILTER; `to_json` as
            // `json_agg_element`, which marks rows and arrays for the
            // layout) written as a JSON array, and
            // `json_object_agg(k, v ...)` the pairs of `array_agg(struct(k,
            // to_json(v)) ...)` written as an object; the `jsonb_` ones take
            // `to_jsonb`'s texts and are made jsonb.
            let json_aggregate = match name.as_str() {
                "json_agg" => Some((false, super::json::ARRAY_OF)),
                "jsonb_agg" => Some((true, super::json::ARRAY_OF)),
                "json_object_agg" => Some((false, super::json::OBJECT_OF)),
                "jsonb_object_agg" => Some((true, super::json::OBJECT_OF)),
                _ => None,
            };
            if let (Some((jsonb, written_by)), None) = (json_aggregate, &f.over) {
                let as_json = |value: &Expr| {
                    let element = match (jsonb, written_by) {
                        (true, _) => "to_jsonb",
                        (false, super::json::ARRAY_OF) => super::json::AGGREGATED_ELEMENT,
                        (false, _) => "to_json",
                    };
                    call(element, vec![value.clone()])
                };
                let mut aggregate = f.clone();
                aggregate.name =
                    ObjectName(vec![ObjectNamePart::Identifier(Ident::new("array_agg"))]);
                if let FunctionArguments::List(list) = &mut aggregate.args {
                    use FunctionArg::Unnamed;
                    use FunctionArgExpr::Expr as Arg;
                    let aggregated = match list.args.as_slice() {
                        [Unnamed(Arg(value))] if written_by == super::json::ARRAY_OF => {
                            Some(as_json(value))
                        }
                        [Unnamed(Arg(key)), Unnamed(Arg(value))]
                            if written_by == super::json::OBJECT_OF =>
                        {
                            Some(call("struct", vec![key.clone(), as_json(value)]))
                        }
                        _ => None,
                    };
                    if let Some(aggregated) = aggregated {
                        list.args = vec![Unnamed(Arg(aggregated))];
                        *expr = call(written_by, vec![Expr::Function(aggregate)]);
                        if jsonb {
                            *expr = call(super::json::TO_JSONB, vec![expr.clone()]);
                        }
                        return;
                    }
                }
            }
            // A template of PostgreSQL's: `to_char`'s for tablegate's function,
            // the others' written for DataFusion's.
            if matches!(name.as_str(), "to_char" | "to_date" | "to_timestamp") {
                if let FunctionArguments::List(list) = &mut f.args {
                    if let [_, FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] =
                        list.args.as_mut_slice()
                    {
                        if let Value::SingleQuotedString(t) = &mut v.value {
                            if name == "to_char" {
                                f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
                                    ToChar::NAME,
                                ))]);
                            } else {
                                *t = chrono_format(t);
                            }
                        }
                    }
                }
            }
            // Set-returning functions in a select list: the set as a list,
            // unnested into rows.
            let args: Vec<Expr> = arguments(f).into_iter().cloned().collect();
            if let Some(listed) = set_as_list(&name, args.len()) {
                *expr = call("unnest", vec![call(listed, args)]);
                return;
            }
            // `timezone(zone, x)` is `x AT TIME ZONE zone`.
            if let ("timezone", [zone, value]) = (name.as_str(), arguments(f).as_slice()) {
                *expr = call(
                    super::functions::AT_TIME_ZONE,
                    vec![(*value).clone(), (*zone).clone()],
                );
                return;
            }
            // The sequence functions read a name or an object id as
            // regclass does: `nextval('s'::regclass)` (a serial column's
            // default) takes the name itself, a constant, so that a
            // prepared INSERT compiles it once.
            if matches!(name.as_str(), "nextval" | "currval" | "setval") {
                if let FunctionArguments::List(list) = &mut f.args {
                    if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) =
                        list.args.first_mut()
                    {
                        if let Some(name) = regclass_of_value(first) {
                            *first = name;
                        }
                    }
                }
            }
            // No table is a partition or partitioned: no ancestors.
            if name == "pg_partition_ancestors" {
                *expr = call(
                    "unnest",
                    vec![Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(Expr::Value(Value::Null.into())),
                        data_type: DataType::Array(
                            datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(
                                Box::new(DataType::Int(None)),
                                None,
                            ),
                        ),
                        array: false,
                        format: None,
                    }],
                );
                return;
            }
            if name == "_pg_expandarray" || name == "generate_series" {
                let expanded = expr.clone();
                *expr = call("unnest", vec![expanded]);
                return;
            }
            // `unnest(generate_series(...))` as written: its inner call was
            // unnested already.
            if name == "unnest" {
                if let Some(inner) = only_argument(f).filter(|a| is_call(a, "unnest")) {
                    if only_argument_of(inner).is_some_and(|a| is_call(a, "generate_series")) {
                        *expr = inner.clone();
                        return;
                    }
                }
            }
            if name == "generate_subscripts" {
                if let [array, _] = arguments(f).as_slice() {
                    let one = || Expr::Value(Value::Number("1".into(), false).into());
                    let length = Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(call("cardinality", vec![(*array).clone()])),
                        data_type: DataType::BigInt(None),
                        array: false,
                        format: None,
                    };
                    let end = Expr::BinaryOp {
                        left: Box::new(length),
                        op: BinaryOperator::Plus,
                        right: Box::new(one()),
                    };
                    *expr = call("unnest", vec![call("range", vec![one(), end])]);
                    return;
                }
            }
            if name == "localtimestamp" && matches!(f.args, FunctionArguments::None) {
                *expr = local_timestamp();
                return;
            }
            if name == "localtime" {
                *expr = local_time();
                return;
            }
            if name == "make_interval" {
                if let Some(interval) = made_interval(f) {
                    *expr = interval;
                    return;
                }
            }
            // `mod(a, b)` is DataFusion's `a % b`.
            if let ("mod", [a, b]) = (name.as_str(), arguments(f).as_slice()) {
                *expr = Expr::BinaryOp {
                    left: Box::new(Expr::Nested(Box::new((*a).clone()))),
                    op: BinaryOperator::Modulo,
                    right: Box::new(Expr::Nested(Box::new((*b).clone()))),
                };
                return;
            }
            // `age(t)` is the age at today's midnight.
            if let ("age", Some(t)) = (name.as_str(), only_argument(f)) {
                let midnight = Expr::Cast {
                    kind: CastKind::Cast,
                    expr: Box::new(call("current_date", vec![])),
                    data_type: DataType::Timestamp(None, TimezoneInfo::WithoutTimeZone),
                    array: false,
                    format: None,
                };
                *expr = call("age", vec![midnight, t.clone()]);
                return;
            }
            if matches!(f.args, FunctionArguments::None) {
                if let Some((_, function)) = KEYWORD_FUNCTIONS.iter().find(|(k, _)| *k == name) {
                    *expr = call(function, vec![]);
                }
            }
        }
        // JSON is held as its text, checked (and as jsonb, normalized).
        Expr::Cast {
            kind: CastKind::DoubleColon | CastKind::Cast,
            expr: inner,
            data_type: data_type @ (DataType::JSON | DataType::JSONB),
            ..
        } => {
            let input = match data_type {
                DataType::JSON => super::json::TO_JSON,
                _ => super::json::TO_JSONB,
            };
            *expr = call(input, vec![(**inner).clone()]);
        }
        // `x::timestamp(3)`: the timestamp, rounded.
        Expr::Cast { .. } if super::precision::split_cast(expr).is_some() => {
            if let Some((mut whole, digits)) = super::precision::split_cast(expr) {
                rewrite_expr(&mut whole);
                *expr = call(super::precision::ROUND_FRACTION, vec![whole, digits]);
            }
        }
        // A uuid is held as its text, written as PostgreSQL writes it.
        Expr::Cast {
            kind: CastKind::DoubleColon | CastKind::Cast,
            expr: inner,
            data_type: DataType::Uuid,
            ..
        } => *expr = call(super::types::UUID_INPUT, vec![(**inner).clone()]),
        Expr::Cast {
            kind: CastKind::DoubleColon | CastKind::Cast,
            expr: inner,
            data_type,
            ..
        } => match custom_type(data_type).as_deref() {
            Some("regclass") if is_value(inner) => {
                *expr = call("regclass", vec![(**inner).clone()])
            }
            Some("regclass") => *expr = call("relation_name", vec![(**inner).clone()]),
            // Functions are named by their text in the catalog (`array_in`).
            Some("regproc") => {
                let name = match inner.as_ref() {
                    Expr::Value(v) => v.value.clone().into_string(),
                    _ => None,
                };
                *expr = match name {
                    Some(name) => Expr::Value(
                        Value::SingleQuotedString(
                            name.strip_prefix("pg_catalog.").unwrap_or(&name).to_owned(),
                        )
                        .into(),
                    ),
                    None => (**inner).clone(),
                };
            }
            Some("regnamespace") if is_value(inner) => {
                *expr = call("regnamespace", vec![(**inner).clone()]);
            }
            Some("regnamespace") => {
                *expr = call("namespace_name", vec![(**inner).clone()]);
            }
            Some("regtype") if !is_value(inner) => {
                *expr = call(
                    "format_type",
                    vec![(**inner).clone(), Expr::Value(Value::Null.into())],
                )
            }
            Some(name) => {
                if let Some(ty) = builtin(name) {
                    *data_type = ty;
                }
            }
            None => {
                // `x::pg_catalog.int2[]`: an array of a catalog type.
                use datafusion::sql::sqlparser::ast::{ArrayElemTypeDef, ExactNumberInfo};
                // PostgreSQL's `float` is a double, `float(p)` a real up to
                // 24 bits of precision (DataFusion's `float` is a real).
                if let DataType::Float(precision) = data_type {
                    *data_type = match precision {
                        ExactNumberInfo::Precision(p) if *p <= 24 => DataType::Real,
                        _ => DataType::DoublePrecision,
                    };
                }
                if let DataType::Array(ArrayElemTypeDef::SquareBracket(element, _)) = data_type {
                    if let Some(ty) = custom_type(element).as_deref().and_then(builtin) {
                        **element = ty;
                    }
                }
            }
        },
        _ => {}
    }
}

/// The rewrites that look at a whole SELECT, query by query: subqueries
/// that test membership in an outer row's array (see
/// [`any_of_outer_array`]), and repeated unnamed select items.
struct Selects {
    joined: usize,
    /// The session's, in which the texts of instants without a zone given
    /// to `generate_series` in FROM are read (see [`series_arguments`]).
    zone: SessionZone,
}

/// `FETCH FIRST n ROWS ONLY` (SQL's spelling, which DataFusion does not
/// plan) as `LIMIT n`; `WITH TIES` and `PERCENT` are left to fail.
fn fetch_as_limit(query: &mut Query) {
    use datafusion::sql::sqlparser::ast::LimitClause;
    let Some(fetch) = query.fetch.as_ref().filter(|f| !f.with_ties && !f.percent) else {
        return;
    };
    let quantity = fetch
        .quantity
        .clone()
        .unwrap_or_else(|| Expr::Value(Value::Number("1".into(), false).into()));
    match &mut query.limit_clause {
        None => {
            query.limit_clause = Some(LimitClause::LimitOffset {
                limit: Some(quantity),
                offset: None,
                limit_by: vec![],
            })
        }
        Some(LimitClause::LimitOffset {
            limit: limit @ None,
            ..
        }) => *limit = Some(quantity),
        Some(_) => return,
    }
    query.fetch = None;
}

/// `ORDER BY 2` where the second select item computes over aggregates
/// (`max(x) + 1`, `coalesce(sum(x), 0)`), as that expression: DataFusion's
/// planner refuses such an ordinal ("must appear in the GROUP BY clause")
/// but takes the expression, which names the same column.
fn ordinals_of_aggregates(query: &mut Query) {
    use datafusion::sql::sqlparser::ast::OrderByKind;
    let (Some(order_by), SetExpr::Select(select)) = (&mut query.order_by, query.body.as_ref())
    else {
        return;
    };
    let OrderByKind::Expressions(sorts) = &mut order_by.kind else {
        return;
    };
    // Positions count `*`'s columns too.
    let starred = select.projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    });
    if starred {
        return;
    }
    for sort in sorts {
        let position = match &sort.expr {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => n.parse::<usize>().ok(),
                _ => None,
            },
            _ => None,
        };
        let item = position
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| select.projection.get(i));
        if let Some(SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item {
            if aggregates(e) {
                sort.expr = e.clone();
            }
        }
    }
}

/// Gives an alias of its own to each unnamed item of a select list that
/// DataFusion would name as an earlier one: the same expression twice
/// (`SELECT NULL, NULL`), or a cast of a column beside it (`SELECT k,
/// k::text`: DataFusion names a cast after what it casts). DataFusion
/// needs distinct names; the names the client sees are taken before
/// rewriting. Columns keep their names (`e.name, d.name` are distinct).
fn name_repeated_items(projection: &mut [SelectItem]) {
    let unnamed: Vec<(usize, &Expr)> = projection
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            SelectItem::UnnamedExpr(expr) => Some((i, expr)),
            _ => None,
        })
        .collect();
    let (columns, others): (Vec<_>, Vec<_>) = unnamed.into_iter().partition(|(_, e)| is_column(e));
    let (mut columns_seen, mut names_seen) = (Vec::new(), HashSet::new());
    let mut repeated = Vec::new();
    for (i, column) in columns {
        // A column written without its table may be any table's.
        let (table, name) = qualified_name(column);
        let same = |(t, n): &(Option<String>, String)| {
            *n == name && (table.is_none() || t.is_none() || *t == table)
        };
        if columns_seen.iter().any(same) {
            repeated.push(i);
        }
        names_seen.insert(name.clone());
        columns_seen.push((table, name));
    }
    // A subquery's value is named in the plan by its own first item:
    // `(SELECT max(id) FROM t)` beside `max(id)` is a repeat too.
    let mut subqueries = Vec::new();
    for (i, other) in others {
        if !names_seen.insert(name_in_plan(other)) {
            repeated.push(i);
        } else if let Expr::Subquery(query) = other {
            subqueries.extend(first_item_name(query).map(|name| (i, name)));
        }
    }
    for (i, name) in subqueries {
        if names_seen.contains(&name) {
            repeated.push(i);
        }
    }
    for i in repeated {
        if let SelectItem::UnnamedExpr(expr) = &projection[i] {
            projection[i] = SelectItem::ExprWithAlias {
                expr: expr.clone(),
                alias: super::names::hidden_alias(i),
            };
        }
    }
}

/// `c.tableoid` of a catalog in FROM (pg_dump reads it beside each
/// object's oid): the catalog's own object id, which its tables here do not
/// hold as a column. Unqualified, when every table of the FROM is a
/// catalog, of the one catalog there.
fn catalog_table_oids(select: &mut Select) {
    let normalize = super::session::normalize;
    let mut catalogs = Vec::new();
    let mut others = false;
    for factor in factors(&select.from) {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = factor
        else {
            others = true;
            continue;
        };
        let table = name.0.last().and_then(|p| p.as_ident()).map(normalize);
        match table.as_deref().and_then(super::pg_catalog::catalog_oid) {
            Some(oid) => {
                let shown = alias.as_ref().map(|a| normalize(&a.name)).or(table);
                catalogs.push((shown, oid));
            }
            None => others = true,
        }
    }
    if catalogs.is_empty() {
        return;
    }
    let oid_of = |e: &Expr| match e {
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
            let (column, qualifier) = (&parts[parts.len() - 1], &parts[parts.len() - 2]);
            (normalize(column) == "tableoid")
                .then(|| {
                    catalogs
                        .iter()
                        .find(|(shown, _)| shown.as_deref() == Some(&normalize(qualifier)))
                })
                .flatten()
                .map(|(_, oid)| *oid)
        }
        Expr::Identifier(column) if normalize(column) == "tableoid" => match catalogs.as_slice() {
            [(_, oid)] if !others => Some(*oid),
            _ => None,
        },
        _ => None,
    };
    let mut replace = |e: &mut Expr| {
        if let Some(oid) = oid_of(e) {
            *e = Expr::Value(Value::Number(oid.to_string(), false).into());
        }
        ControlFlow::<()>::Continue(())
    };
    for e in value_expressions(select) {
        let _ = visit_expressions_mut(e, &mut replace);
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        let _ = visit_expressions_mut(exprs, &mut replace);
    }
    let _ = visit_expressions_mut(&mut select.from, &mut replace);
}

/// What the first item of a query's SELECT is named in the plan.
fn first_item_name(query: &Query) -> Option<String> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    match select.projection.first()? {
        SelectItem::UnnamedExpr(e) => Some(name_in_plan(e)),
        SelectItem::ExprWithAlias { alias, .. } => Some(super::session::normalize(alias)),
        _ => None,
    }
}

fn is_column(expr: &Expr) -> bool {
    matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
}

/// About what DataFusion names a select item: casts, `AT TIME ZONE` and
/// parentheses are not in the name (`1::float / 3` and `1::float8 / 3` are
/// named alike),
/// every subquery is `(<subquery>)`, a column is named by its last part.
fn name_in_plan(expr: &Expr) -> String {
    if is_column(expr) {
        return qualified_name(expr).1;
    }
    let mut named = expr.clone();
    let _ = visit_expressions_mut(&mut named, |e| {
        // As `rewrite_expr` will write it.
        super::date_fields::postgres_date_fields(e);
        if let Expr::Subquery(_) = e {
            *e = Expr::Identifier(Ident::new("(<subquery>)"));
        }
        while let Expr::Cast { expr: inner, .. }
        | Expr::Nested(inner)
        | Expr::AtTimeZone {
            timestamp: inner, ..
        } = e
        {
            *e = std::mem::replace(inner.as_mut(), Expr::Value(Value::Null.into()));
        }
        ControlFlow::<()>::Continue(())
    });
    match &named {
        column if is_column(column) => qualified_name(column).1,
        named => named.to_string(),
    }
}

/// A column's table, when written, and name, as DataFusion folds them.
fn qualified_name(column: &Expr) -> (Option<String>, String) {
    let fold = super::session::normalize;
    match column {
        Expr::CompoundIdentifier(parts) if parts.len() > 1 => {
            let (name, table) = parts.split_last().expect("more than one part");
            let table = table.iter().map(fold).collect::<Vec<_>>().join(".");
            (Some(table), fold(name))
        }
        Expr::CompoundIdentifier(parts) => (None, parts.first().map(fold).unwrap_or_default()),
        Expr::Identifier(ident) => (None, fold(ident)),
        expr => (None, expr.to_string()),
    }
}

impl datafusion::sql::sqlparser::ast::VisitorMut for Selects {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        fetch_as_limit(query);
        ordinals_of_aggregates(query);
        super::recordsets::recordsets_as_elements(query);
        lateral_set_functions(query, &self.zone);
        for_each_select(query.body.as_mut(), &mut |select| {
            for item in &mut select.projection {
                if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item
                {
                    exists_counted(e);
                }
            }
            catalog_table_oids(select);
            name_repeated_items(&mut select.projection);
            name_table_functions(select);
            correlated_derived_tables(select);
            if !over_empty_catalog(select) {
                self.outer_arrays(select);
            }
        });
        ControlFlow::Continue(())
    }
}

/// Names the columns [`outer_keys_moved_out`] adds, which a whole-row
/// reference leaves out.
pub(super) const OUTER_KEY: &str = "__tablegate_outer_key";

/// Subqueries in FROM that read the outer row by equality, which DataFusion
/// does not decorrelate, made plain subqueries joined on those equalities
/// (see [`outer_keys_moved_out`]):
///
/// - a subquery in FROM inside a subquery (`(SELECT json_agg(x) FROM
///   (SELECT id, kind FROM pets WHERE pets.owner = p.id) x)`): the
///   equalities move to the WHERE around it, when nothing joins it from
///   the right;
/// - a LATERAL subquery (`p LEFT JOIN LATERAL (SELECT ... WHERE c.p = p.id
///   ORDER BY at DESC LIMIT 1) x ON true`, or `, LATERAL (...) x`): they
///   move into its join's ON.
///
/// The select around reads no `*`, and reads `x.*` only of a subquery
/// whose columns its select list names (it becomes those columns), so
/// that the columns added do not show.
fn correlated_derived_tables(select: &mut Select) {
    use datafusion::sql::sqlparser::ast::{
        Join, JoinConstraint, JoinOperator, SelectItemQualifiedWildcardKind, TableFactor,
    };
    if select
        .projection
        .iter()
        .any(|item| matches!(item, SelectItem::Wildcard(_)))
    {
        return;
    }
    // `x.*` of a subquery that cannot be listed stops its move.
    let read_whole: Vec<String> = select
        .projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                name.0
                    .last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.to_lowercase())
            }
            _ => None,
        })
        .collect();
    let mut listed: Vec<(Ident, Vec<String>)> = Vec::new();
    let mut moved_out = |factor: &mut TableFactor, lateral: bool| -> Option<Expr> {
        let TableFactor::Derived {
            lateral: is_lateral,
            subquery,
            alias: Some(alias),
            ..
        } = factor
        else {
            return None;
        };
        if *is_lateral != lateral {
            return None;
        }
        let name = alias.name.value.to_lowercase();
        let columns = if read_whole.contains(&name) {
            Some(super::records::named_columns(subquery)?)
        } else {
            None
        };
        let condition = outer_keys_moved_out(subquery, alias)?;
        *is_lateral = false;
        listed.extend(columns.map(|c| (alias.name.clone(), c)));
        Some(condition)
    };
    let mut to_where = Vec::new();
    let mut i = 0;
    while i < select.from.len() {
        let table = &mut select.from[i];
        // `, LATERAL (...) x`: joined to the items before it.
        if i > 0 && table.joins.is_empty() {
            if let Some(condition) = moved_out(&mut table.relation, true) {
                let relation = select.from.remove(i).relation;
                select.from[i - 1].joins.push(Join {
                    relation,
                    global: false,
                    join_operator: JoinOperator::Inner(JoinConstraint::On(condition)),
                });
                continue;
            }
        }
        let table = &mut select.from[i];
        let joined_from_right = table.joins.iter().any(|j| {
            !matches!(
                j.join_operator,
                JoinOperator::Join(_)
                    | JoinOperator::Inner(_)
                    | JoinOperator::Left(_)
                    | JoinOperator::LeftOuter(_)
                    | JoinOperator::CrossJoin(_)
            )
        });
        if !joined_from_right {
            if let Some(condition) = moved_out(&mut table.relation, false) {
                to_where.push(condition);
            }
        }
        for join in &mut table.joins {
            let (on, left) = match &join.join_operator {
                JoinOperator::Join(JoinConstraint::On(on))
                | JoinOperator::Inner(JoinConstraint::On(on)) => (Some(on.clone()), false),
                JoinOperator::Left(JoinConstraint::On(on))
                | JoinOperator::LeftOuter(JoinConstraint::On(on)) => (Some(on.clone()), true),
                JoinOperator::CrossJoin(JoinConstraint::None) => (None, false),
                _ => continue,
            };
            let Some(condition) = moved_out(&mut join.relation, true) else {
                continue;
            };
            let always = |e: &Expr| matches!(e, Expr::Value(v) if v.value == Value::Boolean(true));
            let on = match on.filter(|on| !always(on)) {
                Some(on) => Expr::BinaryOp {
                    left: Box::new(condition),
                    op: BinaryOperator::And,
                    right: Box::new(on),
                },
                None => condition,
            };
            let on = JoinConstraint::On(on);
            join.join_operator = match left {
                true => JoinOperator::LeftOuter(on),
                false => JoinOperator::Inner(on),
            };
        }
        i += 1;
    }
    if !to_where.is_empty() {
        to_where.extend(select.selection.take());
        select.selection = and_all(to_where);
    }
    // `x.*` as the columns the subquery names.
    for (alias, columns) in listed {
        let at = select.projection.iter().position(|item| {
            matches!(item, SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _)
                if name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| i.value.eq_ignore_ascii_case(&alias.value)))
        });
        if let Some(at) = at {
            let items = columns.into_iter().map(|c| {
                SelectItem::UnnamedExpr(Expr::CompoundIdentifier(vec![
                    alias.clone(),
                    Ident::with_quote('"', c),
                ]))
            });
            select.projection.splice(at..=at, items);
        }
    }
}

/// Moves the equalities of a subquery in FROM with the outer query
/// (`c.p = o.id`) out of it, for DataFusion to decorrelate: each inner
/// side becomes a column of the subquery (`c.p AS
/// __tablegate_outer_key1`), and the condition returned compares it with
/// the outer side (`x.__tablegate_outer_key1 = o.id`, ANDed for several).
/// A LIMIT (and OFFSET) becomes a rank among the rows of the same keys, in
/// the subquery's order, compared too. `None`, and the subquery left
/// as it was, unless it is a plain select that does not group, aggregate
/// or de-duplicate, reads the outer query only in equalities of its
/// WHERE, and has at least one.
fn outer_keys_moved_out(
    subquery: &mut Query,
    alias: &datafusion::sql::sqlparser::ast::TableAlias,
) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{LimitClause, OrderByKind, WindowSpec, WindowType};
    if !alias.columns.is_empty() || subquery.with.is_some() || subquery.fetch.is_some() {
        return None;
    }
    let integer = |e: &Expr| match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<u64>().ok(),
            _ => None,
        },
        _ => None,
    };
    let (limit, offset) = match &subquery.limit_clause {
        None => (None, 0),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) if limit_by.is_empty() => (
            match limit {
                Some(limit) => Some(integer(limit)?),
                None => None,
            },
            match offset {
                Some(offset) => integer(&offset.value)?,
                None => 0,
            },
        ),
        Some(_) => return None,
    };
    let order: Vec<datafusion::sql::sqlparser::ast::OrderByExpr> = match &subquery.order_by {
        None => Vec::new(),
        Some(order) => match &order.kind {
            OrderByKind::Expressions(exprs) => exprs.clone(),
            OrderByKind::All(_) => return None,
        },
    };
    let SetExpr::Select(inner_select) = subquery.body.as_mut() else {
        return None;
    };
    let groups = !matches!(&inner_select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty());
    let items: Vec<&Expr> = inner_select
        .projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        })
        .collect();
    if groups
        || items.iter().any(|e| aggregates(e))
        || inner_select.distinct.is_some()
        || inner_select.having.is_some()
    {
        return None;
    }
    let inner = inner_names(inner_select);
    if inner.is_empty()
        || items.iter().any(|e| reads_outer(e, &inner))
        || order.iter().any(|o| reads_outer(&o.expr, &inner))
    {
        return None;
    }
    let mut conditions = Vec::new();
    conjuncts(inner_select.selection.clone()?, &mut conditions);
    let (mut kept, mut keys) = (Vec::new(), Vec::new());
    for c in conditions {
        // Unqualified columns are the subquery's.
        match equated(&c, &inner, Some(true)) {
            Some((outer_side, inner_side)) => keys.push((inner_side, outer_side)),
            None if reads_outer(&c, &inner) => return None,
            None => kept.push(c),
        }
    }
    if keys.is_empty() {
        return None;
    }
    // The window's order: select-list names and positions as what they name.
    let named = |e: &Expr| -> Option<Expr> {
        let item = match e {
            Expr::Value(_) => inner_select.projection.get(integer(e)?.checked_sub(1)? as usize)?,
            Expr::Identifier(name) => inner_select.projection.iter().find(|item| {
                matches!(item, SelectItem::ExprWithAlias { alias, .. } if alias.value.eq_ignore_ascii_case(&name.value))
            })?,
            _ => return None,
        };
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                Some(e.clone())
            }
            _ => None,
        }
    };
    let order: Vec<_> = order
        .into_iter()
        .map(|mut o| {
            if let Some(e) = named(&o.expr) {
                o.expr = e;
            }
            o
        })
        .collect();
    inner_select.selection = and_all(kept);
    let column = |name: &str| Expr::CompoundIdentifier(vec![alias.name.clone(), Ident::new(name)]);
    let mut moved = Vec::new();
    let partition: Vec<Expr> = keys
        .iter()
        .map(|(inner_side, _)| inner_side.clone())
        .collect();
    for (n, (inner_side, outer_side)) in keys.into_iter().enumerate() {
        let key = format!("{OUTER_KEY}{}", n + 1);
        inner_select.projection.push(SelectItem::ExprWithAlias {
            expr: inner_side,
            alias: Ident::new(&key),
        });
        moved.push(Expr::BinaryOp {
            left: Box::new(column(&key)),
            op: BinaryOperator::Eq,
            right: Box::new(outer_side),
        });
    }
    if limit.is_some() || offset > 0 {
        let rank = format!("{OUTER_KEY}_rank");
        let Expr::Function(mut row_number) = call("row_number", vec![]) else {
            unreachable!("call makes a function")
        };
        row_number.over = Some(WindowType::WindowSpec(WindowSpec {
            window_name: None,
            partition_by: partition,
            order_by: order,
            window_frame: None,
        }));
        inner_select.projection.push(SelectItem::ExprWithAlias {
            expr: Expr::Function(row_number),
            alias: Ident::new(&rank),
        });
        let number = |n: u64| Expr::Value(Value::Number(n.to_string(), false).into());
        if let Some(limit) = limit {
            moved.push(Expr::BinaryOp {
                left: Box::new(column(&rank)),
                op: BinaryOperator::LtEq,
                right: Box::new(number(limit + offset)),
            });
        }
        if offset > 0 {
            moved.push(Expr::BinaryOp {
                left: Box::new(column(&rank)),
                op: BinaryOperator::Gt,
                right: Box::new(number(offset)),
            });
        }
        subquery.limit_clause = None;
        subquery.order_by = None;
    }
    and_all(moved)
}

/// Whether an expression reads a column qualified by a table not in
/// `inner`, or has a subquery (which might).
fn reads_outer(expr: &Expr, inner: &[String]) -> bool {
    let mut outer = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
        outer = match e {
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                !inner.contains(&parts[parts.len() - 2].value.to_lowercase())
            }
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => true,
            _ => false,
        };
        if outer {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    outer
}

/// Set-returning functions in FROM that read the columns of a table before
/// them (`FROM t, jsonb_array_elements_text(t.tags) AS tag`, PostgreSQL's
/// implicit LATERAL), which DataFusion does not plan: the table becomes
/// `(SELECT t.*, jsonb_array_elements_text(t.tags) AS tag FROM t) AS t`,
/// whose select list gives a row per value beside its row (`rewrite_expr`
/// unnests the set there), and the function's column, named through its
/// alias (`tag.value`) or by the alias alone (`tag`), is the table's new
/// column. A row whose set is empty is left out, as PostgreSQL's join with
/// an empty set leaves it out, but for `LEFT JOIN ... ON true`, which adds
/// it once beside NULL.
fn lateral_set_functions(query: &mut Query, zone: &SessionZone) {
    match query.body.as_mut() {
        SetExpr::Select(select) => move_set_functions(select, Some(&mut query.order_by), zone),
        // A set operation's ORDER BY names its output columns.
        body => for_each_select(body, &mut |select| move_set_functions(select, None, zone)),
    }
}

/// [`lateral_set_functions`] of one SELECT (and its query's ORDER BY).
fn move_set_functions(
    select: &mut Select,
    mut order_by: Option<&mut Option<datafusion::sql::sqlparser::ast::OrderBy>>,
    zone: &SessionZone,
) {
    for factor in factors_mut(&mut select.from) {
        unnest_as_function(factor);
        series_arguments(factor, zone);
        no_options(factor);
    }
    // The columns the functions moved so far were given.
    let mut taken = HashSet::new();
    while let Some(moved) = lateral_set_function(select, &taken) {
        taken.extend(moved.columns.iter().map(|(_, named)| named.clone()));
        // A column named through the function's alias is the table's; and
        // the alias alone reads a function's one column (a select item
        // keeping the alias's name).
        let column = |name: &str| {
            Expr::CompoundIdentifier(vec![
                Ident::with_quote('"', moved.table_alias.clone()),
                Ident::with_quote('"', name),
            ])
        };
        let alias_alone = |e: &Expr| match (e, moved.read_by_alias()) {
            (Expr::Identifier(alias), Some(read)) => {
                (super::session::normalize(alias) == moved.function_alias).then_some(read)
            }
            _ => None,
        };
        for item in &mut select.projection {
            if let SelectItem::UnnamedExpr(e @ Expr::Identifier(_)) = item {
                if let (Some(read), Expr::Identifier(alias)) = (alias_alone(e), &*e) {
                    *item = SelectItem::ExprWithAlias {
                        alias: alias.clone(),
                        expr: column(read),
                    };
                }
            }
        }
        let mut requalify = |e: &mut Expr| {
            let read = match &*e {
                Expr::CompoundIdentifier(parts)
                    if parts.len() == 2
                        && super::session::normalize(&parts[0]) == moved.function_alias =>
                {
                    moved.column(&super::session::normalize(&parts[1]))
                }
                e => alias_alone(e),
            };
            if let Some(read) = read {
                *e = column(read);
            }
            ControlFlow::<()>::Continue(())
        };
        let _ = visit_expressions_mut(&mut select.projection, &mut requalify);
        // The FROM too: join conditions, and functions after this one
        // that read its columns (`jsonb_array_elements(e.value)`).
        let _ = visit_expressions_mut(&mut select.from, &mut requalify);
        let _ = visit_expressions_mut(&mut select.selection, &mut requalify);
        let _ = visit_expressions_mut(&mut select.group_by, &mut requalify);
        let _ = visit_expressions_mut(&mut select.having, &mut requalify);
        if let Some(order_by) = order_by.as_deref_mut() {
            let _ = visit_expressions_mut(order_by, &mut requalify);
        }
    }
}

/// `OPERATOR(pg_catalog.=)` written as `=`, before the text is parsed: the
/// parser reads a qualified operator between two values, but not before
/// `ANY` (pg_dump's `c.relkind OPERATOR(pg_catalog.=) ANY (...)`).
pub(super) fn operators_unqualified(sql: &str) -> std::borrow::Cow<'_, str> {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let named = sql
        .as_bytes()
        .windows(b"operator(".len())
        .any(|w| w.eq_ignore_ascii_case(b"operator("));
    if !named {
        return sql.into();
    }
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return sql.into();
    };
    let is_word = |token: &Token, word: &str| matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word));
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    while i < tokens.len() {
        if let [operator, Token::LParen, schema, Token::Period, op, Token::RParen, ..] =
            &tokens[i..]
        {
            if is_word(operator, "operator") && is_word(schema, "pg_catalog") {
                out.push_str(&format!(" {op} "));
                i += 6;
                continue;
            }
        }
        out.push_str(&tokens[i].to_string());
        i += 1;
    }
    out.into()
}

/// `generate_series` and `range` in FROM, whose arguments DataFusion
/// evaluates before the casts' rule reads texts as PostgreSQL does: a
/// typed text (`'2024-01-01 10:00'::timestamp`, `TIMESTAMP 'today'`) is
/// read here ([`read_typed_text`], an instant's without a zone in `zone`),
/// and an untyped step (`'1 day'`) is an interval ([`interval_step_of`]),
/// as [`postgres_function`] makes it in an expression.
fn series_arguments(factor: &mut TableFactor, zone: &SessionZone) {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, TableFunctionArgs};
    let (TableFactor::Table {
        name,
        args: Some(TableFunctionArgs { args, .. }),
        ..
    }
    | TableFactor::Function { name, args, .. }) = factor
    else {
        return;
    };
    let series = name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .is_some_and(|f| {
            matches!(
                super::session::normalize(f).as_str(),
                "generate_series" | "range"
            )
        });
    if !series {
        return;
    }
    if let [FunctionArg::Unnamed(FunctionArgExpr::Expr(first)), FunctionArg::Unnamed(FunctionArgExpr::Expr(second)), ..] =
        args.as_mut_slice()
    {
        if let Some(typed) = bound_typed_as(first, second) {
            *second = typed;
        }
    }
    for arg in args.iter_mut() {
        // Also a typed text inside an argument (`'...'::timestamptz +
        // interval '1 day'`).
        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
            let _ = visit_expressions_mut(e, |e| {
                read_typed_text(e, zone);
                ControlFlow::<()>::Continue(())
            });
        }
    }
    if let [_, _, FunctionArg::Unnamed(FunctionArgExpr::Expr(step))] = args.as_mut_slice() {
        if let Some(interval) = interval_step_of(step) {
            *step = interval;
        }
    }
}

/// A text cast to a type (`'...'::timestamp`, `CAST('...' AS date)`,
/// `DATE '...'`), its text made one Arrow reads as PostgreSQL reads it
/// ([`super::types::text_reader`]).
fn read_typed_text(expr: &mut Expr, zone: &SessionZone) {
    let (data_type, value) = match expr {
        Expr::Cast {
            expr: inner,
            data_type,
            ..
        } => match inner.as_mut() {
            Expr::Value(v) => (&*data_type, &mut v.value),
            _ => return,
        },
        Expr::TypedString(typed) => (&typed.data_type, &mut typed.value.value),
        _ => return,
    };
    let Value::SingleQuotedString(text) = value else {
        return;
    };
    let reader = super::types::parameter_type(data_type)
        .as_ref()
        .and_then(super::types::text_reader);
    if let Some(read) = reader {
        if let std::borrow::Cow::Owned(read) = read(text, zone) {
            *text = read;
        }
    }
}

/// `pg_options_to_table(x)` in FROM (pg_dump reads a column's, a foreign
/// server's and a foreign-data wrapper's options through it, correlated):
/// a table of no rows. Nothing here has such options; the catalogs' option
/// columns are all NULL, of which the function gives no rows.
fn no_options(factor: &mut TableFactor) {
    let (TableFactor::Table {
        name,
        args: Some(_),
        alias,
        ..
    }
    | TableFactor::Function { name, alias, .. }) = factor
    else {
        return;
    };
    if !pg_catalog_name(name).is_some_and(|f| f.value.eq_ignore_ascii_case("pg_options_to_table")) {
        return;
    }
    let alias = alias.as_ref().map_or_else(
        || "pg_options_to_table".to_owned(),
        |a| a.name.value.clone(),
    );
    let none =
        "SELECT CAST(NULL AS TEXT) AS option_name, CAST(NULL AS TEXT) AS option_value WHERE false";
    if let Some(table) = derived_table(none, &alias) {
        *factor = table;
    }
}

/// `unnest(t.a)` in FROM, which the parser reads as a table of its own
/// kind, as the call of a set-returning function, when it reads a column:
/// [`lateral_set_functions`] moves it into the table it reads.
fn unnest_as_function(factor: &mut TableFactor) {
    use datafusion::sql::sqlparser::ast::{visit_expressions, FunctionArg, FunctionArgExpr};
    let TableFactor::UNNEST {
        alias,
        array_exprs,
        with_offset: false,
        with_ordinality: false,
        ..
    } = factor
    else {
        return;
    };
    let [array] = array_exprs.as_slice() else {
        return;
    };
    let reads_column = visit_expressions(array, |e| match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break();
    if reads_column {
        *factor = TableFactor::Function {
            lateral: false,
            name: ObjectName::from(vec![Ident::new("unnest")]),
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(array.clone()))],
            with_ordinality: false,
            alias: alias.take(),
        };
    }
}

/// The function giving as a list the rows of set-returning function
/// `name` called with `args` arguments, for those given so.
fn set_as_list(name: &str, args: usize) -> Option<&'static str> {
    match (name, args) {
        ("json_array_elements" | "jsonb_array_elements", 1) => Some(super::json::ELEMENTS),
        ("json_array_elements_text" | "jsonb_array_elements_text", 1) => {
            Some(super::json::ELEMENTS_TEXT)
        }
        ("json_object_keys" | "jsonb_object_keys", 1) => Some(super::json::KEYS),
        ("regexp_matches", 2 | 3) => Some(super::functions::REGEXP_MATCHES_LIST),
        ("regexp_split_to_table", 2 | 3) => Some("regexp_split_to_array"),
        _ => None,
    }
}

/// The set-returning functions [`lateral_set_functions`] moves, and the
/// columns each gives: a column's name when no alias names it (the name
/// of its OUT parameter, else the function's), and the function giving
/// the column's values as a list (none: the call itself, which
/// `rewrite_expr` unnests).
const LATERAL_SET_FUNCTIONS: &[(&str, SetColumns)] = &[
    ("json_array_elements", &[("value", None)]),
    ("jsonb_array_elements", &[("value", None)]),
    ("json_array_elements_text", &[("value", None)]),
    ("jsonb_array_elements_text", &[("value", None)]),
    ("json_object_keys", &[("json_object_keys", None)]),
    ("jsonb_object_keys", &[("jsonb_object_keys", None)]),
    ("regexp_split_to_table", &[("regexp_split_to_table", None)]),
    ("generate_series", &[("generate_series", None)]),
    ("unnest", &[("unnest", None)]),
    ("json_each", JSON_EACH),
    ("jsonb_each", JSON_EACH),
    ("json_each_text", JSON_EACH_TEXT),
    ("jsonb_each_text", JSON_EACH_TEXT),
];
/// A set-returning function's columns (see [`LATERAL_SET_FUNCTIONS`]).
type SetColumns = &'static [(&'static str, Option<&'static str>)];
const JSON_EACH: SetColumns = &[
    ("key", Some(super::json::KEYS)),
    ("value", Some(super::json::VALUES)),
];
const JSON_EACH_TEXT: SetColumns = &[
    ("key", Some(super::json::KEYS)),
    ("value", Some(super::json::VALUES_TEXT)),
];

/// Moves the first set-returning function of `select`'s FROM that reads a
/// table before it into that table (see [`lateral_set_functions`]), its
/// columns named apart from those in `taken`; says where it went.
fn lateral_set_function(select: &mut Select, taken: &HashSet<String>) -> Option<Moved> {
    use datafusion::sql::sqlparser::ast::{
        visit_expressions, JoinConstraint, JoinOperator, TableFactor,
    };
    let normalize = super::session::normalize;
    // Every factor of the FROM in order: an item's first relation, then
    // its joins.
    let positions: Vec<(usize, Option<usize>)> = select
        .from
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            std::iter::once((i, None)).chain((0..t.joins.len()).map(move |j| (i, Some(j))))
        })
        .collect();
    fn factor(select: &Select, (i, j): (usize, Option<usize>)) -> &TableFactor {
        match j {
            None => &select.from[i].relation,
            Some(j) => &select.from[i].joins[j].relation,
        }
    }
    // The name a factor's columns are qualified with.
    let shown = |factor: &TableFactor| match factor {
        TableFactor::Table {
            alias: Some(alias),
            args: None,
            ..
        }
        | TableFactor::Derived {
            alias: Some(alias), ..
        } => Some(normalize(&alias.name)),
        TableFactor::Table {
            name,
            alias: None,
            args: None,
            ..
        } => name.0.last().and_then(|p| p.as_ident()).map(normalize),
        _ => None,
    };
    for (n, &position) in positions.iter().enumerate() {
        let (name, args, alias) = match factor(select, position) {
            TableFactor::Table {
                name,
                args: Some(args),
                alias,
                with_ordinality: false,
                ..
            } => (name, &args.args, alias),
            TableFactor::Function {
                name,
                args,
                alias,
                with_ordinality: false,
                ..
            } => (name, args, alias),
            _ => continue,
        };
        let function = pg_catalog_name(name).map(normalize);
        let Some(function) = function else {
            continue;
        };
        let Some(&(_, specs)) = LATERAL_SET_FUNCTIONS.iter().find(|(f, _)| *f == function) else {
            continue;
        };
        let function_alias = alias
            .as_ref()
            .map_or(function.clone(), |a| normalize(&a.name));
        // The columns, as first named and as named here: an alias's
        // column names, or for one column the alias itself, unless the
        // function names the column (`value`, its OUT parameter). A name
        // an earlier function of this FROM gave its column (`value` of
        // two functions) is made the alias's own.
        let single = specs.len() == 1;
        let columns: Vec<(String, String)> = specs
            .iter()
            .enumerate()
            .map(|(i, &(unnamed, _))| {
                let named = match alias.as_ref().and_then(|a| a.columns.get(i)) {
                    Some(column) => normalize(&column.name),
                    None if alias.is_some() && single && unnamed != "value" => {
                        function_alias.clone()
                    }
                    None => unnamed.to_owned(),
                };
                let named = match (taken.contains(&named), single) {
                    (false, _) => named,
                    (true, true) => function_alias.clone(),
                    (true, false) => format!("{function_alias}_{unnamed}"),
                };
                (unnamed.to_owned(), named)
            })
            .collect();
        let quoted = |name: &str| Ident::with_quote('"', name).to_string();
        let arg_count = args.len();
        let arg_list: Vec<String> = args.iter().map(ToString::to_string).collect();
        let arg_list = arg_list.join(", ");
        let items: Vec<String> = specs
            .iter()
            .zip(&columns)
            .map(|(&(_, listed), (_, named))| match listed {
                Some(listed) => format!("unnest({listed}({arg_list})) AS {}", quoted(named)),
                None => format!("{function}({arg_list}) AS {}", quoted(named)),
            })
            .collect();
        let items = items.join(", ");
        let (mut qualifiers, mut unqualified) = (HashSet::new(), false);
        for arg in args {
            let _ = visit_expressions(arg, |e| {
                match e {
                    Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                        qualifiers.insert(normalize(&parts[0]));
                    }
                    Expr::Identifier(_) => unqualified = true,
                    _ => {}
                }
                ControlFlow::<()>::Continue(())
            });
        }
        // Of constants (DataFusion has generate_series's table function):
        // a table of the set's rows in its place.
        if qualifiers.is_empty() && !unqualified {
            if function == "generate_series" {
                continue;
            }
            let derived = derived_table(&format!("SELECT {items}"), &function_alias)?;
            match position.1 {
                None => select.from[position.0].relation = derived,
                Some(j) => select.from[position.0].joins[j].relation = derived,
            }
            return Some(Moved {
                table_alias: function_alias.clone(),
                function_alias,
                columns,
            });
        }
        // A table of its own in the FROM list, or the right side of a
        // cross join, or of a LEFT JOIN ... ON true (which keeps a row whose
        // set is empty, beside NULL).
        let (item, join) = position;
        let (alone, left) = match join {
            None => (item > 0 && select.from[item].joins.is_empty(), false),
            Some(j) => match &select.from[item].joins[j].join_operator {
                JoinOperator::CrossJoin(JoinConstraint::None) => (true, false),
                JoinOperator::Left(JoinConstraint::On(on))
                | JoinOperator::LeftOuter(JoinConstraint::On(on)) => {
                    let on_true = matches!(on, Expr::Value(v) if v.value == Value::Boolean(true));
                    (on_true, on_true)
                }
                _ => (false, false),
            },
        };
        if !alone {
            continue;
        }
        // The table it reads: the one its columns name, or the only one
        // before it.
        let before = &positions[..n];
        let target = match (qualifiers.len(), unqualified, before) {
            (1, false, _) => {
                let qualifier = qualifiers.into_iter().next()?;
                before
                    .iter()
                    .find(|&&p| shown(factor(select, p)).as_deref() == Some(qualifier.as_str()))
            }
            (0, true, [only]) => Some(only),
            _ => None,
        };
        let Some(&target) = target else {
            continue;
        };
        let table = factor(select, target);
        let Some(table_alias) = shown(table) else {
            continue;
        };
        let table_name = quoted(&table_alias);
        let mut sql = format!("SELECT {table_name}.*, {items} FROM {table}");
        if left {
            // The rows whose set is empty (or NULL), once each.
            let listed = match specs[0].1 {
                Some(listed) => Some(listed),
                None => set_as_list(&function, arg_count),
            };
            let Some(listed) = listed else {
                continue;
            };
            let nulls: Vec<String> = columns
                .iter()
                .map(|(_, named)| format!("NULL AS {}", quoted(named)))
                .collect();
            sql.push_str(&format!(
                " UNION ALL SELECT {table_name}.*, {} FROM {table} \
                 WHERE coalesce(cardinality({listed}({arg_list})), 0) = 0",
                nulls.join(", ")
            ));
        }
        let Some(derived) = derived_table(&sql, &table_alias) else {
            continue;
        };
        match target.1 {
            None => select.from[target.0].relation = derived,
            Some(j) => select.from[target.0].joins[j].relation = derived,
        }
        match join {
            None => {
                select.from.remove(item);
            }
            Some(j) => {
                select.from[item].joins.remove(j);
            }
        }
        return Some(Moved {
            function_alias,
            table_alias,
            columns,
        });
    }
    None
}

/// `(sql) AS "alias"`.
fn derived_table(sql: &str, alias: &str) -> Option<datafusion::sql::sqlparser::ast::TableFactor> {
    use datafusion::sql::sqlparser::ast::{TableAlias, TableFactor};
    let mut parsed =
        datafusion::sql::sqlparser::parser::Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?;
    let Some(Statement::Query(subquery)) = parsed.pop() else {
        return None;
    };
    Some(TableFactor::Derived {
        lateral: false,
        subquery,
        alias: Some(TableAlias {
            explicit: true,
            name: Ident::with_quote('"', alias),
            columns: Vec::new(),
            at: None,
        }),
        sample: None,
    })
}

/// A set-returning function moved into the table it reads (or made a
/// table of its own).
struct Moved {
    function_alias: String,
    table_alias: String,
    /// The function's columns, as first named and as the table's now.
    columns: Vec<(String, String)>,
}

impl Moved {
    /// The table's column that `function_alias.name` reads.
    fn column(&self, name: &str) -> Option<&str> {
        match self.columns.as_slice() {
            [(_, only)] => Some(only),
            columns => columns
                .iter()
                .find(|(unnamed, named)| unnamed == name || named == name)
                .map(|(_, named)| named.as_str()),
        }
    }

    /// The one column the function's alias alone reads, if it names
    /// another.
    fn read_by_alias(&self) -> Option<&str> {
        match self.columns.as_slice() {
            [(_, only)] if *only != self.function_alias => Some(only),
            _ => None,
        }
    }
}

/// `FROM pg_catalog.generate_series(...)`: table functions are registered
/// without a schema. And `generate_series`'s one column is named as
/// PostgreSQL names a function's column: by the table alias (`FROM
/// generate_series(1, 3) g` reads `g`), else by the function.
fn name_table_functions(select: &mut Select) {
    use datafusion::sql::sqlparser::ast::{TableAlias, TableAliasColumnDef};
    for factor in factors_mut(&mut select.from) {
        let TableFactor::Table {
            name,
            args: Some(_),
            alias,
            ..
        } = factor
        else {
            continue;
        };
        if name.0.len() == 2 && is_pg_catalog(&name.0[0]) {
            name.0.remove(0);
        }
        let [part] = name.0.as_slice() else {
            continue;
        };
        if !part
            .as_ident()
            .is_some_and(|f| f.value.eq_ignore_ascii_case("generate_series"))
        {
            continue;
        }
        let alias = alias.get_or_insert_with(|| TableAlias {
            explicit: false,
            name: Ident::new("generate_series"),
            columns: Vec::new(),
            at: None,
        });
        if alias.columns.is_empty() {
            let column = alias.name.clone();
            alias.columns.push(TableAliasColumnDef {
                name: column,
                data_type: None,
            });
        }
    }
}

/// A SELECT that reads a catalog that never has rows (`pg_policy`,
/// `pg_publication`, ...; with or without `pg_catalog.`, which PostgreSQL
/// searches first) through an inner join, and does not aggregate, returns
/// no rows: its WHERE becomes `false` and its select items other than
/// columns NULL (DataFusion may be unable to plan them: pg_dump's read
/// options through correlated subqueries, or give a text where an array
/// is due). The names the client sees are taken before rewriting.
/// Returns whether it did so.
fn over_empty_catalog(select: &mut Select) -> bool {
    use datafusion::sql::sqlparser::ast::JoinOperator;
    let empty = |factor: &TableFactor| {
        let TableFactor::Table {
            name, args: None, ..
        } = factor
        else {
            return false;
        };
        pg_catalog_name(name).is_some_and(|i| super::pg_catalog::is_always_empty(&i.value))
    };
    let reads_empty = select.from.iter().any(|t| {
        empty(&t.relation)
            || t.joins.iter().any(|j| {
                matches!(
                    j.join_operator,
                    JoinOperator::Join(_) | JoinOperator::Inner(_) | JoinOperator::CrossJoin(_)
                ) && empty(&j.relation)
            })
    });
    let grouped = !ungrouped(select);
    let aggregated = select.projection.iter().any(|item| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            aggregates(&without_subqueries(e))
        }
        _ => false,
    });
    if !reads_empty || grouped || aggregated || select.having.is_some() {
        return false;
    }
    let null = || Expr::Value(Value::Null.into());
    for (i, item) in select.projection.iter_mut().enumerate() {
        match item {
            SelectItem::UnnamedExpr(e) if !is_column(e) => {
                *item = SelectItem::ExprWithAlias {
                    expr: null(),
                    alias: super::names::hidden_alias(i),
                }
            }
            SelectItem::ExprWithAlias { expr, .. } if !is_column(expr) => *expr = null(),
            _ => {}
        }
    }
    select.selection = Some(Expr::Value(Value::Boolean(false).into()));
    true
}

/// Whether this expression node is a subquery (`(SELECT ...)`, EXISTS,
/// IN (SELECT ...), ARRAY(SELECT ...)); its inner nodes are not looked at.
pub(super) fn is_subquery(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
    ) || matches!(e, Expr::Function(f) if matches!(f.args, FunctionArguments::Subquery(_)))
}

/// An expression with each subquery in it replaced by NULL.
fn without_subqueries(expr: &Expr) -> Expr {
    let mut expr = expr.clone();
    let _ = visit_expressions_mut(&mut expr, |e| {
        if is_subquery(e) {
            *e = Expr::Value(Value::Null.into());
        }
        ControlFlow::<()>::Continue(())
    });
    expr
}

/// The SELECTs of a query body, through UNION, INTERSECT and EXCEPT.
fn for_each_select(body: &mut SetExpr, visit: &mut impl FnMut(&mut Select)) {
    match body {
        SetExpr::Select(select) => visit(select),
        SetExpr::SetOperation { left, right, .. } => {
            for_each_select(left, visit);
            for_each_select(right, visit);
        }
        _ => {}
    }
}

impl Selects {
    fn outer_arrays(&mut self, select: &mut Select) {
        // The outer query's tables, by the name its columns are qualified with.
        let mut tables = Vec::new();
        for factor in factors(&select.from) {
            if let TableFactor::Table { name, alias, .. } = factor {
                let shown = match alias {
                    Some(a) => a.name.value.to_lowercase(),
                    None => match name.0.last().and_then(|p| p.as_ident()) {
                        Some(i) => i.value.to_lowercase(),
                        None => continue,
                    },
                };
                tables.push((shown, name.clone()));
            }
        }
        if tables.is_empty() {
            return;
        }
        for expr in value_expressions(select) {
            let _ = visit_expressions_mut(expr, |e| {
                let subquery = match e {
                    Expr::Subquery(q) => Some(q.as_mut()),
                    Expr::Exists { subquery, .. } | Expr::InSubquery { subquery, .. } => {
                        Some(subquery.as_mut())
                    }
                    Expr::Function(f) => match &mut f.args {
                        FunctionArguments::Subquery(q) => Some(q.as_mut()),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(subquery) = subquery {
                    any_of_outer_array(subquery, &tables, &mut self.joined);
                }
                ControlFlow::<()>::Continue(())
            });
        }
    }
}

/// The expressions of a select's list, WHERE and HAVING.
pub(super) fn value_expressions(select: &mut Select) -> impl Iterator<Item = &mut Expr> {
    select
        .projection
        .iter_mut()
        .filter_map(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        })
        .chain(select.selection.as_mut())
        .chain(select.having.as_mut())
}

/// In a subquery's WHERE, replaces `x = ANY(o.a)`, with `o` a table of the
/// outer query, by a join with the elements of every `a` of that table.
fn any_of_outer_array(query: &mut Query, outer: &[(String, ObjectName)], joined: &mut usize) {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let inner = inner_names(select);
    if inner.is_empty() {
        return;
    }
    let Some(selection) = select.selection.take() else {
        return;
    };
    let mut all = Vec::new();
    conjuncts(selection, &mut all);
    for condition in &mut all {
        let Expr::AnyOp {
            left,
            compare_op: BinaryOperator::Eq,
            right,
            ..
        } = condition
        else {
            continue;
        };
        let Expr::CompoundIdentifier(parts) = right.as_ref() else {
            continue;
        };
        let [qualifier, column] = parts.as_slice() else {
            continue;
        };
        let qualifier = qualifier.value.to_lowercase();
        let Some((_, table)) = outer.iter().find(|(shown, _)| *shown == qualifier) else {
            continue;
        };
        if inner.contains(&qualifier) || side(left, &inner) == Some(false) {
            continue;
        }
        *joined += 1;
        let alias = format!("__tablegate_any{joined}");
        let column = column.to_string();
        let sql = format!(
            "SELECT 1 FROM (SELECT DISTINCT unnest(t.{column}) AS v, t.{column} AS a FROM {table} AS t) AS {alias} \
             WHERE {left} = {alias}.v AND {alias}.a = {right}"
        );
        let Ok(mut parsed) =
            datafusion::sql::sqlparser::parser::Parser::parse_sql(&PostgreSqlDialect {}, &sql)
        else {
            continue;
        };
        let Some(Statement::Query(parsed)) = parsed.pop() else {
            continue;
        };
        let SetExpr::Select(mut parsed) = *parsed.body else {
            continue;
        };
        let (Some(join), Some(replacement)) = (parsed.from.pop(), parsed.selection.take()) else {
            continue;
        };
        select.from.push(join);
        *condition = replacement;
    }
    select.selection = and_all(all);
}

/// Rewrites one expression given as SQL text (a column's DEFAULT), its
/// casts to the enum types `types` has included, or returns it as it is
/// when it does not parse.
pub fn rewrite_expression(sql: &str, types: &crate::catalog::EnumTypes) -> String {
    let parsed = datafusion::sql::sqlparser::parser::Parser::parse_sql(
        &PostgreSqlDialect {},
        &format!("SELECT {sql}"),
    );
    let Ok(mut statements) = parsed else {
        return sql.to_owned();
    };
    let Some(mut statement) = statements.pop() else {
        return sql.to_owned();
    };
    // A column's default reads no text of a series.
    rewrite(&mut statement, &SessionZone::utc());
    super::enums::rewrite_casts(&mut statement, types);
    match statement {
        Statement::Query(query) => match *query.body {
            SetExpr::Select(select) => match select.projection.as_slice() {
                [SelectItem::UnnamedExpr(expr)] => expr.to_string(),
                _ => sql.to_owned(),
            },
            _ => sql.to_owned(),
        },
        _ => sql.to_owned(),
    }
}

/// Rewrites a statement in place, in a session whose time zone is `zone`.
pub fn rewrite(statement: &mut Statement, zone: &SessionZone) {
    use datafusion::sql::sqlparser::ast::VisitMut;
    // `PREPARE dumpEnumType(pg_catalog.oid) AS ...` (pg_dump's).
    if let Statement::Prepare { data_types, .. } = statement {
        for ty in data_types {
            if let Some(builtin) = custom_type(ty).as_deref().and_then(builtin) {
                *ty = builtin;
            }
        }
    }
    let zone = zone.clone();
    let _ = statement.visit(&mut Selects { joined: 0, zone });
    let _ = statement.visit(&mut Expressions);
}

/// Each expression rewritten ([`rewrite_expr`]), inner ones first; a
/// comparison with ANY or ALL of a subquery (`x > ALL (SELECT ...)`) is
/// written without it before its parts are visited (see
/// [`super::set_comparisons`]), so that its subquery is read as a set of
/// rows, not as a scalar subquery made `single_value`.
struct Expressions;

impl datafusion::sql::sqlparser::ast::VisitorMut for Expressions {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(written) = super::set_comparisons::without_set_comparison(expr) {
            *expr = written;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        rewrite_expr(expr);
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The one statement of `sql`, parsed.
    pub(in crate::sql) fn statement(sql: &str) -> Statement {
        let mut statements = crate::sql::Session::parse(sql).unwrap();
        let datafusion::sql::parser::Statement::Statement(s) = statements.pop().unwrap() else {
            panic!()
        };
        *s
    }

    pub(in crate::sql) fn rewritten(sql: &str) -> String {
        let mut s = statement(sql);
        rewrite(&mut s, &SessionZone::utc());
        s.to_string()
    }

    #[test]
    fn numbers_with_exponents_are_written_in_digits() {
        let cases = [
            ("1e3", Some("1000")),
            ("1.5e3", Some("1500")),
            ("1.50e1", Some("15.0")),
            ("1.5E-3", Some("0.0015")),
            ("0.5e0", Some("0.5")),
            ("00012e-1", Some("1.2")),
            ("1e37", Some("10000000000000000000000000000000000000")),
            ("1e38", None),
            ("1e-39", None),
            ("1e300", None),
            ("1e99999999999", None),
            ("12", None),
        ];
        for (text, digits) in cases {
            assert_eq!(number_in_digits(text).as_deref(), digits, "{text}");
        }
    }

    #[test]
    fn postgres_spellings() {
        assert_eq!(
            rewritten("SELECT current_user, session_user, current_catalog"),
            "SELECT current_user(), session_user(), current_database()"
        );
        assert_eq!(
            rewritten("SELECT \"user\" FROM t"),
            "SELECT \"user\" FROM t"
        );
        assert_eq!(
            rewritten(
                "SELECT 1 FROM c WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default"
            ),
            "SELECT 1 FROM c WHERE c.relname ~ '^(t)$'"
        );
        assert_eq!(
            rewritten("SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM c"),
            "SELECT pg_get_userbyid(c.relowner) FROM c"
        );
        assert_eq!(
            rewritten("SELECT 'employees'::regclass, '42'::oid, c.oid::regclass::text FROM c"),
            "SELECT regclass('employees'), '42'::INT, relation_name(c.oid)::TEXT FROM c"
        );
        assert_eq!(
            rewritten(
                "SELECT nextval('t_id_seq'::regclass), currval('s'), setval($1::regclass, 5)"
            ),
            "SELECT nextval('t_id_seq'), currval('s'), setval($1, 5)"
        );
        assert_eq!(
            rewritten("SELECT x::pg_catalog.text, t.typname::\"char\", a.atttypid::regtype FROM t"),
            "SELECT x::TEXT, t.typname::TEXT, format_type(a.atttypid, NULL) FROM t"
        );
        assert_eq!(
            rewritten("SELECT (SELECT d.x FROM d WHERE d.k = t.k), (SELECT max(y) FROM d), (SELECT z FROM d LIMIT 1) FROM t"),
            "SELECT (SELECT single_value(d.x) FROM d WHERE d.k = t.k), (SELECT max(y) FROM d) AS __tablegate_column1, \
             (SELECT z FROM d LIMIT 1) AS __tablegate_column2 FROM t"
        );
        assert_eq!(
            rewritten("SELECT (SELECT d.x FROM d WHERE d.k = a.k AND a.flag AND d.y > 1) FROM t AS a"),
            "SELECT CASE WHEN a.flag THEN (SELECT single_value(d.x) FROM d WHERE d.k = a.k AND d.y > 1) END FROM t AS a"
        );
        assert_eq!(
            rewritten("SELECT (SELECT c.n FROM c, t WHERE c.oid = a.coll AND t.oid = a.ty AND a.coll <> t.coll) FROM x AS a"),
            "SELECT (SELECT single_value(c.n) FROM c, t WHERE c.oid = a.coll AND t.oid = a.ty AND c.oid <> t.coll) FROM x AS a"
        );
        assert_eq!(
            rewritten("SELECT ARRAY(SELECT b.n FROM b WHERE b.k = r.k ORDER BY 1) FROM r"),
            "SELECT coalesce((SELECT array_agg(b.n ORDER BY b.n) FROM b WHERE b.k = r.k), make_array()) FROM r"
        );
        assert_eq!(
            rewritten("SELECT 1 FROM p WHERE p.roles = '{0}' AND p.name <> '{x}'"),
            "SELECT 1 FROM p WHERE p.roles = make_array(0) AND p.name <> '{x}'"
        );
        assert_eq!(
            rewritten("SELECT (SELECT pg_catalog.d.x FROM pg_catalog.d WHERE pg_catalog.a.flag AND pg_catalog.d.k = pg_catalog.a.k) FROM pg_catalog.a"),
            "SELECT CASE WHEN pg_catalog.a.flag THEN (SELECT single_value(pg_catalog.d.x) FROM pg_catalog.d WHERE pg_catalog.d.k = pg_catalog.a.k) END FROM pg_catalog.a"
        );
        assert_eq!(
            rewritten("SELECT unnest(i.k), generate_subscripts(i.k, 1) FROM i"),
            "SELECT unnest(i.k), unnest(range(1, CAST(cardinality(i.k) AS BIGINT) + 1)) FROM i"
        );
        assert_eq!(
            rewritten("SELECT (SELECT f(a.x = 1, s.y) FROM s WHERE s.k = a.k) FROM a"),
            "SELECT CASE WHEN (SELECT single_value(named_struct('c0', s.y)) FROM s WHERE s.k = a.k) IS NOT NULL \
             THEN f(a.x = 1, get_field((SELECT single_value(named_struct('c0', s.y)) FROM s WHERE s.k = a.k), 'c0')) END FROM a"
        );
        assert_eq!(
            rewritten("SELECT (information_schema._pg_expandarray(i.k)).n, typinput = 'pg_catalog.array_in'::regproc, array_upper(a, 1) FROM i"),
            "SELECT get_field((unnest(_pg_expandarray(i.k))), 'n'), typinput = 'array_in', CAST(nullif(array_length(a, 1), 0) AS BIGINT) FROM i"
        );
        assert_eq!(
            rewritten("SELECT a COLLATE \"de_DE\" FROM t"),
            "SELECT a COLLATE \"de_DE\" FROM t"
        );
    }

    #[test]
    fn membership_in_an_outer_array_joins_the_array_elements() {
        assert_eq!(
            rewritten("SELECT p.name FROM pg_catalog.pg_policy p WHERE EXISTS (SELECT 1 FROM r WHERE r.oid = ANY(p.roles))"),
            "SELECT p.name FROM pg_catalog.pg_policy p WHERE false"
        );
        assert_eq!(
            rewritten("SELECT EXISTS (SELECT 1 FROM r WHERE r.oid = ANY(i.keys) AND r.k = i.k) FROM idx i"),
            "SELECT (SELECT count(*) FROM r, (SELECT DISTINCT unnest(t.keys) AS v, t.keys AS a FROM idx AS t) AS __tablegate_any1 \
             WHERE r.oid = __tablegate_any1.v AND __tablegate_any1.a = i.keys AND r.k = i.k) > 0 FROM idx i"
        );
        // An array of the subquery's own table is left alone.
        assert_eq!(
            rewritten("SELECT EXISTS (SELECT 1 FROM r WHERE 1 = ANY(r.keys)) FROM idx i"),
            "SELECT (SELECT count(*) FROM r WHERE 1 = ANY(r.keys)) > 0 FROM idx i"
        );
    }

    #[test]
    fn outer_equalities_move_out_of_a_subquery_in_from() {
        assert_eq!(
            rewritten("SELECT (SELECT count(*) FROM (SELECT id FROM c WHERE c.p = o.id AND k > 1) x) FROM o"),
            "SELECT (SELECT count(*) FROM (SELECT id, c.p AS __tablegate_outer_key1 FROM c WHERE k > 1) x \
             WHERE x.__tablegate_outer_key1 = o.id) FROM o"
        );
        assert_eq!(
            rewritten("SELECT o.k, x.* FROM o LEFT JOIN LATERAL (SELECT v AS w FROM c WHERE c.p = o.id ORDER BY w DESC LIMIT 2) x ON true"),
            "SELECT o.k, x.\"w\" FROM o LEFT OUTER JOIN (SELECT v AS w, c.p AS __tablegate_outer_key1, \
             row_number() OVER (PARTITION BY c.p ORDER BY v DESC) AS __tablegate_outer_key_rank FROM c) x \
             ON x.__tablegate_outer_key1 = o.id AND x.__tablegate_outer_key_rank <= 2"
        );
        // Not when the subquery aggregates, or compares otherwise with the
        // outer row.
        for sql in [
            "SELECT (SELECT sum(n) FROM (SELECT count(*) AS n FROM c WHERE c.p = o.id) x) FROM o",
            "SELECT (SELECT count(*) FROM (SELECT id FROM c WHERE c.p = o.id AND c.q > o.q) x) FROM o",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }

    #[test]
    fn json_aggregates_aggregate_json_texts() {
        assert_eq!(
            rewritten("SELECT json_agg(v ORDER BY k), jsonb_object_agg(k, v) FILTER (WHERE k > 1) FROM t"),
            "SELECT json_array_of(array_agg(json_agg_element(v) ORDER BY k)), \
             jsonb_input(json_object_of(array_agg(struct(k, to_jsonb(v))) FILTER (WHERE k > 1))) FROM t"
        );
    }

    #[test]
    fn set_returning_functions_in_from_move_into_the_table_they_read() {
        assert_eq!(
            rewritten("SELECT d.id, e, e.value FROM docs d, jsonb_array_elements_text(d.doc) AS e ORDER BY e.value"),
            "SELECT d.id, \"d\".\"value\" AS e, \"d\".\"value\" \
             FROM (SELECT \"d\".*, unnest(json_elements_text_list(d.doc)) AS \"value\" FROM docs d) AS \"d\" \
             ORDER BY \"d\".\"value\""
        );
        // Unqualified, beside the only table; named by its OUT parameter.
        assert_eq!(
            rewritten("SELECT value FROM docs CROSS JOIN jsonb_array_elements(doc)"),
            "SELECT value FROM (SELECT \"docs\".*, unnest(json_elements_list(doc)) AS \"value\" FROM docs) AS \"docs\""
        );
        // Two tables: the one the arguments name.
        assert_eq!(
            rewritten("SELECT g.n FROM a, b, generate_series(1, b.k) AS g(n) WHERE g.n > a.x"),
            "SELECT \"b\".\"n\" FROM a, (SELECT \"b\".*, unnest(generate_series(1, b.k)) AS \"n\" FROM b) AS \"b\" \
             WHERE \"b\".\"n\" > a.x"
        );
        // Two columns; and of constants, a table of its own.
        assert_eq!(
            rewritten("SELECT e.key FROM d, jsonb_each(d.doc) e"),
            "SELECT \"d\".\"key\" FROM (SELECT \"d\".*, unnest(json_keys_list(d.doc)) AS \"key\", \
             unnest(json_values_list(d.doc)) AS \"value\" FROM d) AS \"d\""
        );
        assert_eq!(
            rewritten("SELECT value FROM jsonb_array_elements('[1]')"),
            "SELECT value FROM (SELECT unnest(json_elements_list('[1]')) AS \"value\") AS \"jsonb_array_elements\""
        );
        // LEFT JOIN ... ON true keeps a row with no elements, beside NULL.
        assert_eq!(
            rewritten("SELECT a.id, e FROM a LEFT JOIN LATERAL jsonb_object_keys(a.doc) AS e ON true"),
            "SELECT a.id, e FROM (SELECT \"a\".*, unnest(json_keys_list(a.doc)) AS \"e\" FROM a \
             UNION ALL SELECT \"a\".*, NULL AS \"e\" FROM a WHERE coalesce(CAST(cardinality(json_keys_list(a.doc)) AS INTEGER), 0) = 0) AS \"a\""
        );
        // Left for DataFusion: generate_series of constants (its table
        // function), unqualified columns beside two tables, a LEFT JOIN on
        // a condition.
        for sql in [
            "SELECT * FROM generate_series(1, 3) AS g",
            "SELECT * FROM a, b, jsonb_array_elements(doc) AS e",
            "SELECT * FROM a LEFT JOIN jsonb_array_elements(a.doc) AS e ON e.value = a.x",
        ] {
            assert!(
                !rewritten(sql).contains("unnest"),
                "{sql}: {}",
                rewritten(sql)
            );
        }
    }

    #[test]
    fn selects_over_empty_catalogs_return_no_rows() {
        assert_eq!(
            rewritten("SELECT p.pubname, (SELECT string_agg(a.attname, ',') FROM pg_attribute a WHERE a.attrelid = pr.prrelid) \
                       FROM pg_catalog.pg_publication p JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid"),
            "SELECT p.pubname, NULL AS __tablegate_column1 FROM pg_catalog.pg_publication p JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid WHERE false"
        );
        // Without `pg_catalog.` too; an item other than a column is NULL.
        assert_eq!(
            rewritten("SELECT oid, CASE WHEN r = 0 THEN acldefault('T', r) ELSE '{}' END AS acl FROM pg_default_acl"),
            "SELECT oid, NULL AS acl FROM pg_default_acl WHERE false"
        );
        // An aggregate returns a row even over no rows; a LEFT JOIN keeps the left side's.
        for sql in [
            "SELECT count(*) FROM pg_catalog.pg_policy",
            "SELECT c.relname FROM pg_catalog.pg_class AS c LEFT JOIN pg_catalog.pg_policy AS p ON p.polrelid = c.oid",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }

    #[test]
    fn repeated_unnamed_items_get_aliases() {
        assert_eq!(
            rewritten("SELECT a, NULL, NULL FROM t UNION SELECT a, NULL, NULL FROM u"),
            "SELECT a, NULL, NULL AS __tablegate_column2 FROM t UNION SELECT a, NULL, NULL AS __tablegate_column2 FROM u"
        );
        assert_eq!(
            rewritten("SELECT k::int, t.k, (k)::text, k::text AS x, e.name, d.name, k, 1::float / 3, 1::real / 3 FROM t"),
            "SELECT k::INT AS __tablegate_column0, t.k, (k)::TEXT AS __tablegate_column2, k::TEXT AS x, e.name, d.name, k AS __tablegate_column6, 1::DOUBLE PRECISION / 3, 1::REAL / 3 AS __tablegate_column8 FROM t"
        );
    }

    #[test]
    fn generate_series_names_its_column_by_the_alias_or_itself() {
        for (sql, want) in [
            (
                "SELECT g FROM generate_series(1, 3) g",
                "SELECT g FROM generate_series(1, 3) g (g)",
            ),
            (
                "SELECT n FROM pg_catalog.generate_series(1, 3) AS n",
                "SELECT n FROM generate_series(1, 3) AS n (n)",
            ),
            (
                "SELECT * FROM GENERATE_SERIES(1, 3)",
                "SELECT * FROM GENERATE_SERIES(1, 3) generate_series (generate_series)",
            ),
            (
                "SELECT v FROM generate_series(1, 3) AS t(v)",
                "SELECT v FROM generate_series(1, 3) AS t (v)",
            ),
        ] {
            assert_eq!(rewritten(sql), want, "{sql}");
        }
    }
}
