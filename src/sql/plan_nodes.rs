//! Rewriting the expressions of plan nodes, for the rules that make a
//! DataFusion plan compute what PostgreSQL computes ([`super::arithmetic`],
//! [`super::casts`], [`super::sums`]).

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// The columns a plan node's expressions read: its inputs' together.
pub fn inputs_schema(node: &LogicalPlan) -> DFSchema {
    let mut inputs = DFSchema::empty();
    for input in node.inputs() {
        inputs.merge(input.schema());
    }
    inputs
}

/// `node` with `rewrite` applied to each of its expressions, given the
/// columns they read; result columns keep their names. The node's schema is
/// left as it was.
fn rewrite_expressions(
    node: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<Transformed<LogicalPlan>> {
    let inputs = inputs_schema(&node);
    let names = NamePreserver::new(&node);
    node.map_expressions(|e| {
        let name = names.save(&e);
        Ok(rewrite(e, &inputs)?.update_data(|e| name.restore(e)))
    })
}

/// `plan`, its subqueries' included, with `rewrite` applied to the
/// expressions of each node for which `holds` is true of a part of one of
/// them; result columns keep their names. A rewrite may change a column's
/// type, so every node visited after the first rewrite (every node above
/// it among them) gets its schema computed again.
pub fn rewrite_nodes_holding(
    plan: LogicalPlan,
    holds: impl Fn(&LogicalPlan, &Expr) -> bool,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    let mut rewritten = false;
    let plan = plan.transform_up_with_subqueries(|node| {
        let mut found = false;
        node.apply_expressions(|e| {
            found |= e.exists(|e| Ok(holds(&node, e)))?;
            Ok(TreeNodeRecursion::Continue)
        })?;
        let node = match found {
            true => rewrite_expressions(node, &rewrite)?,
            false => Transformed::no(node),
        };
        rewritten |= node.transformed;
        match rewritten {
            true => Ok(Transformed::yes(node.data.recompute_schema()?)),
            false => Ok(node),
        }
    })?;
    Ok(plan.data)
}
