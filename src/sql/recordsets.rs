//! `json[b]_to_recordset(x) AS e(a int, b text)`: a row for each object of
//! the JSON array `x`, each column the object's field of its name as the
//! column's type (NULL where the object lacks it); and
//! `json[b]_to_record(x) AS e(...)`: the one row of the object `x`.
//!
//! Written before planning as the rows of the array's elements,
//! `jsonb_array_elements(x) AS e` (of `jsonb_build_array(x)` for one
//! object), with each column read from the element: `e.a` is
//! `CAST(e.value ->> 'a' AS int)`, a json or jsonb column `e.value -> 'a'`.
//! The elements then join the table they read as any set-returning
//! function in FROM does (see `rewrite::lateral_set_functions`).

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, DataType, Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName,
    ObjectNamePart, OrderByKind, Query, Select, SelectItem, SelectItemQualifiedWildcardKind,
    SetExpr, TableFactor,
};

use super::dml::quote;
use super::session::normalize;

/// The rewrite of the query's SELECT, and of its ORDER BY.
pub(super) fn recordsets_as_elements(query: &mut Query) {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let columns = columns_as_elements(select);
    if columns.is_empty() {
        return;
    }
    if let Some(OrderByKind::Expressions(order)) = query.order_by.as_mut().map(|o| &mut o.kind) {
        for item in order {
            let _ = visit_expressions_mut(&mut item.expr, |e| read_field(e, &columns));
        }
    }
}

/// Each recordset column, by (alias, column) and by the column alone
/// (`None`): what reads it.
type Columns = HashMap<(Option<String>, String), Expr>;

/// Rewrites the recordsets of a SELECT's FROM and every read of their
/// columns; returns what each column became.
fn columns_as_elements(select: &mut Select) -> Columns {
    let mut columns = Columns::new();
    let factors = super::rewrite::factors(&select.from).count();
    let mut items = Vec::new();
    for factor in super::rewrite::factors_mut(&mut select.from) {
        if let Some(named) = as_elements(factor, &mut columns) {
            items.push(named);
        }
    }
    if columns.is_empty() {
        return columns;
    }
    // `*` of a recordset alone, and `e.*`, are its columns.
    let mut projection = Vec::new();
    for item in std::mem::take(&mut select.projection) {
        let of = match &item {
            SelectItem::Wildcard(_) if factors == 1 => items.first(),
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                match name.0.as_slice() {
                    [ObjectNamePart::Identifier(table)] => {
                        items.iter().find(|(alias, _)| normalize(table) == *alias)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match of {
            Some((alias, names)) => {
                projection.extend(names.iter().map(|name| SelectItem::ExprWithAlias {
                    expr: columns[&(Some(alias.clone()), name.clone())].clone(),
                    alias: Ident::with_quote('"', name.clone()),
                }))
            }
            None => projection.push(item),
        }
    }
    select.projection = projection;
    let mut read = |e: &mut Expr| read_field(e, &columns);
    let _ = visit_expressions_mut(&mut select.projection, &mut read);
    let _ = visit_expressions_mut(&mut select.from, &mut read);
    let _ = visit_expressions_mut(&mut select.selection, &mut read);
    let _ = visit_expressions_mut(&mut select.group_by, &mut read);
    let _ = visit_expressions_mut(&mut select.having, &mut read);
    columns
}

/// A column of a recordset as what reads it from its element.
fn read_field(expr: &mut Expr, columns: &Columns) -> ControlFlow<()> {
    let key = match &*expr {
        Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
            (Some(normalize(&parts[0])), normalize(&parts[1]))
        }
        Expr::Identifier(ident) => (None, normalize(ident)),
        _ => return ControlFlow::Continue(()),
    };
    if let Some(read) = columns.get(&key) {
        *expr = read.clone();
    }
    ControlFlow::Continue(())
}

/// A recordset factor as the elements of its array, its columns added to
/// `columns`; returns its alias and its columns' names.
fn as_elements(factor: &mut TableFactor, columns: &mut Columns) -> Option<(String, Vec<String>)> {
    let (name, args, alias) = match factor {
        TableFactor::Table {
            name,
            args: Some(args),
            alias: Some(alias),
            with_ordinality: false,
            ..
        } => (name, &mut args.args, alias),
        TableFactor::Function {
            name,
            args,
            alias: Some(alias),
            ..
        } => (name, args, alias),
        _ => return None,
    };
    let function = match name.0.as_slice() {
        [ObjectNamePart::Identifier(f)] => normalize(f),
        _ => return None,
    };
    let (elements, one) = match function.as_str() {
        "jsonb_to_recordset" => ("jsonb_array_elements", false),
        "json_to_recordset" => ("json_array_elements", false),
        "jsonb_to_record" => ("jsonb_array_elements", true),
        "json_to_record" => ("json_array_elements", true),
        _ => return None,
    };
    let typed: Option<Vec<(String, DataType)>> = alias
        .columns
        .iter()
        .map(|c| Some((normalize(&c.name), c.data_type.clone()?)))
        .collect();
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] = args.as_mut_slice() else {
        return None;
    };
    let typed = typed.filter(|t| !t.is_empty())?;
    if one {
        // The argument is the object (a text literal read as one).
        let (array, ty) = match elements {
            "jsonb_array_elements" => ("jsonb_build_array", DataType::JSONB),
            _ => ("json_build_array", DataType::JSON),
        };
        let object = super::rewrite::parse_expr(&format!("CAST({arg} AS {ty})"))?;
        *arg = super::rewrite::call(array, vec![object]);
    }
    *name = ObjectName::from(vec![Ident::new(elements)]);
    let table = normalize(&alias.name);
    alias.columns.clear();
    let mut names = Vec::new();
    for (column, ty) in typed {
        let element = format!("{}.value", quote(&table));
        let field = column.replace('\'', "''");
        let sql = match ty {
            DataType::JSON | DataType::JSONB => format!("{element} -> '{field}'"),
            ty => format!("CAST({element} ->> '{field}' AS {ty})"),
        };
        let read = super::rewrite::parse_expr(&sql)?;
        columns.insert((Some(table.clone()), column.clone()), read.clone());
        columns.insert((None, column.clone()), read);
        names.push(column);
    }
    Some((table, names))
}

#[cfg(test)]
mod tests {
    use crate::sql::rewrite::tests::rewritten;

    #[test]
    fn a_recordset_is_its_array_elements_read_field_by_field() {
        assert_eq!(
            rewritten("SELECT * FROM jsonb_to_recordset('[{\"a\":1}]') AS x(a int, b text)"),
            "SELECT CAST(json_get_text(\"x\".\"value\", 'a') AS INT) AS \"a\", \
             CAST(json_get_text(\"x\".\"value\", 'b') AS TEXT) AS \"b\" \
             FROM (SELECT unnest(json_elements_list('[{\"a\":1}]')) AS \"value\") AS \"x\""
        );
    }
}
