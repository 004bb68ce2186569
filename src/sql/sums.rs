//! Sums of bigints as PostgreSQL computes them: `sum(bigint)` is a
//! `numeric`, which holds any sum a table can make, where DataFusion adds in
//! 64 bits and wraps on overflow (two rows of 9e18 summed to
//! -446744073709551616).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::{AggregateFunction, Cast};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, WindowFunctionDefinition};

use super::plan_nodes::{inputs_schema, rewrite_nodes_holding};

/// The type a bigint is summed in: `numeric` of 38 digits.
const SUMMED: DataType = DataType::Decimal128(38, 0);

/// `plan` with each `sum` of a bigint taken over the bigint cast to
/// [`SUMMED`] (as an aggregate or a window function); result columns keep
/// their names, and every plan node above a sum its schema's new types.
pub fn exact_bigint_sums(plan: LogicalPlan) -> Result<LogicalPlan> {
    // The columns a node reads are gathered only for a sum.
    let holds = |node: &LogicalPlan, e: &Expr| {
        sum_argument(e).is_some() && bigint_sum(e, &inputs_schema(node))
    };
    rewrite_nodes_holding(plan, holds, widen_sums)
}

/// Whether `expr` is a `sum` of a bigint.
fn bigint_sum(expr: &Expr, inputs: &DFSchema) -> bool {
    sum_argument(expr).is_some_and(|arg| arg.get_type(inputs).is_ok_and(|t| t == DataType::Int64))
}

/// The single argument of a `sum` (aggregate or window function).
fn sum_argument(expr: &Expr) -> Option<&Expr> {
    let (name, args) = match expr {
        Expr::AggregateFunction(AggregateFunction { func, params }) => (func.name(), &params.args),
        Expr::WindowFunction(w) => match &w.fun {
            WindowFunctionDefinition::AggregateUDF(func) => (func.name(), &w.params.args),
            _ => return None,
        },
        _ => return None,
    };
    match args.as_slice() {
        [arg] if name == "sum" => Some(arg),
        _ => None,
    }
}

fn widen_sums(expr: Expr, inputs: &DFSchema) -> Result<Transformed<Expr>> {
    expr.transform_up(|e| {
        if !bigint_sum(&e, inputs) {
            return Ok(Transformed::no(e));
        }
        let widen = |args: &mut Vec<Expr>| {
            let arg = args.pop().expect("a sum has one argument");
            args.push(Expr::Cast(Cast::new(Box::new(arg), SUMMED)));
        };
        Ok(Transformed::yes(match e {
            Expr::AggregateFunction(mut f) => {
                widen(&mut f.params.args);
                Expr::AggregateFunction(f)
            }
            Expr::WindowFunction(mut w) => {
                widen(&mut w.params.args);
                Expr::WindowFunction(w)
            }
            e => e,
        }))
    })
}

/// The column a `sum` adds up, under the cast [`exact_bigint_sums`] puts
/// around a bigint.
pub fn summed(arg: &Expr) -> &Expr {
    match arg {
        Expr::Cast(Cast { expr, field }) if *field.data_type() == SUMMED => expr,
        arg => arg,
    }
}
