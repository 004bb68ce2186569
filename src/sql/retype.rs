//! `ALTER COLUMN ... TYPE`: which changes of a column's type are made, and
//! each value as the new type holds it, refused as PostgreSQL refuses it
//! (a value too long, out of range, or not a number).
//!
//! The rows are written again with the values converted (`ddl::rewrite_rows`).
//! `USING` is read when it is the column itself, or the column cast to the
//! new type, as Django writes every type change (`USING "c"::integer`): an
//! explicit cast, which cuts a text to a `varchar(n)`'s length where the
//! change without it refuses the value (22001), as in PostgreSQL.

use datafusion::sql::sqlparser::ast::{
    CastKind, Expr as AstExpr, FunctionArg, FunctionArgExpr, FunctionArguments,
};

use super::error::{Result, SqlError};
use super::session::normalize;
use super::types::sql_type;
use crate::catalog::SqlType;
use crate::model::{Decimal, Value};

/// Whether a `USING` casts the column to `to` (an explicit cast); refuses
/// one that is neither that nor the column itself.
pub(super) fn explicit_cast(using: &AstExpr, column: &str, to: SqlType) -> Result<bool> {
    let is_column = |e: &AstExpr| matches!(e, AstExpr::Identifier(i) if normalize(i) == column);
    match using {
        AstExpr::Nested(inner) => return explicit_cast(inner, column, to),
        e if is_column(e) => return Ok(false),
        AstExpr::Cast {
            kind: CastKind::Cast | CastKind::DoubleColon,
            expr,
            data_type,
            ..
        } if sql_type(data_type).is_ok_and(|ty| ty == to) && is_column(cast_operand(expr)) => {
            return Ok(true)
        }
        _ => {}
    }
    Err(SqlError::FeatureNotSupported(format!(
        "ALTER COLUMN TYPE ... USING {using} is not supported: USING may only name the \
         column, or cast it to its new type (USING {column}::{})",
        to.pg_name()
    )))
}

/// What a cast casts, seen through the statement's rewrite of a cast to a
/// `varchar(n)`, which reaches here as `left(c::text, n)::varchar(n)`.
fn cast_operand(expr: &AstExpr) -> &AstExpr {
    let AstExpr::Function(f) = expr else {
        return expr;
    };
    let FunctionArguments::List(list) = &f.args else {
        return expr;
    };
    match list.args.first() {
        Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(AstExpr::Cast { expr, .. })))
            if f.name.to_string().eq_ignore_ascii_case("left") =>
        {
            expr
        }
        _ => expr,
    }
}

/// Refuses a change of a column's type that tablegate does not make.
pub(super) fn supported(from: SqlType, to: SqlType) -> Result<()> {
    use SqlType::*;
    let supported = matches!(
        (from, to),
        (Text | Varchar(_), Text | Varchar(_) | Int2 | Int4 | Int8)
            | (
                Int2 | Int4 | Int8,
                Int2 | Int4 | Int8 | Float4 | Float8 | Numeric { .. }
            )
            | (
                Int2 | Int4 | Int8 | Numeric { .. } | Bool,
                Text | Varchar(_)
            )
            | (Float4 | Float8, Float4 | Float8)
            | (Numeric { .. }, Numeric { .. } | Float4 | Float8)
    );
    if supported {
        return Ok(());
    }
    Err(SqlError::FeatureNotSupported(format!(
        "ALTER COLUMN TYPE from {} to {} is not supported (only between text types, integer \
         types, floating-point types and numerics, from text to an integer, from an integer \
         to a floating-point type or a numeric, from a numeric to a floating-point type, and \
         from an integer, a numeric or a boolean to text)",
        from.pg_name(),
        to.pg_name()
    )))
}

/// A value of a column whose type changes, as the new type holds it; an
/// error, PostgreSQL's, when it does not fit (`explicit`: the change casts
/// the column, which cuts a text to the length of a `varchar(n)`).
pub(super) fn convert(to: SqlType, value: Value, explicit: bool) -> Result<Value> {
    use SqlType::*;
    let out_of_range = |ty: &str| SqlError::value("22003", format!("{ty} out of range"));
    let integer = |n: i64| match to {
        Int2 if i16::try_from(n).is_err() => Err(out_of_range("smallint")),
        Int2 | Int4 => i32::try_from(n)
            .map(Value::Int32)
            .map_err(|_| out_of_range("integer")),
        _ => Ok(Value::Int64(n)),
    };
    Ok(match (value, to) {
        (Value::String(s), Varchar(Some(n))) if s.chars().count() > n as usize => {
            if explicit {
                return Ok(Value::String(s.chars().take(n as usize).collect()));
            }
            return Err(SqlError::value(
                "22001",
                format!("value too long for type character varying({n})"),
            ));
        }
        (Value::String(s), Int2 | Int4 | Int8) => {
            let n = s.trim().parse::<i64>().map_err(|_| {
                let ty = match to {
                    Int2 => "smallint",
                    Int4 => "integer",
                    _ => "bigint",
                };
                SqlError::value(
                    "22P02",
                    format!("invalid input syntax for type {ty}: \"{s}\""),
                )
            })?;
            integer(n)?
        }
        (Value::Int32(n), Int2 | Int4 | Int8) => integer(i64::from(n))?,
        (Value::Int64(n), Int2 | Int4 | Int8) => integer(n)?,
        (Value::Int32(n), Float4 | Float8) => Value::Double(f64::from(n)),
        (Value::Int64(n), Float4 | Float8) => Value::Double(n as f64),
        (Value::Int32(n), Numeric { precision, scale }) => numeric(
            Decimal {
                unscaled: i128::from(n),
                scale: 0,
            },
            precision,
            scale,
        )?,
        (Value::Int64(n), Numeric { precision, scale }) => numeric(
            Decimal {
                unscaled: i128::from(n),
                scale: 0,
            },
            precision,
            scale,
        )?,
        (Value::Decimal(d), Numeric { precision, scale }) => numeric(d, precision, scale)?,
        (Value::Decimal(d), Float4 | Float8) => {
            Value::Double(d.to_string().parse().unwrap_or(f64::NAN))
        }
        (Value::Int32(n), Text | Varchar(_)) => text(n.to_string(), to, explicit)?,
        (Value::Int64(n), Text | Varchar(_)) => text(n.to_string(), to, explicit)?,
        (Value::Decimal(d), Text | Varchar(_)) => text(d.to_string(), to, explicit)?,
        (Value::Boolean(b), Text | Varchar(_)) => text(b.to_string(), to, explicit)?,
        (value, _) => value,
    })
}

/// Text of another type's value in a text column (a `varchar(n)` checks
/// its length).
fn text(s: String, to: SqlType, explicit: bool) -> Result<Value> {
    convert(to, Value::String(s), explicit)
}

/// A numeric at `scale` (rounded half away from zero, as PostgreSQL
/// rounds), refused when it has more than `precision - scale` digits
/// before the point.
fn numeric(d: Decimal, precision: u8, scale: u8) -> Result<Value> {
    let unscaled = if scale >= d.scale {
        d.rescaled(scale)
    } else {
        let divisor = 10i128.pow(u32::from(d.scale - scale));
        let (quotient, remainder) = (d.unscaled / divisor, d.unscaled % divisor);
        Some(quotient + (2 * remainder.abs() >= divisor) as i128 * d.unscaled.signum())
    };
    let limit = 10i128.checked_pow(u32::from(precision));
    match (unscaled, limit) {
        (Some(unscaled), Some(limit)) if unscaled.abs() < limit => {
            Ok(Value::Decimal(Decimal { unscaled, scale }))
        }
        _ => Err(
            SqlError::value("22003", "numeric field overflow").explained(
                Some(format!(
                    "A field with precision {precision}, scale {scale} must round to an absolute \
                 value less than 10^{}.",
                    precision - scale
                )),
                None,
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_as_postgresql_converts_them() {
        let numeric = |precision, scale| SqlType::Numeric { precision, scale };
        let decimal = |unscaled, scale| Value::Decimal(Decimal { unscaled, scale });
        assert_eq!(
            convert(numeric(5, 2), Value::Int32(12), false).unwrap(),
            decimal(1200, 2)
        );
        assert_eq!(
            convert(numeric(4, 1), decimal(-1255, 2), false).unwrap(),
            decimal(-126, 1)
        );
        assert_eq!(
            convert(numeric(4, 1), decimal(1244, 2), false).unwrap(),
            decimal(124, 1)
        );
        let overflow = convert(numeric(3, 2), Value::Int32(12), false).unwrap_err();
        assert_eq!(overflow.to_string(), "numeric field overflow");
        assert_eq!(
            convert(SqlType::Int4, Value::String(" 42 ".into()), false).unwrap(),
            Value::Int32(42)
        );
        let not_a_number = convert(SqlType::Int8, Value::String("4x".into()), false).unwrap_err();
        assert_eq!(
            not_a_number.to_string(),
            "invalid input syntax for type bigint: \"4x\""
        );
        let wide = convert(SqlType::Int2, Value::Int64(40_000), false).unwrap_err();
        assert_eq!(wide.to_string(), "smallint out of range");
        assert_eq!(
            convert(SqlType::Varchar(Some(5)), decimal(150, 2), false).unwrap(),
            Value::String("1.50".into())
        );
        assert_eq!(
            convert(SqlType::Text, Value::Boolean(true), false).unwrap(),
            Value::String("true".into())
        );
        let long = convert(SqlType::Varchar(Some(2)), Value::Int32(123), false).unwrap_err();
        assert_eq!(
            long.to_string(),
            "value too long for type character varying(2)"
        );
        // An explicit cast cuts it.
        assert_eq!(
            convert(SqlType::Varchar(Some(2)), Value::Int32(123), true).unwrap(),
            Value::String("12".into())
        );
    }
}
