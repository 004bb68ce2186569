//! Parameter types and values of the extended protocol.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use datafusion::arrow::compute::CastOptions;
use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalUnit, TimeUnit};
use datafusion::common::{ParamValues, ScalarValue};
use pgwire::api::portal::Portal;
use pgwire::api::Type;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::types::format::FormatOptions;
use pgwire::types::FromSqlText;
use postgres_types::Kind;

use crate::sql::arrays::array_type_oid;
use crate::sql::time_zone::SessionZone;
use crate::sql::types::{cast_input, list_of, uuid_input, UTC};
use crate::sql::Prepared;
use crate::sql::SqlError;

/// The PostgreSQL type reported for a parameter of this Arrow type.
pub fn pg_param_type(ty: Option<&DataType>) -> Type {
    match ty {
        Some(DataType::Boolean) => Type::BOOL,
        Some(DataType::Int8 | DataType::Int16) => Type::INT2,
        Some(DataType::Int32) => Type::INT4,
        Some(DataType::Int64) => Type::INT8,
        Some(DataType::Float32) => Type::FLOAT4,
        Some(DataType::Float64) => Type::FLOAT8,
        Some(DataType::Decimal128(..)) => Type::NUMERIC,
        Some(DataType::Date32) => Type::DATE,
        Some(DataType::Time64(_)) => Type::TIME,
        Some(DataType::Timestamp(_, None)) => Type::TIMESTAMP,
        Some(DataType::Timestamp(_, Some(_))) => Type::TIMESTAMPTZ,
        Some(DataType::Binary) => Type::BYTEA,
        Some(DataType::Interval(_)) => Type::INTERVAL,
        Some(DataType::List(element)) => {
            let element = pg_param_type(Some(element.data_type()));
            array_type_oid(element.oid())
                .and_then(Type::from_oid)
                .unwrap_or(Type::TEXT_ARRAY)
        }
        _ => Type::TEXT,
    }
}

/// The type a parameter the client declared as `ty` (in Parse) is planned
/// as, for the types whose values a guess from the statement could
/// misread (a numeric added to `1`, a date compared with nothing); `None`
/// leaves the type to the statement, as for text and unknown.
pub fn declared_type(ty: &Type) -> Option<DataType> {
    Some(match *ty {
        Type::BOOL => DataType::Boolean,
        Type::INT2 => DataType::Int16,
        Type::INT4 => DataType::Int32,
        Type::INT8 => DataType::Int64,
        Type::FLOAT4 => DataType::Float32,
        Type::FLOAT8 => DataType::Float64,
        Type::NUMERIC => DataType::Decimal128(38, 10),
        Type::DATE => DataType::Date32,
        Type::TIME => DataType::Time64(TimeUnit::Microsecond),
        Type::TIMESTAMP => DataType::Timestamp(TimeUnit::Microsecond, None),
        Type::TIMESTAMPTZ => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
        Type::BYTEA => DataType::Binary,
        Type::INTERVAL => DataType::Interval(IntervalUnit::MonthDayNano),
        _ => match ty.kind() {
            Kind::Array(element) => list_of(match *element {
                Type::TEXT | Type::VARCHAR => DataType::Utf8,
                ref element => declared_type(element)?,
            }),
            _ => return None,
        },
    })
}

/// A parameter's value that could not be read: PostgreSQL's error for
/// its text, with the parameter named in the CONTEXT as PostgreSQL names
/// it (`unnamed portal parameter $1 = '...'`).
fn bad(portal: &str, i: usize, e: PgWireError) -> PgWireError {
    let mut info = match e {
        PgWireError::UserError(info) => *info,
        e => pgwire::error::ErrorInfo::new(
            "ERROR".into(),
            "22P02".into(),
            format!("invalid value for parameter ${}: {e}", i + 1),
        ),
    };
    let portal = match portal {
        pgwire::api::DEFAULT_NAME | "" => "unnamed portal".to_owned(),
        name => format!("portal \"{name}\""),
    };
    info.where_context = Some(format!("{portal} parameter ${} = '...'", i + 1));
    PgWireError::UserError(Box::new(info))
}

/// The values of a portal's parameters, as the statement's parameter types
/// (an instant's text without a zone read in `zone`, the session's).
pub fn values(
    portal: &Portal<std::sync::Arc<Prepared>>,
    zone: &SessionZone,
) -> PgWireResult<ParamValues> {
    let prepared = &portal.statement.statement;
    let mut out = Vec::with_capacity(portal.parameter_len());
    for i in 0..portal.parameter_len() {
        let expected = prepared.param_types.get(i).cloned().flatten();
        // The type the client sent the value as: its own declaration, else ours.
        let declared = portal
            .statement
            .parameter_types
            .get(i)
            .cloned()
            .flatten()
            .unwrap_or_else(|| pg_param_type(expected.as_ref()));
        let raw = portal.parameters.get(i).and_then(|p| p.as_deref());
        let binary = portal.parameter_format.is_binary(i);
        let value = decode(raw, binary, &declared, zone).map_err(|e| bad(&portal.name, i, e))?;
        let value = match &expected {
            Some(target) if !value.is_null() && value.data_type() != *target => {
                read_as(&value, target, zone).map_err(|e| bad(&portal.name, i, e.into()))?
            }
            Some(target) if value.is_null() => {
                ScalarValue::try_from(target).unwrap_or(ScalarValue::Null)
            }
            _ => value,
        };
        out.push(value);
    }
    Ok(ParamValues::from(out))
}

/// A value of type `ty` sent in text or binary (`None` for NULL).
fn value<T>(raw: Option<&[u8]>, binary: bool, ty: &Type) -> PgWireResult<Option<T>>
where
    T: for<'a> postgres_types::FromSql<'a> + for<'a> FromSqlText<'a>,
{
    let Some(raw) = raw else {
        return Ok(None);
    };
    if binary {
        return T::from_sql(ty, raw)
            .map(Some)
            .map_err(PgWireError::FailedToParseParameter);
    }
    T::from_sql_text(ty, raw, &FormatOptions::default())
        .map(Some)
        .map_err(|_| {
            let name = declared_type(ty).and_then(|t| crate::sql::types::sql_name(&t));
            let name = name.as_deref().unwrap_or(ty.name());
            SqlError::unreadable(&String::from_utf8_lossy(raw), name).into()
        })
}

/// `value` as `target`, as a literal is cast (a text read by
/// [`cast_input`]), refusing what `target` cannot hold.
fn read_as(
    value: &ScalarValue,
    target: &DataType,
    zone: &SessionZone,
) -> Result<ScalarValue, SqlError> {
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    let cast = cast_input(&value.to_array()?, target, &strict, zone)?;
    Ok(ScalarValue::try_from_array(&cast, 0)?)
}

fn decode(
    raw: Option<&[u8]>,
    binary: bool,
    ty: &Type,
    zone: &SessionZone,
) -> PgWireResult<ScalarValue> {
    // A date, a time of day or a timestamp sent as text reads as the same
    // text written as a literal of its type: PostgreSQL's forms, a time
    // without seconds or an offset of hours among them.
    if !binary
        && matches!(
            *ty,
            Type::DATE | Type::TIME | Type::TIMESTAMP | Type::TIMESTAMPTZ
        )
    {
        if let Some(target) = declared_type(ty) {
            return read_as(&text(raw), &target, zone).map_err(PgWireError::from);
        }
    }
    Ok(match *ty {
        Type::BOOL => ScalarValue::Boolean(value::<bool>(raw, binary, ty)?),
        Type::INT2 => ScalarValue::Int16(value::<i16>(raw, binary, ty)?),
        Type::INT4 => ScalarValue::Int32(value::<i32>(raw, binary, ty)?),
        Type::INT8 => ScalarValue::Int64(value::<i64>(raw, binary, ty)?),
        Type::FLOAT4 => ScalarValue::Float32(value::<f32>(raw, binary, ty)?),
        Type::FLOAT8 => ScalarValue::Float64(value::<f64>(raw, binary, ty)?),
        Type::NUMERIC => match value::<rust_decimal::Decimal>(raw, binary, ty)? {
            Some(d) => ScalarValue::Decimal128(Some(d.mantissa()), 38, d.scale() as i8),
            None => ScalarValue::Decimal128(None, 38, 0),
        },
        Type::DATE => ScalarValue::Date32(value::<NaiveDate>(raw, binary, ty)?.map(|d| {
            (d - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()).num_days() as i32
        })),
        Type::TIME => {
            ScalarValue::Time64Microsecond(value::<NaiveTime>(raw, binary, ty)?.map(|t| {
                i64::from(t.num_seconds_from_midnight()) * 1_000_000
                    + i64::from(t.nanosecond() / 1_000)
            }))
        }
        Type::TIMESTAMP => ScalarValue::TimestampMicrosecond(
            value::<NaiveDateTime>(raw, binary, ty)?.map(|t| t.and_utc().timestamp_micros()),
            None,
        ),
        Type::TIMESTAMPTZ => ScalarValue::TimestampMicrosecond(
            value::<DateTime<FixedOffset>>(raw, binary, ty)?.map(|t| t.timestamp_micros()),
            Some(UTC.into()),
        ),
        Type::BYTEA => ScalarValue::Binary(value::<Vec<u8>>(raw, binary, ty)?),
        // `interval_send`: microseconds, days, months.
        Type::INTERVAL if binary => match raw {
            Some(&[a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p]) => {
                let micros = i64::from_be_bytes([a, b, c, d, e, f, g, h]);
                let days = i32::from_be_bytes([i, j, k, l]);
                let months = i32::from_be_bytes([m, n, o, p]);
                ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(
                    months,
                    days,
                    micros.saturating_mul(1000),
                )))
            }
            Some(other) => {
                return Err(PgWireError::ApiError(
                    format!("a binary interval has 16 bytes, not {}", other.len()).into(),
                ))
            }
            None => ScalarValue::IntervalMonthDayNano(None),
        },
        Type::UUID if binary => match raw {
            Some(bytes) => match <[u8; 16]>::try_from(bytes) {
                Ok(uuid) => ScalarValue::Utf8(Some(crate::model::Guid(uuid).to_string())),
                Err(_) => {
                    return Err(PgWireError::ApiError(
                        format!("a binary uuid has 16 bytes, not {}", bytes.len()).into(),
                    ))
                }
            },
            None => ScalarValue::Utf8(None),
        },
        Type::UUID => uuid_input(&text(raw))?,
        Type::JSONB if binary => ScalarValue::Utf8(
            raw.map(|b| String::from_utf8_lossy(b.get(1..).unwrap_or_default()).into_owned()),
        ),
        _ => match ty.kind() {
            Kind::Array(element) => match raw {
                Some(raw) if binary => binary_array(raw, element)?,
                Some(raw) => text_array(raw, element, zone)?,
                None => ScalarValue::Utf8(None),
            },
            _ => text(raw),
        },
    })
}

fn text(raw: Option<&[u8]>) -> ScalarValue {
    ScalarValue::Utf8(raw.map(|b| String::from_utf8_lossy(b).into_owned()))
}

/// An array in PostgreSQL's binary form (`array_send`'s): a list of its
/// elements, each decoded as a parameter of the element type.
fn binary_array(raw: &[u8], element: &Type) -> PgWireResult<ScalarValue> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> PgWireResult<&'a [u8]> {
        let bytes = rest
            .get(..n)
            .ok_or_else(|| PgWireError::ApiError("malformed binary array".into()))?;
        *rest = &rest[n..];
        Ok(bytes)
    }
    fn int(rest: &mut &[u8]) -> PgWireResult<i32> {
        let bytes = take(rest, 4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
    let mut rest = raw;
    let dimensions = int(&mut rest)?;
    let _has_nulls = int(&mut rest)?;
    let _element_oid = int(&mut rest)?;
    let count = match dimensions {
        0 => 0,
        1 => {
            let count = int(&mut rest)?;
            let _lower_bound = int(&mut rest)?;
            count
        }
        _ => {
            return Err(PgWireError::ApiError(
                "arrays of arrays are not supported".into(),
            ))
        }
    };
    let mut elements = Vec::with_capacity((count.max(0) as usize).min(raw.len() / 4));
    for _ in 0..count {
        let bytes = match usize::try_from(int(&mut rest)?) {
            Ok(length) => Some(take(&mut rest, length)?),
            Err(_) => None,
        };
        elements.push(decode(bytes, true, element, &SessionZone::utc())?);
    }
    list(&elements, element)
}

/// An array in PostgreSQL's text form (`array_in`'s): a list of its
/// elements, each read as a parameter of the element type sent as text
/// (a uuid's text as the uuid it names, a date's as PostgreSQL reads it).
fn text_array(raw: &[u8], element: &Type, zone: &SessionZone) -> PgWireResult<ScalarValue> {
    let elements = crate::sql::arrays::parse_literal(&String::from_utf8_lossy(raw))?
        .iter()
        .map(|e| decode(e.as_deref().map(str::as_bytes), false, element, zone))
        .collect::<PgWireResult<Vec<_>>>()?;
    list(&elements, element)
}

/// A list of `elements`, values of parameters of type `element`.
fn list(elements: &[ScalarValue], element: &Type) -> PgWireResult<ScalarValue> {
    let element_type = decode(None, true, element, &SessionZone::utc())?.data_type();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        elements,
        &element_type,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(text: &str) -> i64 {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .unwrap()
            .and_utc()
            .timestamp_micros()
    }

    #[test]
    fn dates_and_timestamps_sent_as_text_are_read_as_postgres_reads_them() {
        let naive = |text| ScalarValue::TimestampMicrosecond(Some(micros(text)), None);
        let zoned = |text| ScalarValue::TimestampMicrosecond(Some(micros(text)), Some(UTC.into()));
        for (ty, text, read) in [
            (
                Type::TIMESTAMP,
                "2020-01-01 10:00",
                naive("2020-01-01 10:00:00"),
            ),
            (Type::TIMESTAMP, "2020-01-01 9:30:15.5", {
                ScalarValue::TimestampMicrosecond(
                    Some(micros("2020-01-01 09:30:15") + 500_000),
                    None,
                )
            }),
            // A timestamp without time zone ignores the offset.
            (
                Type::TIMESTAMP,
                "2020-01-01 10:00:00+02",
                naive("2020-01-01 10:00:00"),
            ),
            (
                Type::TIMESTAMP,
                "1500-03-01 12:00:00",
                naive("1500-03-01 12:00:00"),
            ),
            (
                Type::TIMESTAMPTZ,
                "2020-01-01 10:00+02",
                zoned("2020-01-01 08:00:00"),
            ),
            (
                Type::TIMESTAMPTZ,
                "2020-01-01T10:00:00Z",
                zoned("2020-01-01 10:00:00"),
            ),
            (Type::DATE, "2020-02-29", ScalarValue::Date32(Some(18_321))),
            (
                Type::DATE,
                "2020-02-29 +00",
                ScalarValue::Date32(Some(18_321)),
            ),
        ] {
            let value = decode(Some(text.as_bytes()), false, &ty, &SessionZone::utc()).unwrap();
            assert_eq!(value, read, "{ty} {text}");
        }
        assert_eq!(
            decode(None, false, &Type::TIMESTAMP, &SessionZone::utc()).unwrap(),
            ScalarValue::TimestampMicrosecond(None, None)
        );
        assert!(decode(
            Some(b"2020-13-01 10:00"),
            false,
            &Type::TIMESTAMP,
            &SessionZone::utc()
        )
        .is_err());
        assert!(decode(
            Some(b"yesterday-ish"),
            false,
            &Type::DATE,
            &SessionZone::utc()
        )
        .is_err());
    }

    #[test]
    fn uuids_sent_as_text_alone_or_in_arrays_are_read_as_the_uuids_they_name() {
        let utc = SessionZone::utc();
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let text = |s: &str| ScalarValue::Utf8(Some(s.to_owned()));
        for sent in [
            uuid,
            "0F8FAD5BD9CB469FA16570867728950E",
            "{0f8fad5b-d9cb-469f-a165-70867728950e}",
        ] {
            let read = decode(Some(sent.as_bytes()), false, &Type::UUID, &utc).unwrap();
            assert_eq!(read, text(uuid), "{sent}");
        }
        assert!(decode(Some(b"0f8fad5b"), false, &Type::UUID, &utc).is_err());
        let sent = b"{0f8fad5bd9cb469fa16570867728950e,NULL}";
        let read = decode(Some(sent), false, &Type::UUID_ARRAY, &utc).unwrap();
        let list =
            ScalarValue::new_list_nullable(&[text(uuid), ScalarValue::Utf8(None)], &DataType::Utf8);
        assert_eq!(read, ScalarValue::List(list));
        let sent = b"{1,NULL,3}";
        let read = decode(Some(sent), false, &Type::INT4_ARRAY, &utc).unwrap();
        let numbers = [
            ScalarValue::Int32(Some(1)),
            ScalarValue::Int32(None),
            ScalarValue::Int32(Some(3)),
        ];
        let list = ScalarValue::new_list_nullable(&numbers, &DataType::Int32);
        assert_eq!(read, ScalarValue::List(list));
        assert!(decode(Some(b"{1,x}"), false, &Type::INT4_ARRAY, &utc).is_err());
    }
}
