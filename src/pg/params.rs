//! Parameter types and values of the extended protocol.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ParamValues, ScalarValue};
use pgwire::api::portal::Portal;
use pgwire::api::Type;
use pgwire::error::{PgWireError, PgWireResult};

use crate::sql::types::UTC;
use crate::sql::Prepared;

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
        Some(DataType::Timestamp(_, None)) => Type::TIMESTAMP,
        Some(DataType::Timestamp(_, Some(_))) => Type::TIMESTAMPTZ,
        Some(DataType::Binary) => Type::BYTEA,
        _ => Type::TEXT,
    }
}

fn bad(i: usize, e: impl std::fmt::Display) -> PgWireError {
    PgWireError::UserError(Box::new(pgwire::error::ErrorInfo::new(
        "ERROR".into(),
        "22P02".into(),
        format!("invalid value for parameter ${}: {e}", i + 1),
    )))
}

/// The values of a portal's parameters, as the statement's parameter types.
pub fn values(portal: &Portal<std::sync::Arc<Prepared>>) -> PgWireResult<ParamValues> {
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
        let value = decode(portal, i, &declared).map_err(|e| bad(i, e))?;
        let value = match &expected {
            Some(target) if !value.is_null() && value.data_type() != *target => {
                value.cast_to(target).map_err(|e| bad(i, e))?
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

fn decode(
    portal: &Portal<std::sync::Arc<Prepared>>,
    i: usize,
    ty: &Type,
) -> PgWireResult<ScalarValue> {
    Ok(match *ty {
        Type::BOOL => ScalarValue::Boolean(portal.parameter::<bool>(i, ty)?),
        Type::INT2 => ScalarValue::Int16(portal.parameter::<i16>(i, ty)?),
        Type::INT4 => ScalarValue::Int32(portal.parameter::<i32>(i, ty)?),
        Type::INT8 => ScalarValue::Int64(portal.parameter::<i64>(i, ty)?),
        Type::FLOAT4 => ScalarValue::Float32(portal.parameter::<f32>(i, ty)?),
        Type::FLOAT8 => ScalarValue::Float64(portal.parameter::<f64>(i, ty)?),
        Type::NUMERIC => match portal.parameter::<rust_decimal::Decimal>(i, ty)? {
            Some(d) => ScalarValue::Decimal128(Some(d.mantissa()), 38, d.scale() as i8),
            None => ScalarValue::Decimal128(None, 38, 0),
        },
        Type::DATE => ScalarValue::Date32(portal.parameter::<NaiveDate>(i, ty)?.map(|d| {
            (d - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()).num_days() as i32
        })),
        Type::TIMESTAMP => ScalarValue::TimestampMicrosecond(
            portal
                .parameter::<NaiveDateTime>(i, ty)?
                .map(|t| t.and_utc().timestamp_micros()),
            None,
        ),
        Type::TIMESTAMPTZ => ScalarValue::TimestampMicrosecond(
            portal
                .parameter::<DateTime<FixedOffset>>(i, ty)?
                .map(|t| t.timestamp_micros()),
            Some(UTC.into()),
        ),
        Type::BYTEA => ScalarValue::Binary(portal.parameter::<Vec<u8>>(i, ty)?),
        Type::UUID => {
            let raw = portal.parameters.get(i).cloned().flatten();
            match raw {
                None => ScalarValue::Utf8(None),
                Some(bytes) if portal.parameter_format.is_binary(i) && bytes.len() == 16 => {
                    let mut g = [0u8; 16];
                    g.copy_from_slice(&bytes);
                    ScalarValue::Utf8(Some(crate::model::Guid(g).to_string()))
                }
                Some(bytes) => {
                    ScalarValue::Utf8(Some(String::from_utf8_lossy(&bytes).into_owned()))
                }
            }
        }
        Type::JSONB if portal.parameter_format.is_binary(i) => {
            let raw = portal.parameters.get(i).cloned().flatten();
            ScalarValue::Utf8(
                raw.map(|b| String::from_utf8_lossy(b.get(1..).unwrap_or_default()).into_owned()),
            )
        }
        _ => {
            let raw = portal.parameters.get(i).cloned().flatten();
            ScalarValue::Utf8(raw.map(|b| String::from_utf8_lossy(&b).into_owned()))
        }
    })
}
