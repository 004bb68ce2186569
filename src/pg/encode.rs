//! Arrow results to PostgreSQL row descriptions and data rows, and rows read
//! by key to data rows from their stored values ([`stored_rows`]).
//!
//! Most values are encoded by `arrow-pg`. Columns whose Arrow type does not
//! tell their PostgreSQL type (uuid, json, jsonb, varchar, char are all Utf8)
//! carry the type in their field metadata, and uuid and json values are
//! encoded here so that binary-format clients get the right bytes. Numbers
//! are written here too, as PostgreSQL writes them.

use std::error::Error;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use futures::{Stream, StreamExt};
use pgwire::api::portal::Format;
use pgwire::api::results::{CopyCsvOptions, CopyEncoder, CopyTextOptions, FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::CopyData;
use pgwire::messages::data::DataRow;
use pgwire::types::format::FormatOptions;
use pgwire::types::ToSqlText;
use postgres_types::Kind;
use postgres_types::{IsNull, ToSql};

use crate::catalog::SqlType;
use crate::model::{Date, DateTime, ValueRef};
use crate::sql::decimals::{put_decimal, put_decimal_binary, put_digits};
use crate::sql::floats::put_float;
use crate::sql::time_zone::SessionZone;
use crate::sql::types::{
    declared_type, push_date, push_timestamp, timestamp_micros_at, PG_TYPE_KEY,
};
use crate::sql::{rescale, RowSink, StoredRows};

/// The PostgreSQL type of a result column.
pub fn pg_type(field: &Arc<Field>) -> PgWireResult<Type> {
    if let Some(vector) = vector_type(field) {
        return Ok(vector);
    }
    Ok(match declared_type(field) {
        Some(SqlType::Uuid) => Type::UUID,
        Some(SqlType::Json) => Type::JSON,
        Some(SqlType::Jsonb) => Type::JSONB,
        Some(SqlType::Varchar(_)) => Type::VARCHAR,
        Some(SqlType::Char(_)) => Type::BPCHAR,
        Some(SqlType::Array(element)) => {
            Type::from_oid(crate::sql::arrays::type_oid(element)).unwrap_or(Type::TEXT_ARRAY)
        }
        // A row value, sent as text: `(1,x)`.
        _ if matches!(field.data_type(), DataType::Struct(_)) => Type::RECORD,
        _ => return arrow_pg::datatypes::field_into_pg_type(field),
    })
}

/// The type of a catalog's vector (`indkey`, `indclass`): a list its
/// metadata names `int2vector` or `oidvector`. As with a declared type, a
/// cast (`indkey::text`) passes the name on with another Arrow type, and
/// then the Arrow type says what the values are.
fn vector_type(field: &Field) -> Option<Type> {
    if !matches!(field.data_type(), DataType::List(_)) {
        return None;
    }
    match field.metadata().get(PG_TYPE_KEY)?.as_str() {
        "int2vector" => Some(Type::INT2_VECTOR),
        "oidvector" => Some(Type::OID_VECTOR),
        _ => None,
    }
}

pub fn fields(schema: &Schema, format: &Format) -> PgWireResult<Vec<FieldInfo>> {
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            Ok(FieldInfo::new(
                f.name().clone(),
                None,
                None,
                pg_type(f)?,
                format.format_for(i),
            ))
        })
        .collect()
}

/// Whether a column of this type is sent as a [`TypedText`].
fn is_typed_text(ty: &Type) -> bool {
    *ty == Type::UUID || *ty == Type::JSON || *ty == Type::JSONB
}

/// A uuid, json or jsonb value held as text. Its text form is the text; its
/// binary form is 16 bytes for uuid, the text for json, and a version byte
/// then the text for jsonb.
#[derive(Debug)]
struct TypedText<'a>(&'a str);

impl ToSql for TypedText<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        if *ty == Type::UUID {
            let guid = crate::sql::types::parse_uuid(self.0)
                .ok_or_else(|| format!("invalid uuid {:?}", self.0))?;
            out.put_slice(&guid.0);
            return Ok(IsNull::No);
        }
        if *ty == Type::JSONB {
            out.put_u8(1);
        }
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        is_typed_text(ty)
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for TypedText<'_> {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }
}

/// A number: binary in its column's type (an integer narrowed to int2 or
/// int4, a float as itself), text in PostgreSQL's form. Integers' digits
/// are written here: the general formatter costs more than the digits for
/// the many integers of a result.
#[derive(Debug)]
enum Number {
    Integer(i64),
    F32(f32),
    F64(f64),
}

impl ToSql for Number {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match (self, ty) {
            (Number::Integer(v), &Type::INT2) => i16::try_from(*v)?.to_sql(ty, out),
            (Number::Integer(v), &Type::INT4) => i32::try_from(*v)?.to_sql(ty, out),
            (Number::Integer(v), _) => v.to_sql(ty, out),
            (Number::F32(v), _) => v.to_sql(ty, out),
            (Number::F64(v), _) => v.to_sql(ty, out),
        }
    }
    fn accepts(ty: &Type) -> bool {
        [
            Type::INT2,
            Type::INT4,
            Type::INT8,
            Type::FLOAT4,
            Type::FLOAT8,
        ]
        .contains(ty)
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for Number {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            Number::Integer(v) => {
                let mut digits = [0u8; 20];
                let start = put_digits(u128::from(v.unsigned_abs()), &mut digits);
                if *v < 0 {
                    out.put_u8(b'-');
                }
                out.put_slice(&digits[start..]);
            }
            Number::F32(v) => put_float(*v, out),
            Number::F64(v) => put_float(*v, out),
        }
        Ok(IsNull::No)
    }
}

/// A numeric: its digits and the precision and scale of its column.
#[derive(Debug)]
struct Decimal {
    mantissa: i128,
    precision: u8,
    scale: i8,
}

impl ToSql for Decimal {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        put_decimal_binary(self.mantissa, self.precision, self.scale, out);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for Decimal {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        put_decimal(self.mantissa, self.precision, self.scale, out);
        Ok(IsNull::No)
    }
}

/// An integer column's value at `row`, if the column is one.
fn integer_at(array: &dyn Array, row: usize) -> Option<Option<Number>> {
    let any = array.as_any();
    let value = |valid: bool, value: i64| valid.then_some(Number::Integer(value));
    if let Some(ints) = any.downcast_ref::<Int64Array>() {
        Some(value(ints.is_valid(row), ints.value(row)))
    } else if let Some(ints) = any.downcast_ref::<Int32Array>() {
        Some(value(ints.is_valid(row), ints.value(row).into()))
    } else {
        any.downcast_ref::<Int16Array>()
            .map(|ints| value(ints.is_valid(row), ints.value(row).into()))
    }
}

/// A timestamp: binary as PostgreSQL's microseconds since 2000, text as
/// PostgreSQL prints it (`2026-11-21 10:11:12.5`, fraction only when not
/// zero; an instant in the session's zone, with its offset there).
#[derive(Debug)]
struct Timestamp<'a> {
    /// Since 1970-01-01.
    micros: i64,
    /// The session's zone, for an instant (a `timestamptz`).
    zone: Option<&'a SessionZone>,
}

/// Microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = PG_EPOCH_DAYS as i64 * 86_400_000_000;

/// Days from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_DAYS: i32 = 10_957;

impl ToSql for Timestamp<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        let since_pg_epoch = self.micros.checked_sub(PG_EPOCH_MICROS);
        out.put_i64(since_pg_epoch.ok_or("timestamp out of range")?);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMP || *ty == Type::TIMESTAMPTZ
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for Timestamp<'_> {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        push_timestamp(out, self.micros, self.zone);
        Ok(IsNull::No)
    }
}

/// A date: binary as PostgreSQL's days since 2000, text as PostgreSQL
/// prints it (`2026-11-21`, `0044-03-15 BC`).
#[derive(Debug)]
struct CalendarDate {
    /// Since 1970-01-01.
    days: i32,
}

impl ToSql for CalendarDate {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        let since_pg_epoch = self.days.checked_sub(PG_EPOCH_DAYS);
        out.put_i32(since_pg_epoch.ok_or("date out of range")?);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::DATE
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for CalendarDate {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        push_date(out, i64::from(self.days));
        Ok(IsNull::No)
    }
}

/// A timestamp column's value at `row`, if the column is one, in
/// PostgreSQL's microseconds (a computed timestamp, such as a cast
/// literal's, is in nanoseconds; rounded to the nearest microsecond).
fn timestamp_at<'a>(
    array: &dyn Array,
    row: usize,
    session_zone: &'a SessionZone,
) -> Option<Option<Timestamp<'a>>> {
    let DataType::Timestamp(_, zone) = array.data_type() else {
        return None;
    };
    let micros = timestamp_micros_at(array, row)?;
    Some(array.is_valid(row).then_some(Timestamp {
        micros,
        zone: zone.is_some().then_some(session_zone),
    }))
}

/// Microseconds as PostgreSQL prints a time: `hh:mm:ss`, then the
/// fraction of a second without trailing zeros (`01:30:00.5`); hours past
/// 24 for an interval's time.
fn clock_text(micros: u64) -> String {
    let (hours, minutes) = (micros / 3_600_000_000, micros / 60_000_000 % 60);
    let (seconds, fraction) = (micros / 1_000_000 % 60, micros % 1_000_000);
    let mut text = format!("{hours:02}:{minutes:02}:{seconds:02}");
    if fraction != 0 {
        text.push_str(format!(".{fraction:06}").trim_end_matches('0'));
    }
    text
}

/// A time of day in microseconds: binary as PostgreSQL's, text as it
/// prints one (`10:00:00`, `10:00:00.5`).
#[derive(Debug)]
struct TimeOfDay(i64);

impl ToSql for TimeOfDay {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_i64(self.0);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIME
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for TimeOfDay {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(clock_text(self.0.unsigned_abs()).as_bytes());
        Ok(IsNull::No)
    }
}

/// A time column's value at `row`, if the column is one (nanoseconds
/// truncated to PostgreSQL's microseconds).
fn time_at(array: &dyn Array, row: usize) -> Option<Option<TimeOfDay>> {
    use datafusion::arrow::datatypes::{
        Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    };
    let micros = match array.data_type() {
        DataType::Time32(TimeUnit::Second) => {
            i64::from(array.as_primitive::<Time32SecondType>().value(row)) * 1_000_000
        }
        DataType::Time32(_) => {
            i64::from(array.as_primitive::<Time32MillisecondType>().value(row)) * 1_000
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            array.as_primitive::<Time64MicrosecondType>().value(row)
        }
        DataType::Time64(_) => array.as_primitive::<Time64NanosecondType>().value(row) / 1_000,
        _ => return None,
    };
    Some(array.is_valid(row).then_some(TimeOfDay(micros)))
}

/// An interval: binary as PostgreSQL's (microseconds, days, months), text
/// as PostgreSQL prints it in its default style (`1 year 2 mons -3 days
/// +04:05:06.5`).
#[derive(Debug, PartialEq)]
struct Interval {
    months: i32,
    days: i32,
    micros: i64,
}

impl ToSql for Interval {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_i64(self.micros);
        out.put_i32(self.days);
        out.put_i32(self.months);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for Interval {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(self.text().as_bytes());
        Ok(IsNull::No)
    }
}

impl Interval {
    /// PostgreSQL's `EncodeInterval` in its `postgres` style: the nonzero
    /// years, months and days, each signed, a positive one after a negative
    /// one with `+`; then the time, when it is not zero or nothing came
    /// before, with the seconds' fraction without trailing zeros.
    fn text(&self) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        let mut before_negative = false;
        let fields = [
            (i64::from(self.months / 12), "year"),
            (i64::from(self.months % 12), "mon"),
            (i64::from(self.days), "day"),
        ];
        for (value, unit) in fields {
            if value == 0 {
                continue;
            }
            let space = if text.is_empty() { "" } else { " " };
            let plus = if before_negative && value > 0 {
                "+"
            } else {
                ""
            };
            let plural = if value == 1 { "" } else { "s" };
            let _ = write!(text, "{space}{plus}{value} {unit}{plural}");
            before_negative = value < 0;
        }
        if text.is_empty() || self.micros != 0 {
            let sign = match (self.micros < 0, before_negative) {
                (true, _) => "-",
                (false, true) => "+",
                (false, false) => "",
            };
            let space = if text.is_empty() { "" } else { " " };
            let clock = clock_text(self.micros.unsigned_abs());
            let _ = write!(text, "{space}{sign}{clock}");
        }
        text
    }
}

/// An interval column's value at `row`, if the column is one (nanoseconds
/// truncated to PostgreSQL's microseconds).
fn interval_at(array: &dyn Array, row: usize) -> Option<Option<Interval>> {
    use datafusion::arrow::datatypes::{
        IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType,
    };
    let DataType::Interval(unit) = array.data_type() else {
        return None;
    };
    let value = match unit {
        IntervalUnit::YearMonth => Interval {
            months: array.as_primitive::<IntervalYearMonthType>().value(row),
            days: 0,
            micros: 0,
        },
        IntervalUnit::DayTime => {
            let v = array.as_primitive::<IntervalDayTimeType>().value(row);
            Interval {
                months: 0,
                days: v.days,
                micros: i64::from(v.milliseconds) * 1_000,
            }
        }
        IntervalUnit::MonthDayNano => {
            let v = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            Interval {
                months: v.months,
                days: v.days,
                micros: v.nanoseconds / 1_000,
            }
        }
    };
    Some(array.is_valid(row).then_some(value))
}

/// A value already encoded in the format it is sent in.
#[derive(Debug)]
struct Encoded(BytesMut);

impl ToSql for Encoded {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(&self.0);
        Ok(IsNull::No)
    }
    fn accepts(_: &Type) -> bool {
        true
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for Encoded {
    fn to_sql_text(
        &self,
        _: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(&self.0);
        Ok(IsNull::No)
    }
}

/// A row value (a struct) in text, as PostgreSQL's `record_out` writes
/// one: `(1,ann,"a b",)`, each field's text as a column's would be, quoted
/// when empty or holding a quote, backslash, parenthesis, comma or white
/// space (quotes and backslashes doubled inside), nothing for NULL (`None`
/// for a NULL row). Its binary form is left to arrow-pg.
fn record_text(
    records: &StructArray,
    row: usize,
    zone: &SessionZone,
) -> PgWireResult<Option<Encoded>> {
    if records.is_null(row) {
        return Ok(None);
    }
    let batch = RecordBatch::from(records.slice(row, 1));
    let fields = fields(batch.schema_ref(), &Format::UnifiedText)?;
    let widths: Vec<_> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| char_width(f))
        .collect();
    let mut texts = FieldValues::default();
    encode_row(&mut texts, &batch, 0, &fields, &widths, zone)?;
    let mut out = BytesMut::new();
    out.put_u8(b'(');
    for (i, text) in texts.0.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        let Some(text) = text else { continue };
        let quoted = text.is_empty()
            || text.iter().any(|&b| {
                matches!(b, b'"' | b'\\' | b'(' | b')' | b',') || b.is_ascii_whitespace()
            });
        if !quoted {
            out.put_slice(text);
            continue;
        }
        out.put_u8(b'"');
        for &b in text.iter() {
            if b == b'"' || b == b'\\' {
                out.put_u8(b);
            }
            out.put_u8(b);
        }
        out.put_u8(b'"');
    }
    out.put_u8(b')');
    Ok(Some(Encoded(out)))
}

/// An array (a list) as PostgreSQL sends one: text in its text form (see
/// [`crate::sql::arrays::list_texts`]; instants in `zone`), binary as `array_send` writes it
/// (dimensions, whether an element is NULL, the element type, then each
/// element's length and bytes). `None` for NULL.
fn array_value(
    lists: &ListArray,
    row: usize,
    field: &FieldInfo,
    zone: &SessionZone,
) -> PgWireResult<Option<Encoded>> {
    if lists.is_null(row) {
        return Ok(None);
    }
    let sql_error = |e: crate::sql::SqlError| super::error::to_pgwire(e);
    let vector = [Type::INT2_VECTOR, Type::OID_VECTOR].contains(field.datatype());
    if field.format() == FieldFormat::Text && vector {
        let one: ArrayRef = Arc::new(lists.slice(row, 1));
        let text = crate::sql::arrays::vector_texts(&one).map_err(sql_error)?;
        let text = text.as_string::<i32>().value(0);
        return Ok(Some(Encoded(BytesMut::from(text.as_bytes()))));
    }
    if field.format() == FieldFormat::Text {
        let one: ArrayRef = Arc::new(lists.slice(row, 1));
        let text = crate::sql::arrays::list_texts(&one, zone).map_err(sql_error)?;
        let text = text.as_string::<i32>().value(0);
        return Ok(Some(Encoded(BytesMut::from(text.as_bytes()))));
    }
    let element = match field.datatype().kind() {
        Kind::Array(element) => element.clone(),
        _ => Type::TEXT,
    };
    let values = lists.value(row);
    let schema = Schema::new(vec![Field::new(
        "element",
        values.data_type().clone(),
        true,
    )]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![values.clone()])
        .map_err(|e| sql_error(e.into()))?;
    let fields = [FieldInfo::new(
        "element".into(),
        None,
        None,
        element.clone(),
        FieldFormat::Binary,
    )];
    let mut elements = FieldValues::default();
    for r in 0..values.len() {
        // Binary: an instant's form is the same in every zone.
        encode_row(
            &mut elements,
            &batch,
            r,
            &fields,
            &[None],
            &SessionZone::utc(),
        )?;
    }
    let mut out = BytesMut::new();
    let dimensions = i32::from(!values.is_empty());
    out.put_i32(dimensions);
    out.put_i32(i32::from(values.null_count() > 0));
    out.put_u32(element.oid());
    if dimensions == 1 {
        out.put_i32(values.len() as i32);
        out.put_i32(1);
    }
    for value in &elements.0 {
        match value {
            Some(bytes) => {
                out.put_i32(bytes.len() as i32);
                out.put_slice(bytes);
            }
            None => out.put_i32(-1),
        }
    }
    Ok(Some(Encoded(out)))
}

/// One row's fields, each encoded in its field's format (NULL as `None`).
#[derive(Default)]
struct FieldValues(Vec<Option<BytesMut>>);

impl arrow_pg::encoder::Encoder for FieldValues {
    type Item = ();

    fn encode_field<T>(&mut self, value: &T, field: &FieldInfo) -> PgWireResult<()>
    where
        T: ToSql + ToSqlText + Sized,
    {
        let mut bytes = BytesMut::new();
        let null = match field.format() {
            FieldFormat::Text => {
                value.to_sql_text(field.datatype(), &mut bytes, field.format_options())?
            }
            FieldFormat::Binary => value.to_sql(field.datatype(), &mut bytes)?,
        };
        self.0.push(matches!(null, IsNull::No).then_some(bytes));
        Ok(())
    }

    fn take_row(&mut self) {}
}

/// The length of a `character(n)` column, whose values are sent padded
/// with spaces to it (they are stored without).
fn char_width(field: &Field) -> Option<usize> {
    match declared_type(field)? {
        SqlType::Char(n) => Some(n as usize),
        _ => None,
    }
}

/// Appends row `row` of `batch` to the encoder; `widths` are the columns'
/// [`char_width`]s.
fn encode_row<E: arrow_pg::encoder::Encoder>(
    encoder: &mut E,
    batch: &RecordBatch,
    row: usize,
    fields: &[FieldInfo],
    widths: &[Option<usize>],
    zone: &SessionZone,
) -> PgWireResult<()> {
    let schema = batch.schema_ref();
    for (col, pg_field) in fields.iter().enumerate() {
        let array = batch.column(col);
        let ty = pg_field.datatype();
        let integer = match *ty {
            Type::INT2 | Type::INT4 | Type::INT8 => integer_at(array.as_ref(), row),
            _ => None,
        };
        if let Some(value) = integer {
            encoder.encode_field(&value, pg_field)?;
        } else if let (Some(width), Some(strings)) =
            (widths[col], array.as_any().downcast_ref::<StringArray>())
        {
            let value = strings.is_valid(row).then(|| Padded {
                text: strings.value(row),
                width,
            });
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(value) = timestamp_at(array.as_ref(), row, zone) {
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(dates) = array.as_any().downcast_ref::<Date32Array>() {
            let value = dates.is_valid(row).then(|| CalendarDate {
                days: dates.value(row),
            });
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(value) = interval_at(array.as_ref(), row) {
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(value) = time_at(array.as_ref(), row) {
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(floats) = array.as_any().downcast_ref::<Float64Array>() {
            let value = floats.is_valid(row).then(|| Number::F64(floats.value(row)));
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(floats) = array.as_any().downcast_ref::<Float32Array>() {
            let value = floats.is_valid(row).then(|| Number::F32(floats.value(row)));
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(decimals) = array.as_any().downcast_ref::<Decimal128Array>() {
            let value = decimals.is_valid(row).then(|| Decimal {
                mantissa: decimals.value(row),
                precision: decimals.precision(),
                scale: decimals.scale(),
            });
            encoder.encode_field(&value, pg_field)?;
        } else if is_typed_text(ty) {
            let strings = array
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| {
                    PgWireError::ApiError(format!("column {} is not text", pg_field.name()).into())
                })?;
            let value = strings.is_valid(row).then(|| TypedText(strings.value(row)));
            encoder.encode_field(&value, pg_field)?;
        } else if let Some(lists) = array.as_list_opt::<i32>() {
            encoder.encode_field(&array_value(lists, row, pg_field, zone)?, pg_field)?;
        } else if let (FieldFormat::Text, Some(records)) =
            (pg_field.format(), array.as_struct_opt())
        {
            encoder.encode_field(&record_text(records, row, zone)?, pg_field)?;
        } else {
            arrow_pg::encoder::encode_value(encoder, array, row, schema.field(col), pg_field)?;
        }
    }
    Ok(())
}

/// Encodes every row of a stream of record batches, with a fresh encoder
/// per batch (made for the batch's number of rows).
fn encode_batches<E>(
    batches: impl Stream<Item = datafusion::error::Result<RecordBatch>> + Send + 'static,
    fields: Arc<Vec<FieldInfo>>,
    zone: SessionZone,
    make_encoder: impl Fn(usize) -> E + Send + 'static,
) -> impl Stream<Item = PgWireResult<E::Item>> + Send + 'static
where
    E: arrow_pg::encoder::Encoder,
    E::Item: Send + 'static,
{
    batches.flat_map(move |batch| {
        let rows: Vec<PgWireResult<E::Item>> = match batch {
            Err(e) => vec![Err(super::error::to_pgwire(
                crate::sql::SqlError::DataFusion(e),
            ))],
            Ok(batch) => {
                let mut encoder = make_encoder(batch.num_rows());
                let widths: Vec<Option<usize>> = batch
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| char_width(f))
                    .collect();
                (0..batch.num_rows())
                    .map(|r| {
                        encode_row(&mut encoder, &batch, r, &fields, &widths, &zone)?;
                        Ok(encoder.take_row())
                    })
                    .collect()
            }
        };
        futures::stream::iter(rows)
    })
}

/// Data rows cut from one buffer: pgwire's encoder starts each batch with
/// 128 bytes and grows by small steps, which showed in the profile of a
/// 100-row read (growing buffers, `BytesMut::reserve_inner` with the
/// reallocations under it, was 3.3% of the server's samples, and copying
/// into them 5.5%). Once a row is encoded,
/// the buffer makes room for as many more rows of its size as the batch
/// has left, so a batch takes about one allocation. The first row starts
/// in [`FIRST_ROW_BYTES`]: a point select's row of ten columns otherwise
/// grew its buffer as its fields were written (reallocations, under the
/// numeric and integer fields' encoders among others, about 2% of the
/// server's samples in its profile).
struct DataRows {
    buffer: BytesMut,
    fields: usize,
    left: usize,
}

impl DataRows {
    fn new(rows: usize) -> Self {
        DataRows {
            buffer: BytesMut::with_capacity(FIRST_ROW_BYTES),
            fields: 0,
            left: rows,
        }
    }
}

/// Room for a batch's first data row before it is encoded.
const FIRST_ROW_BYTES: usize = 256;

impl arrow_pg::encoder::Encoder for DataRows {
    type Item = DataRow;

    fn encode_field<T>(&mut self, value: &T, field: &FieldInfo) -> PgWireResult<()>
    where
        T: ToSql + ToSqlText + Sized,
    {
        let start = self.buffer.len();
        self.buffer.put_i32(-1);
        let null = if field.format() == FieldFormat::Text {
            let options = field.format_options();
            value.to_sql_text(field.datatype(), &mut self.buffer, options)?
        } else {
            value.to_sql(field.datatype(), &mut self.buffer)?
        };
        if let IsNull::No = null {
            let length = (self.buffer.len() - start - 4) as i32;
            self.buffer[start..start + 4].copy_from_slice(&length.to_be_bytes());
        }
        self.fields += 1;
        Ok(())
    }

    fn take_row(&mut self) -> DataRow {
        let row = self.buffer.split();
        self.left = self.left.saturating_sub(1);
        self.buffer.reserve(row.len() * self.left);
        DataRow::new(row, std::mem::take(&mut self.fields) as i16)
    }
}

/// The data rows of a stream of record batches, instants shown in `zone`.
pub fn rows(
    batches: impl Stream<Item = datafusion::error::Result<RecordBatch>> + Send + 'static,
    fields: Arc<Vec<FieldInfo>>,
    zone: SessionZone,
) -> impl Stream<Item = PgWireResult<DataRow>> + Send + 'static {
    encode_batches(batches, fields, zone, DataRows::new)
}

/// How [`stored_rows`] encodes a column's stored values: as their Arrow
/// form would be, which for some types takes the column's Arrow field;
/// `None` for a column whose values take a record batch (arrays).
fn stored_column(field: &Field, pg_field: &FieldInfo) -> Option<StoredColumn> {
    Some(match (pg_field.datatype(), field.data_type()) {
        (&Type::BPCHAR, _) => StoredColumn::Char(char_width(field)?),
        (&Type::NUMERIC, &DataType::Decimal128(precision, scale)) => StoredColumn::Decimal {
            precision,
            scale: u8::try_from(scale).ok()?,
        },
        (&Type::DATE, &DataType::Date32) => StoredColumn::Date,
        (
            &Type::TIMESTAMP | &Type::TIMESTAMPTZ,
            DataType::Timestamp(TimeUnit::Microsecond, zone),
        ) => StoredColumn::Timestamp {
            zoned: zone.is_some(),
        },
        (
            &Type::INT2
            | &Type::INT4
            | &Type::INT8
            | &Type::FLOAT4
            | &Type::FLOAT8
            | &Type::TEXT
            | &Type::VARCHAR
            | &Type::BOOL
            | &Type::BYTEA
            | &Type::UUID
            | &Type::JSON
            | &Type::JSONB,
            _,
        ) => StoredColumn::Plain,
        _ => return None,
    })
}

/// What encoding a column's stored value needs besides its value.
#[derive(Clone, Copy)]
enum StoredColumn {
    /// The value alone.
    Plain,
    /// char(n): blank-padded to its width.
    Char(usize),
    /// numeric(p, s): the value at the column's scale.
    Decimal { precision: u8, scale: u8 },
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since 1970-01-01, with a time zone or without.
    Timestamp { zoned: bool },
}

/// The data rows of rows read by key, encoded from their stored values
/// with the same values [`encode_row`] encodes from their Arrow form, with
/// no record batch between; `None` when a column's type is not one of
/// [`stored_column`]'s.
pub fn stored_rows(
    rows: &StoredRows,
    fields: &[FieldInfo],
    zone: &SessionZone,
) -> PgWireResult<Option<Vec<DataRow>>> {
    let columns: Option<Vec<StoredColumn>> = rows
        .schema()
        .fields()
        .iter()
        .zip(fields)
        .map(|(field, pg_field)| stored_column(field, pg_field))
        .collect();
    let Some(columns) = columns else {
        return Ok(None);
    };
    let mut sink = StoredSink {
        encoder: DataRows::new(rows.len()),
        fields,
        columns,
        rows: Vec::with_capacity(rows.len()),
        zone,
    };
    rows.decode_into(&mut sink)?;
    Ok(Some(sink.rows))
}

struct StoredSink<'a> {
    encoder: DataRows,
    fields: &'a [FieldInfo],
    columns: Vec<StoredColumn>,
    rows: Vec<DataRow>,
    /// The session's, in which instants are shown.
    zone: &'a SessionZone,
}

impl RowSink for StoredSink<'_> {
    type Error = PgWireError;

    fn value(&mut self, column: usize, value: Option<ValueRef>) -> PgWireResult<()> {
        use arrow_pg::encoder::Encoder;
        let field = &self.fields[column];
        let encoder = &mut self.encoder;
        let Some(value) = value else {
            return encoder.encode_field(&None::<Number>, field);
        };
        let ty = field.datatype();
        match (value, self.columns[column]) {
            // An int2 column's Arrow form holds no value beyond int2's range.
            (ValueRef::Int32(v), _) if *ty == Type::INT2 => encoder.encode_field(
                &i16::try_from(v).ok().map(|v| Number::Integer(v.into())),
                field,
            ),
            (ValueRef::Int32(v), _) => encoder.encode_field(&Number::Integer(v.into()), field),
            (ValueRef::Int64(v), _) => encoder.encode_field(&Number::Integer(v), field),
            (ValueRef::Double(v), _) if *ty == Type::FLOAT4 => {
                encoder.encode_field(&Number::F32(v as f32), field)
            }
            (ValueRef::Double(v), _) => encoder.encode_field(&Number::F64(v), field),
            (ValueRef::Boolean(v), _) => encoder.encode_field(&v, field),
            (ValueRef::Binary(v), _) => encoder.encode_field(&v, field),
            (ValueRef::Guid(v), _) => encoder.encode_field(&TypedText(&v.to_string()), field),
            (ValueRef::String(v), StoredColumn::Char(width)) => {
                encoder.encode_field(&Padded { text: v, width }, field)
            }
            (ValueRef::String(v) | ValueRef::Json(v), _) if is_typed_text(ty) => {
                encoder.encode_field(&TypedText(v), field)
            }
            (ValueRef::String(v) | ValueRef::Json(v), _) => encoder.encode_field(&v, field),
            // A value the column's scale cannot hold is NULL in its Arrow
            // form too.
            (ValueRef::Decimal(d), StoredColumn::Decimal { precision, scale }) => {
                let value = rescale(d, scale).map(|mantissa| Decimal {
                    mantissa,
                    precision,
                    scale: scale as i8,
                });
                encoder.encode_field(&value, field)
            }
            (ValueRef::Date(Date(days)), StoredColumn::Date) => {
                encoder.encode_field(&CalendarDate { days }, field)
            }
            (ValueRef::DateTime(DateTime(micros)), StoredColumn::Timestamp { zoned }) => {
                let zone = zoned.then_some(self.zone);
                encoder.encode_field(&Timestamp { micros, zone }, field)
            }
            (other, _) => Err(PgWireError::ApiError(
                format!(
                    "column {} of type {ty} holds a stored {} value",
                    field.name(),
                    other.property_type().edm_name()
                )
                .into(),
            )),
        }
    }

    fn row_done(&mut self) -> PgWireResult<()> {
        use arrow_pg::encoder::Encoder;
        self.rows.push(self.encoder.take_row());
        Ok(())
    }
}

/// A char(n) value, sent blank-padded to its width as PostgreSQL sends
/// one, in either format.
#[derive(Debug)]
struct Padded<'a> {
    text: &'a str,
    width: usize,
}

impl Padded<'_> {
    fn put(&self, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(self.text.as_bytes());
        let pad = self.width.saturating_sub(self.text.chars().count());
        out.put_bytes(b' ', pad);
        Ok(IsNull::No)
    }
}

impl ToSql for Padded<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.put(out)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::BPCHAR
    }
    postgres_types::to_sql_checked!();
}

impl ToSqlText for Padded<'_> {
    fn to_sql_text(
        &self,
        _: &Type,
        out: &mut BytesMut,
        _: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.put(out)
    }
}

/// The COPY TO STDOUT data of a stream of record batches, in text or CSV.
pub fn copy_rows(
    schema: &Schema,
    batches: impl Stream<Item = datafusion::error::Result<RecordBatch>> + Send + 'static,
    format: &crate::sql::copy::CopyFormat,
    zone: SessionZone,
) -> PgWireResult<impl Stream<Item = PgWireResult<CopyData>> + Send + 'static> {
    let fields = Arc::new(fields(schema, &Format::UnifiedText)?);
    let delimiter = format.delimiter.to_string();
    let make_encoder = {
        let fields = fields.clone();
        let format = format.clone();
        move |_rows| {
            if format.csv {
                CopyEncoder::new_csv(
                    fields.clone(),
                    CopyCsvOptions {
                        delimiter: format.delimiter.to_string().as_str().into(),
                        quote: format.quote.to_string().as_str().into(),
                        escape: format.escape.to_string().as_str().into(),
                        null_string: format.null.as_str().into(),
                        force_quote: Vec::new(),
                    },
                )
            } else {
                CopyEncoder::new_text(
                    fields.clone(),
                    CopyTextOptions {
                        delimiter: format.delimiter.to_string().as_str().into(),
                        null_string: format.null.as_str().into(),
                    },
                )
            }
        }
    };
    // The header goes in front of the first row, so that the row count the
    // client is told is the number of rows.
    let mut header = format.header.then(|| {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        format!("{}\n", names.join(&delimiter))
    });
    let rows = encode_batches(batches, fields, zone, make_encoder);
    let rows = rows.map(move |row| match (header.take(), row) {
        (Some(h), Ok(data)) => {
            let mut bytes = h.into_bytes();
            bytes.extend_from_slice(&data.data);
            Ok(CopyData::new(bytes::Bytes::from(bytes)))
        }
        (_, row) => row,
    });
    Ok(rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn intervals_print_like_postgres() {
        let interval = |months, days, micros| {
            super::Interval {
                months,
                days,
                micros,
            }
            .text()
        };
        assert_eq!(
            interval(14, 2, 3 * 3_600_000_000),
            "1 year 2 mons 2 days 03:00:00"
        );
        assert_eq!(interval(-14, 0, 0), "-1 years -2 mons");
        assert_eq!(interval(0, 0, 1_500_000), "00:00:01.5");
        assert_eq!(interval(0, 0, 0), "00:00:00");
        assert_eq!(interval(0, 0, 25 * 3_600_000_000), "25:00:00");
        assert_eq!(interval(0, 1, -1_000_000), "1 day -00:00:01");
        assert_eq!(interval(0, -1, 3_600_000_000), "-1 days +01:00:00");
        assert_eq!(interval(1, 0, 0), "1 mon");
    }

    #[test]
    fn integers_print_in_decimal_and_encode_in_their_width() {
        use super::{FormatOptions, Number, ToSql, ToSqlText, Type};
        for v in [0, 7, -7, 10, -100, 1234567890, i64::MAX, i64::MIN] {
            let mut out = bytes::BytesMut::new();
            Number::Integer(v)
                .to_sql_text(&Type::INT8, &mut out, &FormatOptions::default())
                .unwrap();
            assert_eq!(out, v.to_string().as_bytes(), "{v}");
        }
        let binary = |v: i64, ty: &Type| {
            let mut out = bytes::BytesMut::new();
            Number::Integer(v)
                .to_sql(ty, &mut out)
                .map(|_| out.to_vec())
        };
        assert_eq!(binary(-2, &Type::INT2).unwrap(), (-2i16).to_be_bytes());
        assert_eq!(binary(-2, &Type::INT4).unwrap(), (-2i32).to_be_bytes());
        assert_eq!(binary(-2, &Type::INT8).unwrap(), (-2i64).to_be_bytes());
        assert!(binary(1 << 40, &Type::INT4).is_err());
    }
}
