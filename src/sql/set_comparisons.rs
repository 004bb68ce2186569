//! A value compared with each row of a subquery, `x op ANY (SELECT ...)`
//! and `x op ALL (SELECT ...)`, as PostgreSQL answers it: true, false, or
//! NULL where no row decides and a comparison was NULL.
//!
//! `x = ANY (S)` is `x IN (S)`, which DataFusion plans as a join. The
//! other forms are written with the subquery's row count, its count of
//! NULLs, its least and greatest values and the array of its values: `x >
//! ANY (S)` is true when `x` is above the least value, `x > ALL (S)` false
//! when `x` is not above the greatest, `x <> ALL (S)` false when the array
//! holds `x`, and so on. (DataFusion plans these
//! comparisons itself, but its answers were wrong: no rows for `amount >
//! ANY (...)`, every row for `amount >= ALL (...)`; and its `NOT IN` of a
//! constant keeps the row when the subquery holds a NULL.)
//!
//! ANY and ALL of an array's text (`x = ANY ('{1,2}')`) are written as the
//! comparisons of its elements, which PostgreSQL reads as values of `x`'s
//! type (see [`of_array_literal`]).

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, GroupByExpr, Query, SelectItem, SetExpr, Value,
};

use super::rewrite::{aggregates, parse_expr};

/// `expr` written without a comparison with ANY or ALL of a subquery or
/// of an array's text, or `None` when it is not one.
pub(super) fn without_set_comparison(expr: &Expr) -> Option<Expr> {
    let (left, op, right, all) = match expr {
        Expr::AnyOp {
            left,
            compare_op,
            right,
            ..
        } => (left, compare_op, right, false),
        Expr::AllOp {
            left,
            compare_op,
            right,
        } => (left, compare_op, right, true),
        _ => return None,
    };
    use BinaryOperator::{Eq, Gt, GtEq, Lt, LtEq, NotEq};
    let query = match right.as_ref() {
        Expr::Subquery(query) => query,
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(text) => {
                return of_array_literal(left, op, text, all);
            }
            _ => return None,
        },
        _ => return None,
    };
    if (op, all) == (&Eq, false) {
        return Some(Expr::InSubquery {
            expr: left.clone(),
            subquery: query.clone(),
            negated: false,
        });
    }
    let x = format!("({left})");
    let [rows, nulls, least, greatest] = [
        "count(*)",
        "count(*) - count(__tablegate_v)",
        "min(__tablegate_v)",
        "max(__tablegate_v)",
    ]
    .map(|aggregate| of_rows(query, aggregate));
    let sql = match (op, all) {
        // No row equal to x: x not among the rows' values.
        (NotEq, true) => format!(
            "CASE WHEN {rows} = 0 THEN true WHEN {x} IS NULL THEN NULL \
             WHEN array_has({}, {x}) THEN false WHEN {nulls} > 0 THEN NULL ELSE true END",
            of_rows(query, "array_agg(__tablegate_v)")
        ),
        // Some row above (below) x: x above the least (below the greatest).
        (Gt | GtEq | Lt | LtEq, false) => {
            let bound = if matches!(op, Gt | GtEq) {
                least
            } else {
                greatest
            };
            format!(
                "CASE WHEN {rows} = 0 THEN false WHEN {x} {op} {bound} THEN true \
                 WHEN {nulls} > 0 OR {x} IS NULL THEN NULL ELSE false END"
            )
        }
        // Every row: x above the greatest (below the least).
        (Gt | GtEq | Lt | LtEq, true) => {
            let bound = if matches!(op, Gt | GtEq) {
                greatest
            } else {
                least
            };
            format!(
                "CASE WHEN {rows} = 0 THEN true WHEN {x} IS NULL THEN NULL \
                 WHEN NOT ({x} {op} {bound}) THEN false WHEN {nulls} > 0 THEN NULL ELSE true END"
            )
        }
        (Eq, true) => format!(
            "CASE WHEN {rows} = 0 THEN true WHEN {x} IS NULL THEN NULL \
             WHEN NOT ({x} = {least} AND {x} = {greatest}) THEN false \
             WHEN {nulls} > 0 THEN NULL ELSE true END"
        ),
        (NotEq, false) => format!(
            "CASE WHEN {rows} = 0 THEN false WHEN {x} <> {least} OR {x} <> {greatest} THEN true \
             WHEN {nulls} > 0 OR {x} IS NULL THEN NULL ELSE false END"
        ),
        _ => return None,
    };
    parse_expr(&sql)
}

/// `x op ANY ('{a,b}')` (or ALL) of an array's text form, which
/// PostgreSQL reads as an array of `x`'s type: `x IN ('a', 'b')` for `=
/// ANY`, `x NOT IN (...)` for `<> ALL`, else each element compared (`x >
/// 'a' OR x > 'b'`), the texts then read as `x`'s type as literals
/// compared with it are. A text that is no array is left to fail as one
/// (`'{a'::text[]`).
fn of_array_literal(left: &Expr, op: &BinaryOperator, text: &str, all: bool) -> Option<Expr> {
    let Ok(elements) = super::arrays::parse_literal(text) else {
        return parse_expr(&format!(
            "{left} {op} ANY ({}::text[])",
            Value::SingleQuotedString(text.into())
        ));
    };
    let elements: Vec<Expr> = elements
        .into_iter()
        .map(|e| Expr::Value(e.map_or(Value::Null, Value::SingleQuotedString).into()))
        .collect();
    let negated = match (op, all) {
        _ if elements.is_empty() => return Some(Expr::Value(Value::Boolean(all).into())),
        (BinaryOperator::Eq, false) => false,
        (BinaryOperator::NotEq, true) => true,
        _ => {
            let joined = if all {
                BinaryOperator::And
            } else {
                BinaryOperator::Or
            };
            let compared = elements.into_iter().map(|e| Expr::BinaryOp {
                left: Box::new(left.clone()),
                op: op.clone(),
                right: Box::new(e),
            });
            let chain = compared.reduce(|a, b| Expr::BinaryOp {
                left: Box::new(a),
                op: joined.clone(),
                right: Box::new(b),
            })?;
            return Some(Expr::Nested(Box::new(chain)));
        }
    };
    Some(Expr::InList {
        expr: Box::new(left.clone()),
        list: elements,
        negated,
    })
}

/// A scalar subquery of `aggregate` over the one column (`__tablegate_v`)
/// of `query`'s rows: the query's own SELECT with the aggregate in place
/// of its item, when that item does not aggregate and the query has no
/// HAVING or LIMIT (so that a correlated one stays one DataFusion
/// decorrelates; its DISTINCT, GROUP BY and ORDER BY change none of the
/// aggregates taken here), else an aggregate over the query in FROM.
fn of_rows(query: &Query, aggregate: &str) -> String {
    let plain = query.limit_clause.is_none() && query.fetch.is_none() && query.with.is_none();
    if let (true, SetExpr::Select(select)) = (plain, query.body.as_ref()) {
        if let [SelectItem::UnnamedExpr(item) | SelectItem::ExprWithAlias { expr: item, .. }] =
            select.projection.as_slice()
        {
            let value = parse_expr(&aggregate.replace("__tablegate_v", &format!("({item})")));
            if let (Some(value), None, false) = (value, &select.having, aggregates(item)) {
                let mut select = select.clone();
                select.distinct = None;
                select.group_by = GroupByExpr::Expressions(vec![], vec![]);
                select.projection = vec![SelectItem::UnnamedExpr(value)];
                return format!("({select})");
            }
        }
    }
    format!("(SELECT {aggregate} FROM ({query}) AS __tablegate_rows(__tablegate_v))")
}

#[cfg(test)]
mod tests {
    use super::super::rewrite::tests::rewritten;

    #[test]
    fn equality_with_any_is_membership() {
        assert_eq!(
            rewritten("SELECT 1 FROM t WHERE a = ANY (SELECT b FROM u)"),
            "SELECT 1 FROM t WHERE a IN (SELECT b FROM u)"
        );
    }
}
