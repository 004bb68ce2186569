//! PostgreSQL's functions that DataFusion lacks: the session and catalog
//! functions that clients call before their own queries (`version()`,
//! `current_setting`, `set_config`, `current_database()`, `format_type`,
//! `pg_get_indexdef`, ...), evaluated row by row on scalar values, and a
//! few over user data (`age`, `format`, `width_bucket`, the regular
//! expression functions, `AT TIME ZONE`, `pg_typeof`).

use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{new_null_array, Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, Float64Type, IntervalUnit, TimeUnit,
};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{exec_err, Result as DfResult, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::async_udf::{AsyncScalarUDF, AsyncScalarUDFImpl};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};
use datafusion::prelude::SessionContext;

use super::arithmetic::{justify, Justify};
use super::ddl::type_of_field;
use super::pg_catalog::{
    catalog_oid, constraints_of, format_type, indexes_of, quote_ident, sequence_oid, table_oid,
    type_oid, DATABASE, NAMESPACES, OWNER,
};
use super::provider::ReadView;
use super::settings::{Refused, Settings, SERVER_VERSION};
use super::types::{declared_type, uuid_input, UUID_INPUT};
use crate::catalog::Catalog;
use crate::catalog::SqlType;

type Body = Arc<dyn Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync>;

/// A function evaluated on each row's argument values.
struct RowFunction {
    name: &'static str,
    signature: Signature,
    returns: DataType,
    /// The PostgreSQL type of the value, when it is text of a type `Utf8`
    /// does not name.
    text_type: Option<TextType>,
    body: Body,
}

impl std::fmt::Debug for RowFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}()", self.name)
    }
}

impl PartialEq for RowFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.body, &other.body)
    }
}

impl Eq for RowFunction {}

impl Hash for RowFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for RowFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(self.returns.clone())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let ty = match self.text_type {
            None => return Ok(Arc::new(Field::new(self.name, self.returns.clone(), true))),
            Some(TextType::Of(ty)) => ty,
            Some(TextType::JsonOfFirstArgument) => {
                match args.arg_fields.first().and_then(|f| declared_type(f)) {
                    Some(SqlType::Jsonb) => SqlType::Jsonb,
                    _ => SqlType::Json,
                }
            }
        };
        Ok(super::types::text_field(self.name, ty))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let volatile = self.signature.volatility == Volatility::Volatile;
        each_row(&args, &self.returns, volatile, |values| (self.body)(values))
    }
}

/// The PostgreSQL type of a [`RowFunction`]'s text value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextType {
    Of(SqlType),
    /// `jsonb` when the first argument is, else `json` (`->` and the like).
    JsonOfFirstArgument,
}

/// `body`'s value for each row's argument values, or once for all rows
/// when every argument is a constant (but for a volatile function, such
/// as nextval, which gives each row a value of its own).
pub(super) fn each_row(
    args: &ScalarFunctionArgs,
    returns: &DataType,
    volatile: bool,
    body: impl Fn(&[ScalarValue]) -> DfResult<ScalarValue>,
) -> DfResult<ColumnarValue> {
    let constant = |a: &ColumnarValue| match a {
        ColumnarValue::Scalar(s) => Some(s.clone()),
        ColumnarValue::Array(_) => None,
    };
    if !volatile {
        if let Some(values) = args.args.iter().map(constant).collect::<Option<Vec<_>>>() {
            return Ok(ColumnarValue::Scalar(body(&values)?));
        }
    }
    let mut out = Vec::with_capacity(args.number_rows);
    for row in 0..args.number_rows {
        let values = args
            .args
            .iter()
            .map(|a| match a {
                ColumnarValue::Scalar(s) => Ok(s.clone()),
                ColumnarValue::Array(a) => ScalarValue::try_from_array(a, row),
            })
            .collect::<DfResult<Vec<_>>>()?;
        out.push(body(&values)?);
    }
    if out.is_empty() {
        return Ok(ColumnarValue::Array(
            datafusion::arrow::array::new_empty_array(returns),
        ));
    }
    Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
}

/// What `x AT TIME ZONE zone` becomes.
pub const AT_TIME_ZONE: &str = "__tablegate_at_time_zone";

/// The function `x AT TIME ZONE zone` becomes.
pub(super) fn at_time_zone() -> Arc<ScalarUDF> {
    static UDF: std::sync::OnceLock<Arc<ScalarUDF>> = std::sync::OnceLock::new();
    UDF.get_or_init(|| Arc::new(ScalarUDF::new_from_impl(AtTimeZone::default())))
        .clone()
}

/// `x AT TIME ZONE zone` as PostgreSQL computes it: a `timestamptz` (or a
/// text or a date, which the casts' analyzer rule reads as the instant
/// they are in the session's zone) is the wall time it shows in the zone, as
/// a `timestamp`; a `timestamp` is that wall time in the zone, as a
/// `timestamptz`. (DataFusion's
/// kept the instant and only relabelled it: `2024-01-15 10:00:00+00 AT
/// TIME ZONE 'America/New_York'` was `10:00:00+00`, PostgreSQL's
/// `05:00:00`.)
#[derive(Debug, PartialEq, Eq, Hash)]
struct AtTimeZone {
    signature: Signature,
}

impl Default for AtTimeZone {
    fn default() -> Self {
        AtTimeZone {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for AtTimeZone {
    fn name(&self) -> &str {
        AT_TIME_ZONE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, types: &[DataType]) -> DfResult<DataType> {
        use datafusion::arrow::datatypes::TimeUnit::Microsecond;
        Ok(match types.first() {
            Some(DataType::Timestamp(_, Some(_)) | DataType::Utf8 | DataType::Date32) => {
                DataType::Timestamp(Microsecond, None)
            }
            _ => DataType::Timestamp(Microsecond, Some(super::types::UTC.into())),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use chrono::{Offset, TimeZone};
        use datafusion::arrow::array::AsArray;
        use datafusion::arrow::compute::cast;
        use datafusion::arrow::datatypes::{TimeUnit::Microsecond, TimestampMicrosecondType};
        let [value, zone] = args.args.as_slice() else {
            return exec_err!("AT TIME ZONE takes a value and a zone");
        };
        let ColumnarValue::Scalar(zone) = zone else {
            return exec_err!("AT TIME ZONE takes a constant zone");
        };
        let Some(zone) = text(zone) else {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from(
                args.return_field.data_type(),
            )?));
        };
        let scalar = matches!(value, ColumnarValue::Scalar(_));
        let values = value.to_array(args.number_rows)?;
        let tz: datafusion::arrow::array::timezone::Tz = zone.parse()?;
        let micros = cast(&values, &DataType::Timestamp(Microsecond, None))?;
        let micros = micros.as_primitive::<TimestampMicrosecondType>();
        let shifted = match values.data_type() {
            DataType::Timestamp(_, Some(_)) => {
                let local = micros.unary_opt::<_, TimestampMicrosecondType>(|m| {
                    let utc = chrono::DateTime::from_timestamp_micros(m)?.naive_utc();
                    let offset = tz.offset_from_utc_datetime(&utc).fix().local_minus_utc();
                    m.checked_add(i64::from(offset) * 1_000_000)
                });
                std::sync::Arc::new(local) as datafusion::arrow::array::ArrayRef
            }
            _ => {
                let instants = micros.unary_opt::<_, TimestampMicrosecondType>(|m| {
                    super::time_zone::instant_of(&tz, m)
                });
                let instants = instants.with_timezone(super::types::UTC);
                std::sync::Arc::new(instants) as datafusion::arrow::array::ArrayRef
            }
        };
        Ok(match scalar {
            true => ColumnarValue::Scalar(ScalarValue::try_from_array(&shifted, 0)?),
            false => ColumnarValue::Array(shifted),
        })
    }
}

/// `pg_typeof(value)`: the name of the value's type, as PostgreSQL prints
/// a `regtype` (`integer`, `numeric`, `character varying`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeOf {
    signature: Signature,
}

impl Default for PgTypeOf {
    fn default() -> Self {
        PgTypeOf {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PgTypeOf {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [field] = args.arg_fields.as_slice() else {
            return exec_err!("pg_typeof takes one value");
        };
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(type_name(
            field,
        )))))
    }
}

/// `gen_random_uuid()`: DataFusion's `uuid`, a version 4 uuid for each
/// row, typed `uuid` (DataFusion's is text).
#[derive(Debug, PartialEq, Eq, Hash)]
struct GenRandomUuid(ScalarUDF);

impl ScalarUDFImpl for GenRandomUuid {
    fn name(&self) -> &str {
        "gen_random_uuid"
    }

    fn signature(&self) -> &Signature {
        self.0.signature()
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, _: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(super::types::text_field(self.name(), SqlType::Uuid))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        self.0.invoke_with_args(args)
    }
}

/// `pg_sleep(seconds)`: waits that long for each row, without holding a
/// thread, and returns nothing (NULL; PostgreSQL's `void` prints the same).
/// A statement timeout or a cancel request ends the wait with the
/// statement.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgSleep {
    signature: Signature,
}

impl Default for PgSleep {
    fn default() -> Self {
        PgSleep {
            signature: Signature::uniform(1, vec![DataType::Float64], Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for PgSleep {
    fn name(&self) -> &str {
        "pg_sleep"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Null)
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        exec_err!("pg_sleep runs only as an asynchronous function")
    }
}

#[async_trait::async_trait]
impl AsyncScalarUDFImpl for PgSleep {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [seconds] = args.args.as_slice() else {
            return exec_err!("pg_sleep takes one value");
        };
        let seconds = seconds.to_array(args.number_rows)?;
        let seconds = seconds.as_primitive::<Float64Type>();
        for s in seconds.iter().flatten().filter(|s| *s > 0.0) {
            let Ok(wait) = std::time::Duration::try_from_secs_f64(s) else {
                return exec_err!("pg_sleep: {s} seconds is out of range");
            };
            tokio::time::sleep(wait).await;
        }
        Ok(ColumnarValue::Array(new_null_array(
            &DataType::Null,
            args.number_rows,
        )))
    }
}

/// The name of a value's type without its modifiers (`numeric`, not
/// `numeric(10,2)`).
fn type_name(field: &Field) -> String {
    let name = match field.data_type() {
        DataType::Null => "unknown".to_owned(),
        DataType::Interval(_) => "interval".to_owned(),
        DataType::Time32(_) | DataType::Time64(_) => "time without time zone".to_owned(),
        DataType::Struct(_) => "record".to_owned(),
        DataType::List(item) | DataType::LargeList(item) => {
            return format!("{}[]", type_name(item))
        }
        _ => type_of_field(field).map_or_else(|_| field.data_type().to_string(), |ty| ty.pg_name()),
    };
    match name.split_once('(') {
        Some((base, _)) => base.to_owned(),
        None => name,
    }
}

/// `generate_series` and `range` in FROM, given timestamps of any unit:
/// DataFusion's take nanoseconds only, where SQL's `timestamp` is
/// microseconds here (see [`super::types::PostgresTypes`]). A timestamp
/// nanoseconds cannot hold (before 1677, after 2262) is an error.
#[derive(Debug)]
struct SeriesOfAnyUnit(Arc<dyn TableFunctionImpl>);

impl TableFunctionImpl for SeriesOfAnyUnit {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let exprs = args
            .exprs()
            .iter()
            .map(|e| match e {
                Expr::Literal(value, meta) => match value.data_type() {
                    DataType::Timestamp(unit, zone) if unit != TimeUnit::Nanosecond => {
                        let nanos =
                            value.cast_to(&DataType::Timestamp(TimeUnit::Nanosecond, zone))?;
                        Ok(Expr::Literal(nanos, meta.clone()))
                    }
                    _ => Ok(e.clone()),
                },
                e => Ok(e.clone()),
            })
            .collect::<DfResult<Vec<_>>>()?;
        self.0
            .call_with_args(TableFunctionArgs::new(&exprs, args.session()))
    }
}

/// Registers a [`RowFunction`], and returns it for planners that call it.
pub(super) fn register(
    ctx: &SessionContext,
    name: &'static str,
    arities: &[usize],
    returns: DataType,
    volatility: Volatility,
    body: impl Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync + 'static,
) -> Arc<ScalarUDF> {
    register_row_function(
        ctx,
        name,
        arities,
        returns,
        volatility,
        None,
        Arc::new(body),
    )
}

/// Registers an immutable [`RowFunction`] whose value is text of a type
/// `Utf8` does not name (JSON's).
fn register_typed_text(
    ctx: &SessionContext,
    name: &'static str,
    arities: &[usize],
    text_type: TextType,
    body: impl Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync + 'static,
) -> Arc<ScalarUDF> {
    register_row_function(
        ctx,
        name,
        arities,
        DataType::Utf8,
        Volatility::Immutable,
        Some(text_type),
        Arc::new(body),
    )
}

fn register_row_function(
    ctx: &SessionContext,
    name: &'static str,
    arities: &[usize],
    returns: DataType,
    volatility: Volatility,
    text_type: Option<TextType>,
    body: Body,
) -> Arc<ScalarUDF> {
    let function = row_function(name, arities, returns, volatility, text_type, body);
    ctx.register_udf(function.as_ref().clone());
    function
}

/// A [`RowFunction`], for a planner to call without a session's context.
fn row_function(
    name: &'static str,
    arities: &[usize],
    returns: DataType,
    volatility: Volatility,
    text_type: Option<TextType>,
    body: Body,
) -> Arc<ScalarUDF> {
    let signatures = arities
        .iter()
        .map(|&n| {
            if n == 0 {
                TypeSignature::Nullary
            } else {
                TypeSignature::Any(n)
            }
        })
        .collect();
    Arc::new(ScalarUDF::new_from_impl(RowFunction {
        name,
        signature: Signature::one_of(signatures, volatility),
        returns,
        text_type,
        body,
    }))
}

/// `uuid_input(text)`: the text as the uuid it names (see
/// [`super::types::uuid_input`]), typed `uuid`.
pub(super) fn uuid_input_function() -> Arc<ScalarUDF> {
    static FUNCTION: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    FUNCTION
        .get_or_init(|| {
            let uuid = Some(TextType::Of(SqlType::Uuid));
            let body: Body = Arc::new(|a: &[ScalarValue]| Ok(uuid_input(&a[0])?));
            row_function(
                UUID_INPUT,
                &[1],
                DataType::Utf8,
                Volatility::Immutable,
                uuid,
                body,
            )
        })
        .clone()
}

/// A value's text: a string's own, another value's printed; `None` for NULL.
pub(super) fn text(value: &ScalarValue) -> Option<String> {
    match value {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.clone(),
        v if v.is_null() => None,
        v => Some(v.to_string()),
    }
}

/// A value as an integer, when it is one or converts to one.
pub(super) fn int(value: &ScalarValue) -> Option<i64> {
    match value.cast_to(&DataType::Int64).ok()? {
        ScalarValue::Int64(v) => v,
        _ => None,
    }
}

fn utf8(value: Option<String>) -> ScalarValue {
    ScalarValue::Utf8(value)
}

/// `age(later, earlier)` as PostgreSQL computes it: the difference of the
/// two timestamps field by field (years, months, days, then time), each
/// field below zero borrowing from the one above it, a day borrowing the
/// length of the earlier timestamp's month (`age('2024-03-01',
/// '2024-01-15')` is `1 mon 17 days`). NULL if either is.
fn age(
    later: &ScalarValue,
    earlier: &ScalarValue,
) -> DfResult<Option<datafusion::arrow::datatypes::IntervalMonthDayNano>> {
    use chrono::{Datelike, Timelike};
    let micros = DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None);
    let at = |value: &ScalarValue| -> DfResult<Option<chrono::NaiveDateTime>> {
        Ok(match value.cast_to(&micros)? {
            ScalarValue::TimestampMicrosecond(Some(m), _) => {
                chrono::DateTime::from_timestamp_micros(m).map(|t| t.naive_utc())
            }
            _ => None,
        })
    };
    let (Some(t1), Some(t2)) = (at(later)?, at(earlier)?) else {
        return Ok(None);
    };
    let fields = |t: chrono::NaiveDateTime| {
        [
            t.year() as i64,
            t.month() as i64,
            t.day() as i64,
            t.hour() as i64,
            t.minute() as i64,
            t.second() as i64,
            (t.nanosecond() / 1_000) as i64,
        ]
    };
    let (f1, f2) = (fields(t1), fields(t2));
    // PostgreSQL works on the positive difference and gives the sign back.
    let sign = if t1 < t2 { -1 } else { 1 };
    let [mut year, mut month, mut day, mut hour, mut minute, mut second, mut micro] =
        std::array::from_fn(|i| sign * (f1[i] - f2[i]));
    // A field below zero borrows units of it from the field above.
    let borrow = |field: &mut i64, above: &mut i64, units: i64| {
        while *field < 0 {
            *field += units;
            *above -= 1;
        }
    };
    let month_days = {
        let earlier = if sign < 0 { t1 } else { t2 };
        let first = earlier.date().with_day(1).expect("a month has a first day");
        (first + chrono::Months::new(1) - first).num_days()
    };
    borrow(&mut micro, &mut second, 1_000_000);
    borrow(&mut second, &mut minute, 60);
    borrow(&mut minute, &mut hour, 60);
    borrow(&mut hour, &mut day, 24);
    borrow(&mut day, &mut month, month_days);
    borrow(&mut month, &mut year, 12);
    let nanos = (((hour * 60 + minute) * 60 + second) * 1_000_000 + micro) * 1_000;
    Ok(Some(
        datafusion::arrow::datatypes::IntervalMonthDayNano::new(
            (sign * (year * 12 + month)) as i32,
            (sign * day) as i32,
            sign * nanos,
        ),
    ))
}

/// `width_bucket(x, low, high, count)`: which of `count` equal buckets
/// from `low` to `high` holds `x` (0 below them, `count + 1` above), as
/// PostgreSQL numbers them; `low` above `high` counts downwards.
fn width_bucket(args: &[ScalarValue]) -> DfResult<ScalarValue> {
    let number = |v: &ScalarValue| match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(n)) => Ok(n),
        _ => exec_err!("width_bucket takes numbers"),
    };
    let (Some(x), Some(low), Some(high), Some(count)) = (
        number(&args[0])?,
        number(&args[1])?,
        number(&args[2])?,
        number(&args[3])?,
    ) else {
        return Ok(ScalarValue::Int32(None));
    };
    if count <= 0.0 || count.fract() != 0.0 || count > f64::from(i32::MAX) - 1.0 {
        return Err(sql_error("2201G", "count must be greater than zero"));
    }
    if low == high || !x.is_finite() || !low.is_finite() || !high.is_finite() {
        return Err(sql_error("2201G", "lower bound cannot equal upper bound"));
    }
    let bucket = if low < high {
        match x {
            x if x < low => 0.0,
            x if x >= high => count + 1.0,
            x => ((x - low) / (high - low) * count).floor() + 1.0,
        }
    } else {
        match x {
            x if x > low => 0.0,
            x if x <= high => count + 1.0,
            x => ((low - x) / (low - high) * count).floor() + 1.0,
        }
    };
    Ok(ScalarValue::Int32(Some(bucket as i32)))
}

/// The text, the compiled pattern and the flags of a regular expression
/// function's arguments (`text, pattern [, flags]`; flag `i` ignores
/// case); `None` when the text or the pattern is NULL.
fn regex_arguments(args: &[ScalarValue]) -> DfResult<Option<(String, regex::Regex, String)>> {
    let mut values = args.iter().map(text);
    let (Some(Some(value)), Some(Some(pattern))) = (values.next(), values.next()) else {
        return Ok(None);
    };
    let flags = values.next().flatten().unwrap_or_default();
    let regex = regex::RegexBuilder::new(&pattern)
        .case_insensitive(flags.contains('i'))
        .build()
        .map_err(|e| sql_error("2201B", format!("invalid regular expression: {e}")))?;
    Ok(Some((value, regex, flags)))
}

/// Texts as a list value (`text[]`).
pub(super) fn text_list(texts: impl IntoIterator<Item = Option<String>>) -> ScalarValue {
    let texts: Vec<ScalarValue> = texts.into_iter().map(ScalarValue::Utf8).collect();
    ScalarValue::List(ScalarValue::new_list_nullable(&texts, &DataType::Utf8))
}

/// `regexp_split_to_array(text, pattern [, flags])`: the pieces of the
/// text between the pattern's matches.
fn regexp_split_to_array(args: &[ScalarValue]) -> DfResult<ScalarValue> {
    let Some((value, regex, _)) = regex_arguments(args)? else {
        return ScalarValue::try_from(DataType::new_list(DataType::Utf8, true));
    };
    Ok(text_list(
        regex.split(&value).map(|piece| Some(piece.to_owned())),
    ))
}

/// `regexp_substr(text, pattern)`: the text of the pattern's first match
/// (NULL without one).
fn regexp_substr(args: &[ScalarValue]) -> DfResult<ScalarValue> {
    let Some((value, regex, _)) = regex_arguments(args)? else {
        return Ok(utf8(None));
    };
    Ok(utf8(regex.find(&value).map(|m| m.as_str().to_owned())))
}

/// What `regexp_matches(text, pattern [, flags])` becomes inside
/// `unnest(...)`: its set as a list.
pub const REGEXP_MATCHES_LIST: &str = "__tablegate_regexp_matches";

/// The matches of `regexp_matches`, each the array of its groups (or of
/// the whole match when the pattern has none): the first only, or every
/// one with flag `g`.
fn regexp_matches_list(args: &[ScalarValue]) -> DfResult<ScalarValue> {
    let list = DataType::new_list(DataType::Utf8, true);
    let Some((value, regex, flags)) = regex_arguments(args)? else {
        return ScalarValue::try_from(DataType::new_list(list, true));
    };
    let matches: Vec<ScalarValue> = regex
        .captures_iter(&value)
        .take(if flags.contains('g') { usize::MAX } else { 1 })
        .map(|groups| match groups.len() {
            1 => text_list([Some(groups[0].to_owned())]),
            _ => text_list(
                groups
                    .iter()
                    .skip(1)
                    .map(|group| group.map(|g| g.as_str().to_owned())),
            ),
        })
        .collect();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        &matches, &list,
    )))
}

/// JSON's operators' functions, and PostgreSQL's functions over JSON text
/// (see [`super::json`]).
fn register_json_functions(ctx: &SessionContext) {
    use super::json;
    use DataType::{Boolean, Int32, Utf8};
    use Volatility::Immutable;
    for build in json::JsonBuild::all() {
        ctx.register_udf(ScalarUDF::new_from_impl(build));
    }
    const JSON: TextType = TextType::Of(SqlType::Json);
    const JSONB: TextType = TextType::Of(SqlType::Jsonb);
    const OF_FIRST_ARGUMENT: TextType = TextType::JsonOfFirstArgument;
    register_typed_text(ctx, json::TO_JSON, &[1], JSON, |a| json::input(a, false));
    register_typed_text(ctx, json::TO_JSONB, &[1], JSONB, |a| json::input(a, true));
    register_typed_text(ctx, json::ARRAY_OF, &[1], JSON, |a| {
        Ok(json::array_of(&a[0]))
    });
    register_typed_text(ctx, json::OBJECT_OF, &[1], JSON, |a| json::object_of(&a[0]));
    register_typed_text(ctx, json::GET, &[2], OF_FIRST_ARGUMENT, |a| {
        json::get(a, false)
    });
    register(ctx, json::GET_TEXT, &[2], Utf8, Immutable, |a| {
        json::get(a, true)
    });
    register_typed_text(ctx, json::GET_PATH, &[2], OF_FIRST_ARGUMENT, |a| {
        json::get_path(a, false)
    });
    register(ctx, json::GET_PATH_TEXT, &[2], Utf8, Immutable, |a| {
        json::get_path(a, true)
    });
    let list = DataType::new_list(Utf8, true);
    for (name, of) in [
        (json::ELEMENTS, json::Members::Elements),
        (json::ELEMENTS_TEXT, json::Members::ElementsText),
        (json::KEYS, json::Members::Keys),
        (json::VALUES, json::Members::Values),
        (json::VALUES_TEXT, json::Members::ValuesText),
    ] {
        register(ctx, name, &[1], list.clone(), Immutable, move |a| {
            json::members(a, of)
        });
    }
    let contains = register(
        ctx,
        json::CONTAINS,
        &[2],
        Boolean,
        Immutable,
        json::contains,
    );
    let has_any_key = register(ctx, json::HAS_ANY_KEY, &[2], Boolean, Immutable, |a| {
        json::has_keys(a, false)
    });
    let has_all_keys = register(ctx, json::HAS_ALL_KEYS, &[2], Boolean, Immutable, |a| {
        json::has_keys(a, true)
    });
    register_typed_text(ctx, "jsonb_strip_nulls", &[1], JSONB, json::strip_nulls);
    register_typed_text(ctx, "jsonb_set", &[3, 4], JSONB, json::set);
    register(ctx, "jsonb_pretty", &[1], Utf8, Immutable, json::pretty);
    let concat = register_typed_text(ctx, json::CONCAT, &[2], JSONB, json::concat);
    let delete = register_typed_text(ctx, json::DELETE, &[2], JSONB, json::delete);
    let delete_path = register_typed_text(ctx, json::DELETE_PATH, &[2], JSONB, json::delete_path);
    let operators = json::JsonOperators {
        contains,
        has_any_key,
        has_all_keys,
        concat,
        delete,
        delete_path,
    };
    let _ = ctx
        .state_ref()
        .write()
        .register_expr_planner(Arc::new(operators));
    let steps = &[2, 3, 4, 5, 6, 7, 8];
    for [extract, extract_text, length, type_of] in [
        [
            "json_extract_path",
            "json_extract_path_text",
            "json_array_length",
            "json_typeof",
        ],
        [
            "jsonb_extract_path",
            "jsonb_extract_path_text",
            "jsonb_array_length",
            "jsonb_typeof",
        ],
    ] {
        register(ctx, extract, steps, Utf8, Immutable, |a| {
            json::extract_path(a, false)
        });
        register(ctx, extract_text, steps, Utf8, Immutable, |a| {
            json::extract_path(a, true)
        });
        register(ctx, length, &[1], Int32, Immutable, json::array_length);
        register(ctx, type_of, &[1], Utf8, Immutable, json::type_of);
    }
}

/// A text as an SQL string literal (`'it''s'`; with backslashes, `E'...'`).
fn quote_literal(text: &str) -> String {
    let quoted = text.replace('\'', "''");
    match quoted.contains('\\') {
        true => format!("E'{}'", quoted.replace('\\', "\\\\")),
        false => format!("'{quoted}'"),
    }
}

/// PostgreSQL's `format(template, args...)`: `%s` a value's text (nothing
/// for NULL), `%I` an identifier, quoted as needed, `%L` a literal (`NULL`
/// for NULL), `%%` a percent sign, each optionally `%n$s` for the n-th
/// argument. NULL for a NULL template.
fn format_text(args: &[ScalarValue]) -> DfResult<Option<String>> {
    let Some(template) = text(&args[0]) else {
        return Ok(None);
    };
    let invalid = |message: String| sql_error("22023", message);
    let mut out = String::new();
    let mut next = 1;
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        // `n$`: the argument's position.
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let at = match digits.is_empty() {
            true => next,
            false if chars.next() == Some('$') => digits.parse().unwrap_or(0),
            false => return Err(invalid("unterminated format() type specifier".into())),
        };
        let Some(value) = args.get(at).filter(|_| at > 0) else {
            return Err(invalid("too few arguments for format()".into()));
        };
        next = at + 1;
        let value = text(value);
        match chars.next() {
            Some('s') => out.push_str(value.as_deref().unwrap_or("")),
            Some('I') => match value {
                Some(name) => out.push_str(&quote_ident(&name)),
                None => {
                    return Err(invalid(
                        "null values cannot be formatted as an SQL identifier".into(),
                    ))
                }
            },
            Some('L') => match value {
                Some(value) => out.push_str(&quote_literal(&value)),
                None => out.push_str("NULL"),
            },
            Some(other) => {
                return Err(invalid(format!(
                    "unrecognized format() type specifier \"{other}\""
                )))
            }
            None => return Err(invalid("unterminated format() type specifier".into())),
        }
    }
    Ok(Some(out))
}

/// What `version()` answers; clients parse the leading "PostgreSQL 15.0".
pub fn version_string() -> String {
    format!(
        "PostgreSQL {SERVER_VERSION} (tablegate {}) on {}-{}, 64-bit",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::env::consts::OS
    )
}

/// Registers the functions on a session's context.
pub fn register_all(
    ctx: &SessionContext,
    settings: Settings,
    catalog: Arc<Catalog>,
    view: Arc<ReadView>,
    user: &str,
    backend_pid: i32,
) {
    use DataType::{Boolean, Int32, Utf8};
    use Volatility::{Immutable, Stable, Volatile};

    ctx.register_udaf(SingleValue::udaf());
    for name in ["generate_series", "range"] {
        let series = ctx.state().table_functions().get(name).cloned();
        if let Some(series) = series {
            ctx.register_udtf(name, Arc::new(SeriesOfAnyUnit(series.function().clone())));
        }
    }
    super::result_limits::register(ctx);
    // PostgreSQL's `variance` is the sample variance, DataFusion's `var`.
    let variance = datafusion::functions_aggregate::variance::var_samp_udaf();
    ctx.register_udaf(variance.as_ref().clone().with_aliases(["variance"]));
    ctx.register_udf(ScalarUDF::new_from_impl(super::templates::ToChar::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(PgTypeOf::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(
        super::precision::RoundFraction::default(),
    ));
    ctx.register_udf(AsyncScalarUDF::new(Arc::new(PgSleep::default())).into_scalar_udf());
    for row in super::records::RowValue::both() {
        ctx.register_udf(ScalarUDF::new_from_impl(row));
    }
    ctx.register_udf(at_time_zone().as_ref().clone());
    ctx.register_udf(ScalarUDF::new_from_impl(
        super::ordered_sets::MostFrequent::default(),
    ));
    let uuid = datafusion::functions::string::uuid();
    ctx.register_udf(ScalarUDF::new_from_impl(GenRandomUuid(
        uuid.as_ref().clone(),
    )));
    ctx.register_udf(uuid_input_function().as_ref().clone());
    // PostgreSQL's `every` is `bool_and`.
    let bool_and = datafusion::functions_aggregate::bool_and_or::bool_and_udaf();
    ctx.register_udaf(bool_and.as_ref().clone().with_aliases(["every"]));
    // PostgreSQL's `sign` is DataFusion's `signum`.
    let signum = datafusion::functions::math::signum();
    ctx.register_udf(signum.as_ref().clone().with_aliases(["sign"]));
    register(ctx, "width_bucket", &[4], Int32, Immutable, width_bucket);
    register(
        ctx,
        "regexp_split_to_array",
        &[2, 3],
        DataType::new_list(Utf8, true),
        Immutable,
        regexp_split_to_array,
    );
    register(ctx, "regexp_substr", &[2], Utf8, Immutable, regexp_substr);
    register(
        ctx,
        REGEXP_MATCHES_LIST,
        &[2, 3],
        DataType::new_list(DataType::new_list(Utf8, true), true),
        Immutable,
        regexp_matches_list,
    );
    register(
        ctx,
        "age",
        &[2],
        DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano),
        Immutable,
        |args| Ok(ScalarValue::IntervalMonthDayNano(age(&args[0], &args[1])?)),
    );
    register(ctx, "version", &[0], Utf8, Immutable, |_| {
        Ok(utf8(Some(version_string())))
    });
    register(ctx, "current_database", &[0], Utf8, Immutable, |_| {
        Ok(utf8(Some(DATABASE.into())))
    });
    register(ctx, "current_schema", &[0], Utf8, Stable, |_| {
        Ok(utf8(Some("public".into())))
    });
    for name in ["current_user", "session_user"] {
        let user = user.to_owned();
        register(ctx, name, &[0], Utf8, Stable, move |_| {
            Ok(utf8(Some(user.clone())))
        });
    }
    register(ctx, "pg_backend_pid", &[0], Int32, Stable, move |_| {
        Ok(ScalarValue::Int32(Some(backend_pid)))
    });
    register(ctx, "pg_is_in_recovery", &[0], Boolean, Stable, |_| {
        Ok(ScalarValue::Boolean(Some(false)))
    });
    register(
        ctx,
        "current_schemas",
        &[1],
        DataType::new_list(Utf8, true),
        Stable,
        |args| {
            let mut schemas = vec![];
            if args.first().and_then(|a| a.cast_to(&Boolean).ok())
                == Some(ScalarValue::Boolean(Some(true)))
            {
                schemas.push(ScalarValue::Utf8(Some("pg_catalog".into())));
            }
            schemas.push(ScalarValue::Utf8(Some("public".into())));
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                &schemas, &Utf8,
            )))
        },
    );

    let s = settings.clone();
    register(ctx, "current_setting", &[1, 2], Utf8, Stable, move |args| {
        let name = text(&args[0]).unwrap_or_default();
        let missing_ok = args.get(1).and_then(|a| a.cast_to(&Boolean).ok())
            == Some(ScalarValue::Boolean(Some(true)));
        match s.get(&name) {
            Some(v) => Ok(utf8(Some(v))),
            None if missing_ok => Ok(utf8(None)),
            None => exec_err!("unrecognized configuration parameter \"{name}\""),
        }
    });
    let search_path = settings.clone();
    register(ctx, "set_config", &[3], Utf8, Volatile, move |args| {
        let name = text(&args[0]).unwrap_or_default();
        let value = text(&args[1]).unwrap_or_default();
        match settings.set(&name, &value) {
            // The value as it is shown (`Asia/Tokyo` for `asia/tokyo`).
            Ok(()) => Ok(utf8(settings.get(&name).or(Some(value)))),
            Err(Refused::ReadOnly(_)) => exec_err!("parameter \"{name}\" cannot be changed"),
            Err(Refused::Invalid(message)) => exec_err!("{message}"),
            Err(Refused::Unsupported(message)) => {
                Err(super::SqlError::FeatureNotSupported(message).into())
            }
        }
    });

    register(ctx, "pg_get_userbyid", &[1], Utf8, Stable, |_| {
        Ok(utf8(Some(OWNER.into())))
    });
    register(ctx, "pg_encoding_to_char", &[1], Utf8, Immutable, |_| {
        Ok(utf8(Some("UTF8".into())))
    });
    let types = catalog.clone();
    register(ctx, "format_type", &[2], Utf8, Stable, move |args| {
        let Some(oid) = int(&args[0]) else {
            return Ok(utf8(None));
        };
        // Types of `public` are named with their schema when the search
        // path leaves it out (pg_dump's, which is empty).
        let public_seen = search_path.get("search_path").is_some_and(|path| {
            path.split(',')
                .any(|schema| schema.trim().trim_matches('"') == "public")
        });
        Ok(utf8(
            format_type(oid, int(&args[1]))
                .or_else(|| super::pg_catalog::enum_type_name(&types.types, oid, !public_seen))
                .or(Some("???".into())),
        ))
    });
    register(
        ctx,
        super::enums::ENUM_TEXT,
        &[1],
        Utf8,
        Immutable,
        |args| Ok(utf8(text(&args[0]))),
    );
    let types = catalog.clone();
    register(
        ctx,
        super::enums::ENUM_POSITION,
        &[2],
        Int32,
        Stable,
        move |args| {
            let place = match super::enums::labelled(&types.types, args)? {
                Some((ty, label)) => Some(super::enums::position(&ty, &label)?),
                None => None,
            };
            Ok(ScalarValue::Int32(place))
        },
    );
    let types = catalog.clone();
    register(
        ctx,
        super::enums::ENUM_INPUT,
        &[2],
        Utf8,
        Stable,
        move |args| {
            let label = match super::enums::labelled(&types.types, args)? {
                Some((ty, label)) => Some(super::enums::check_label(&ty, &label).map(|()| label)?),
                None => None,
            };
            Ok(utf8(label))
        },
    );
    register(ctx, "pg_get_expr", &[2, 3], Utf8, Stable, |args| {
        Ok(utf8(text(&args[0])))
    });
    // Comments: of tables (obj_description) and their columns
    // (col_description), and the built-in schemas' descriptions.
    let (c, v) = (catalog.clone(), view.clone());
    register(ctx, "obj_description", &[1, 2], Utf8, Stable, move |args| {
        let Some(oid) = int(&args[0]) else {
            return Ok(utf8(None));
        };
        if let Some(description) = super::pg_catalog::built_in_description(oid) {
            return Ok(utf8(Some(description.into())));
        }
        Ok(utf8(
            find_table(&c, &v, |name| i64::from(table_oid(name)) == oid)
                .and_then(|def| def.comment.clone()),
        ))
    });
    let (c, v) = (catalog.clone(), view.clone());
    register(ctx, "col_description", &[2], Utf8, Stable, move |args| {
        let (Some(oid), Some(number)) = (int(&args[0]), int(&args[1])) else {
            return Ok(utf8(None));
        };
        Ok(utf8(
            find_table(&c, &v, |name| i64::from(table_oid(name)) == oid).and_then(|def| {
                let i = usize::try_from(number).ok()?.checked_sub(1)?;
                def.columns.get(i)?.comment.clone()
            }),
        ))
    });
    register(ctx, "shobj_description", &[2], Utf8, Stable, |_| {
        Ok(utf8(None))
    });
    // The diagnostics views are in a schema of their own, off the search path.
    let diagnostics: Vec<i64> = super::diagnostics::relations()
        .map(|(name, _)| i64::from(super::pg_catalog::oid_of("view", name)))
        .collect();
    register(
        ctx,
        "pg_table_is_visible",
        &[1],
        Boolean,
        Stable,
        move |args| {
            Ok(ScalarValue::Boolean(
                int(&args[0]).map(|oid| !diagnostics.contains(&oid)),
            ))
        },
    );
    for name in ["pg_type_is_visible", "pg_function_is_visible"] {
        register(ctx, name, &[1], Boolean, Stable, |args| {
            Ok(ScalarValue::Boolean((!args[0].is_null()).then_some(true)))
        });
    }
    // Every table is readable and writable by every user until roles exist.
    for name in [
        "has_table_privilege",
        "has_schema_privilege",
        "has_database_privilege",
        "has_column_privilege",
        "has_any_column_privilege",
        "has_sequence_privilege",
        "has_function_privilege",
    ] {
        register(ctx, name, &[2, 3, 4], Boolean, Stable, |_| {
            Ok(ScalarValue::Boolean(Some(true)))
        });
    }
    let (c, v) = (catalog.clone(), view.clone());
    register(
        ctx,
        "pg_relation_is_publishable",
        &[1],
        Boolean,
        Stable,
        move |args| {
            let oid = int(&args[0]);
            Ok(ScalarValue::Boolean(Some(oid.is_some_and(|oid| {
                find_table(&c, &v, |name| i64::from(table_oid(name)) == oid).is_some()
            }))))
        },
    );
    // No extended statistics objects or triggers exist (pg_statistic_ext
    // and pg_trigger are empty).
    register(
        ctx,
        "pg_get_statisticsobjdef_columns",
        &[1],
        Utf8,
        Stable,
        |_| Ok(utf8(None)),
    );
    register(ctx, "pg_get_triggerdef", &[1, 2], Utf8, Stable, |_| {
        Ok(utf8(None))
    });
    let c = catalog.clone();
    register(
        ctx,
        "pg_get_serial_sequence",
        &[2],
        Utf8,
        Stable,
        move |args| {
            let (Some(table), Some(column)) = (text(&args[0]), text(&args[1])) else {
                return Ok(utf8(None));
            };
            let owner = (relation_name(&table).to_owned(), column);
            Ok(utf8(
                c.sequences
                    .list()
                    .into_iter()
                    .find(|s| s.def.owned_by.as_ref() == Some(&owner))
                    .map(|s| format!("public.{}", quote_ident(&s.def.name))),
            ))
        },
    );
    register_sequence_functions(ctx, &catalog);
    super::sizes::register(ctx, &catalog);
    register(
        ctx,
        "pg_collation_is_visible",
        &[1],
        Boolean,
        Stable,
        |args| Ok(ScalarValue::Boolean((!args[0].is_null()).then_some(true))),
    );
    // Before JSON's: an operator with an array on one side is the
    // array's (`tags <@ '{a,b}'`), whatever text is on the other.
    let _ = ctx
        .state_ref()
        .write()
        .register_expr_planner(Arc::new(super::arrays::ArrayOperators));
    register_json_functions(ctx);
    // `interval * number`, `number * interval` and `interval / number`.
    let _ = ctx
        .state_ref()
        .write()
        .register_expr_planner(Arc::new(super::arithmetic::IntervalScaling));
    for (name, how) in [
        ("justify_hours", Justify::Hours),
        ("justify_days", Justify::Days),
        ("justify_interval", Justify::Interval),
    ] {
        let interval = DataType::Interval(IntervalUnit::MonthDayNano);
        let returns = interval.clone();
        register(
            ctx,
            name,
            &[1],
            returns,
            Volatility::Immutable,
            move |args| {
                Ok(match args[0].cast_to(&interval)? {
                    ScalarValue::IntervalMonthDayNano(v) => {
                        ScalarValue::IntervalMonthDayNano(v.map(|v| justify(v, how)))
                    }
                    other => return exec_err!("{name} of {}", other.data_type()),
                })
            },
        );
    }
    // `information_schema._pg_expandarray`: an array's elements with their
    // positions, as a list of `(x, n)` (the rewrite unnests it).
    let pair = DataType::Struct(
        vec![
            datafusion::arrow::datatypes::Field::new("x", DataType::Int64, true),
            datafusion::arrow::datatypes::Field::new("n", DataType::Int64, false),
        ]
        .into(),
    );
    register(
        ctx,
        "_pg_expandarray",
        &[1],
        DataType::new_list(pair, true),
        Immutable,
        |args| {
            let elements: Vec<Option<i64>> = match &args[0] {
                ScalarValue::List(list) if !list.is_null(0) => {
                    let values = list.value(0);
                    (0..values.len())
                        .map(|i| {
                            ScalarValue::try_from_array(&values, i)
                                .ok()
                                .and_then(|v| int(&v))
                        })
                        .collect()
                }
                _ => Vec::new(),
            };
            let positions: Vec<i64> = (1..=elements.len() as i64).collect();
            let pairs = datafusion::arrow::array::StructArray::from(vec![
                (
                    Arc::new(datafusion::arrow::datatypes::Field::new(
                        "x",
                        DataType::Int64,
                        true,
                    )),
                    Arc::new(datafusion::arrow::array::Int64Array::from(elements))
                        as datafusion::arrow::array::ArrayRef,
                ),
                (
                    Arc::new(datafusion::arrow::datatypes::Field::new(
                        "n",
                        DataType::Int64,
                        false,
                    )),
                    Arc::new(datafusion::arrow::array::Int64Array::from(positions)),
                ),
            ]);
            Ok(
                datafusion::common::utils::SingleRowListArrayBuilder::new(Arc::new(pairs))
                    .build_list_scalar(),
            )
        },
    );
    // An object kind's default privileges: none are kept here, so NULL,
    // which pg_dump reads as nothing to grant or revoke.
    let acl = super::types::list_of(Utf8);
    register(ctx, "acldefault", &[2], acl.clone(), Stable, move |_| {
        ScalarValue::try_from(&acl)
    });
    // Arrays here start at 1: the lower bound is 1 unless the array is empty.
    register(ctx, "array_lower", &[2], Int32, Immutable, |args| {
        let empty = match &args[0] {
            ScalarValue::List(list) => list.is_null(0) || list.value(0).is_empty(),
            _ => true,
        };
        Ok(ScalarValue::Int32((!empty).then_some(1)))
    });
    register(ctx, "to_regtype", &[1], Int32, Stable, |args| {
        Ok(ScalarValue::Int32(
            text(&args[0]).and_then(|n| type_oid(&n)),
        ))
    });
    register(ctx, "quote_ident", &[1], Utf8, Immutable, |args| {
        Ok(utf8(text(&args[0]).map(|s| quote_ident(&s))))
    });
    register(ctx, "quote_nullable", &[1], Utf8, Immutable, |args| {
        Ok(utf8(Some(
            text(&args[0]).map_or_else(|| "NULL".into(), |s| quote_literal(&s)),
        )))
    });
    // `num_nulls(...)` and `num_nonnulls(...)`: how many arguments are
    // NULL, and how many are not.
    let arities: Vec<usize> = (1..=100).collect();
    register(ctx, "num_nulls", &arities, Int32, Immutable, |args| {
        let nulls = args.iter().filter(|a| a.is_null()).count();
        Ok(ScalarValue::Int32(Some(nulls as i32)))
    });
    register(ctx, "num_nonnulls", &arities, Int32, Immutable, |args| {
        let values = args.iter().filter(|a| !a.is_null()).count();
        Ok(ScalarValue::Int32(Some(values as i32)))
    });
    // `isfinite(x)` of a date, a timestamp or an interval: tablegate holds
    // no infinite ones.
    register(ctx, "isfinite", &[1], Boolean, Immutable, |args| {
        Ok(ScalarValue::Boolean((!args[0].is_null()).then_some(true)))
    });
    register(ctx, "quote_literal", &[1], Utf8, Immutable, |args| {
        Ok(utf8(text(&args[0]).map(|s| quote_literal(&s))))
    });
    register(
        ctx,
        "format",
        &(1..=10).collect::<Vec<_>>(),
        Utf8,
        Stable,
        |args| format_text(args).map(utf8),
    );

    let (c, v) = (catalog.clone(), view.clone());
    register(ctx, "pg_get_indexdef", &[1, 3], Utf8, Stable, move |args| {
        let Some(oid) = int(&args[0]) else {
            return Ok(utf8(None));
        };
        let column = args.get(1).and_then(int).unwrap_or(0);
        let index = v
            .tables(&c)
            .iter()
            .flat_map(|t| indexes_of(t))
            .find(|index| i64::from(index.oid) == oid);
        Ok(utf8(index.map(|index| {
            if column > 0 {
                index
                    .columns
                    .get(column as usize - 1)
                    .map(|c| quote_ident(c))
                    .unwrap_or_default()
            } else {
                index.definition()
            }
        })))
    });
    let (c, v) = (catalog.clone(), view.clone());
    register(
        ctx,
        "pg_get_constraintdef",
        &[1, 2],
        Utf8,
        Stable,
        move |args| {
            let Some(oid) = int(&args[0]) else {
                return Ok(utf8(None));
            };
            Ok(utf8(
                v.tables(&c)
                    .iter()
                    .flat_map(|t| constraints_of(t))
                    .find(|constraint| i64::from(constraint.oid) == oid)
                    .map(|constraint| {
                        let pretty = matches!(args.get(1), Some(ScalarValue::Boolean(Some(true))));
                        constraint.definition(pretty)
                    }),
            ))
        },
    );
    // pg_proc holds no functions (there are none made with SQL), so no oid
    // names one (psql's `\df` lists none).
    for name in [
        "pg_get_function_result",
        "pg_get_function_arguments",
        "pg_get_function_identity_arguments",
    ] {
        register(ctx, name, &[1], Utf8, Stable, |_| Ok(utf8(None)));
    }
    // Every relation is in the default tablespace, whose location
    // PostgreSQL gives as empty (psql's `\db`).
    register(ctx, "pg_tablespace_location", &[1], Utf8, Stable, |args| {
        Ok(utf8((!args[0].is_null()).then(String::new)))
    });
    let (c, v) = (catalog.clone(), view.clone());
    // `pg_get_viewdef(view [, pretty])`, the view by its oid or its name.
    register(ctx, "pg_get_viewdef", &[1, 2], Utf8, Stable, move |args| {
        let def = match &args[0] {
            ScalarValue::Utf8(Some(name)) => v.definition(&c, relation_name(name)),
            oid => int(oid).and_then(|oid| {
                v.tables(&c)
                    .into_iter()
                    .find(|t| i64::from(table_oid(&t.name)) == oid)
            }),
        };
        Ok(utf8(def.and_then(|def| {
            let query = match (&def.plain_view, &def.view) {
                (Some(view), _) => &view.query,
                (None, Some(view)) => &view.query,
                (None, None) => return None,
            };
            Some(super::pg_catalog::view_definition(query))
        })))
    });
    let (c, v) = (catalog.clone(), view.clone());
    register(ctx, "regclass", &[1], Int32, Stable, move |args| {
        let Some(name) = text(&args[0]) else {
            return Ok(ScalarValue::Int32(None));
        };
        // A number is an object id, as in PostgreSQL.
        if let Ok(oid) = name.trim().parse::<i32>() {
            return Ok(ScalarValue::Int32(Some(oid)));
        }
        let relation = relation_name(&name);
        if let Some(def) = v.definition(&c, relation) {
            return Ok(ScalarValue::Int32(Some(table_oid(&def.name))));
        }
        if c.sequences.get(relation).is_some() {
            return Ok(ScalarValue::Int32(Some(sequence_oid(relation))));
        }
        let index = (v.tables(&c).iter())
            .flat_map(|def| indexes_of(def))
            .find(|index| index.name == relation);
        match index.map(|i| i.oid).or_else(|| catalog_oid(&name)) {
            Some(oid) => Ok(ScalarValue::Int32(Some(oid))),
            None => Err(sql_error(
                "42P01",
                format!("relation \"{name}\" does not exist"),
            )),
        }
    });
    let (c, v) = (catalog.clone(), view.clone());
    register(ctx, "relation_name", &[1], Utf8, Stable, move |args| {
        let Some(oid) = int(&args[0]) else {
            return Ok(utf8(None));
        };
        let sequence = || {
            c.sequences
                .list()
                .into_iter()
                .find(|s| i64::from(sequence_oid(&s.def.name)) == oid)
                .map(|s| s.def.name.clone())
        };
        let index = || {
            (v.tables(&c).iter())
                .flat_map(|def| indexes_of(def))
                .find(|index| i64::from(index.oid) == oid)
                .map(|index| index.name)
        };
        Ok(utf8(Some(
            find_table(&c, &v, |name| i64::from(table_oid(name)) == oid)
                .map(|def| def.name.clone())
                .or_else(sequence)
                .or_else(index)
                .map(|name| quote_ident(&name))
                .unwrap_or_else(|| oid.to_string()),
        )))
    });
    // `'pg_catalog'::regnamespace`: the schema's object id.
    register(ctx, "regnamespace", &[1], Int32, Immutable, |args| {
        let Some(name) = text(&args[0]) else {
            return Ok(ScalarValue::Int32(None));
        };
        if let Ok(oid) = name.trim().parse::<i32>() {
            return Ok(ScalarValue::Int32(Some(oid)));
        }
        match NAMESPACES.iter().find(|(_, n)| *n == name) {
            Some((oid, _)) => Ok(ScalarValue::Int32(Some(*oid))),
            None => Err(sql_error(
                "3F000",
                format!("schema \"{name}\" does not exist"),
            )),
        }
    });
    register(ctx, "namespace_name", &[1], Utf8, Immutable, |args| {
        let Some(oid) = int(&args[0]) else {
            return Ok(utf8(None));
        };
        Ok(utf8(Some(
            NAMESPACES
                .iter()
                .find(|(o, _)| i64::from(*o) == oid)
                .map_or_else(|| oid.to_string(), |(_, name)| (*name).to_owned()),
        )))
    });
    let (c, v) = (catalog, view);
    register(ctx, "to_regclass", &[1], Int32, Stable, move |args| {
        let Some(name) = text(&args[0]) else {
            return Ok(ScalarValue::Int32(None));
        };
        Ok(ScalarValue::Int32(
            v.definition(&c, relation_name(&name))
                .map(|def| table_oid(&def.name)),
        ))
    });
}

/// A relation name as `regclass` reads it: optionally `public.`-qualified,
/// optionally quoted.
pub(super) fn relation_name(name: &str) -> &str {
    let name = name.strip_prefix("public.").unwrap_or(name);
    name.strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or(name)
}

/// An error with its SQLSTATE, raised inside DataFusion.
fn sql_error(
    sqlstate: &'static str,
    message: impl Into<String>,
) -> datafusion::error::DataFusionError {
    crate::sql::SqlError::value(sqlstate, message).into()
}

/// The sequence a `nextval`/`currval`/`setval` argument names: a name, or
/// the object id `'name'::regclass` gives; `None` for NULL (the functions
/// then return NULL).
fn sequence_of(
    catalog: &Catalog,
    arg: &ScalarValue,
) -> DfResult<Option<Arc<crate::catalog::Sequence>>> {
    if arg.is_null() {
        return Ok(None);
    }
    let name = arg.try_as_str().flatten();
    // Text of digits is an object id too, as regclass reads it.
    let oid = match name {
        Some(name) => name.parse::<i64>().ok(),
        None => int(arg),
    };
    let found = match (oid, name) {
        (Some(oid), _) => catalog
            .sequences
            .list()
            .into_iter()
            .find(|s| i64::from(sequence_oid(&s.def.name)) == oid),
        (None, Some(name)) => catalog.sequences.get(relation_name(name)),
        (None, None) => None,
    };
    found
        .map(Some)
        .ok_or_else(|| sql_error("42P01", format!("sequence {arg} does not exist")))
}

/// `nextval`, `currval` (the session's last `nextval` of a sequence) and
/// `setval`.
fn register_sequence_functions(ctx: &SessionContext, catalog: &Arc<Catalog>) {
    use DataType::Int64;
    let session_values: Arc<std::sync::Mutex<std::collections::HashMap<String, i64>>> =
        Arc::default();
    let (c, values) = (catalog.clone(), session_values.clone());
    register(
        ctx,
        "nextval",
        &[1],
        Int64,
        Volatility::Volatile,
        move |args| {
            let Some(sequence) = sequence_of(&c, &args[0])? else {
                return Ok(ScalarValue::Int64(None));
            };
            let value = c
                .sequences
                .next(&sequence)
                .map_err(|e| sql_error(e.sqlstate(), e.to_string()))?;
            values
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(sequence.def.name.clone(), value);
            Ok(ScalarValue::Int64(Some(value)))
        },
    );
    let (c, values) = (catalog.clone(), session_values);
    register(
        ctx,
        "currval",
        &[1],
        Int64,
        Volatility::Volatile,
        move |args| {
            let Some(sequence) = sequence_of(&c, &args[0])? else {
                return Ok(ScalarValue::Int64(None));
            };
            let last = values
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&sequence.def.name)
                .copied();
            match last {
                Some(value) => Ok(ScalarValue::Int64(Some(value))),
                None => Err(sql_error(
                    "55000",
                    format!(
                        "currval of sequence {:?} is not yet defined in this session",
                        sequence.def.name
                    ),
                )),
            }
        },
    );
    let c = catalog.clone();
    register(
        ctx,
        "setval",
        &[2, 3],
        Int64,
        Volatility::Volatile,
        move |args| {
            let Some(sequence) = sequence_of(&c, &args[0])? else {
                return Ok(ScalarValue::Int64(None));
            };
            let Some(value) = int(&args[1]) else {
                return Ok(ScalarValue::Int64(None));
            };
            let called = match args.get(2) {
                Some(ScalarValue::Boolean(b)) => b.unwrap_or(true),
                _ => true,
            };
            c.sequences
                .set(&sequence, value, called)
                .map_err(|e| sql_error("22003", e.to_string()))?;
            Ok(ScalarValue::Int64(Some(value)))
        },
    );
}

/// The table (as the session sees it) whose name satisfies `matches`.
fn find_table(
    catalog: &Catalog,
    view: &ReadView,
    matches: impl Fn(&str) -> bool,
) -> Option<Arc<crate::catalog::TableDef>> {
    view.tables(catalog)
        .into_iter()
        .find(|def| matches(&def.name))
}

/// The value of a scalar subquery: its only row's value, NULL when it has
/// none, and PostgreSQL's error when it has more than one. DataFusion plans
/// a correlated scalar subquery only around an aggregate; wrapping the
/// subquery's expression in this one keeps PostgreSQL's meaning exactly.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SingleValue {
    signature: Signature,
}

pub const SINGLE_VALUE: &str = "single_value";

impl SingleValue {
    pub fn udaf() -> datafusion::logical_expr::AggregateUDF {
        datafusion::logical_expr::AggregateUDF::new_from_impl(SingleValue {
            signature: Signature::any(1, Volatility::Immutable),
        })
    }
}

fn more_than_one_row<T>() -> DfResult<T> {
    exec_err!("more than one row returned by a subquery used as an expression")
}

impl datafusion::logical_expr::AggregateUDFImpl for SingleValue {
    fn name(&self) -> &str {
        SINGLE_VALUE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types[0].clone())
    }

    fn accumulator(
        &self,
        args: datafusion::logical_expr::function::AccumulatorArgs,
    ) -> DfResult<Box<dyn datafusion::logical_expr::Accumulator>> {
        Ok(Box::new(SingleValueAccumulator {
            value: ScalarValue::try_from(args.return_field.data_type())?,
            rows: 0,
        }))
    }

    fn state_fields(
        &self,
        args: datafusion::logical_expr::function::StateFieldsArgs,
    ) -> DfResult<Vec<datafusion::arrow::datatypes::FieldRef>> {
        use datafusion::logical_expr::utils::format_state_name;
        Ok(vec![
            Arc::new(datafusion::arrow::datatypes::Field::new(
                format_state_name(args.name, "value"),
                args.return_field.data_type().clone(),
                true,
            )),
            Arc::new(datafusion::arrow::datatypes::Field::new(
                format_state_name(args.name, "rows"),
                DataType::UInt64,
                false,
            )),
        ])
    }
}

#[derive(Debug)]
struct SingleValueAccumulator {
    value: ScalarValue,
    rows: u64,
}

impl datafusion::logical_expr::Accumulator for SingleValueAccumulator {
    fn update_batch(&mut self, values: &[datafusion::arrow::array::ArrayRef]) -> DfResult<()> {
        let column = &values[0];
        for row in 0..column.len() {
            self.rows += 1;
            if self.rows > 1 {
                return more_than_one_row();
            }
            self.value = ScalarValue::try_from_array(column, row)?;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size()
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            self.value.clone(),
            ScalarValue::UInt64(Some(self.rows)),
        ])
    }

    fn merge_batch(&mut self, states: &[datafusion::arrow::array::ArrayRef]) -> DfResult<()> {
        let rows = datafusion::arrow::array::AsArray::as_primitive::<
            datafusion::arrow::datatypes::UInt64Type,
        >(states[1].as_ref());
        for row in 0..rows.len() {
            let n = rows.value(row);
            if n == 0 {
                continue;
            }
            self.rows += n;
            if self.rows > 1 {
                return more_than_one_row();
            }
            self.value = ScalarValue::try_from_array(&states[0], row)?;
        }
        Ok(())
    }
}
