//! The types of a statement's parameters (`$1`, `$2`, ...), inferred as
//! PostgreSQL infers them: from the column a parameter is compared with or
//! stored into (DataFusion's own inference), from a cast written on it
//! (`$1::float8`), from the one type a function takes (`pg_sleep($1)`),
//! from the other arguments of `coalesce` and its kin, and from `LIMIT`;
//! one type for each parameter wherever it appears.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::DFSchema;
use datafusion::logical_expr::expr::{Cast, Placeholder, ScalarFunction, TryCast};
use datafusion::logical_expr::{Expr, ExprSchemable, Limit, LogicalPlan, ScalarUDF, TypeSignature};

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
                        expr: Box::new(typed(*expr, field.data_type())),
                        field,
                    })),
                    Expr::TryCast(TryCast { expr, field }) => {
                        Transformed::yes(Expr::TryCast(TryCast {
                            expr: Box::new(typed(*expr, field.data_type())),
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
