//! Casts as PostgreSQL does them, where Arrow's differ: an analyzer rule
//! ([`PostgresCasts`]) puts a function of its own in place of each such
//! cast, after DataFusion's type coercion.
//!
//! - A float cast to text is written with the shortest digits that read
//!   back the same value (`-571`, `1e+20`; Arrow writes `-571.0`, `1e20`).
//! - A timestamp cast to text is written as PostgreSQL prints it
//!   (`2024-01-01 10:00:00.5`, `+00` after an instant; Arrow writes
//!   `2024-01-01T10:00:00.500`).
//! - A value cast to `real` that f32 cannot hold is an error (22003), where
//!   Arrow's cast makes it infinite or zero.
//! - A text cast to a timestamp may leave out the seconds, one cast to an
//!   interval may be written as PostgreSQL prints it (`1 day 01:30:00`):
//!   a literal's text is made one Arrow reads when planned, a column's
//!   texts when they are read.
//! - A number cast to an integer is rounded (`3.7::int` is 4), a numeric's
//!   half away from zero and a double's to even, where Arrow truncates it;
//!   `round`, `ceil`, `floor` and `trunc` round as PostgreSQL's do.
//! - Timestamps given to `generate_series` and `range` are cast to
//!   nanoseconds, DataFusion's unit there, by a cast that refuses a value
//!   out of their range (the function's own made it NULL).
//! - In a session whose time zone is not UTC, an instant's text and the
//!   casts between `timestamptz` and `timestamp`, `date` or `time`,
//!   `date_trunc`, `date_part`, `to_char` and `age` of instants, `current_date`
//!   and `current_time` take their wall times in that zone, and an instant
//!   moved by a literal interval's months and days moves its wall time
//!   there, as PostgreSQL's do (see [`super::time_zone`]); Arrow's and
//!   DataFusion's take them in UTC.
//! - The year of a date or a timestamp before 1 AD is PostgreSQL's, which
//!   has no year 0 (`date_part('year', date '0044-03-15 BC')` is -44).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Float32Type, Float64Type, IntervalMonthDayNano, TimeUnit,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_err, DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{BinaryExpr, Cast, ScalarFunction};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::datetime_input::Target;
use super::decimals::decimal_texts;
use super::floats::{check_real_range, put_float};
use super::functions::AT_TIME_ZONE;
use super::plan_nodes::rewrite_nodes_holding;
use super::settings::Settings;
use super::templates::ToChar;
use super::time_zone::SessionZone;
use super::types::{list_of, push_timestamp, text_inputs, text_reader, timestamp_micros_at};

/// Puts a [`PostgresCast`] in place of each cast of a float or a timestamp
/// to text, and of each cast to `real` of a double, a number or a text,
/// after DataFusion's type coercion (which adds the casts of `x || 'a'`);
/// a text cast to a date, a timestamp or an interval is made one Arrow
/// reads (see [`super::types::text_reader`]). Result columns keep their
/// names.
/// The session's settings name the zone of its instants.
#[derive(Debug)]
pub struct PostgresCasts(pub Settings);

impl AnalyzerRule for PostgresCasts {
    fn name(&self) -> &str {
        "postgres_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        let zone = self.0.zone();
        rewrite_nodes_holding(
            plan,
            |_, e| may_rewrite(e),
            |e, inputs| postgres_casts(e, inputs, &zone),
        )
    }
}

/// Whether [`postgres_casts`] may put something in place of `expr`.
fn may_rewrite(expr: &Expr) -> bool {
    match expr {
        Expr::Cast(_) => true,
        Expr::BinaryExpr(b) => matches!(b.op, Operator::Plus | Operator::Minus),
        Expr::ScalarFunction(f) => matches!(
            f.name(),
            "round"
                | "ceil"
                | "floor"
                | "trunc"
                | "generate_series"
                | "range"
                | "array_element"
                | "date_trunc"
                | "date_part"
                | "current_date"
                | "current_time"
                | ToChar::NAME
                | "age"
                | AT_TIME_ZONE
        ),
        _ => false,
    }
}

/// `expr`, over columns of `inputs`, with a [`PostgresCast`] in place of
/// each cast PostgreSQL does otherwise (see [`PostgresCasts`]), in a
/// session whose time zone is `zone`.
pub fn postgres_casts(
    expr: Expr,
    inputs: &DFSchema,
    zone: &SessionZone,
) -> Result<Transformed<Expr>> {
    static CASTS: OnceLock<[Arc<ScalarUDF>; 7]> = OnceLock::new();
    let [float_text, decimal_text, real, rounded, array_text, vector_text, array_input] = CASTS
        .get_or_init(|| {
            let cast = |name, returns, cast| {
                Arc::new(
                    PostgresCast {
                        name,
                        returns,
                        cast,
                    }
                    .into(),
                )
            };
            [
                cast("__tablegate_float_text", Some(DataType::Utf8), float_texts),
                cast(
                    "__tablegate_decimal_text",
                    Some(DataType::Utf8),
                    decimal_texts,
                ),
                cast("__tablegate_real", Some(DataType::Float32), to_real),
                cast("__tablegate_rounded", None, rounded_numbers),
                cast("__tablegate_array_text", Some(DataType::Utf8), array_texts),
                cast(
                    "__tablegate_vector_text",
                    Some(DataType::Utf8),
                    vector_texts,
                ),
                cast(
                    "__tablegate_array_input",
                    Some(list_of(DataType::Utf8)),
                    array_input_texts,
                ),
            ]
        });
    let timestamp_text = TimestampText::udf(zone);
    expr.transform_up(|e| match e {
        // An instant's wall time, date or time of day in the session's
        // zone, and the instant of a wall time or a date there.
        Expr::Cast(Cast { expr, field })
            if !zone.is_utc()
                && expr
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
            if !zone.is_utc()
                && f.name() == "date_trunc"
                && f.args.len() == 2
                && is_instant(&f.args[1], inputs) =>
        {
            let ty = Expr::ScalarFunction(f.clone()).get_type(inputs)?;
            f.args[1] = in_zone(f.args[1].clone(), inputs, zone)?;
            let truncated = in_zone(Expr::ScalarFunction(f), inputs, zone)?;
            Ok(Transformed::yes(Expr::Cast(Cast::new(
                Box::new(truncated),
                ty,
            ))))
        }
        Expr::ScalarFunction(f) if f.name() == "date_part" && f.args.len() == 2 => {
            date_part(f, inputs, zone)
        }
        // An instant formatted, or aged, as its wall time in the
        // session's zone.
        Expr::ScalarFunction(mut f)
            if !zone.is_utc()
                && matches!(f.name(), ToChar::NAME | "age")
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
        Expr::BinaryExpr(b) if !zone.is_utc() && moves_instant(&b, inputs) => {
            moved_in_zone(b, inputs, zone).map(Transformed::yes)
        }
        // Today's date and the time of day in the session's zone.
        Expr::ScalarFunction(f)
            if !zone.is_utc() && matches!(f.name(), "current_date" | "current_time") =>
        {
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
        // `x AT TIME ZONE z` of a text or a date: the instant it is in the
        // session's zone.
        Expr::ScalarFunction(mut f)
            if !zone.is_utc()
                && f.name() == AT_TIME_ZONE
                && f.args.first().is_some_and(|value| {
                    value
                        .get_type(inputs)
                        .is_ok_and(|t| matches!(t, DataType::Utf8 | DataType::Date32))
                }) =>
        {
            f.args[0] = instant_in_zone(f.args[0].clone(), inputs, zone)?;
            Ok(Transformed::yes(Expr::ScalarFunction(f)))
        }
        Expr::Cast(Cast { expr, field }) if is_text(field.data_type()) => {
            let text = match expr.get_type(inputs) {
                Ok(t) if t.is_floating() => float_text,
                Ok(DataType::Decimal128(..)) => decimal_text,
                Ok(DataType::Timestamp(..)) => &timestamp_text,
                Ok(DataType::List(_)) if is_vector(&expr, inputs) => vector_text,
                Ok(DataType::List(_)) => array_text,
                _ => {
                    return Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                        expr, field,
                    ))))
                }
            };
            let text = Expr::ScalarFunction(ScalarFunction::new_udf(text.clone(), vec![*expr]));
            Ok(Transformed::yes(match field.data_type() {
                DataType::Utf8 => text,
                _ => Expr::Cast(Cast::new_from_field(Box::new(text), field)),
            }))
        }
        // A date's or a timestamp's text read as its value, an interval's
        // made one Arrow reads (see `types::text_inputs`).
        Expr::Cast(Cast { expr, field }) if text_reader(field.data_type()).is_some() => match *expr
        {
            Expr::Literal(ScalarValue::Utf8(Some(text)), meta) => {
                let texts: ArrayRef = Arc::new(StringArray::from(vec![text]));
                let read = text_inputs(&texts, field.data_type(), zone)?;
                let literal = Expr::Literal(ScalarValue::try_from_array(&read, 0)?, meta);
                // A date's or a timestamp's value, or an interval's text
                // to cast.
                if read.data_type() == field.data_type() {
                    Ok(Transformed::yes(literal))
                } else {
                    let cast = Cast::new_from_field(Box::new(literal), field);
                    Ok(Transformed::yes(Expr::Cast(cast)))
                }
            }
            expr if expr.get_type(inputs).is_ok_and(|t| t == DataType::Utf8) => {
                let read = TextInput::udf(field.data_type(), zone);
                let read = ScalarFunction::new_udf(read, vec![expr]);
                let cast = Cast::new_from_field(Box::new(Expr::ScalarFunction(read)), field);
                Ok(Transformed::yes(Expr::Cast(cast)))
            }
            expr => Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                Box::new(expr),
                field,
            )))),
        },
        // A text in an array's text form (`'{a,b}'::text[]`), whose
        // elements are then cast.
        Expr::Cast(Cast { expr, field })
            if matches!(field.data_type(), DataType::List(_))
                && expr.get_type(inputs).is_ok_and(|t| is_text(&t)) =>
        {
            let lists = ScalarFunction::new_udf(array_input.clone(), vec![*expr]);
            let cast = Cast::new_from_field(Box::new(Expr::ScalarFunction(lists)), field);
            Ok(Transformed::yes(Expr::Cast(cast)))
        }
        // `extract(epoch FROM d)` of a date is a whole number of seconds,
        // printed without decimals as PostgreSQL's (see `date_fields`).
        Expr::Cast(Cast { expr, field })
            if field.data_type() == &DataType::Decimal128(38, 6)
                && super::date_fields::epoch_of_date(&expr, inputs) =>
        {
            let whole = Cast::new(expr, DataType::Decimal128(38, 0));
            Ok(Transformed::yes(Expr::Cast(whole)))
        }
        Expr::Cast(Cast { expr, field })
            if field.data_type() == &DataType::Float32
                && expr.get_type(inputs).is_ok_and(|t| narrows_to_real(&t)) =>
        {
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(real.clone(), vec![*expr]),
            )))
        }
        // DataFusion's series of timestamps count nanoseconds, and its
        // cast of an argument to them made a value out of their range
        // NULL (an empty series); a cast here makes it an error.
        Expr::ScalarFunction(mut f)
            if matches!(f.name(), "generate_series" | "range")
                && f.args.iter().any(|a| in_nanoseconds(a, inputs).is_some()) =>
        {
            for arg in &mut f.args {
                if let Some(nanos) = in_nanoseconds(arg, inputs) {
                    *arg = Expr::Cast(Cast::new(Box::new(arg.clone()), nanos));
                }
            }
            Ok(Transformed::yes(Expr::ScalarFunction(f)))
        }
        // A vector's subscripts count from 0, as PostgreSQL's int2vector's
        // and oidvector's do (`indkey[0]` is an index's first column); an
        // array's from 1.
        Expr::ScalarFunction(mut f)
            if f.name() == "array_element"
                && f.args.len() == 2
                && is_vector(&f.args[0], inputs) =>
        {
            let index = Expr::Cast(Cast::new(Box::new(f.args[1].clone()), DataType::Int64));
            f.args[1] = index + datafusion::logical_expr::lit(1i64);
            Ok(Transformed::yes(Expr::ScalarFunction(f)))
        }
        // `round(x)` of a double rounds a half to even, as C's `rint` in
        // PostgreSQL (`round(2.5::float8)` is 2); DataFusion's away from zero.
        Expr::ScalarFunction(f)
            if f.name() == "round"
                && f.args.len() == 1
                && f.args[0].get_type(inputs).is_ok_and(|t| t.is_floating()) =>
        {
            let rounded = ScalarFunction::new_udf(rounded.clone(), f.args);
            Ok(Transformed::yes(Expr::ScalarFunction(rounded)))
        }
        // `ceil`, `floor` and `trunc` of a numeric have PostgreSQL's
        // scale: none, or `trunc(x, n)`'s n (DataFusion's keep the
        // argument's: `ceil(10.50)` was `11.00`), and a digit more for a
        // carry (`ceil(99.99)` of a numeric(4,2) overflowed).
        Expr::ScalarFunction(mut f) if matches!(f.name(), "ceil" | "floor" | "trunc") => {
            let digits = match f.args.as_slice() {
                [_] => Some(0),
                [_, digits] => literal_integer(digits),
                _ => None,
            };
            let ty = f.args.first().and_then(|a| a.get_type(inputs).ok());
            match (ty, digits) {
                (Some(DataType::Decimal128(precision, scale)), Some(digits))
                    if (0..i64::from(scale)).contains(&digits) =>
                {
                    let wider = DataType::Decimal128((precision + 1).min(38), scale);
                    let value = f.args[0].clone();
                    f.args[0] = Expr::Cast(Cast::new(Box::new(value), wider));
                    let kept = digits as i8;
                    let whole = precision as i8 - scale;
                    let ty = DataType::Decimal128((whole + kept + 1).clamp(1, 38) as u8, kept);
                    let cast = Cast::new(Box::new(Expr::ScalarFunction(f)), ty);
                    Ok(Transformed::yes(Expr::Cast(cast)))
                }
                _ => Ok(Transformed::no(Expr::ScalarFunction(f))),
            }
        }
        // A number cast to an integer is rounded, not truncated.
        Expr::Cast(Cast { expr, field })
            if field.data_type().is_integer()
                && expr.get_type(inputs).is_ok_and(|t| {
                    matches!(
                        t,
                        DataType::Float32 | DataType::Float64 | DataType::Decimal128(..)
                    )
                }) =>
        {
            let rounded = ScalarFunction::new_udf(rounded.clone(), vec![*expr]);
            let cast = Cast::new_from_field(Box::new(Expr::ScalarFunction(rounded)), field);
            Ok(Transformed::yes(Expr::Cast(cast)))
        }
        e => Ok(Transformed::no(e)),
    })
}

/// `date_part(field, x)` as PostgreSQL's: a field of an instant's wall time
/// in the session's zone (its epoch is the same in every zone), and the
/// year of a date or a time before 1 AD counted as PostgreSQL counts it,
/// without a year 0 (44 BC is -44; DataFusion's calendar year is -43).
fn date_part(
    mut f: ScalarFunction,
    inputs: &DFSchema,
    zone: &SessionZone,
) -> Result<Transformed<Expr>> {
    let field = match &f.args[0] {
        Expr::Literal(ScalarValue::Utf8(Some(field)), _) => field.to_lowercase(),
        _ => return Ok(Transformed::no(Expr::ScalarFunction(f))),
    };
    let value = f.args[1].get_type(inputs)?;
    let shifted = !zone.is_utc() && is_instant(&f.args[1], inputs) && field != "epoch";
    if shifted {
        f.args[1] = in_zone(f.args[1].clone(), inputs, zone)?;
    }
    let dated = matches!(value, DataType::Date32 | DataType::Timestamp(..));
    if !(dated && matches!(field.as_str(), "year" | "years")) {
        return Ok(Transformed::new_transformed(
            Expr::ScalarFunction(f),
            shifted,
        ));
    }
    let year = Expr::ScalarFunction(f);
    let ty = year.get_type(inputs)?;
    let (zero, one) = (ScalarValue::new_zero(&ty)?, ScalarValue::new_one(&ty)?);
    let before_christ = year.clone().lt_eq(Expr::Literal(zero, None));
    let counted =
        datafusion::logical_expr::when(before_christ, year.clone() - Expr::Literal(one, None))
            .otherwise(year)?;
    Ok(Transformed::yes(counted))
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
fn is_instant(expr: &Expr, inputs: &DFSchema) -> bool {
    expr.get_type(inputs)
        .is_ok_and(|t| matches!(t, DataType::Timestamp(_, Some(_))))
}

/// `expr AT TIME ZONE zone`: an instant's wall time in the zone, or the
/// instant of a wall time (a date's midnight) there.
fn in_zone(expr: Expr, inputs: &DFSchema, zone: &SessionZone) -> Result<Expr> {
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

/// The instant a text (read in the session's zone) or a date (its
/// midnight there) is.
fn instant_in_zone(expr: Expr, inputs: &DFSchema, zone: &SessionZone) -> Result<Expr> {
    let instant = DataType::Timestamp(TimeUnit::Microsecond, Some(super::types::UTC.into()));
    match expr {
        Expr::Literal(ScalarValue::Utf8(Some(text)), meta) => {
            let texts: ArrayRef = Arc::new(StringArray::from(vec![text]));
            let read = text_inputs(&texts, &instant, zone)?;
            Ok(Expr::Literal(ScalarValue::try_from_array(&read, 0)?, meta))
        }
        expr if expr.get_type(inputs)? == DataType::Utf8 => Ok(Expr::ScalarFunction(
            ScalarFunction::new_udf(TextInput::udf(&instant, zone), vec![expr]),
        )),
        expr => in_zone(expr, inputs, zone),
    }
}

/// The type in nanoseconds of `expr`, a timestamp of a coarser unit.
fn in_nanoseconds(expr: &Expr, inputs: &DFSchema) -> Option<DataType> {
    match expr.get_type(inputs) {
        Ok(DataType::Timestamp(unit, zone)) if unit != TimeUnit::Nanosecond => {
            Some(DataType::Timestamp(TimeUnit::Nanosecond, zone))
        }
        _ => None,
    }
}

/// The value of an integer literal, also under a cast.
fn literal_integer(expr: &Expr) -> Option<i64> {
    match expr {
        Expr::Literal(value, _) => super::functions::int(value),
        Expr::Cast(Cast { expr, .. }) => literal_integer(expr),
        _ => None,
    }
}

fn is_text(ty: &DataType) -> bool {
    matches!(
        ty,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// Whether a value of this type may be out of `real`'s range.
fn narrows_to_real(ty: &DataType) -> bool {
    is_text(ty) || matches!(ty, DataType::Float64 | DataType::Decimal128(..))
}

/// A cast done as PostgreSQL does it, of one value or a column of them.
#[derive(Debug)]
struct PostgresCast {
    name: &'static str,
    /// `None`: the value's own type.
    returns: Option<DataType>,
    cast: fn(&ArrayRef) -> Result<ArrayRef>,
}

impl PartialEq for PostgresCast {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for PostgresCast {}

impl std::hash::Hash for PostgresCast {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for PostgresCast {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        static ANY_ONE: OnceLock<Signature> = OnceLock::new();
        ANY_ONE.get_or_init(|| Signature::any(1, Volatility::Immutable))
    }

    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        match (&self.returns, types) {
            (Some(returns), _) => Ok(returns.clone()),
            (None, [own]) => Ok(own.clone()),
            (None, _) => exec_err!("{} takes one value", self.name),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return exec_err!("{} takes one value", self.name);
        };
        let cast = (self.cast)(&value.to_array(args.number_rows)?)?;
        Ok(match value {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&cast, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(cast),
        })
    }
}

/// Floats' text.
pub(super) fn float_texts(floats: &ArrayRef) -> Result<ArrayRef> {
    fn texts<F: ryu::Float + Into<f64>>(
        floats: impl ExactSizeIterator<Item = Option<F>>,
    ) -> ArrayRef {
        let mut texts = StringBuilder::with_capacity(floats.len(), floats.len() * 8);
        let mut text = Vec::with_capacity(32);
        for float in floats {
            match float {
                Some(float) => {
                    text.clear();
                    put_float(float, &mut text);
                    texts.append_value(String::from_utf8_lossy(&text));
                }
                None => texts.append_null(),
            }
        }
        Arc::new(texts.finish())
    }
    Ok(match floats.data_type() {
        DataType::Float64 => texts(floats.as_primitive::<Float64Type>().iter()),
        DataType::Float32 => texts(floats.as_primitive::<Float32Type>().iter()),
        other => return exec_err!("float text of a {other}"),
    })
}

/// Values as `real`, refusing what it cannot hold.
fn to_real(values: &ArrayRef) -> Result<ArrayRef> {
    let options = datafusion::arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let real = datafusion::arrow::compute::cast_with_options(values, &DataType::Float32, &options)?;
    check_real_range(values, &real)?;
    Ok(real)
}

/// A column's texts read as a type's values, or made ones Arrow reads
/// as them ([`text_inputs`]); a cast to the type follows it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TextInput {
    name: String,
    target: DataType,
    /// The session's, in which an instant's text without a zone is read.
    zone: SessionZone,
}

impl TextInput {
    fn udf(target: &DataType, zone: &SessionZone) -> Arc<ScalarUDF> {
        let name = format!("__tablegate_text_input_{target}");
        let target = target.clone();
        let zone = zone.clone();
        Arc::new(TextInput { name, target, zone }.into())
    }
}

impl ScalarUDFImpl for TextInput {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        static ONE_TEXT: OnceLock<Signature> = OnceLock::new();
        ONE_TEXT.get_or_init(|| Signature::exact(vec![DataType::Utf8], Volatility::Immutable))
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(match Target::of(&self.target) {
            Some(_) => self.target.clone(),
            None => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return exec_err!("{} takes one text", self.name);
        };
        let read = text_inputs(&value.to_array(args.number_rows)?, &self.target, &self.zone)?;
        Ok(match value {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&read, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(read),
        })
    }
}

/// Arrays' text form (see [`super::arrays::list_texts`]).
fn array_texts(lists: &ArrayRef) -> Result<ArrayRef> {
    Ok(super::arrays::list_texts(lists)?)
}

/// Vectors' text form (see [`super::arrays::vector_texts`]).
fn vector_texts(lists: &ArrayRef) -> Result<ArrayRef> {
    Ok(super::arrays::vector_texts(lists)?)
}

/// Whether `expr` is a catalog's `int2vector` or `oidvector` column
/// (`indkey`), by the type its field's metadata names.
fn is_vector(expr: &Expr, inputs: &DFSchema) -> bool {
    expr.to_field(inputs).is_ok_and(|(_, field)| {
        matches!(
            field
                .metadata()
                .get(super::types::PG_TYPE_KEY)
                .map(String::as_str),
            Some("int2vector" | "oidvector")
        )
    })
}

/// Texts in an array's text form as lists of texts.
fn array_input_texts(texts: &ArrayRef) -> Result<ArrayRef> {
    let texts = datafusion::arrow::compute::cast(texts, &DataType::Utf8)?;
    Ok(text_inputs(
        &texts,
        &list_of(DataType::Utf8),
        &SessionZone::utc(),
    )?)
}

/// A timestamp's text, as PostgreSQL prints it: an instant's in the
/// session's zone.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampText {
    zone: SessionZone,
}

impl TimestampText {
    fn udf(zone: &SessionZone) -> Arc<ScalarUDF> {
        let zone = zone.clone();
        Arc::new(TimestampText { zone }.into())
    }
}

impl ScalarUDFImpl for TimestampText {
    fn name(&self) -> &str {
        "__tablegate_timestamp_text"
    }

    fn signature(&self) -> &Signature {
        static ANY_ONE: OnceLock<Signature> = OnceLock::new();
        ANY_ONE.get_or_init(|| Signature::any(1, Volatility::Immutable))
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return exec_err!("{} takes one value", self.name());
        };
        let texts = timestamp_texts(&value.to_array(args.number_rows)?, &self.zone)?;
        Ok(match value {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&texts, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(texts),
        })
    }
}

/// Timestamps' text, as PostgreSQL prints them (instants in `zone`).
pub(super) fn timestamp_texts(times: &ArrayRef, zone: &SessionZone) -> Result<ArrayRef> {
    let DataType::Timestamp(_, of_type) = times.data_type() else {
        return exec_err!("timestamp text of a {}", times.data_type());
    };
    let zoned = of_type.is_some();
    let mut texts = StringBuilder::with_capacity(times.len(), times.len() * 26);
    for row in 0..times.len() {
        if times.is_null(row) {
            texts.append_null();
            continue;
        }
        let micros = timestamp_micros_at(times.as_ref(), row);
        let Some(micros) = micros else {
            return exec_err!("timestamp text of a {}", times.data_type());
        };
        // Written into the builder, then ended as one value.
        push_timestamp(&mut texts, micros, zoned.then_some(zone));
        texts.append_value("");
    }
    Ok(Arc::new(texts.finish()))
}

/// Numbers rounded to whole ones before they are made integers, as
/// PostgreSQL rounds them: a numeric's half away from zero, a float's half
/// to even (C's `rint`).
fn rounded_numbers(numbers: &ArrayRef) -> Result<ArrayRef> {
    Ok(match numbers.data_type() {
        DataType::Float64 => {
            let floats = numbers.as_primitive::<Float64Type>();
            Arc::new(floats.unary::<_, Float64Type>(f64::round_ties_even))
        }
        DataType::Float32 => {
            let floats = numbers.as_primitive::<Float32Type>();
            Arc::new(floats.unary::<_, Float32Type>(f32::round_ties_even))
        }
        &DataType::Decimal128(precision, scale) if scale > 0 => {
            let unit = 10i128.pow(scale as u32);
            let round = |v: i128| {
                let whole = v / unit;
                let away = (v % unit).abs() * 2 >= unit;
                (whole + if away { v.signum() } else { 0 }) * unit
            };
            let decimals = numbers.as_primitive::<Decimal128Type>();
            let rounded = decimals.unary::<_, Decimal128Type>(round);
            Arc::new(rounded.with_precision_and_scale(precision, scale)?)
        }
        _ => numbers.clone(),
    })
}
