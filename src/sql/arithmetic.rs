//! Arithmetic as PostgreSQL does it.
//!
//! - A literal integer in `integer`'s range is an `integer`, not a `bigint`
//!   as DataFusion plans it ([`integer_literals`]): `SELECT 1` sends an
//!   int4, and `a * 2` of an `integer` column is an `integer`.
//! - A sum, difference or product past its type's range is an error
//!   (22003, "integer out of range"), where DataFusion's planner makes the
//!   wrapping kind (two integers of 2e9 added to -294967296). DataFusion's
//!   physical `BinaryExpr` can check (`with_fail_on_overflow`), but its
//!   planner never asks it to; so an analyzer rule ([`PostgresArithmetic`])
//!   puts a function of its own in place of each integer `+`, `-` and `*`,
//!   computed with Arrow's checked kernels.
//! - The difference of two timestamps is an `interval` of days and time
//!   (`1 day 01:00:00`), where DataFusion's is a duration (`25:00:00`)
//!   that compares wrongly with an interval (`now() - t > interval '1
//!   day'` was false for a `t` years ago); the same rule puts
//!   [`TimestampDifference`] in its place.
//! - Intervals compare and sort by their length, months of 30 days and
//!   days of 24 hours (`interval '1 month' = interval '30 days'`,
//!   `interval '25 hours' > interval '1 day'`), as PostgreSQL's do, where
//!   Arrow compares months, then days, then time: the same rule compares
//!   and sorts their [`IntervalSpan`]s. (`max` and `min` of intervals
//!   still take Arrow's order.)
//! - A date moved by an interval with a time of day is a timestamp
//!   (`date '2024-01-05' - interval '1 hour'` is `2024-01-04 23:00:00`),
//!   where DataFusion's date drops the time ([`date_moved_in_time`]).
//! - The quotient of two numerics has about 16 significant digits, as
//!   PostgreSQL's (`1 / 3.0` is `0.33333333333333333333`), where
//!   DataFusion's has four decimals more than the dividend (`0.3333`); a
//!   numeric divided by zero is 22012. [`NumericDivision`] computes it.
//! - An interval times or divided by a number (`interval '1 day' * 2`,
//!   `(t2 - t1) / 3`) is PostgreSQL's scaled interval, a fraction of a
//!   month carried into days and of a day into time, where DataFusion's
//!   type coercion has no such operation. [`IntervalScaling`] plans it
//!   before the coercion, as a call of [`ScaledInterval`].

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{AsArray, Decimal128Array, IntervalMonthDayNanoArray};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{i256, Decimal128Type};
use datafusion::arrow::datatypes::{
    DataType, DurationMicrosecondType, IntervalMonthDayNano, IntervalUnit, TimeUnit,
};
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{exec_err, DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::{Cast, ScalarFunction};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::analyzer::type_coercion::TypeCoercion;
use datafusion::optimizer::AnalyzerRule;
use datafusion::physical_expr_common::datum;
use datafusion::sql::sqlparser::ast::BinaryOperator;

use super::plan_nodes::rewrite_nodes_holding;

/// `plan` with each literal `bigint` that an `integer` holds made an
/// `integer`, as PostgreSQL types a literal, before DataFusion's type
/// coercion widens it where a wider type meets it. Left as they are: LIMIT
/// and OFFSET (which DataFusion reads as bigints), VALUES lists (whose
/// column types are settled from all their rows) and aggregates' arguments
/// (`count(*)` is DataFusion's `count(1)` of a bigint 1, which its rules
/// recognize). Result columns keep their names, and every node above a
/// narrowed literal its schema's new types. A plan with a recursive query
/// is left as planned: the types of its work table, which its recursive
/// term reads, were fixed from the first term's bigints.
pub fn integer_literals(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut recursive = false;
    plan.apply_with_subqueries(|node| {
        recursive |= matches!(node, LogicalPlan::RecursiveQuery(_));
        Ok(match recursive {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    })?;
    if recursive {
        return Ok(plan);
    }
    rewrite_nodes_holding(
        plan,
        |node, e| narrows_literals(node) && narrowed(e).is_some(),
        |e, _| narrow_literals(e),
    )
}

fn narrows_literals(node: &LogicalPlan) -> bool {
    !matches!(node, LogicalPlan::Limit(_) | LogicalPlan::Values(_))
}

/// The `integer` literal of a `bigint` literal `integer` holds.
fn narrowed(expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::Literal(ScalarValue::Int64(Some(v)), meta) => Some(Expr::Literal(
            ScalarValue::Int32(Some(i32::try_from(*v).ok()?)),
            meta.clone(),
        )),
        _ => None,
    }
}

fn narrow_literals(expr: Expr) -> Result<Transformed<Expr>> {
    expr.transform_down(|e| {
        if matches!(e, Expr::AggregateFunction(_)) {
            return Ok(Transformed::new(e, false, TreeNodeRecursion::Jump));
        }
        Ok(match narrowed(&e) {
            Some(narrow) => Transformed::yes(narrow),
            None => Transformed::no(e),
        })
    })
}

/// Puts a [`CheckedOperation`] in place of each `+`, `-` and `*` of two
/// integers, and a [`TimestampDifference`] in place of each `-` of two
/// timestamps, after DataFusion's type coercion (which gives both sides of
/// an integer operation one type). Result columns keep their names.
#[derive(Debug)]
pub struct PostgresArithmetic;

impl AnalyzerRule for PostgresArithmetic {
    fn name(&self) -> &str {
        "postgres_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        let replaced = |e: &Expr| {
            matches!(e, Expr::BinaryExpr(BinaryExpr { op, .. })
                if checked(*op).is_some() || *op == Operator::Divide || compares(*op))
        };
        let plan = intervals_sorted_by_span(plan)?;
        let timestamps_made = Cell::new(false);
        let plan = rewrite_nodes_holding(
            plan,
            |_, e| replaced(e),
            |e, inputs| checked_operations(e, inputs, &timestamps_made),
        )?;
        // A date made a timestamp may now meet a date in a comparison.
        match timestamps_made.get() {
            true => TypeCoercion::new().analyze(plan, config),
            false => Ok(plan),
        }
    }
}

/// The three operations checked, in the order of [`OPERATIONS`].
const OPERATORS: [Operator; 3] = [Operator::Plus, Operator::Minus, Operator::Multiply];

/// The checked function of an operator, if it is one of [`OPERATORS`].
fn checked(op: Operator) -> Option<&'static Arc<ScalarUDF>> {
    static OPERATIONS: OnceLock<[Arc<ScalarUDF>; 3]> = OnceLock::new();
    let at = OPERATORS.iter().position(|o| *o == op)?;
    let operations = OPERATIONS
        .get_or_init(|| OPERATORS.map(|op| Arc::new(ScalarUDF::from(CheckedOperation::new(op)))));
    Some(&operations[at])
}

/// The operator and operands of a `+`, `-` or `*`, checked or not.
pub fn operation(expr: &Expr) -> Option<(Operator, &Expr, &Expr)> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if OPERATORS.contains(op) => {
            Some((*op, left, right))
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) => {
            let op = func.inner().downcast_ref::<CheckedOperation>()?.op;
            match args.as_slice() {
                [left, right] => Some((op, left, right)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `expr`, over columns of `inputs`, with each integer `+`, `-` and `*`
/// checked, each difference of timestamps an interval, each quotient of
/// numerics PostgreSQL's, and each date moved by a time of day a
/// timestamp (`timestamps_made` is set then).
fn checked_operations(
    expr: Expr,
    inputs: &DFSchema,
    timestamps_made: &Cell<bool>,
) -> Result<Transformed<Expr>> {
    expr.transform_up(|e| {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
            return Ok(Transformed::no(e));
        };
        if let Some(moved) = date_moved_in_time(&left, op, &right, inputs) {
            timestamps_made.set(true);
            return Ok(Transformed::yes(moved));
        }
        // Two integers of one type (`date - date` is an integer too, of
        // two dates), two timestamps subtracted, or two numerics divided
        // (DataFusion's coercion makes a numeric of an integer divided
        // with one).
        let ty = |side: &Expr| side.get_type(inputs).ok();
        // Two intervals compared: their spans.
        if compares(op) {
            let interval = |side: &Expr| ty(side).is_some_and(|t| is_interval(&t));
            if interval(&left) && interval(&right) {
                return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(span_of(*left)),
                    op,
                    Box::new(span_of(*right)),
                ))));
            }
            return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                left,
                op,
                right,
            })));
        }
        let function = match (ty(&left), ty(&right), checked(op)) {
            (Some(l), Some(r), Some(function)) if l == r && l.is_integer() => function,
            (Some(DataType::Timestamp(..)), Some(DataType::Timestamp(..)), _)
                if op == Operator::Minus =>
            {
                static DIFFERENCE: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
                DIFFERENCE.get_or_init(|| Arc::new(ScalarUDF::from(TimestampDifference::new())))
            }
            (Some(DataType::Decimal128(..)), Some(DataType::Decimal128(..)), _)
                if op == Operator::Divide =>
            {
                static DIVISION: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
                DIVISION.get_or_init(|| Arc::new(ScalarUDF::from(NumericDivision::new())))
            }
            _ => {
                let expr = Expr::BinaryExpr(BinaryExpr { left, op, right });
                return Ok(Transformed::no(expr));
            }
        };
        Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(function.clone(), vec![*left, *right]),
        )))
    })
}

fn compares(op: Operator) -> bool {
    use Operator::*;
    matches!(
        op,
        Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom
    )
}

fn is_interval(ty: &DataType) -> bool {
    matches!(ty, DataType::Interval(_) | DataType::Duration(_))
}

fn span_of(interval: Expr) -> Expr {
    static SPAN: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    let span = SPAN.get_or_init(|| Arc::new(ScalarUDF::from(IntervalSpan::new())));
    Expr::ScalarFunction(ScalarFunction::new_udf(span.clone(), vec![interval]))
}

/// `plan` with each sort by an interval a sort by its span.
fn intervals_sorted_by_span(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| {
        let LogicalPlan::Sort(mut sort) = node else {
            return Ok(Transformed::no(node));
        };
        let inputs = sort.input.schema().clone();
        let mut changed = false;
        for key in &mut sort.expr {
            if key.expr.get_type(&inputs).is_ok_and(|t| is_interval(&t)) {
                key.expr = span_of(key.expr.clone());
                changed = true;
            }
        }
        Ok(Transformed::new_transformed(
            LogicalPlan::Sort(sort),
            changed,
        ))
    })?;
    Ok(plan.data)
}

/// An interval's length as PostgreSQL compares intervals, in nanoseconds:
/// a month is 30 days, a day 24 hours.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalSpan {
    signature: Signature,
}

impl IntervalSpan {
    fn new() -> Self {
        IntervalSpan {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for IntervalSpan {
    fn name(&self) -> &str {
        "interval_span"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Decimal128(NUMERIC_DIGITS, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [interval] = args.args.as_slice() else {
            return exec_err!("{} takes one value", self.name());
        };
        let scalar = matches!(interval, ColumnarValue::Scalar(_));
        let intervals = interval_values(&interval.to_array(args.number_rows)?)?;
        let spans: Decimal128Array = intervals
            .into_iter()
            .map(|i| {
                i.map(|i| {
                    (i128::from(i.months) * i128::from(DAYS_A_MONTH) + i128::from(i.days))
                        * i128::from(NANOS_A_DAY)
                        + i128::from(i.nanoseconds)
                })
            })
            .collect();
        let spans = spans.with_precision_and_scale(NUMERIC_DIGITS, 0)?;
        Ok(match scalar {
            true => ColumnarValue::Scalar(ScalarValue::try_from_array(&spans, 0)?),
            false => ColumnarValue::Array(Arc::new(spans)),
        })
    }
}

/// `date ± interval` as a timestamp, as PostgreSQL computes it, when the
/// interval may hold a time of day (DataFusion's date drops it: a date
/// minus an hour was the day before). Moved by whole days or months, the
/// date stays DataFusion's date (PostgreSQL's is that date at midnight),
/// which keeps comparisons of date columns with it pushed into scans.
fn date_moved_in_time(left: &Expr, op: Operator, right: &Expr, inputs: &DFSchema) -> Option<Expr> {
    let ty = |side: &Expr| side.get_type(inputs).ok();
    let (date, interval) = match (ty(left)?, ty(right)?) {
        (DataType::Date32, DataType::Interval(_))
            if matches!(op, Operator::Plus | Operator::Minus) =>
        {
            (left, right)
        }
        (DataType::Interval(_), DataType::Date32) if op == Operator::Plus => (right, left),
        _ => return None,
    };
    let whole_days = matches!(
        interval,
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) if v.nanoseconds == 0
    ) || matches!(
        interval,
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) if v.milliseconds == 0
    ) || matches!(
        interval,
        Expr::Literal(ScalarValue::IntervalYearMonth(_), _)
    ) || counts_days(interval);
    if whole_days {
        return None;
    }
    let midnight = Expr::Cast(Cast::new(
        Box::new(date.clone()),
        DataType::Timestamp(TimeUnit::Microsecond, None),
    ));
    let (left, right) = match std::ptr::eq(date, left) {
        true => (midnight, right.clone()),
        false => (left.clone(), midnight),
    };
    Some(Expr::BinaryExpr(BinaryExpr::new(
        Box::new(left),
        op,
        Box::new(right),
    )))
}

/// Whether an interval is DataFusion's of a number of days: `date - 1`
/// subtracts `CAST(CAST(1 * 86400 AS Duration(s)) AS Interval)`.
fn counts_days(interval: &Expr) -> bool {
    match interval {
        Expr::Cast(Cast { expr, .. }) => counts_days(expr),
        // Checked already (the rule rewrites inner expressions first).
        e => operation(e).is_some_and(|(op, _, right)| {
            op == Operator::Multiply
                && matches!(right, Expr::Literal(ScalarValue::Int64(Some(86_400)), _))
        }),
    }
}

/// An integer `+`, `-` or `*` that refuses a result its type cannot hold.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedOperation {
    op: Operator,
    signature: Signature,
}

impl CheckedOperation {
    fn new(op: Operator) -> Self {
        CheckedOperation {
            op,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for CheckedOperation {
    fn name(&self) -> &str {
        match self.op {
            Operator::Plus => "checked_add",
            Operator::Minus => "checked_subtract",
            _ => "checked_multiply",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        match types {
            [left, right] if left == right => Ok(left.clone()),
            _ => exec_err!("{} of {types:?}: both sides need one type", self.name()),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right] = args.args.as_slice() else {
            return exec_err!("{} takes two values", self.name());
        };
        let ty = left.data_type();
        let operation = match self.op {
            Operator::Plus => numeric::add,
            Operator::Minus => numeric::sub,
            _ => numeric::mul,
        };
        datum::apply(left, right, operation).map_err(|e| match e {
            DataFusionError::ArrowError(error, _)
                if matches!(*error, ArrowError::ArithmeticOverflow(_)) =>
            {
                out_of_range(&ty)
            }
            e => e,
        })
    }
}

/// `a - b` of two timestamps as PostgreSQL computes it: an interval of
/// whole days and the time left, both of the difference's sign (its
/// `justify_hours`), to the microsecond.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampDifference {
    signature: Signature,
}

impl TimestampDifference {
    fn new() -> Self {
        TimestampDifference {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for TimestampDifference {
    fn name(&self) -> &str {
        "timestamp_difference"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right] = args.args.as_slice() else {
            return exec_err!("{} takes two values", self.name());
        };
        // Both in microseconds since 1970, as PostgreSQL keeps them.
        let micros = DataType::Timestamp(TimeUnit::Microsecond, None);
        let (left, right) = (left.cast_to(&micros, None)?, right.cast_to(&micros, None)?);
        let difference = datum::apply(&left, &right, numeric::sub)?;
        Ok(match difference {
            ColumnarValue::Scalar(ScalarValue::DurationMicrosecond(micros)) => {
                ColumnarValue::Scalar(ScalarValue::IntervalMonthDayNano(micros.map(days_and_time)))
            }
            ColumnarValue::Array(d) => {
                let d = d.as_primitive::<DurationMicrosecondType>();
                let intervals: IntervalMonthDayNanoArray =
                    d.iter().map(|m| m.map(days_and_time)).collect();
                ColumnarValue::Array(Arc::new(intervals))
            }
            other => return exec_err!("a timestamp difference of {:?}", other.data_type()),
        })
    }
}

/// A day of an interval's time, and the days of an interval's month, as
/// PostgreSQL counts them when it moves parts between units.
const NANOS_A_DAY: i64 = 86_400_000_000_000;
const DAYS_A_MONTH: i32 = 30;

/// Which parts `justify_hours`, `justify_days` and `justify_interval` move
/// into the next larger unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Justify {
    /// Each 24 hours into a day.
    Hours,
    /// Each 30 days into a month.
    Days,
    /// Both, and every part given one sign.
    Interval,
}

/// An interval justified as PostgreSQL's `justify_*` functions do it
/// (`interval_justify_hours` and its kin in PostgreSQL's timestamp.c).
pub fn justify(interval: IntervalMonthDayNano, how: Justify) -> IntervalMonthDayNano {
    let (mut months, mut days, mut time) = (interval.months, interval.days, interval.nanoseconds);
    let days_into_months = |months: &mut i32, days: &mut i32| {
        *months = months.saturating_add(*days / DAYS_A_MONTH);
        *days %= DAYS_A_MONTH;
    };
    if how == Justify::Interval && i64::from(days.signum()) * time.signum() > 0 {
        days_into_months(&mut months, &mut days);
    }
    if how != Justify::Days {
        days = days.saturating_add((time / NANOS_A_DAY) as i32);
        time %= NANOS_A_DAY;
    }
    if how != Justify::Hours {
        days_into_months(&mut months, &mut days);
        let time_sign = if how == Justify::Interval {
            time.signum()
        } else {
            0
        };
        if months > 0 && (days < 0 || (days == 0 && time_sign < 0)) {
            days += DAYS_A_MONTH;
            months -= 1;
        } else if months < 0 && (days > 0 || (days == 0 && time_sign > 0)) {
            days -= DAYS_A_MONTH;
            months += 1;
        }
    }
    if how != Justify::Days {
        if days > 0 && time < 0 {
            time += NANOS_A_DAY;
            days -= 1;
        } else if days < 0 && time > 0 {
            time -= NANOS_A_DAY;
            days += 1;
        }
    }
    IntervalMonthDayNano::new(months, days, time)
}

/// A span of microseconds as an interval of whole days and the time left,
/// as PostgreSQL makes the difference of two timestamps.
fn days_and_time(micros: i64) -> IntervalMonthDayNano {
    let micros_a_day = NANOS_A_DAY / 1_000;
    IntervalMonthDayNano::new(
        0,
        (micros / micros_a_day) as i32,
        micros % micros_a_day * 1_000,
    )
}

/// `a / b` of two numerics as PostgreSQL computes it, to within the
/// fixed scale of an Arrow decimal: PostgreSQL gives each quotient at
/// least 16 significant digits (20 decimals for a quotient below 1, 16
/// from 1 to 9999), a scale of its own; here one scale serves the whole
/// column: 20 decimals, or the operands' if either has more, or fewer when
/// a quotient as large as the operands' types allow would not fit 38
/// digits (never fewer than 6). Rounded at its last digit, half away from
/// zero, as PostgreSQL rounds a numeric.
#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericDivision {
    signature: Signature,
}

/// A decimal's digits, as Arrow's `Decimal128` holds them.
const NUMERIC_DIGITS: u8 = 38;

impl NumericDivision {
    fn new() -> Self {
        NumericDivision {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }

    /// The quotient's scale, for a dividend of `(precision, scale)` and a
    /// divisor of `scale` `divisor`.
    fn scale((precision, scale): (u8, i8), divisor: i8) -> i8 {
        let (scale, divisor) = (scale.max(0), divisor.max(0));
        // The most digits before the point a quotient may have.
        let whole = (precision as i8 - scale + divisor).max(0);
        let fits = (NUMERIC_DIGITS as i8 - whole).clamp(6, 20);
        fits.max(scale).max(divisor).min(NUMERIC_DIGITS as i8)
    }
}

impl ScalarUDFImpl for NumericDivision {
    fn name(&self) -> &str {
        "numeric_divide"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        match types {
            [DataType::Decimal128(p, s), DataType::Decimal128(_, divisor)] => Ok(
                DataType::Decimal128(NUMERIC_DIGITS, Self::scale((*p, *s), *divisor)),
            ),
            _ => exec_err!("numeric_divide of {types:?}: it divides two numerics"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right] = args.args.as_slice() else {
            return exec_err!("{} takes two values", self.name());
        };
        let scalars = matches!(
            (left, right),
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
        );
        let (dividends, divisors) = (
            left.to_array(args.number_rows)?,
            right.to_array(args.number_rows)?,
        );
        let (dividends, divisors) = (
            dividends.as_primitive::<Decimal128Type>(),
            divisors.as_primitive::<Decimal128Type>(),
        );
        let DataType::Decimal128(_, scale) = args.return_field.data_type() else {
            return exec_err!("numeric_divide returns a numeric");
        };
        // The dividend's digits are shifted so that the integer quotient
        // has the result's scale.
        let shift = *scale as i32 - dividends.scale() as i32 + divisors.scale() as i32;
        let factor = i256::from_i128(10)
            .checked_pow(shift.max(0) as u32)
            .ok_or_else(numeric_overflow)?;
        let limit = i256::from_i128(10).wrapping_pow(NUMERIC_DIGITS as u32);
        let divide = |dividend: i128, divisor: i128| -> Result<i128> {
            if divisor == 0 {
                return Err(crate::sql::SqlError::value("22012", "division by zero").into());
            }
            let (dividend, divisor) = (i256::from_i128(dividend), i256::from_i128(divisor));
            let shifted = dividend.checked_mul(factor).ok_or_else(numeric_overflow)?;
            let (mut quotient, rest) =
                (shifted.wrapping_div(divisor), shifted.wrapping_rem(divisor));
            if rest.wrapping_abs().wrapping_mul(i256::from_i128(2)) >= divisor.wrapping_abs() {
                let away = if (shifted < i256::ZERO) == (divisor < i256::ZERO) {
                    1
                } else {
                    -1
                };
                quotient = quotient.wrapping_add(i256::from_i128(away));
            }
            match quotient.wrapping_abs() < limit {
                true => Ok(quotient.as_i128()),
                false => Err(numeric_overflow()),
            }
        };
        let quotients: Decimal128Array = dividends
            .iter()
            .zip(divisors.iter())
            .map(|pair| match pair {
                (Some(dividend), Some(divisor)) => divide(dividend, divisor).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        let quotients = quotients.with_precision_and_scale(NUMERIC_DIGITS, *scale)?;
        Ok(match scalars {
            true => ColumnarValue::Scalar(ScalarValue::try_from_array(&quotients, 0)?),
            false => ColumnarValue::Array(Arc::new(quotients)),
        })
    }
}

/// PostgreSQL's error for a numeric too large for its type.
fn numeric_overflow() -> DataFusionError {
    crate::sql::SqlError::value("22003", "numeric field overflow").into()
}

/// PostgreSQL's error for a result past an integer type's range.
fn out_of_range(ty: &DataType) -> DataFusionError {
    let name = match ty {
        DataType::Int8 | DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        _ => "bigint",
    };
    crate::sql::SqlError::value("22003", format!("{name} out of range")).into()
}

/// Plans `interval * number`, `number * interval` and `interval /
/// number` as calls of [`ScaledInterval`] (an interval being an interval
/// or the duration of two timestamps subtracted).
#[derive(Debug)]
pub struct IntervalScaling;

impl ExprPlanner for IntervalScaling {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let RawBinaryExpr { op, left, right } = expr;
        let interval = |e: &Expr| {
            e.get_type(schema)
                .is_ok_and(|t| matches!(t, DataType::Interval(_) | DataType::Duration(_)))
        };
        let number = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_numeric());
        let (interval, factor) = match op {
            BinaryOperator::Multiply if interval(&left) && number(&right) => (left, right),
            BinaryOperator::Multiply if number(&left) && interval(&right) => (right, left),
            BinaryOperator::Divide if interval(&left) && number(&right) => {
                let one = Expr::Literal(ScalarValue::Float64(Some(1.0)), None);
                let divisor = Expr::Cast(Cast::new(Box::new(right), DataType::Float64));
                (
                    left,
                    Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(one),
                        Operator::Divide,
                        Box::new(divisor),
                    )),
                )
            }
            _ => return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right })),
        };
        static SCALED: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
        let scaled = SCALED.get_or_init(|| Arc::new(ScalarUDF::from(ScaledInterval::new())));
        let factor = Expr::Cast(Cast::new(Box::new(factor), DataType::Float64));
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(scaled.clone(), vec![interval, factor]),
        )))
    }
}

/// An interval times a factor, as PostgreSQL's `interval_mul` computes
/// it: months, days and time each scaled, the fraction of a month carried
/// into days (30 a month) and the fraction of a day into time, rounded to
/// the microsecond.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ScaledInterval {
    signature: Signature,
}

impl ScaledInterval {
    fn new() -> Self {
        ScaledInterval {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ScaledInterval {
    fn name(&self) -> &str {
        "scaled_interval"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [interval, factor] = args.args.as_slice() else {
            return exec_err!("{} takes two values", self.name());
        };
        let scalar = matches!(
            (interval, factor),
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
        );
        let rows = args.number_rows;
        let intervals = interval_values(&interval.to_array(rows)?)?;
        let factors = factor.to_array(rows)?;
        let factors = factors.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        let scaled: IntervalMonthDayNanoArray = intervals
            .iter()
            .zip(factors.iter())
            .map(|(interval, factor)| match (interval, factor) {
                (Some(interval), Some(factor)) => scale_interval(*interval, factor).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&scaled, 0)?)
        } else {
            ColumnarValue::Array(Arc::new(scaled))
        })
    }
}

/// Intervals, or durations as intervals of days and time (as the
/// difference of two timestamps is one).
fn interval_values(
    values: &datafusion::arrow::array::ArrayRef,
) -> Result<Vec<Option<IntervalMonthDayNano>>> {
    if let DataType::Duration(_) = values.data_type() {
        let micros =
            datafusion::arrow::compute::cast(values, &DataType::Duration(TimeUnit::Microsecond))?;
        return Ok(micros
            .as_primitive::<DurationMicrosecondType>()
            .iter()
            .map(|m| m.map(days_and_time))
            .collect());
    }
    let intervals =
        datafusion::arrow::compute::cast(values, &DataType::Interval(IntervalUnit::MonthDayNano))?;
    Ok(intervals
        .as_primitive::<datafusion::arrow::datatypes::IntervalMonthDayNanoType>()
        .iter()
        .collect())
}

fn scale_interval(interval: IntervalMonthDayNano, factor: f64) -> Result<IntervalMonthDayNano> {
    const SECONDS_A_DAY: f64 = (NANOS_A_DAY / 1_000_000_000) as f64;
    let months = f64::from(interval.months) * factor;
    let month_days = (months - months.trunc()) * f64::from(DAYS_A_MONTH);
    let days = f64::from(interval.days) * factor;
    let mut seconds = ((days - days.trunc()) + (month_days - month_days.trunc())) * SECONDS_A_DAY;
    seconds = (seconds * 1e6).round() / 1e6;
    let mut carried_days = month_days.trunc();
    if seconds.abs() >= SECONDS_A_DAY {
        carried_days += (seconds / SECONDS_A_DAY).trunc();
        seconds -= (seconds / SECONDS_A_DAY).trunc() * SECONDS_A_DAY;
    }
    let micros = (interval.nanoseconds as f64 / 1_000.0 * factor + seconds * 1e6).round();
    let whole_days = days.trunc() + carried_days;
    let fits = |v: f64, min: f64, max: f64| v.is_finite() && v >= min && v <= max;
    if !fits(months, i32::MIN.into(), i32::MAX.into())
        || !fits(whole_days, i32::MIN.into(), i32::MAX.into())
        || !fits(micros, -9.2e15, 9.2e15)
    {
        return Err(crate::sql::SqlError::value("22008", "interval out of range").into());
    }
    Ok(IntervalMonthDayNano::new(
        months.trunc() as i32,
        whole_days as i32,
        micros as i64 * 1_000,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, Int32Array, Int64Array};
    use datafusion::arrow::datatypes::Field;

    #[test]
    fn intervals_are_justified_as_postgresql_justifies_them() {
        const HOUR: i64 = 3_600_000_000_000;
        let interval = |months, days, hours| IntervalMonthDayNano::new(months, days, hours * HOUR);
        let cases = [
            (interval(0, 0, 30), Justify::Hours, interval(0, 1, 6)),
            (interval(0, 1, -30), Justify::Hours, interval(0, 0, -6)),
            (interval(0, 35, 0), Justify::Days, interval(1, 5, 0)),
            (interval(1, -35, 0), Justify::Days, interval(0, -5, 0)),
            (interval(1, 0, -1), Justify::Interval, interval(0, 29, 23)),
            (
                interval(0, -50, 30),
                Justify::Interval,
                interval(-1, -18, -18),
            ),
            (interval(0, 29, 49), Justify::Interval, interval(1, 1, 1)),
        ];
        for (given, how, justified) in cases {
            assert_eq!(justify(given, how), justified, "{given:?} {how:?}");
        }
    }

    fn run(op: Operator, left: ColumnarValue, right: ColumnarValue) -> Result<ColumnarValue> {
        let ty = left.data_type();
        let function = CheckedOperation::new(op);
        let field = Arc::new(Field::new("a", ty.clone(), true));
        function.invoke_with_args(ScalarFunctionArgs {
            args: vec![left, right],
            arg_fields: vec![field.clone(), field],
            number_rows: 2,
            return_field: Arc::new(Field::new("r", ty, true)),
            config_options: Arc::new(ConfigOptions::default()),
        })
    }

    fn divide(left: ScalarValue, right: ScalarValue) -> Result<ScalarValue> {
        let function = NumericDivision::new();
        let types = [left.data_type(), right.data_type()];
        let ty = function.return_type(&types)?;
        let result = function.invoke_with_args(ScalarFunctionArgs {
            arg_fields: types
                .iter()
                .map(|t| Arc::new(Field::new("a", t.clone(), true)))
                .collect(),
            args: vec![ColumnarValue::Scalar(left), ColumnarValue::Scalar(right)],
            number_rows: 1,
            return_field: Arc::new(Field::new("r", ty, true)),
            config_options: Arc::new(ConfigOptions::default()),
        })?;
        match result {
            ColumnarValue::Scalar(v) => Ok(v),
            ColumnarValue::Array(_) => panic!("two scalars make a scalar"),
        }
    }

    fn numeric(digits: i128, precision: u8, scale: i8) -> ScalarValue {
        ScalarValue::Decimal128(Some(digits), precision, scale)
    }

    #[test]
    fn quotients_of_numerics_have_postgresql_s_digits() {
        // 1 / 3.0 (an integer is made a numeric of 10 digits).
        let third = divide(numeric(1, 10, 0), numeric(30, 2, 1)).unwrap();
        assert_eq!(third.to_string(), "0.33333333333333333333");
        // Rounded at the last digit, half away from zero, either sign.
        let two_thirds = divide(numeric(-2, 10, 0), numeric(30, 2, 1)).unwrap();
        assert_eq!(two_thirds.to_string(), "-0.66666666666666666667");
        // The operands' scale when it is larger.
        let fine = divide(numeric(10, 30, 25), numeric(3, 1, 0)).unwrap();
        assert_eq!(fine.to_string(), "0.0000000000000000000000003");
        // A dividend of 38 digits leaves room for 6 decimals.
        let sum = divide(numeric(10, 38, 0), numeric(4, 20, 0)).unwrap();
        assert_eq!(sum.to_string(), "2.500000");
        assert!(
            divide(numeric(1, 38, 0), ScalarValue::Decimal128(None, 2, 1))
                .unwrap()
                .is_null()
        );
    }

    #[test]
    fn numeric_division_refuses_zero_and_overflow() {
        let error = divide(numeric(1, 2, 1), numeric(0, 2, 1)).unwrap_err();
        assert!(error.to_string().contains("division by zero"), "{error}");
        let most = 10i128.pow(38) - 1;
        let error = divide(numeric(most, 38, 0), numeric(1, 38, 37)).unwrap_err();
        assert!(
            error.to_string().contains("numeric field overflow"),
            "{error}"
        );
    }

    #[test]
    fn in_range_results_are_computed() {
        let left = ColumnarValue::Array(Arc::new(Int32Array::from(vec![Some(2), None])));
        let right = ColumnarValue::Scalar(ScalarValue::Int32(Some(3)));
        let ColumnarValue::Array(product) = run(Operator::Multiply, left, right).unwrap() else {
            panic!("an array times a scalar is an array");
        };
        let product = product.as_any().downcast_ref::<Int32Array>().unwrap();
        assert_eq!(product.value(0), 6);
        assert!(product.is_null(1));
    }

    #[test]
    fn overflow_is_out_of_range_for_the_type() {
        let big = || ColumnarValue::Scalar(ScalarValue::Int32(Some(2_000_000_000)));
        let error = run(Operator::Plus, big(), big()).unwrap_err();
        assert!(
            error.to_string().contains("integer out of range"),
            "{error}"
        );
        let least = ColumnarValue::Array(Arc::new(Int64Array::from(vec![i64::MIN, 0])));
        let one = ColumnarValue::Scalar(ScalarValue::Int64(Some(1)));
        let error = run(Operator::Minus, least, one).unwrap_err();
        assert!(error.to_string().contains("bigint out of range"), "{error}");
    }
}
