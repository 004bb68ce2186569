//! SQL column types to and from Arrow types and the parser's type names.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, IntervalUnit, TimeUnit};
use datafusion::common::datatype::DataTypeExt;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, CharacterLength, DataType as AstType, ExactNumberInfo, TimezoneInfo,
};

use super::error::SqlError;
use super::time_zone::{push_offset, SessionZone};
use crate::catalog::{Column, Element, SqlType, DEFAULT_NUMERIC};

/// An interval's text as Arrow's parser reads it. PostgreSQL also reads a
/// time of day (`1 day 01:30:00`, `-1 days +02:00:00`, as it prints
/// intervals), signs before numbers (`+2 hours`), a number without a unit
/// (seconds), units glued to numbers (`10min`), short units (`1 d`, `2 hr`,
/// `5 mins`), a leading `@` and a trailing `ago`; these become Arrow's
/// words (`1 days 1 hours 30 minutes`), and so does ISO 8601's
/// `P1Y2M3DT4H5M6S`. Any other text is left as it is.
pub fn interval_input(text: &str) -> Cow<'_, str> {
    let Some((parts, ago)) = iso_8601_interval(text.trim())
        .map(|parts| (parts, false))
        .or_else(|| postgres_interval(text))
    else {
        return Cow::Borrowed(text);
    };
    let negated = |number: String| match number.strip_prefix('-') {
        Some(positive) => positive.to_owned(),
        None => format!("-{number}"),
    };
    let words: Vec<String> = parts
        .into_iter()
        .map(|(number, unit)| {
            let number = if ago { negated(number) } else { number };
            format!("{number} {unit}")
        })
        .collect();
    Cow::Owned(words.join(" "))
}

/// PostgreSQL's interval words as numbers and units, and whether they end
/// in `ago`; `None` for text that is not.
fn postgres_interval(text: &str) -> Option<(Vec<(String, &'static str)>, bool)> {
    let mut parts = Vec::new();
    let mut ago = false;
    let mut tokens = text.split_whitespace().peekable();
    while let Some(token) = tokens.next() {
        if token == "@" {
            continue;
        }
        if token.eq_ignore_ascii_case("ago") && tokens.peek().is_none() {
            ago = true;
            continue;
        }
        if let Some(time) = time_of_day(token) {
            parts.extend(time);
            continue;
        }
        let glued = token
            .find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(token.len());
        let (number, unit) = token.split_at(glued);
        let number = number.strip_prefix('+').unwrap_or(number);
        if number.parse::<f64>().is_err() || number.contains(['e', 'E']) {
            return None;
        }
        let unit = match unit {
            "" => match tokens.peek().and_then(|next| interval_unit(next)) {
                Some(unit) => {
                    tokens.next();
                    unit
                }
                None => "seconds",
            },
            unit => interval_unit(unit)?,
        };
        parts.push((number.to_owned(), unit));
    }
    (!parts.is_empty()).then_some((parts, ago))
}

/// ISO 8601's interval with designators (`P1Y2M3DT4H5M6.5S`, `P2W`) as
/// numbers and units; `None` for any other text.
fn iso_8601_interval(text: &str) -> Option<Vec<(String, &'static str)>> {
    let designators = text.strip_prefix(['P', 'p'])?;
    let mut parts = Vec::new();
    let mut number = String::new();
    let mut in_time = false;
    for c in designators.chars() {
        match c {
            'T' | 't' if number.is_empty() && !in_time => in_time = true,
            '0'..='9' | '.' | '-' | '+' => number.push(c),
            _ => {
                let unit = match (c.to_ascii_uppercase(), in_time) {
                    ('Y', false) => "years",
                    ('M', false) => "months",
                    ('W', false) => "weeks",
                    ('D', false) => "days",
                    ('H', true) => "hours",
                    ('M', true) => "minutes",
                    ('S', true) => "seconds",
                    _ => return None,
                };
                number.parse::<f64>().ok()?;
                parts.push((std::mem::take(&mut number), unit));
            }
        }
    }
    (number.is_empty() && !parts.is_empty()).then_some(parts)
}

/// `[+-]h:mm[:ss[.f]]` as signed hours, minutes and seconds.
fn time_of_day<'a>(token: &'a str) -> Option<[(String, &'static str); 3]> {
    let (sign, unsigned) = match token.as_bytes().first()? {
        b'-' => ("-", &token[1..]),
        b'+' => ("", &token[1..]),
        _ => ("", token),
    };
    let mut fields = unsigned.split(':');
    let (hours, minutes, seconds) = (fields.next()?, fields.next()?, fields.next().unwrap_or("0"));
    let digits = |f: &str| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit());
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, "0"));
    if fields.next().is_some() || ![hours, minutes, whole, fraction].into_iter().all(digits) {
        return None;
    }
    let significant = |n: &'a str| match n.trim_start_matches('0') {
        "" => "0",
        n => n,
    };
    let number = |n: &'a str| format!("{sign}{}", significant(n));
    let seconds = format!("{sign}{}.{fraction}", significant(whole));
    Some([
        (number(hours), "hours"),
        (number(minutes), "minutes"),
        (seconds, "seconds"),
    ])
}

/// Arrow's name of a unit PostgreSQL reads in an interval.
fn interval_unit(word: &str) -> Option<&'static str> {
    Some(match word.to_ascii_lowercase().as_str() {
        "us" | "usec" | "usecs" | "microsecond" | "microseconds" => "microseconds",
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => "milliseconds",
        "s" | "sec" | "secs" | "second" | "seconds" => "seconds",
        "m" | "min" | "mins" | "minute" | "minutes" => "minutes",
        "h" | "hr" | "hrs" | "hour" | "hours" => "hours",
        "d" | "day" | "days" => "days",
        "w" | "week" | "weeks" => "weeks",
        "mon" | "mons" | "month" | "months" => "months",
        "y" | "yr" | "yrs" | "year" | "years" => "years",
        "decade" | "decades" => "decades",
        "c" | "century" | "centuries" => "centuries",
        _ => return None,
    })
}

/// Microseconds since 1970 (PostgreSQL's unit) of row `row` of a timestamp
/// column of any unit (nanoseconds are rounded to the nearest
/// microsecond); `None` for a column of another type.
pub fn timestamp_micros_at(array: &dyn Array, row: usize) -> Option<i64> {
    use datafusion::arrow::datatypes::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    let DataType::Timestamp(unit, _) = array.data_type() else {
        return None;
    };
    Some(match unit {
        TimeUnit::Second => {
            let seconds = array.as_primitive::<TimestampSecondType>().value(row);
            seconds.saturating_mul(1_000_000)
        }
        TimeUnit::Millisecond => {
            let millis = array.as_primitive::<TimestampMillisecondType>().value(row);
            millis.saturating_mul(1_000)
        }
        TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => {
            let nanos = array.as_primitive::<TimestampNanosecondType>().value(row);
            nanos.div_euclid(1_000) + i64::from(nanos.rem_euclid(1_000) >= 500)
        }
    })
}

/// A timestamp as PostgreSQL prints one: `2026-11-21 10:11:12.5`, a
/// fraction only when it is not zero, and `+00` after an instant (a
/// `timestamptz`, shown in UTC).
pub fn timestamp_text(micros: i64, zoned: bool) -> String {
    let mut text = String::new();
    push_timestamp(&mut text, micros, zoned.then(SessionZone::utc).as_ref());
    text
}

/// Writes [`timestamp_text`]'s text of a timestamp.
pub fn push_timestamp(out: &mut impl std::fmt::Write, micros: i64, zone: Option<&SessionZone>) {
    match zone {
        None => push_instant(out, micros, b' ', ""),
        Some(zone) if zone.is_utc() => push_instant(out, micros, b' ', "+00"),
        // The wall time in the zone, then the zone's offset there.
        Some(zone) => {
            let offset = zone.offset_at(micros);
            let mut shown = String::with_capacity(9);
            push_offset(&mut shown, offset);
            let wall = micros.saturating_add(i64::from(offset) * 1_000_000);
            push_instant(out, wall, b' ', &shown);
        }
    }
}

/// Writes a timestamp as PostgreSQL writes one into JSON: ISO 8601's `T`
/// between date and time, an instant's offset in full (`+00:00`).
pub fn push_json_timestamp(out: &mut impl std::fmt::Write, micros: i64, zoned: bool) {
    let zone = if zoned { "+00:00" } else { "" };
    push_instant(out, micros, b'T', zone);
}

/// Writes a date as PostgreSQL prints one: `2026-11-21`, years of more than
/// four digits in full, years before 1 as `0044-03-15 BC`.
pub fn push_date(out: &mut impl std::fmt::Write, days: i64) {
    push_moment(out, days, None, b' ', "");
}

/// Writes `micros` since 1970-01-01 as a date, `separator`, the time of
/// day and `zone`.
fn push_instant(out: &mut impl std::fmt::Write, micros: i64, separator: u8, zone: &str) {
    let (days, clock) = (
        micros.div_euclid(MICROS_A_DAY),
        micros.rem_euclid(MICROS_A_DAY),
    );
    push_moment(out, days, Some(clock), separator, zone);
}

/// Microseconds in a day.
pub(super) const MICROS_A_DAY: i64 = 86_400_000_000;

/// Writes `days` since 1970-01-01 as [`push_date`]'s date, then, given
/// `clock` (microseconds since midnight), `separator`, the time of day
/// (`10:11:12.5`, a fraction only when it is not zero) and `zone`, and
/// ` BC` last for years before 1. The digits are written here, not by a
/// format string: a result may hold many of them.
fn push_moment(
    out: &mut impl std::fmt::Write,
    days: i64,
    clock: Option<i64>,
    separator: u8,
    zone: &str,
) {
    let (year, month, day) = civil_date(days);
    // Year 0 is 1 BC.
    let (year, bc) = if year <= 0 {
        (1 - year, true)
    } else {
        (year, false)
    };
    let mut text = ShortText::default();
    let mut digits = [b'0'; 20];
    let start = super::decimals::put_digits(u128::from(year.unsigned_abs()), &mut digits);
    // At least four digits: zeros before a shorter year.
    text.put(&digits[start.min(digits.len() - 4)..]);
    text.put(b"-");
    text.two_digits(i64::from(month));
    text.put(b"-");
    text.two_digits(i64::from(day));
    if let Some(clock) = clock {
        let seconds = clock / 1_000_000;
        text.put(&[separator]);
        text.two_digits(seconds / 3600);
        text.put(b":");
        text.two_digits(seconds / 60 % 60);
        text.put(b":");
        text.two_digits(seconds % 60);
        let fraction = clock % 1_000_000;
        if fraction != 0 {
            let mut places = [b'0'; 6];
            super::decimals::put_digits(fraction as u128, &mut places);
            let kept = places.iter().rposition(|&d| d != b'0').map_or(0, |p| p + 1);
            text.put(b".");
            text.put(&places[..kept]);
        }
        text.put(zone.as_bytes());
    }
    if bc {
        text.put(b" BC");
    }
    let _ = out.write_str(text.as_str());
}

/// A short ASCII text built on the stack.
struct ShortText {
    bytes: [u8; 48],
    len: usize,
}

impl Default for ShortText {
    fn default() -> Self {
        ShortText {
            bytes: [0; 48],
            len: 0,
        }
    }
}

impl ShortText {
    fn put(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// A number below 100 as two digits.
    fn two_digits(&mut self, n: i64) {
        self.put(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]);
    }

    fn as_str(&self) -> &str {
        // Only ASCII is put.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

/// Days since 1970-01-01 as a date of the proleptic Gregorian calendar,
/// (year, month, day), year 0 being 1 BC (Howard Hinnant's
/// `civil_from_days`).
pub(super) fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March.
    let march_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 {
        march_month + 3
    } else {
        march_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

/// `array` with each text read as PostgreSQL reads a text cast to
/// `target`, when it holds texts: a date's, a time's or a timestamp's as
/// its value ([`super::datetime_input`]), an interval's by
/// [`interval_input`], a numeric's by [`numeric_input`], an array's from
/// its text form (`{a,b}`; Arrow would make `'{a,b}'` the
/// one element of a list); an instant's text without a zone is a wall time
/// in `zone`, the session's.
pub fn text_inputs(
    array: &ArrayRef,
    target: &DataType,
    zone: &SessionZone,
) -> Result<ArrayRef, SqlError> {
    let Some(texts) = array.as_any().downcast_ref::<StringArray>() else {
        return Ok(array.clone());
    };
    Ok(match target {
        DataType::List(element) => super::arrays::texts_to_lists(texts, element.data_type(), zone)?,
        DataType::Date32 | DataType::Timestamp(..) | DataType::Time64(_) => {
            super::datetime_input::read_texts(texts, target, zone)?
        }
        DataType::Interval(_) => Arc::new(
            texts
                .iter()
                .map(|text| text.map(interval_input))
                .collect::<StringArray>(),
        ),
        DataType::Decimal128(..) => Arc::new(
            texts
                .iter()
                .map(|text| text.map(numeric_input))
                .collect::<StringArray>(),
        ),
        _ => array.clone(),
    })
}

/// The type a parameter declared as `ast` (in SQL's `PREPARE`) takes:
/// a column type's, or an interval's.
pub fn parameter_type(ast: &AstType) -> Option<DataType> {
    match ast {
        AstType::Interval { .. } => Some(DataType::Interval(IntervalUnit::MonthDayNano)),
        ast => sql_type(ast).ok().map(arrow_type),
    }
}

/// Makes a text one Arrow reads, as a value of some type (an instant's
/// text without a zone read in the session's zone).
pub type TextReader = for<'a> fn(&'a str, &SessionZone) -> Cow<'a, str>;

/// What makes a text one Arrow reads as a value of `target`, for the
/// types of which PostgreSQL reads more forms than Arrow.
pub fn text_reader(target: &DataType) -> Option<TextReader> {
    use super::datetime_input::{arrow_text, Target};
    Some(match target {
        DataType::Date32 => |text, zone| arrow_text(text, Target::Date, zone),
        DataType::Timestamp(_, None) => |text, zone| arrow_text(text, Target::Timestamp, zone),
        DataType::Timestamp(_, Some(_)) => |text, zone| arrow_text(text, Target::Timestamptz, zone),
        DataType::Interval(_) => |text, _| interval_input(text),
        DataType::Decimal128(..) => |text, _| numeric_input(text),
        DataType::Time64(_) => |text, zone| arrow_text(text, Target::Time, zone),
        _ => return None,
    })
}

/// A numeric's text as Arrow reads it: one with an exponent (`1.5e3`) in
/// plain digits (`1500`).
fn numeric_input(text: &str) -> Cow<'_, str> {
    match super::decimals::without_exponent(text.trim(), NUMERIC_INPUT_DIGITS) {
        Some(plain) => Cow::Owned(plain),
        None => Cow::Borrowed(text),
    }
}

/// The most digits a numeric's text with an exponent is written out to;
/// more than any `Decimal128` holds, so that such a text is refused as
/// out of range.
const NUMERIC_INPUT_DIGITS: usize = 100;

/// `array` cast to `target`, its texts read as [`text_inputs`] reads them.
pub fn cast_input(
    array: &ArrayRef,
    target: &DataType,
    options: &CastOptions,
    zone: &SessionZone,
) -> Result<ArrayRef, SqlError> {
    Ok(cast_with_options(
        &text_inputs(array, target, zone)?,
        target,
        options,
    )?)
}

/// The name SQL gives the type of Arrow's `data_type`, for the types a
/// client may declare or a text may be read as (`integer`, `double
/// precision`, `numeric`, `timestamptz`, `text[]`).
pub fn sql_name(data_type: &DataType) -> Option<String> {
    Some(match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Decimal128(..) => "numeric".into(),
        DataType::Date32 => "date".into(),
        DataType::Time64(_) => "time".into(),
        DataType::Timestamp(_, None) => "timestamp".into(),
        DataType::Timestamp(_, Some(_)) => "timestamptz".into(),
        DataType::Binary => "bytea".into(),
        DataType::Interval(_) => "interval".into(),
        DataType::Utf8 => "text".into(),
        DataType::List(element) => format!("{}[]", sql_name(element.data_type())?),
        _ => return None,
    })
}

/// Arrow field metadata naming the PostgreSQL type of a column whose Arrow
/// type does not say it (uuid, json, varchar(n), ...).
pub const PG_TYPE_KEY: &str = "tablegate.pg_type";

/// The time zone of `timestamptz` columns: values are instants (shown in
/// the session's zone).
pub const UTC: &str = "+00:00";

pub fn arrow_type(ty: SqlType) -> DataType {
    match ty {
        SqlType::Text
        | SqlType::Varchar(_)
        | SqlType::Char(_)
        | SqlType::Uuid
        | SqlType::Json
        | SqlType::Jsonb => DataType::Utf8,
        SqlType::Int2 => DataType::Int16,
        SqlType::Int4 => DataType::Int32,
        SqlType::Int8 => DataType::Int64,
        SqlType::Float4 => DataType::Float32,
        SqlType::Float8 => DataType::Float64,
        SqlType::Numeric { precision, scale } => DataType::Decimal128(precision, scale as i8),
        SqlType::Bool => DataType::Boolean,
        SqlType::Date => DataType::Date32,
        SqlType::Time => DataType::Time64(TimeUnit::Microsecond),
        SqlType::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
        SqlType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        SqlType::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(UTC))),
        SqlType::Bytea => DataType::Binary,
        SqlType::Array(element) => list_of(arrow_type(element.sql_type())),
    }
}

/// The Arrow types of SQL's `timestamp` and `timestamptz` in casts and
/// typed literals (`'9999-12-31'::timestamp`, `TIMESTAMP '1500-01-01'`):
/// microseconds, as columns hold them and as PostgreSQL counts, where
/// DataFusion's nanoseconds reach only 1677 to 2262. A precision given
/// (`timestamp(3)`) keeps DataFusion's type.
#[derive(Debug)]
pub struct PostgresTypes;

impl TypePlanner for PostgresTypes {
    fn plan_type_field(&self, ast: &AstType) -> datafusion::common::Result<Option<FieldRef>> {
        Ok(match ast {
            AstType::Timestamp(None, _) => sql_type(ast)
                .ok()
                .map(|ty| arrow_type(ty).into_nullable_field_ref()),
            _ => None,
        })
    }
}

/// The Arrow type of a list of values of `element`, as DataFusion makes
/// them (`ARRAY[..]`, `array_agg`).
pub fn list_of(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, true)))
}

/// The Arrow field of a column, with its PostgreSQL type in the metadata.
pub fn arrow_field(column: &Column) -> Field {
    let mut metadata = HashMap::from([(PG_TYPE_KEY.to_owned(), column.ty.pg_name())]);
    if let Some(ty) = &column.enum_type {
        metadata.insert(ENUM_KEY.to_owned(), ty.name.clone());
    }
    Field::new(
        &column.name,
        arrow_type(column.ty),
        column.nullable || column.system.is_some(),
    )
    .with_metadata(metadata)
}

/// The field metadata that names the enum type a text column's values are
/// labels of (see [`super::enums`]).
pub const ENUM_KEY: &str = "tablegate.enum";

/// A result column of text holding values of `ty` (json, uuid, ...).
pub fn text_field(name: &str, ty: SqlType) -> FieldRef {
    Arc::new(
        Field::new(name, DataType::Utf8, true)
            .with_metadata(HashMap::from([(PG_TYPE_KEY.to_owned(), ty.pg_name())])),
    )
}

/// The declared type a result column's metadata names, if its values are
/// still held as that type holds them: a cast (`tags::text`, `amount::int`)
/// passes its input's metadata on with another Arrow type, and then the
/// Arrow type says what the values are.
pub fn declared_type(field: &Field) -> Option<SqlType> {
    let ty = SqlType::from_pg_name(field.metadata().get(PG_TYPE_KEY)?)?;
    (arrow_type(ty) == *field.data_type()).then_some(ty)
}

fn length(len: &Option<CharacterLength>) -> Result<Option<u32>, SqlError> {
    match len {
        None => Ok(None),
        Some(CharacterLength::IntegerLength { length, .. }) => u32::try_from(*length)
            .ok()
            .filter(|&n| n > 0)
            .map(Some)
            .ok_or_else(|| SqlError::InvalidDefinition(format!("length {length} is out of range"))),
        Some(CharacterLength::Max) => Ok(None),
    }
}

fn numeric(info: &ExactNumberInfo) -> Result<SqlType, SqlError> {
    let (precision, scale) = match *info {
        ExactNumberInfo::None => DEFAULT_NUMERIC,
        ExactNumberInfo::Precision(p) => (u8::try_from(p).unwrap_or(u8::MAX), 0),
        ExactNumberInfo::PrecisionAndScale(p, s) => (
            u8::try_from(p).unwrap_or(u8::MAX),
            u8::try_from(s).unwrap_or(u8::MAX),
        ),
    };
    if precision == 0 || precision > 38 || scale > precision {
        return Err(SqlError::FeatureNotSupported(format!(
            "numeric({precision},{scale}): tablegate stores numeric with a precision of 1 to 38 and a scale of 0 to the precision"
        )));
    }
    Ok(SqlType::Numeric { precision, scale })
}

/// The column type named in DDL.
pub fn sql_type(ast: &AstType) -> Result<SqlType, SqlError> {
    Ok(match ast {
        AstType::Text | AstType::String(None) => SqlType::Text,
        AstType::Varchar(n) | AstType::CharacterVarying(n) | AstType::CharVarying(n) => {
            SqlType::Varchar(length(n)?)
        }
        AstType::Char(n) | AstType::Character(n) => SqlType::Char(length(n)?.unwrap_or(1)),
        AstType::SmallInt(_) | AstType::Int2(_) => SqlType::Int2,
        AstType::Int(_) | AstType::Integer(_) | AstType::Int4(_) => SqlType::Int4,
        AstType::BigInt(_) | AstType::Int8(_) => SqlType::Int8,
        AstType::Real | AstType::Float4 => SqlType::Float4,
        AstType::Double(_) | AstType::DoublePrecision | AstType::Float8 => SqlType::Float8,
        AstType::Float(ExactNumberInfo::Precision(p)) if *p <= 24 => SqlType::Float4,
        AstType::Float(_) => SqlType::Float8,
        AstType::Numeric(info) | AstType::Decimal(info) | AstType::Dec(info) => numeric(info)?,
        AstType::Bool | AstType::Boolean => SqlType::Bool,
        AstType::Date => SqlType::Date,
        AstType::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => {
            SqlType::Timestamptz
        }
        AstType::Timestamp(_, _) => SqlType::Timestamp,
        AstType::Time(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => SqlType::Time,
        AstType::Interval {
            fields: None,
            precision: None,
        } => SqlType::Interval,
        AstType::Uuid => SqlType::Uuid,
        AstType::Bytea => SqlType::Bytea,
        AstType::JSON => SqlType::Json,
        AstType::JSONB => SqlType::Jsonb,
        AstType::Array(
            ArrayElemTypeDef::SquareBracket(element, _) | ArrayElemTypeDef::AngleBracket(element),
        ) => {
            let element = sql_type(element)?;
            let Some(element) = Element::of(element) else {
                return Err(SqlError::FeatureNotSupported(format!(
                    "arrays of {} are not supported",
                    element.pg_name()
                )));
            };
            SqlType::Array(element)
        }
        AstType::Custom(name, _) => match name.to_string().to_ascii_lowercase().as_str() {
            "timestamptz" => SqlType::Timestamptz,
            "bpchar" => SqlType::Char(1),
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "type {other:?} is not supported"
                )))
            }
        },
        other => {
            return Err(SqlError::FeatureNotSupported(format!(
                "type {other} is not supported"
            )))
        }
    })
}

/// The SQL spelling of a type, for casts in statements tablegate writes.
pub fn cast_name(ty: SqlType) -> String {
    match ty {
        SqlType::Uuid | SqlType::Json | SqlType::Jsonb | SqlType::Char(_) | SqlType::Varchar(_) => {
            "TEXT".into()
        }
        // Microseconds, as the columns hold them (DataFusion's `TIMESTAMP`
        // is nanoseconds, which hold no moment before 1677 or after 2262).
        SqlType::Timestamp => "TIMESTAMP(6)".into(),
        SqlType::Timestamptz => "TIMESTAMP(6) WITH TIME ZONE".into(),
        SqlType::Array(element) => format!("{}[]", cast_name(element.sql_type())),
        other => other.pg_name().to_uppercase(),
    }
}

/// The function a text is read as a uuid with (`x::uuid`, a text compared
/// with a uuid).
pub const UUID_INPUT: &str = "uuid_input";

/// A text as the uuid it names, written as PostgreSQL writes uuids
/// (lowercase, hyphenated); 22P02 when it names none.
pub fn uuid_input(text: &ScalarValue) -> Result<ScalarValue, SqlError> {
    let Some(text) = super::functions::text(text) else {
        return Ok(ScalarValue::Utf8(None));
    };
    match parse_uuid(&text) {
        Some(uuid) => Ok(ScalarValue::Utf8(Some(uuid.to_string()))),
        None => Err(SqlError::unreadable(&text, "uuid")),
    }
}

/// Parses a UUID in the forms PostgreSQL accepts: hex digits, optional
/// hyphens, optional braces.
pub fn parse_uuid(s: &str) -> Option<crate::model::Guid> {
    let s = s.trim();
    let s = s
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(s);
    let hex: Vec<u8> = s.bytes().filter(|&b| b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(crate::model::Guid(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_timestamps_print_as_postgresql_prints_them() {
        // Microseconds since 1970 of a day and a time of day in microseconds.
        let micros = |year: i32, month: u32, day: u32, clock: i64| {
            let day = chrono::NaiveDate::from_ymd_opt(year, month, day).unwrap();
            let midnight = day.and_hms_opt(0, 0, 0).unwrap().and_utc();
            midnight.timestamp_micros() + clock
        };
        let clock =
            |h: i64, m: i64, s: i64, fraction: i64| ((h * 60 + m) * 60 + s) * 1_000_000 + fraction;
        let date = |days: i64| {
            let mut text = String::new();
            push_date(&mut text, days);
            text
        };
        let moment = micros(2026, 11, 21, clock(10, 11, 12, 500_000));
        assert_eq!(timestamp_text(moment, false), "2026-11-21 10:11:12.5");
        assert_eq!(timestamp_text(moment, true), "2026-11-21 10:11:12.5+00");
        assert_eq!(timestamp_text(0, false), "1970-01-01 00:00:00");
        assert_eq!(timestamp_text(-1, true), "1969-12-31 23:59:59.999999+00");
        assert_eq!(
            timestamp_text(micros(2000, 2, 29, 120), false),
            "2000-02-29 00:00:00.00012"
        );
        // PostgreSQL's years before 1 (year 0 is 1 BC) and past 9999, as
        // PostgreSQL 15 printed them.
        assert_eq!(date(-1_000_000), "0769-02-04 BC");
        assert_eq!(date(-730_000), "0030-05-01 BC");
        assert_eq!(date(-719_163), "0001-12-31 BC");
        assert_eq!(date(-719_162), "0001-01-01");
        assert_eq!(
            timestamp_text(micros(-43, 3, 15, clock(10, 11, 12, 500_000)), true),
            "0044-03-15 10:11:12.5+00 BC"
        );
        assert_eq!(
            timestamp_text(micros(12345, 1, 2, clock(3, 4, 5, 0)), true),
            "12345-01-02 03:04:05+00"
        );
        assert_eq!(date(1_106_000), "4998-02-15");
        // The calendar, against chrono's, from 1 AD to 4998 AD.
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for days in (-719_162..1_106_000).step_by(7) {
            let chrono = epoch + chrono::Duration::days(days);
            assert_eq!(date(days), chrono.format("%Y-%m-%d").to_string());
        }
    }

    #[test]
    fn postgres_interval_text_becomes_arrow_s_words() {
        for (text, read) in [
            ("1 day 01:30:00", "1 days 1 hours 30 minutes 0.0 seconds"),
            ("-1 days +02:00:00", "-1 days 2 hours 0 minutes 0.0 seconds"),
            ("-00:00:01.5", "-0 hours -0 minutes -1.5 seconds"),
            ("@ 2 hr ago", "-2 hours"),
            ("10min 5", "10 minutes 5 seconds"),
            ("+3 mons -1 d", "3 months -1 days"),
            ("P1DT2H", "1 days 2 hours"),
            (
                "P1Y2M3DT4H5M6.5S",
                "1 years 2 months 3 days 4 hours 5 minutes 6.5 seconds",
            ),
            ("PT-90M", "-90 minutes"),
            ("P2W", "2 weeks"),
            ("P1H", "P1H"),
            ("P1D2", "P1D2"),
            ("P", "P"),
            ("1 fortnight", "1 fortnight"),
            ("1:2:3:4", "1:2:3:4"),
            ("", ""),
        ] {
            assert_eq!(interval_input(text), read, "{text}");
        }
    }
}
