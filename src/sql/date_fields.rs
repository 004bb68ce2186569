//! `extract(field FROM x)` and `date_part('field', x)` as PostgreSQL 15
//! answers them, over DataFusion's `date_part`, whose fields are whole
//! numbers (a second without its fraction: `extract(second FROM
//! '10:00:05.25')` was 5):
//!
//! - `extract` is a `numeric`: six decimals for `epoch` and `second`
//!   (`1767261600.500000`, `5.250000`), three for `milliseconds`, none
//!   for the other fields;
//! - `date_part` is a `double precision`, seconds and milliseconds with
//!   their fractions.
//!
//! The second and its parts are read from the microseconds (the second's
//! and its fraction's), which DataFusion gives whole.

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Value,
};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{Expr as PlannedExpr, ExprSchemable};

use super::rewrite::parse_expr;
use super::time_zone::SessionZone;

/// Rewrites an `extract` or a `date_part` call (see the module's comment).
pub(super) fn postgres_date_fields(expr: &mut Expr) {
    let rewritten = match &*expr {
        Expr::Extract {
            field, expr: value, ..
        } => extract(&field.to_string().to_lowercase(), value),
        Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("date_part") => {
            let FunctionArguments::List(list) = &f.args else {
                return;
            };
            match list.args.as_slice() {
                [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(field))), FunctionArg::Unnamed(FunctionArgExpr::Expr(value))] => {
                    match &field.value {
                        Value::SingleQuotedString(field) => date_part(&field.to_lowercase(), value),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        _ => None,
    };
    if let Some(rewritten) = rewritten {
        *expr = rewritten;
    }
}

/// The field's value as a double, and the number of decimals
/// PostgreSQL's `extract` gives it.
fn field_value(field: &str, value: &Expr) -> (String, u8) {
    let micros = format!("CAST(date_part('microsecond', {value}) AS DOUBLE PRECISION)");
    match field {
        // DataFusion's epoch misses a fraction by a little
        // (`1767261605.2499998` for `...:05.25`): to the microsecond.
        "epoch" => (format!("round(date_part('epoch', {value}), 6)"), 6),
        "second" | "seconds" => (format!("{micros} / 1000000"), 6),
        "millisecond" | "milliseconds" => (format!("{micros} / 1000"), 3),
        "microsecond" | "microseconds" => (micros, 0),
        field => (
            format!("CAST(date_part('{field}', {value}) AS DOUBLE PRECISION)"),
            0,
        ),
    }
}

/// Whether a planned expression is `round(date_part('epoch', d), 6)` of a
/// date `d`, as [`field_value`] writes `extract(epoch FROM d)`: its cast
/// to a numeric then takes no decimals (see `casts::postgres_casts`).
pub(super) fn epoch_of_date(expr: &PlannedExpr, inputs: &DFSchema) -> bool {
    let PlannedExpr::ScalarFunction(round) = expr else {
        return false;
    };
    let Some(PlannedExpr::ScalarFunction(part)) = round.args.first() else {
        return false;
    };
    round.name() == "round"
        && part.name() == "date_part"
        && matches!(
            part.args.as_slice(),
            [PlannedExpr::Literal(ScalarValue::Utf8(Some(field)), _), value]
                if field == "epoch" && value.get_type(inputs).is_ok_and(|t| t == DataType::Date32)
        )
}

fn extract(field: &str, value: &Expr) -> Option<Expr> {
    let (value, decimals) = field_value(field, value);
    parse_expr(&format!("CAST({value} AS NUMERIC(38, {decimals}))"))
}

fn date_part(field: &str, value: &Expr) -> Option<Expr> {
    let (value, _) = field_value(field, value);
    parse_expr(&format!("CAST({value} AS DOUBLE PRECISION)"))
}

/// A planned `date_part(field, x)` as PostgreSQL's: a field of an instant's wall time
/// in the session's zone (its epoch is the same in every zone), and the
/// year of a date or a time before 1 AD counted as PostgreSQL counts it,
/// without a year 0 (44 BC is -44; DataFusion's calendar year is -43).
pub(super) fn planned_date_part(
    mut f: ScalarFunction,
    inputs: &DFSchema,
    zone: &SessionZone,
) -> Result<Transformed<PlannedExpr>> {
    let field = match &f.args[0] {
        PlannedExpr::Literal(ScalarValue::Utf8(Some(field)), _) => field.to_lowercase(),
        _ => return Ok(Transformed::no(PlannedExpr::ScalarFunction(f))),
    };
    let value = f.args[1].get_type(inputs)?;
    let shifted =
        !zone.is_utc() && super::wall_times::is_instant(&f.args[1], inputs) && field != "epoch";
    if shifted {
        f.args[1] = super::wall_times::in_zone(f.args[1].clone(), inputs, zone)?;
    }
    let dated = matches!(value, DataType::Date32 | DataType::Timestamp(..));
    if !(dated && matches!(field.as_str(), "year" | "years")) {
        return Ok(Transformed::new_transformed(
            PlannedExpr::ScalarFunction(f),
            shifted,
        ));
    }
    let year = PlannedExpr::ScalarFunction(f);
    let ty = year.get_type(inputs)?;
    let (zero, one) = (ScalarValue::new_zero(&ty)?, ScalarValue::new_one(&ty)?);
    let before_christ = year.clone().lt_eq(PlannedExpr::Literal(zero, None));
    let counted = datafusion::logical_expr::when(
        before_christ,
        year.clone() - PlannedExpr::Literal(one, None),
    )
    .otherwise(year)?;
    Ok(Transformed::yes(counted))
}

#[cfg(test)]
mod tests {
    use crate::sql::rewrite::tests::rewritten;

    #[test]
    fn extract_is_a_numeric_and_date_part_a_double() {
        assert_eq!(
            rewritten("SELECT extract(epoch FROM t), extract(second FROM t), extract(year FROM t) FROM x"),
            "SELECT CAST(round(date_part('epoch', t), 6) AS NUMERIC(38,6)), \
             CAST(CAST(date_part('microsecond', t) AS DOUBLE PRECISION) / 1000000 AS NUMERIC(38,6)), \
             CAST(CAST(date_part('year', t) AS DOUBLE PRECISION) AS NUMERIC(38,0)) FROM x"
        );
        assert_eq!(
            rewritten("SELECT date_part('milliseconds', t), date_part('dow', t), date_part(f, t) FROM x"),
            "SELECT CAST(CAST(date_part('microsecond', t) AS DOUBLE PRECISION) / 1000 AS DOUBLE PRECISION), \
             CAST(CAST(date_part('dow', t) AS DOUBLE PRECISION) AS DOUBLE PRECISION), date_part(f, t) FROM x"
        );
    }
}
