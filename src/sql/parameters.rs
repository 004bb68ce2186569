//! The types of a statement's parameters (`$1`, `$2`, ...), inferred as
//! PostgreSQL infers them: from the column a parameter is compared with or
//! stored into (DataFusion's own inference), from a cast written on it
//! (`$1::float8`) and from the one type a function takes (`pg_sleep($1)`),
//! one type for each parameter wherever it appears.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::expr::{Cast, Placeholder, ScalarFunction, TryCast};
use datafusion::logical_expr::{Expr, LogicalPlan, TypeSignature};

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
/// is written around them: a cast gives its type (`$1::float8` is a
/// float8 parameter, as in PostgreSQL, not text cast to float8), and so
/// does a function argument where the function takes one type there.
pub(super) fn typed_by_casts_and_calls(plan: LogicalPlan) -> Result<LogicalPlan> {
    let typed = rewrite_nodes_holding(
        plan,
        |_, e| context_type(e).is_some(),
        |e, _| {
            e.transform_up(|e| {
                let Some(types) = context_type(&e) else {
                    return Ok(Transformed::no(e));
                };
                Ok(Transformed::yes(match e {
                    Expr::Cast(Cast { expr, field }) => Expr::Cast(Cast {
                        expr: Box::new(typed(*expr, &types[0])),
                        field,
                    }),
                    Expr::TryCast(TryCast { expr, field }) => Expr::TryCast(TryCast {
                        expr: Box::new(typed(*expr, &types[0])),
                        field,
                    }),
                    Expr::ScalarFunction(ScalarFunction { func, args }) => {
                        let args = args
                            .into_iter()
                            .zip(types)
                            .map(|(arg, t)| typed(arg, &t))
                            .collect();
                        Expr::ScalarFunction(ScalarFunction { func, args })
                    }
                    e => e,
                }))
            })
        },
    )?;
    Ok(typed)
}

/// For an expression with an untyped parameter right under it that its
/// context types, the type of each operand (`Null` where none is given).
fn context_type(e: &Expr) -> Option<Vec<DataType>> {
    let untyped = |e: &Expr| matches!(e, Expr::Placeholder(Placeholder { field: None, .. }));
    match e {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field })
            if untyped(expr) =>
        {
            Some(vec![field.data_type().clone()])
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) if args.iter().any(untyped) => {
            let taken = match &func.signature().type_signature {
                TypeSignature::Exact(types) if types.len() == args.len() => types.clone(),
                TypeSignature::Uniform(n, types) if *n == args.len() && types.len() == 1 => {
                    vec![types[0].clone(); *n]
                }
                _ => return None,
            };
            let typed_any = args
                .iter()
                .zip(&taken)
                .any(|(arg, t)| untyped(arg) && *t != DataType::Null);
            typed_any.then_some(taken)
        }
        _ => None,
    }
}

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
    let other_than_first = |e: &Expr| match e {
        Expr::Placeholder(Placeholder { id, field }) => first
            .get(id)
            .is_some_and(|kept| field.as_ref() != Some(kept)),
        _ => false,
    };
    let unified = rewrite_nodes_holding(
        plan,
        |_, e| other_than_first(e),
        |e, _| {
            e.transform_up(|e| match e {
                Expr::Placeholder(Placeholder { id, field })
                    if first
                        .get(&id)
                        .is_some_and(|kept| field.as_ref() != Some(kept)) =>
                {
                    let kept = first[&id].clone();
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
                }
                e => Ok(Transformed::no(e)),
            })
        },
    )?;
    Ok(unified)
}
