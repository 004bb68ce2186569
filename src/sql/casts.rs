//! Casts as PostgreSQL does them, where Arrow's differ: an analyzer rule
//! ([`PostgresCasts`]) puts a function of its own in place of each such
//! cast, after DataFusion's type coercion.
//!
//! - A float cast to text is written with the shortest digits that read
//!   back the same value (`-571`, `1e+20`; Arrow writes `-571.0`, `1e20`).
//! - A timestamp cast to text is written as PostgreSQL prints it
//!   (`2024-01-01 10:00:00.5`, an instant in the session's zone with its
//!   offset there, `+00` in UTC; Arrow writes `2024-01-01T10:00:00.500`).
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
//! - A text read as an instant without an offset is a wall time in the
//!   session's zone; the casts and functions that take an instant's wall
//!   time take it there ([`super::wall_times`]).
//! - `date_part` takes an instant's fields in the session's zone, and the
//!   year of a date or a timestamp before 1 AD as PostgreSQL counts it,
//!   without a year 0 ([`super::date_fields::planned_date_part`]).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float32Type, Float64Type, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_err, DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{BinaryExpr, Cast, InList, ScalarFunction};
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
use super::time_zone::SessionZone;
use super::types::{
    declared_type, list_of, push_timestamp, text_inputs, text_reader, timestamp_micros_at,
};
use crate::catalog::SqlType;

/// Puts a [`PostgresCast`] in place of each cast of a float or a timestamp
/// to text, and of each cast to `real` of a double, a number or a text,
/// after DataFusion's type coercion (which adds the casts of `x || 'a'`);
/// a text cast to a date, a timestamp or an interval is made one Arrow
/// reads (see [`super::types::text_reader`]). Result columns keep their
/// names. The session's settings name the zone of its instants.
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
    super::wall_times::may_rewrite(expr)
        || match expr {
            Expr::Cast(_) | Expr::BinaryExpr(_) | Expr::InList(_) => true,
            Expr::ScalarFunction(f) => matches!(
                f.name(),
                "round"
                    | "ceil"
                    | "floor"
                    | "trunc"
                    | "generate_series"
                    | "range"
                    | "array_element"
                    | "date_part"
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
    static CASTS: OnceLock<[Arc<ScalarUDF>; 6]> = OnceLock::new();
    let [float_text, decimal_text, real, rounded, vector_text, array_input] =
        CASTS.get_or_init(|| {
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
    let zoned_text = ZonedText::udf(zone);
    expr.transform_up(|e| {
        let e = match super::wall_times::in_session_zone(e, inputs, zone)? {
            shifted if shifted.transformed => return Ok(shifted),
            unchanged => unchanged.data,
        };
        match e {
            Expr::ScalarFunction(f) if f.name() == "date_part" && f.args.len() == 2 => {
                super::date_fields::planned_date_part(f, inputs, zone)
            }
            // `x AT TIME ZONE z` of a text or a date: the instant it is in the
            // session's zone.
            Expr::ScalarFunction(mut f)
                if f.name() == AT_TIME_ZONE
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
                    Ok(DataType::List(_)) if is_vector(&expr, inputs) => vector_text,
                    Ok(DataType::Timestamp(..) | DataType::List(_)) => &zoned_text,
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
            // A date's or a timestamp's text read as its value, a numeric's or
            // an interval's made one Arrow reads (see `types::text_inputs`).
            Expr::Cast(Cast { expr, field })
                if text_reader(field.data_type()).is_some()
                    && expr.get_type(inputs).is_ok_and(|t| is_text(&t)) =>
            {
                match *expr {
                    Expr::Literal(ScalarValue::Utf8(Some(text)), meta) => {
                        let read = read_literal(text, field.data_type(), zone)?;
                        // A date's or a timestamp's value, or an interval's text
                        // to cast.
                        let read_as_is = read.data_type() == *field.data_type();
                        let literal = Expr::Literal(read, meta);
                        if read_as_is {
                            Ok(Transformed::yes(literal))
                        } else {
                            let cast = Cast::new_from_field(Box::new(literal), field);
                            Ok(Transformed::yes(Expr::Cast(cast)))
                        }
                    }
                    expr if expr.get_type(inputs).is_ok_and(|t| t == DataType::Utf8) => {
                        let read = TextInput::udf(field.data_type(), zone);
                        let read = ScalarFunction::new_udf(read, vec![expr]);
                        let cast =
                            Cast::new_from_field(Box::new(Expr::ScalarFunction(read)), field);
                        Ok(Transformed::yes(Expr::Cast(cast)))
                    }
                    expr => Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                        Box::new(expr),
                        field,
                    )))),
                }
            }
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
            // A text compared with a uuid is read as the uuid it names, as
            // PostgreSQL reads the literal (`id = 'A0EEBC99...'` or without
            // hyphens): the texts then compare as the uuids do.
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(
                    op,
                    Operator::Eq
                        | Operator::NotEq
                        | Operator::Lt
                        | Operator::LtEq
                        | Operator::Gt
                        | Operator::GtEq
                        | Operator::IsDistinctFrom
                        | Operator::IsNotDistinctFrom
                ) && is_uuid(&left, inputs) != is_uuid(&right, inputs) =>
            {
                let (left, right) = (read_as_uuid(*left, inputs), read_as_uuid(*right, inputs));
                Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(left),
                    op,
                    Box::new(right),
                ))))
            }
            Expr::InList(InList {
                expr,
                list,
                negated,
            }) if is_uuid(&expr, inputs) => {
                let list = list.into_iter().map(|e| read_as_uuid(e, inputs)).collect();
                Ok(Transformed::yes(Expr::InList(InList::new(
                    expr, list, negated,
                ))))
            }
            e => Ok(Transformed::no(e)),
        }
    })
}

/// Whether `expr`'s values are uuids.
fn is_uuid(expr: &Expr, inputs: &DFSchema) -> bool {
    expr.to_field(inputs)
        .is_ok_and(|(_, field)| declared_type(&field) == Some(SqlType::Uuid))
}

/// A text that is not a uuid read as one (see
/// [`super::types::uuid_input`]). A parameter is left as it is: its value
/// is read as a uuid when the client says it is one, and a read by key
/// reads it as the key's uuid.
fn read_as_uuid(expr: Expr, inputs: &DFSchema) -> Expr {
    let text = !matches!(expr, Expr::Placeholder(_))
        && !is_uuid(&expr, inputs)
        && expr.get_type(inputs).is_ok_and(|t| is_text(&t));
    if !text {
        return expr;
    }
    let read = super::functions::uuid_input_function();
    Expr::ScalarFunction(ScalarFunction::new_udf(read, vec![expr]))
}

/// The instant a text (read in the session's zone) or a date (its
/// midnight there) is.
fn instant_in_zone(expr: Expr, inputs: &DFSchema, zone: &SessionZone) -> Result<Expr> {
    let instant = DataType::Timestamp(TimeUnit::Microsecond, Some(super::types::UTC.into()));
    match expr {
        Expr::Literal(ScalarValue::Utf8(Some(text)), meta) => {
            Ok(Expr::Literal(read_literal(text, &instant, zone)?, meta))
        }
        expr if expr.get_type(inputs)? == DataType::Utf8 => Ok(Expr::ScalarFunction(
            ScalarFunction::new_udf(TextInput::udf(&instant, zone), vec![expr]),
        )),
        expr => super::wall_times::in_zone(expr, inputs, zone),
    }
}

/// A literal's text read as [`text_inputs`] reads it for `target`.
fn read_literal(text: String, target: &DataType, zone: &SessionZone) -> Result<ScalarValue> {
    let texts: ArrayRef = Arc::new(StringArray::from(vec![text]));
    let read = text_inputs(&texts, target, zone)?;
    ScalarValue::try_from_array(&read, 0)
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

/// The text of a timestamp or an array, as PostgreSQL prints it: instants
/// (alone or in the array) in the session's zone (see
/// [`super::arrays::list_texts`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ZonedText {
    zone: SessionZone,
}

impl ZonedText {
    fn udf(zone: &SessionZone) -> Arc<ScalarUDF> {
        let zone = zone.clone();
        Arc::new(ZonedText { zone }.into())
    }
}

impl ScalarUDFImpl for ZonedText {
    fn name(&self) -> &str {
        "__tablegate_zoned_text"
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
        let values = value.to_array(args.number_rows)?;
        let texts = match values.data_type() {
            DataType::List(_) => super::arrays::list_texts(&values, &self.zone)?,
            _ => timestamp_texts(&values, &self.zone)?,
        };
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
