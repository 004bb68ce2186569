//! CHECK constraints: a row written must not make any of its table's
//! conditions false (true and NULL pass, as in PostgreSQL). A write
//! compiles its table's conditions once, against the table's columns, and
//! judges each batch of the rows it makes.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::physical_expr::PhysicalExpr;

use super::arrays::value_texts;
use super::error::{Result, SqlError};
use super::session::Session;
use super::time_zone::SessionZone;
use crate::catalog::{RowError, TableDef};

/// A table's conditions, compiled, by the constraints' names (the order
/// PostgreSQL checks them in, which names the one a row fails first).
pub(super) struct Checks {
    def: Arc<TableDef>,
    conditions: Vec<(usize, Arc<dyn PhysicalExpr>)>,
    /// The session's zone, which a failing row's instants are written in.
    zone: SessionZone,
}

impl Checks {
    /// The table's conditions; `None` for a table without any.
    pub fn of(session: &Session, def: &Arc<TableDef>) -> Result<Option<Checks>> {
        if def.checks.is_empty() {
            return Ok(None);
        }
        let schema = DFSchema::try_from(rows_schema(def))?;
        let state = session.context().state();
        let mut by_name: Vec<usize> = (0..def.checks.len()).collect();
        by_name.sort_by(|&a, &b| def.checks[a].name.cmp(&def.checks[b].name));
        let conditions = by_name
            .into_iter()
            .map(|c| {
                let condition = state.create_logical_expr(&def.checks[c].expr, &schema)?;
                Ok((c, state.create_physical_expr(condition, &schema)?))
            })
            .collect::<Result<_>>()?;
        Ok(Some(Checks {
            def: def.clone(),
            conditions,
            zone: session.settings().zone(),
        }))
    }

    /// The verdict on each row of `batch`, whose columns hold the table's
    /// `columns` (the others are NULL).
    pub fn judge(&self, columns: &[usize], batch: &RecordBatch) -> Result<Verdicts<'_>> {
        let rows = table_rows(&self.def, columns, batch)?;
        let mut failed = vec![None; rows.num_rows()];
        for (c, condition) in &self.conditions {
            let values = condition.evaluate(&rows)?.into_array(rows.num_rows())?;
            let values = cast(&values, &DataType::Boolean)?;
            let values = values.as_boolean();
            for (r, verdict) in failed.iter_mut().enumerate() {
                if verdict.is_none() && values.is_valid(r) && !values.value(r) {
                    *verdict = Some(*c);
                }
            }
        }
        Ok(Verdicts {
            checks: self,
            failed,
            rows,
        })
    }
}

/// Which condition, if any, each row of a batch makes false.
pub(super) struct Verdicts<'a> {
    checks: &'a Checks,
    failed: Vec<Option<usize>>,
    rows: RecordBatch,
}

impl Verdicts<'_> {
    /// PostgreSQL's 23514 for row `r` if it makes a condition false.
    pub fn pass(&self, r: usize) -> Result<()> {
        let Some(c) = self.failed[r] else {
            return Ok(());
        };
        let def = &self.checks.def;
        Err(SqlError::value(
            "23514",
            format!(
                "new row for relation \"{}\" violates check constraint \"{}\"",
                def.name, def.checks[c].name
            ),
        )
        .explained(Some(row_text(&self.rows, r, &self.checks.zone)?), None))
    }
}

/// `error`, a row's refusal, with the DETAIL PostgreSQL gives a NOT NULL
/// violation: the row (row `r` of `batch`, whose columns hold the table's
/// `columns`), as [`Verdicts::pass`] gives a CHECK's. Other refusals are
/// returned as they are.
pub(super) fn naming_failing_row(
    error: RowError,
    def: &TableDef,
    columns: &[usize],
    batch: &RecordBatch,
    r: usize,
    zone: &SessionZone,
) -> SqlError {
    let null = matches!(error, RowError::NotNull { .. });
    let refused = SqlError::from(error);
    if !null {
        return refused;
    }
    match table_rows(def, columns, batch).and_then(|rows| row_text(&rows, r, zone)) {
        Ok(row) => refused.explained(Some(row), None),
        Err(_) => refused,
    }
}

/// `Failing row contains (...).`: row `r` of `rows` (the table's columns),
/// each value as PostgreSQL writes it, NULL as `null`.
fn row_text(rows: &RecordBatch, r: usize, zone: &SessionZone) -> Result<String> {
    let values = rows
        .columns()
        .iter()
        .map(|column| {
            let text = value_texts(&column.slice(r, 1), zone)?;
            let text = text.as_string::<i32>();
            let text = if text.is_valid(0) {
                text.value(0)
            } else {
                "null"
            };
            Ok(text.to_owned())
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(format!("Failing row contains ({}).", values.join(", ")))
}

/// The table's columns, each nullable (a row is judged before its NOT NULL
/// columns are).
fn rows_schema(def: &TableDef) -> Schema {
    let schema = super::provider::table_schema(def, false);
    Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect::<Vec<_>>(),
    )
}

/// A batch of the table's columns from one holding `columns`.
fn table_rows(def: &TableDef, columns: &[usize], batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = Arc::new(rows_schema(def));
    let arrays: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| match columns.iter().position(|&c| c == i) {
            Some(j) => batch.column(j).clone(),
            None => new_null_array(field.data_type(), batch.num_rows()),
        })
        .collect();
    Ok(RecordBatch::try_new(schema, arrays)?)
}
