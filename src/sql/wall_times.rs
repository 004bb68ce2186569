//! Instants (`timestamptz`) in a session whose time zone is not UTC, as
//! PostgreSQL takes them: the casts between an instant and a `timestamp`,
//! a `date` or a `time`, `date_trunc`, `to_char` and `age` of instants,
//! `current_date` and `current_time` take their wall times in the zone,
//! and an instant moved by an interval literal's months and days moves its
//! wall time there. DataFusion's and Arrow's take them all in UTC. (Texts
//! read as instants and instants written as texts follow the zone where
//! they are read and written: `casts`, `types`, `datetime_input`.)

use std::sync::{Arc, OnceLock};

use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{BinaryExpr, Cast, ScalarFunction};
use datafusion::logical_expr::{Expr, ExprSchemable, Operator, ScalarUDF};

use super::templates::ToChar;
use super::time_zone::SessionZone;

/// Whether [`in_session_zone`] may put something in place of `expr`.
pub(super) fn may_rewrite(expr: &Expr) -> bool {
    match expr {
        Expr::Cast(_) => true,
        Expr::BinaryExpr(b) => matches!(b.op, Operator::Plus | Operator::Minus),
        Expr::ScalarFunction(f) => matches!(
            f.name(),
            "date_trunc" | "current_date" | "current_time" | ToChar::NAME | "age"
        ),
        _ => false,
    }
}

/// `expr` (whose inputs are already rewritten) as PostgreSQL computes it in
/// a session whose zone is `zone` (see the module's comment).
pub(super) fn in_session_zone(
    expr: Expr,
    inputs: &DFSchema,
    zone: &SessionZone,
) -> Result<Transformed<Expr>> {
    if zone.is_utc() {
        return Ok(Transformed::no(expr));
    }
    match expr {
        // An instant's wall time, date or time of day in the session's
        // zone, and the instant of a wall time or a date there.
        Expr::Cast(Cast { expr, field })
            if expr
                .get_type(inputs)
                .is_ok_and(|from| shifts_zone(&from, field.data_type())) =>
        {
            let shifted = in_zone(*expr, inputs, zone)?;
            Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                Box::new(shifted),
                field,
            ))))
        }
        // An instant truncated at its wall time in the session's zone.
        Expr::ScalarFunction(mut f)
            if f.name() == "date_trunc" && f.args.len() == 2 && is_instant(&f.args[1], inputs) =>
        {
            let ty = Expr::ScalarFunction(f.clone()).get_type(inputs)?;
            f.args[1] = in_zone(f.args[1].clone(), inputs, zone)?;
            let truncated = in_zone(Expr::ScalarFunction(f), inputs, zone)?;
            Ok(Transformed::yes(Expr::Cast(Cast::new(
                Box::new(truncated),
                ty,
            ))))
        }
        // An instant formatted, or aged, as its wall time in the
        // session's zone.
        Expr::ScalarFunction(mut f)
            if matches!(f.name(), ToChar::NAME | "age")
                && f.args.iter().any(|arg| is_instant(arg, inputs)) =>
        {
            for arg in &mut f.args {
                if is_instant(arg, inputs) {
                    *arg = in_zone(arg.clone(), inputs, zone)?;
                }
            }
            Ok(Transformed::yes(Expr::ScalarFunction(f)))
        }
        // An instant moved by months and days moves its wall time in the
        // session's zone (a day after noon is noon, across a change of
        // offset), then by the interval's time (see `moved_in_zone`).
        Expr::BinaryExpr(b) if moves_instant(&b, inputs) => {
            moved_in_zone(b, inputs, zone).map(Transformed::yes)
        }
        // Today's date and the time of day in the session's zone.
        Expr::ScalarFunction(f) if matches!(f.name(), "current_date" | "current_time") => {
            static NOW: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
            // An instant, as the session's `now()` is.
            let now = NOW.get_or_init(|| {
                let mut config = ConfigOptions::default();
                config.execution.time_zone = Some(super::types::UTC.to_owned());
                datafusion::functions::datetime::now(&config)
            });
            let ty = Expr::ScalarFunction(f).get_type(inputs)?;
            let now = Expr::ScalarFunction(ScalarFunction::new_udf(now.clone(), vec![]));
            let wall = in_zone(now, inputs, zone)?;
            Ok(Transformed::yes(Expr::Cast(Cast::new(Box::new(wall), ty))))
        }
        expr => Ok(Transformed::no(expr)),
    }
}

/// The months and days of an interval literal, and its time, when it has
/// months or days.
fn calendar_part(expr: &Expr) -> Option<(IntervalMonthDayNano, IntervalMonthDayNano)> {
    let interval = match expr {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) => *v,
        Expr::Literal(ScalarValue::IntervalYearMonth(Some(months)), _) => {
            IntervalMonthDayNano::new(*months, 0, 0)
        }
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => {
            IntervalMonthDayNano::new(0, v.days, i64::from(v.milliseconds) * 1_000_000)
        }
        _ => return None,
    };
    (interval.months != 0 || interval.days != 0).then_some((
        IntervalMonthDayNano::new(interval.months, interval.days, 0),
        IntervalMonthDayNano::new(0, 0, interval.nanoseconds),
    ))
}

/// Whether `b` is an instant plus or minus an interval literal of months or
/// days (or that interval plus an instant).
fn moves_instant(b: &BinaryExpr, inputs: &DFSchema) -> bool {
    match b.op {
        Operator::Minus => is_instant(&b.left, inputs) && calendar_part(&b.right).is_some(),
        Operator::Plus => {
            (is_instant(&b.left, inputs) && calendar_part(&b.right).is_some())
                || (is_instant(&b.right, inputs) && calendar_part(&b.left).is_some())
        }
        _ => false,
    }
}

/// `instant ± interval` as PostgreSQL computes it in a session's zone: the
/// months and days moved on the instant's wall time there, the time then
/// added to the instant (`timestamptz '2024-03-30 12:00+01' + interval '1
/// day'` is `2024-03-31 12:00+02` in Paris, 23 hours later).
fn moved_in_zone(moved: BinaryExpr, inputs: &DFSchema, zone: &SessionZone) -> Result<Expr> {
    let BinaryExpr { left, op, right } = match moved {
        // `interval + instant` is `instant + interval`.
        BinaryExpr { left, op, right } if calendar_part(&left).is_some() => BinaryExpr {
            left: right,
            op,
            right: left,
        },
        moved => moved,
    };
    let Some((calendar, time)) = calendar_part(&right) else {
        return Ok(Expr::BinaryExpr(BinaryExpr { left, op, right }));
    };
    let ty = Expr::BinaryExpr(BinaryExpr::new(left.clone(), op, right)).get_type(inputs)?;
    let interval = |v| Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), None);
    let wall = Expr::BinaryExpr(BinaryExpr::new(
        Box::new(in_zone(*left, inputs, zone)?),
        op,
        Box::new(interval(calendar)),
    ));
    let instant = Expr::BinaryExpr(BinaryExpr::new(
        Box::new(in_zone(wall, inputs, zone)?),
        op,
        Box::new(interval(time)),
    ));
    Ok(Expr::Cast(Cast::new(Box::new(instant), ty)))
}

/// Whether a cast from `from` to `to` takes a wall time in the session's
/// zone: from an instant to a wall time, a date or a time of day, or from
/// a wall time or a date to an instant.
fn shifts_zone(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (DataType::Timestamp(_, Some(_)), to) => matches!(
            to,
            DataType::Timestamp(_, None) | DataType::Date32 | DataType::Time64(_)
        ),
        (DataType::Timestamp(_, None) | DataType::Date32, DataType::Timestamp(_, Some(_))) => true,
        _ => false,
    }
}

/// Whether `expr` is an instant (a `timestamptz`).
pub(super) fn is_instant(expr: &Expr, inputs: &DFSchema) -> bool {
    expr.get_type(inputs)
        .is_ok_and(|t| matches!(t, DataType::Timestamp(_, Some(_))))
}

/// `expr AT TIME ZONE zone`: an instant's wall time in the zone, or the
/// instant of a wall time (a date's midnight) there.
pub(super) fn in_zone(expr: Expr, inputs: &DFSchema, zone: &SessionZone) -> Result<Expr> {
    let expr = match expr.get_type(inputs)? {
        DataType::Date32 => Expr::Cast(Cast::new(
            Box::new(expr),
            DataType::Timestamp(TimeUnit::Microsecond, None),
        )),
        _ => expr,
    };
    let zone = datafusion::logical_expr::lit(zone.name());
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
        super::functions::at_time_zone(),
        vec![expr, zone],
    )))
}
