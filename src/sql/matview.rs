//! `CREATE MATERIALIZED VIEW`, `REFRESH MATERIALIZED VIEW`, `VERIFY
//! MATERIALIZED VIEW` and `DROP MATERIALIZED VIEW`.
//!
//! A view's query is planned by DataFusion and its plan read for one of the
//! shapes every write keeps current (see `catalog::view`): a filtered copy
//! of one table, the same joined to another table on that table's primary
//! key, or one table grouped with COUNT, SUM, MIN, MAX and AVG. Any other
//! query makes a view that `REFRESH MATERIALIZED VIEW` recomputes, and the
//! statement says so in a notice.
//!
//! The view's key: `WITH (partition_key = 'a', row_key = 'b, c')` names
//! view columns; without it a copy or join keeps its base table's key, a
//! grouped view is keyed by its group columns, and a refreshed view gets
//! generated keys.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::common::Column as DfColumn;
use datafusion::logical_expr::{BinaryExpr, Expr, JoinType, LogicalPlan, Operator};
use datafusion::sql::sqlparser::ast::{CreateTableOptions, CreateView, SqlOption};

use super::ddl::{define, fill, type_of_field};
use super::error::{Result, SqlError};
use super::pushdown::literal_value;
use super::session::{normalize, table_name, Output, Session};
use super::txn::Change;
use crate::catalog::{
    check_definition, Aggregate, CatalogError, Column, CompareOp, GroupItem, KeyJoin, Keys,
    Maintained, Predicate, Shape, Source, TableDef, ViewDef,
};

pub async fn create(session: &mut Session, create: CreateView) -> Result<Output> {
    let name = table_name(&create.name)?;
    if super::ddl::exists(
        session,
        session.table_def(&name).is_some(),
        create.if_not_exists,
        &name,
    )? {
        return Ok(Output::Command("CREATE MATERIALIZED VIEW".into()));
    }
    let query = create.query.to_string();
    let plan = session.plan_query(&query).await?;
    let shape = analyse(session, &plan);
    let mut columns: Vec<Column> = match &shape {
        Some(found) => found.columns.clone(),
        None => plan
            .schema()
            .fields()
            .iter()
            .map(|f| Ok(Column::new(f.name().as_str(), type_of_field(f)?)))
            .collect::<Result<_>>()?,
    };
    if !create.columns.is_empty() {
        if create.columns.len() != columns.len() {
            return Err(SqlError::InvalidDefinition(format!(
                "materialized view {name:?} names {} columns, its query returns {}",
                create.columns.len(),
                columns.len()
            )));
        }
        for (column, def) in columns.iter_mut().zip(&create.columns) {
            column.name = normalize(&def.name);
        }
    }
    let declared = key_options(&create.options)?;
    let keys = match (&declared, &shape) {
        (Some((partition, row)), _) => {
            let index = |n: &String| {
                columns
                    .iter()
                    .position(|c| &c.name == n)
                    .ok_or_else(|| SqlError::undefined_column(n))
            };
            Keys::Columns {
                partition: partition.iter().map(index).collect::<Result<_>>()?,
                row: row.iter().map(index).collect::<Result<_>>()?,
            }
        }
        (None, Some(found)) => found.default_keys.clone().ok_or_else(|| {
            SqlError::InvalidDefinition(format!(
                "materialized view {name:?} does not return its base table's primary key: \
                 name its key with WITH (partition_key = '...', row_key = '...')"
            ))
        })?,
        (None, None) => Keys::Generated,
    };
    let (partition, row) = match &keys {
        Keys::Columns { partition, row } => (partition.clone(), row.clone()),
        Keys::Generated => (vec![], vec![]),
    };
    for &i in partition.iter().chain(&row) {
        columns[i].nullable = false;
    }
    let mut maintained = shape.map(|found| found.maintained);
    if let Some(Maintained {
        shape: Shape::Groups {
            group,
            columns: items,
        },
        ..
    }) = &maintained
    {
        // A group's view row is found by its key: the key is the group columns.
        let key_items: Vec<&GroupItem> = partition.iter().chain(&row).map(|&i| &items[i]).collect();
        let all_groups = key_items.len() == group.len()
            && key_items
                .iter()
                .all(|item| matches!(item, GroupItem::Group(_)));
        if !all_groups {
            maintained = None;
        }
    }
    let def = TableDef {
        name: name.clone(),
        columns,
        keys,
        foreign_keys: Vec::new(),
        comment: None,
        indexes: Vec::new(),
        view: Some(ViewDef {
            query,
            maintained: maintained.clone(),
        }),
        plain_view: None,
        checks: Vec::new(),
        grants: Vec::new(),
        temporary: None,
        triggers_disabled: false,
    };
    check_definition(&def)?;
    define(session, &name, Some(def.clone()))?;
    if maintained.is_none() {
        session.notice(format!(
            "materialized view {name:?} is not kept current by writes (only a filtered copy of one table, \
             a join on another table's primary key, and GROUP BY with COUNT, SUM, MIN, MAX, AVG are): \
             REFRESH MATERIALIZED VIEW recomputes it"
        ));
        fill(session, &def, plan).await?;
        session.engine().monitor.record_refresh(&name);
    }
    Ok(Output::Command("CREATE MATERIALIZED VIEW".into()))
}

/// `WITH (partition_key = 'a', row_key = 'b, c')`.
fn key_options(options: &CreateTableOptions) -> Result<Option<(Vec<String>, Vec<String>)>> {
    let CreateTableOptions::With(options) = options else {
        return Ok(None);
    };
    let list = |value: &datafusion::sql::sqlparser::ast::Expr| -> Vec<String> {
        value
            .to_string()
            .trim_matches('\'')
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let (mut partition, mut row) = (None, Vec::new());
    for option in options {
        match option {
            SqlOption::KeyValue { key, value }
                if key.value.eq_ignore_ascii_case("partition_key") =>
            {
                partition = Some(list(value))
            }
            SqlOption::KeyValue { key, value } if key.value.eq_ignore_ascii_case("row_key") => {
                row = list(value)
            }
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "materialized view option {other} is not supported (partition_key, row_key)"
                )))
            }
        }
    }
    match partition {
        Some(partition) if !partition.is_empty() => Ok(Some((partition, row))),
        Some(_) | None if !row.is_empty() => Err(SqlError::InvalidDefinition(
            "row_key needs a partition_key".into(),
        )),
        _ => Ok(None),
    }
}

/// A view query of a maintained shape.
struct Found {
    maintained: Maintained,
    columns: Vec<Column>,
    /// The key a copy or join keeps from its base table, a grouped view
    /// from its group columns; `None` when the view does not return it.
    default_keys: Option<Keys>,
}

/// The scans under a plan: qualifier (alias or table name) to table.
struct Scans {
    tables: BTreeMap<String, Arc<TableDef>>,
}

impl Scans {
    /// The table and column a column expression reads.
    fn resolve(&self, column: &DfColumn) -> Option<(Arc<TableDef>, String)> {
        match &column.relation {
            Some(relation) => {
                let def = self.tables.get(relation.table())?;
                def.column_index(&column.name)?;
                Some((def.clone(), column.name.clone()))
            }
            None => {
                let mut holders = self
                    .tables
                    .values()
                    .filter(|d| d.column_index(&column.name).is_some());
                let def = holders.next()?;
                holders
                    .next()
                    .is_none()
                    .then(|| (def.clone(), column.name.clone()))
            }
        }
    }
}

/// One table scanned, under its alias, with nothing else in between.
fn scan_of(session: &Session, plan: &LogicalPlan) -> Option<(String, Arc<TableDef>)> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let name = scan.table_name.table().to_owned();
            let def = session.table_def(&name)?;
            (def.view.is_none() && scan.filters.is_empty() && scan.fetch.is_none())
                .then_some((name, def))
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let (_, def) = scan_of(session, &alias.input)?;
            Some((alias.alias.table().to_owned(), def))
        }
        _ => None,
    }
}

fn analyse(session: &Session, plan: &LogicalPlan) -> Option<Found> {
    let LogicalPlan::Projection(projection) = plan else {
        return None;
    };
    let names: Vec<String> = plan
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    match projection.input.as_ref() {
        LogicalPlan::Aggregate(aggregate) => {
            let (filter, input) = split_filter(&aggregate.input);
            let (alias, base) = scan_of(session, input)?;
            let scans = Scans {
                tables: [(alias, base.clone())].into(),
            };
            let filter = match filter {
                Some(f) => Some(predicate(&scans, &base, None, f)?),
                None => None,
            };
            let group_count = aggregate.group_expr.len();
            let mut group = Vec::new();
            for expr in &aggregate.group_expr {
                let Expr::Column(c) = expr else { return None };
                let (_, name) = scans.resolve(c)?;
                // NULL groups would have no key.
                let i = base.column_index(&name)?;
                if base.columns[i].nullable && !base.is_key_column(i) {
                    return None;
                }
                group.push(name);
            }
            let mut items = Vec::new();
            let mut columns = Vec::new();
            for (expr, name) in projection.expr.iter().zip(&names) {
                let Expr::Column(c) = unalias(expr) else {
                    return None;
                };
                let i = aggregate.schema.index_of_column(c).ok()?;
                if i < group_count {
                    let column = &group[i];
                    let ty = base.columns[base.column_index(column)?].ty;
                    items.push(GroupItem::Group(column.clone()));
                    columns.push(Column::new(name.as_str(), ty));
                } else {
                    let (function, argument) =
                        aggregate_of(&scans, &aggregate.aggr_expr[i - group_count])?;
                    let ty = match (function, &argument) {
                        (Aggregate::Min | Aggregate::Max, Some(a)) => {
                            base.columns[base.column_index(a)?].ty
                        }
                        _ => type_of_field(plan.schema().field(columns.len())).ok()?,
                    };
                    items.push(GroupItem::Aggregate {
                        function,
                        column: argument,
                    });
                    columns.push(Column::new(name.as_str(), ty));
                }
            }
            // Keyed by the group columns, in GROUP BY order.
            let positions: Option<Vec<usize>> = group
                .iter()
                .map(|g| {
                    items
                        .iter()
                        .position(|item| item == &GroupItem::Group(g.clone()))
                })
                .collect();
            let default_keys = positions.filter(|p| !p.is_empty()).map(|p| Keys::Columns {
                partition: p[..1].to_vec(),
                row: p[1..].to_vec(),
            });
            Some(Found {
                maintained: Maintained {
                    table: base.name.clone(),
                    filter,
                    shape: Shape::Groups {
                        group,
                        columns: items,
                    },
                },
                columns,
                default_keys: Some(default_keys?),
            })
        }
        input => {
            let (filter, input) = split_filter(input);
            let (scans, base, join) = match input {
                LogicalPlan::Join(join) => {
                    let outer = match join.join_type {
                        JoinType::Inner => false,
                        JoinType::Left => true,
                        _ => return None,
                    };
                    let (base_alias, base) = scan_of(session, &join.left)?;
                    let (other_alias, other) = scan_of(session, &join.right)?;
                    if base_alias == other_alias {
                        return None;
                    }
                    let scans = Scans {
                        tables: [
                            (base_alias.clone(), base.clone()),
                            (other_alias, other.clone()),
                        ]
                        .into(),
                    };
                    let mut pairs: Vec<(Expr, Expr)> = join.on.clone();
                    if let Some(f) = &join.filter {
                        for conjunct in datafusion::logical_expr::utils::split_conjunction(f) {
                            let Expr::BinaryExpr(BinaryExpr {
                                left,
                                op: Operator::Eq,
                                right,
                            }) = conjunct
                            else {
                                return None;
                            };
                            pairs.push(((**left).clone(), (**right).clone()));
                        }
                    }
                    let on = key_join_columns(&scans, &base, &other, &pairs)?;
                    let join = KeyJoin {
                        table: other.name.clone(),
                        on,
                        outer,
                    };
                    (scans, base, Some((join, other)))
                }
                other => {
                    let (alias, base) = scan_of(session, other)?;
                    let scans = Scans {
                        tables: [(alias, base.clone())].into(),
                    };
                    (scans, base, None)
                }
            };
            let joined = join.as_ref().map(|(_, other)| other.clone());
            let filter = match filter {
                Some(f) => Some(predicate(&scans, &base, joined.as_ref(), f)?),
                None => None,
            };
            let mut sources = Vec::new();
            let mut columns = Vec::new();
            for (expr, name) in projection.expr.iter().zip(&names) {
                let Expr::Column(c) = unalias(expr) else {
                    return None;
                };
                let (def, column) = scans.resolve(c)?;
                let ty = def.columns[def.column_index(&column)?].ty;
                let system = def.columns[def.column_index(&column)?].system.is_some();
                if system {
                    return None;
                }
                sources.push(if Arc::ptr_eq(&def, &base) {
                    Source::Base(column)
                } else {
                    Source::Joined(column)
                });
                columns.push(Column::new(name.as_str(), ty));
            }
            // The base table's key, where the view returns it.
            let position = |i: &usize| {
                let name = &base.columns[*i].name;
                sources
                    .iter()
                    .position(|s| s == &Source::Base(name.clone()))
            };
            let default_keys = match &base.keys {
                Keys::Columns { partition, row } => {
                    let partition: Option<Vec<usize>> = partition.iter().map(position).collect();
                    let row: Option<Vec<usize>> = row.iter().map(position).collect();
                    partition
                        .zip(row)
                        .map(|(partition, row)| Keys::Columns { partition, row })
                }
                Keys::Generated => return None,
            };
            Some(Found {
                maintained: Maintained {
                    table: base.name.clone(),
                    filter,
                    shape: Shape::Rows {
                        join: join.map(|(j, _)| j),
                        columns: sources,
                    },
                },
                columns,
                default_keys,
            })
        }
    }
}

fn unalias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unalias(&alias.expr),
        other => other,
    }
}

/// A WHERE over the input, and the input under it.
fn split_filter(plan: &LogicalPlan) -> (Option<&Expr>, &LogicalPlan) {
    match plan {
        LogicalPlan::Filter(filter) => (Some(&filter.predicate), &filter.input),
        other => (None, other),
    }
}

/// The base table's columns that an equi-join gives the other table's whole
/// primary key from, in the other's key order.
fn key_join_columns(
    scans: &Scans,
    base: &Arc<TableDef>,
    other: &Arc<TableDef>,
    pairs: &[(Expr, Expr)],
) -> Option<Vec<String>> {
    let mut by_key: BTreeMap<String, String> = BTreeMap::new();
    for (a, b) in pairs {
        let (Expr::Column(a), Expr::Column(b)) = (unalias(a), unalias(b)) else {
            return None;
        };
        let (a, b) = (scans.resolve(a)?, scans.resolve(b)?);
        let ((_, base_column), (_, other_column)) =
            if Arc::ptr_eq(&a.0, base) && Arc::ptr_eq(&b.0, other) {
                (a, b)
            } else if Arc::ptr_eq(&a.0, other) && Arc::ptr_eq(&b.0, base) {
                (b, a)
            } else {
                return None;
            };
        let ty = |def: &TableDef, name: &str| def.columns[def.column_index(name).unwrap_or(0)].ty;
        if ty(base, &base_column) != ty(other, &other_column) {
            return None;
        }
        by_key.insert(other_column, base_column);
    }
    let key = other.key_column_names();
    if key.is_empty() || key.len() != by_key.len() {
        return None;
    }
    key.iter().map(|k| by_key.get(k).cloned()).collect()
}

fn aggregate_of(scans: &Scans, expr: &Expr) -> Option<(Aggregate, Option<String>)> {
    let Expr::AggregateFunction(call) = unalias(expr) else {
        return None;
    };
    let params = &call.params;
    if params.distinct || params.filter.is_some() || !params.order_by.is_empty() {
        return None;
    }
    let function = match call.func.name() {
        "count" => Aggregate::Count,
        "sum" => Aggregate::Sum,
        "min" => Aggregate::Min,
        "max" => Aggregate::Max,
        "avg" => Aggregate::Avg,
        _ => return None,
    };
    let args: Vec<&Expr> = match function {
        Aggregate::Sum => params.args.iter().map(super::sums::summed).collect(),
        _ => params.args.iter().collect(),
    };
    match args.as_slice() {
        [Expr::Column(c)] => {
            let (def, column) = scans.resolve(c)?;
            let ty = def.columns[def.column_index(&column)?].ty;
            let numeric = matches!(
                ty,
                crate::catalog::SqlType::Int2
                    | crate::catalog::SqlType::Int4
                    | crate::catalog::SqlType::Int8
                    | crate::catalog::SqlType::Numeric { .. }
                    | crate::catalog::SqlType::Float4
                    | crate::catalog::SqlType::Float8
            );
            if matches!(function, Aggregate::Sum | Aggregate::Avg) && !numeric {
                return None;
            }
            Some((function, Some(column)))
        }
        [Expr::Literal(value, _)] if function == Aggregate::Count && !value.is_null() => {
            Some((function, None))
        }
        [] if function == Aggregate::Count => Some((function, None)),
        _ => None,
    }
}

/// A WHERE as a predicate over base and joined columns, when it only
/// compares columns with literals.
fn predicate(
    scans: &Scans,
    base: &Arc<TableDef>,
    joined: Option<&Arc<TableDef>>,
    expr: &Expr,
) -> Option<Predicate> {
    let source = |e: &Expr| -> Option<(Source, crate::catalog::SqlType)> {
        let Expr::Column(c) = unalias(e) else {
            return None;
        };
        let (def, name) = scans.resolve(c)?;
        let column = &def.columns[def.column_index(&name)?];
        if column.system.is_some() {
            return None;
        }
        let ty = column.ty;
        if Arc::ptr_eq(&def, base) {
            Some((Source::Base(name), ty))
        } else if joined.is_some_and(|j| Arc::ptr_eq(&def, j)) {
            Some((Source::Joined(name), ty))
        } else {
            None
        }
    };
    let literal = |e: &Expr, ty| match unalias(e) {
        Expr::Literal(v, _) => literal_value(ty, v),
        _ => None,
    };
    let recurse = |e: &Expr| predicate(scans, base, joined, e).map(Box::new);
    match unalias(expr) {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let compare = |op| match op {
                Operator::Eq => Some(CompareOp::Eq),
                Operator::NotEq => Some(CompareOp::NotEq),
                Operator::Lt => Some(CompareOp::Lt),
                Operator::LtEq => Some(CompareOp::LtEq),
                Operator::Gt => Some(CompareOp::Gt),
                Operator::GtEq => Some(CompareOp::GtEq),
                _ => None,
            };
            match op {
                Operator::And => Some(Predicate::And(recurse(left)?, recurse(right)?)),
                Operator::Or => Some(Predicate::Or(recurse(left)?, recurse(right)?)),
                op => {
                    let op = compare(*op)?;
                    if let Some((column, ty)) = source(left) {
                        let value = literal(right, ty)?;
                        return Some(Predicate::Compare { column, op, value });
                    }
                    let (column, ty) = source(right)?;
                    let value = literal(left, ty)?;
                    let flipped = match op {
                        CompareOp::Lt => CompareOp::Gt,
                        CompareOp::LtEq => CompareOp::GtEq,
                        CompareOp::Gt => CompareOp::Lt,
                        CompareOp::GtEq => CompareOp::LtEq,
                        same => same,
                    };
                    Some(Predicate::Compare {
                        column,
                        op: flipped,
                        value,
                    })
                }
            }
        }
        Expr::Not(e) => Some(Predicate::Not(recurse(e)?)),
        Expr::IsNull(e) => Some(Predicate::IsNull {
            column: source(e)?.0,
            negated: false,
        }),
        Expr::IsNotNull(e) => Some(Predicate::IsNull {
            column: source(e)?.0,
            negated: true,
        }),
        // `x IS [NOT] TRUE|FALSE` on a boolean column: never NULL.
        Expr::IsTrue(e) | Expr::IsFalse(e) | Expr::IsNotTrue(e) | Expr::IsNotFalse(e) => {
            let (column, _) = source(e)?;
            let (value, null_counts) = match unalias(expr) {
                Expr::IsTrue(_) => (true, false),
                Expr::IsFalse(_) => (false, false),
                Expr::IsNotTrue(_) => (false, true),
                _ => (true, true),
            };
            let equals = Predicate::Compare {
                column: column.clone(),
                op: CompareOp::Eq,
                value: crate::model::Value::Boolean(value),
            };
            let null = Predicate::IsNull {
                column,
                negated: !null_counts,
            };
            Some(if null_counts {
                Predicate::Or(Box::new(null), Box::new(equals))
            } else {
                Predicate::And(Box::new(null), Box::new(equals))
            })
        }
        Expr::InList(list) => {
            let (column, ty) = source(&list.expr)?;
            let values = list
                .list
                .iter()
                .map(|e| literal(e, ty))
                .collect::<Option<Vec<_>>>()?;
            Some(Predicate::InList {
                column,
                values,
                negated: list.negated,
            })
        }
        Expr::Between(between) => {
            let (column, ty) = source(&between.expr)?;
            let low = Predicate::Compare {
                column: column.clone(),
                op: CompareOp::GtEq,
                value: literal(&between.low, ty)?,
            };
            let high = Predicate::Compare {
                column,
                op: CompareOp::LtEq,
                value: literal(&between.high, ty)?,
            };
            let both = Predicate::And(Box::new(low), Box::new(high));
            Some(if between.negated {
                Predicate::Not(Box::new(both))
            } else {
                both
            })
        }
        e @ Expr::Column(_) => {
            let (column, ty) = source(e)?;
            (ty == crate::catalog::SqlType::Bool).then_some(Predicate::Compare {
                column,
                op: CompareOp::Eq,
                value: crate::model::Value::Boolean(true),
            })
        }
        _ => None,
    }
}

/// The materialized view of this name.
fn view_def(session: &Session, name: &str) -> Result<Arc<TableDef>> {
    match session.table_def(name) {
        Some(def) if def.view.is_some() => Ok(def),
        Some(_) => Err(SqlError::WrongObjectType(format!(
            "{name:?} is not a materialized view"
        ))),
        None => Err(CatalogError::TableNotFound(name.to_owned()).into()),
    }
}

/// `REFRESH MATERIALIZED VIEW name`: a view writes keep current is current
/// already; any other is computed again, in one commit with its old rows'
/// deletion.
pub async fn refresh(session: &mut Session, name: &str) -> Result<Output> {
    let def = view_def(session, name)?;
    let view = def.view.as_ref().expect("a view");
    if view.maintained.is_none() {
        let plan = session.plan_query(&view.query).await?;
        let old = crate::store::query_all(
            &*session.current_view(),
            &def.name,
            &crate::store::Query::table().project(Vec::<String>::new()),
        )
        .await?;
        let deletes = old
            .into_iter()
            .map(|e| Change {
                table: def.name.clone(),
                key: e.key,
                read: e.etag,
                new: None,
                creates: false,
                moved_to: None,
            })
            .collect();
        session.apply_to_transaction(deletes, &def)?;
        fill(session, &def, plan).await?;
    }
    Ok(Output::Command("REFRESH MATERIALIZED VIEW".into()))
}

/// `VERIFY MATERIALIZED VIEW name`: runs the view's query and compares its
/// rows with the view's, as multisets; one row per difference (`missing`:
/// the query returns it and the view does not; `extra`: the other way).
pub async fn verify(session: &Session, name: &str) -> Result<Vec<(&'static str, String)>> {
    let def = view_def(session, name)?;
    let view = def.view.as_ref().expect("a view");
    let columns: Vec<String> = def
        .columns
        .iter()
        .map(|c| format!("\"{}\"", c.name.replace('"', "\"\"")))
        .collect();
    let casts: Vec<String> = def
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("CAST(q.\"c{i}\" AS {})", super::types::cast_name(c.ty)))
        .collect();
    let aliases: Vec<String> = (0..def.columns.len()).map(|i| format!("c{i}")).collect();
    let expected = format!(
        "SELECT {} FROM ({}) AS q({})",
        casts.join(", "),
        view.query,
        aliases.join(", ")
    );
    let actual = format!(
        "SELECT {} FROM \"{}\"",
        columns.join(", "),
        def.name.replace('"', "\"\"")
    );
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for (sql, sign) in [(expected, 1), (actual, -1)] {
        for row in session.query_text_rows(&sql).await? {
            *counts.entry(row).or_default() += sign;
        }
    }
    let mut differences = Vec::new();
    for (row, n) in counts {
        let kind = if n > 0 { "missing" } else { "extra" };
        for _ in 0..n.unsigned_abs() {
            differences.push((kind, row.clone()));
        }
    }
    Ok(differences)
}

/// `REFRESH MATERIALIZED VIEW name` and `VERIFY MATERIALIZED VIEW name`,
/// which the SQL parser does not read; `None` for any other statement.
pub async fn text_command(session: &mut Session, sql: &str) -> Option<Result<Output>> {
    let words: Vec<&str> = sql
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .collect();
    let [command, materialized, view, name] = words.as_slice() else {
        return None;
    };
    if !materialized.eq_ignore_ascii_case("materialized") || !view.eq_ignore_ascii_case("view") {
        return None;
    }
    let name = name.trim_matches('"').to_owned();
    if command.eq_ignore_ascii_case("refresh") {
        return Some(
            async {
                session.check_not_failed()?;
                let implicit = session.open_implicit();
                let result = refresh(session, &name).await;
                if implicit {
                    session.close_implicit(result.is_ok()).await?;
                }
                if result.is_ok() {
                    session.engine().monitor.record_refresh(&name);
                }
                result
            }
            .await,
        );
    }
    if !command.eq_ignore_ascii_case("verify") {
        return None;
    }
    Some(
        async {
            session.refresh_view();
            let differences = verify(session, &name).await?;
            session
                .engine()
                .monitor
                .record_verification(&name, differences.len() as u64);
            super::ddl::verify_output(differences)
        }
        .await,
    )
}
