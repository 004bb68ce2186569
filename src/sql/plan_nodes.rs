//! Rewriting the expressions of one plan node, for the rules that make a
//! DataFusion plan compute what PostgreSQL computes ([`super::floats`],
//! [`super::sums`]).

use datafusion::common::tree_node::Transformed;
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
pub fn rewrite_expressions(
    node: LogicalPlan,
    mut rewrite: impl FnMut(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<Transformed<LogicalPlan>> {
    let inputs = inputs_schema(&node);
    let names = NamePreserver::new(&node);
    node.map_expressions(|e| {
        let name = names.save(&e);
        Ok(rewrite(e, &inputs)?.update_data(|e| name.restore(e)))
    })
}
