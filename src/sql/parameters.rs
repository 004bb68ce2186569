//! The types of a statement's parameters (`$1`, `$2`, ...), inferred as
//! PostgreSQL infers them: from the column a parameter is compared with or
//! stored into (DataFusion's own inference), from a cast written on it
//! (`$1::float8`), from the one type a function takes (`pg_sleep($1)`),
//! from the other arguments of `coalesce` and its kin, and from `LIMIT`;
//! one type for each parameter wherever it appears.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::DFSchema;
use datafusion::logical_expr::expr::{Cast, Placeholder, ScalarFunction, TryCast};
use datafusion::logical_expr::{Expr, ExprSchemable, Limit, LogicalPlan, ScalarUDF, TypeSignature};

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, CastKind, DataType as SqlDataType, Expr as SqlExpr, Statement, Value,
    ValueWithSpan,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::error::Result;
use super::plan_nodes::rewrite_nodes_holding;

/// Parameter types of a plan, in `$1, $2, ...` order; `None` for one no
/// context gave a type (PostgreSQL's `unknown`, read as text).
pub(super) fn types(plan: &LogicalPlan) -> Result<Vec<Option<DataType>>> {
    let types = plan.get_parameter_types()?;
    let count = types
        .keys()
        .filter_map(|k| k.trim_start_matches('$').parse::<usize>().ok())
        .max()
        .unwrap_or(0);
    Ok((1..=count)
        .map(|i| types.get(&format!("${i}")).cloned().flatten())
        .collect())
}

/// The plan with the parameters DataFusion leaves untyped typed by what
/// is written around them, as PostgreSQL types them: a cast gives its type
/// (`$1::float8` is a float8 parameter, not text cast to float8); so does
/// a function argument where the function takes one type there
/// (`pg_sleep($1)`); `coalesce`, `greatest`, `least` and `nullif` give the
/// type of their other arguments (`coalesce(qty, $1)`); and `LIMIT` and
/// `OFFSET` take a bigint.
pub(super) fn typed_by_context(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = rewrite_nodes_holding(
        plan,
        |_, e| takes_type_around(e),
        |e, inputs| {
            e.transform_up(|e| {
                if !takes_type_around(&e) {
                    return Ok(Transformed::no(e));
                }
                Ok(match e {
                    Expr::Cast(Cast { expr, field }) => Transformed::yes(Expr::Cast(Cast {
                        expr: Box::new(typed(*expr, &cast_parameter_type(field.data_type()))),
                        field,
                    })),
                    Expr::TryCast(TryCast { expr, field }) => {
                        Transformed::yes(Expr::TryCast(TryCast {
                            expr: Box::new(typed(*expr, &cast_parameter_type(field.data_type()))),
                            field,
                        }))
                    }
                    Expr::ScalarFunction(f) => match argument_types(&f.func, &f.args, inputs) {
                        Some(types) => {
                            let args = f.args.into_iter().zip(&types).map(|(a, t)| typed(a, t));
                            Transformed::yes(Expr::ScalarFunction(ScalarFunction {
                                func: f.func,
                                args: args.collect(),
                            }))
                        }
                        None => Transformed::no(Expr::ScalarFunction(f)),
                    },
                    e => Transformed::no(e),
                })
            })
        },
    )?;
    let limits = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Limit(Limit { skip, fetch, input })
            if skip.iter().chain(&fetch).any(|e| untyped(e)) =>
        {
            let bigint = |e: Option<Box<Expr>>| e.map(|e| Box::new(typed(*e, &DataType::Int64)));
            Ok(Transformed::yes(LogicalPlan::Limit(Limit {
                skip: bigint(skip),
                fetch: bigint(fetch),
                input,
            })))
        }
        node => Ok(Transformed::no(node)),
    })?;
    Ok(limits.data)
}

/// The type of a parameter cast to `target`: the target's, but a
/// timestamp in microseconds, as PostgreSQL's are (DataFusion's
/// `timestamp` is in nanoseconds, which hold no moment before 1677 or
/// after 2262); the cast converts.
fn cast_parameter_type(target: &DataType) -> DataType {
    match target {
        DataType::Timestamp(_, zone) => DataType::Timestamp(TimeUnit::Microsecond, zone.clone()),
        other => other.clone(),
    }
}

fn untyped(e: &Expr) -> bool {
    matches!(e, Expr::Placeholder(Placeholder { field: None, .. }))
}

/// Whether `e` has an untyped parameter right under it whose type may
/// come from `e`: a cast's operand or a function's argument.
fn takes_type_around(e: &Expr) -> bool {
    match e {
        Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. }) => untyped(expr),
        Expr::ScalarFunction(ScalarFunction { args, .. }) => args.iter().any(untyped),
        _ => false,
    }
}

/// The types a function's arguments take, given the columns `inputs`,
/// where they say anything of an untyped parameter among them.
fn argument_types(func: &ScalarUDF, args: &[Expr], inputs: &DFSchema) -> Option<Vec<DataType>> {
    let taken = if COMMON_TYPE_FUNCTIONS.contains(&func.name()) {
        let common = args
            .iter()
            .filter(|a| !untyped(a))
            .find_map(|a| a.get_type(inputs).ok().filter(|t| *t != DataType::Null))?;
        vec![common; args.len()]
    } else {
        match &func.signature().type_signature {
            TypeSignature::Exact(types) if types.len() == args.len() => types.clone(),
            TypeSignature::Uniform(n, types) if *n == args.len() && types.len() == 1 => {
                vec![types[0].clone(); *n]
            }
            _ => return None,
        }
    };
    let says = args
        .iter()
        .zip(&taken)
        .any(|(a, t)| untyped(a) && *t != DataType::Null);
    says.then_some(taken)
}

/// Functions whose arguments are of one type, resolved from all of them
/// (PostgreSQL's rules for UNION, CASE and related constructs).
const COMMON_TYPE_FUNCTIONS: [&str; 4] = ["coalesce", "greatest", "least", "nullif"];

/// `e`, given `data_type` if it is an untyped parameter.
fn typed(e: Expr, data_type: &DataType) -> Expr {
    match e {
        Expr::Placeholder(Placeholder { id, field: None }) if *data_type != DataType::Null => {
            let field = Arc::new(Field::new(&id, data_type.clone(), true));
            Expr::Placeholder(Placeholder {
                id,
                field: Some(field),
            })
        }
        e => e,
    }
}

/// The plan with one type for each parameter. DataFusion infers a
/// parameter's type at each place it appears, so `seq >= $2 AND seq < $2 +
/// 10` over an int column gives `$2` two types (int and bigint) and cannot
/// be prepared, and `id = $1 OR $1 IS NULL` types one place only;
/// PostgreSQL gives a parameter one type. The first type inferred is the
/// parameter's: the places that inferred another cast it to theirs, and
/// those that inferred none take it.
pub(super) fn one_type_each(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut first: HashMap<String, FieldRef> = HashMap::new();
    let mut untyped = HashSet::new();
    let mut differ = false;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::Placeholder(Placeholder { id, field }) = e {
                    match (first.get(id), field) {
                        (Some(kept), Some(field)) => differ |= kept != field,
                        (None, Some(field)) => {
                            first.insert(id.clone(), field.clone());
                        }
                        (_, None) => {
                            untyped.insert(id.clone());
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    if !differ && !untyped.iter().any(|id| first.contains_key(id)) {
        return Ok(plan);
    }
    // The type a parameter takes here, where it is not the one it has.
    let retyped = |id: &str, field: Option<&FieldRef>| {
        first.get(id).filter(|kept| field != Some(*kept)).cloned()
    };
    let unified = rewrite_nodes_holding(
        plan,
        |_, e| matches!(e, Expr::Placeholder(p) if retyped(&p.id, p.field.as_ref()).is_some()),
        |e, _| {
            e.transform_up(|e| {
                let Expr::Placeholder(Placeholder { id, field }) = e else {
                    return Ok(Transformed::no(e));
                };
                let Some(kept) = retyped(&id, field.as_ref()) else {
                    return Ok(Transformed::no(Expr::Placeholder(Placeholder {
                        id,
                        field,
                    })));
                };
                let parameter = Expr::Placeholder(Placeholder {
                    id,
                    field: Some(kept.clone()),
                });
                Ok(Transformed::yes(match field {
                    Some(field) if field.data_type() != kept.data_type() => {
                        Expr::Cast(Cast::new_from_field(Box::new(parameter), field))
                    }
                    _ => parameter,
                }))
            })
        },
    )?;
    Ok(unified)
}

/// Whether a parameter the client declared as `declared` is planned as
/// that type rather than as the `inferred` one: where nothing gave it a
/// type, or where reading its values as the inferred type would change
/// them (a numeric `1.25` added to `1` is not the bigint `1`). A value
/// that the inferred type holds as it is (an int2 compared with a bigint
/// key) keeps the statement's plan as it is.
fn declared_prevails(inferred: Option<&DataType>, declared: &DataType) -> bool {
    let Some(inferred) = inferred else {
        return true;
    };
    !reads_unchanged(declared, inferred)
}

/// Whether every value of type `from` reads as the same value of `to`.
fn reads_unchanged(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let decimal = |t: &DataType| matches!(t, Decimal128(..));
    match (from, to) {
        (List(from), List(to)) => reads_unchanged(from.data_type(), to.data_type()),
        (Timestamp(..), Timestamp(..)) => true,
        _ if from == to => true,
        _ if from.is_integer() => to.is_integer() || to.is_floating() || decimal(to),
        _ if from.is_floating() => to.is_floating(),
        _ => decimal(from) && decimal(to),
    }
}

/// The parameters whose declared type prevails (see [`declared_prevails`]),
/// as `(number, type)`; with no plan, every declared one.
pub(super) fn prevailing(
    declared: &[Option<DataType>],
    inferred: Option<&[Option<DataType>]>,
) -> Vec<(usize, DataType)> {
    declared
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let d = d.as_ref()?;
            let inferred = match inferred {
                Some(types) => types.get(i).and_then(Option::as_ref),
                None => None,
            };
            declared_prevails(inferred, d).then(|| (i + 1, d.clone()))
        })
        .collect()
}

/// `statement` with each parameter `$n` of `types` cast to its type, as if
/// written `$n::type`.
pub(super) fn cast_parameters(statement: &mut Statement, types: &[(usize, DataType)]) {
    let _ = visit_expressions_mut(statement, |e| {
        if let SqlExpr::Value(ValueWithSpan {
            value: Value::Placeholder(name),
            ..
        }) = e
        {
            let number = name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
            let cast = types.iter().find(|(n, _)| Some(*n) == number);
            if let Some(data_type) = cast.and_then(|(_, t)| sql_type(t)) {
                *e = SqlExpr::Cast {
                    kind: CastKind::DoubleColon,
                    expr: Box::new(e.clone()),
                    data_type,
                    array: false,
                    format: None,
                };
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The SQL type naming `data_type`, for the types a client may declare.
fn sql_type(data_type: &DataType) -> Option<SqlDataType> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&super::types::sql_name(data_type)?)
        .and_then(|mut p| p.parse_data_type())
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_type_prevails_where_the_inferred_one_would_change_values() {
        let numeric = DataType::Decimal128(38, 10);
        let list = |t: DataType| crate::sql::types::list_of(t);
        // Nothing inferred: the client's type.
        assert!(declared_prevails(None, &DataType::Int16));
        // Values the inferred type holds as they are: the statement's type.
        for (inferred, declared) in [
            (DataType::Int64, DataType::Int16),
            (DataType::Int32, DataType::Int64),
            (DataType::Float64, DataType::Int32),
            (numeric.clone(), DataType::Int64),
            (DataType::Float32, DataType::Float64),
            (DataType::Decimal128(10, 2), numeric.clone()),
            (list(DataType::Int64), list(DataType::Int32)),
        ] {
            assert!(
                !declared_prevails(Some(&inferred), &declared),
                "{declared} as {inferred}"
            );
        }
        // Values the inferred type would change: the client's type.
        for (inferred, declared) in [
            (DataType::Int64, numeric.clone()),
            (DataType::Int64, DataType::Float64),
            (DataType::Int64, DataType::Date32),
            (numeric.clone(), DataType::Float64),
            (DataType::Utf8, DataType::Int64),
            (list(DataType::Int64), list(DataType::Float64)),
        ] {
            assert!(
                declared_prevails(Some(&inferred), &declared),
                "{declared} as {inferred}"
            );
        }
    }
}
