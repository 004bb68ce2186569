//! `ALTER COLUMN ... TYPE`: which changes of a column's type are made, and
//! each value as the new type holds it, refused as PostgreSQL refuses it
//! (a value too long, out of range, or not a number).
//!
//! The rows are written again with the values converted (`ddl::rewrite_rows`);
//! dates and timestamps are read and shown in the session's time zone.
//! `USING` is read when it is the column itself, or the column cast to the
//! new type, as Django writes every type change (`USING "c"::integer`): an
//! explicit cast, which cuts a text to a `varchar(n)`'s length where the
//! change without it refuses the value (22001), as in PostgreSQL.

use datafusion::sql::sqlparser::ast::{
    CastKind, Expr as AstExpr, FunctionArg, FunctionArgExpr, FunctionArguments,
};

use super::error::{Result, SqlError};
use super::session::normalize;
use super::time_zone::SessionZone;
use super::types::sql_type;
use crate::catalog::SqlType;
use crate::model::{DateTime, Decimal, Value};

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

/// A change of a column's type, as `ALTER COLUMN ... TYPE` makes it.
pub(super) struct Retype {
    from: SqlType,
    to: SqlType,
    /// The change casts the column (`USING c::type`), which cuts a text to
    /// the length of a `varchar(n)`.
    explicit: bool,
    /// The session's time zone, which dates and timestamps without a zone
    /// are read in as instants (and instants shown in).
    zone: SessionZone,
    /// The digits of a second the new `timestamp(p)` or `time(p)` keeps.
    digits: Option<u8>,
}

impl Retype {
    /// The change from `from` to `to`; refuses one tablegate does not make.
    pub fn new(from: SqlType, to: SqlType, explicit: bool, zone: SessionZone) -> Result<Retype> {
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
                | (
                    Date | Timestamp | Timestamptz,
                    Date | Timestamp | Timestamptz
                )
                | (Time, Time)
        );
        if !supported {
            return Err(SqlError::FeatureNotSupported(format!(
                "ALTER COLUMN TYPE from {} to {} is not supported (only between text types, \
                 integer types, floating-point types and numerics, dates and timestamps, times, \
                 from text to an integer, from an integer to a floating-point type or a numeric, \
                 from a numeric to a floating-point type, and from an integer, a numeric or a \
                 boolean to text)",
                from.pg_name(),
                to.pg_name()
            )));
        }
        Ok(Retype {
            from,
            to,
            explicit,
            zone,
            digits: None,
        })
    }

    /// The change to a `timestamp(p)`, `timestamptz(p)` or `time(p)` that
    /// keeps `digits` digits of a second.
    pub fn keeping_digits(self, digits: Option<u8>) -> Retype {
        Retype { digits, ..self }
    }

    /// A value as the new type holds it; an error, PostgreSQL's, when it
    /// does not fit.
    pub fn value(&self, value: Value) -> Result<Value> {
        Ok(match (self.converted(value)?, self.to, self.digits) {
            (Value::DateTime(t), SqlType::Timestamp | SqlType::Timestamptz, Some(digits)) => {
                Value::DateTime(DateTime(super::precision::round_timestamp(t.0, digits)))
            }
            (Value::Int64(t), SqlType::Time, Some(digits)) => {
                Value::Int64(super::precision::round_time(t, digits))
            }
            (value, ..) => value,
        })
    }

    fn converted(&self, value: Value) -> Result<Value> {
        use SqlType::*;
        const DAY: i64 = 86_400_000_000;
        let to = self.to;
        let out_of_range = |ty: &str| SqlError::value("22003", format!("{ty} out of range"));
        let integer = |n: i64| match to {
            Int2 if i16::try_from(n).is_err() => Err(out_of_range("smallint")),
            Int2 | Int4 => i32::try_from(n)
                .map(Value::Int32)
                .map_err(|_| out_of_range("integer")),
            _ => Ok(Value::Int64(n)),
        };
        let text = |s: String| self.converted(Value::String(s));
        let whole = |n: i64| Decimal {
            unscaled: i128::from(n),
            scale: 0,
        };
        // A date or timestamp as a wall time (microseconds on the clock),
        // an instant as the session's clock shows it.
        let wall = |value: &Value| match (value, self.from) {
            (Value::Date(d), _) => Some(i64::from(d.0) * DAY),
            (Value::DateTime(t), Timestamptz) => {
                Some(t.0 + i64::from(self.zone.offset_at(t.0)) * 1_000_000)
            }
            (Value::DateTime(t), _) => Some(t.0),
            _ => None,
        };
        Ok(match (&value, to) {
            (Value::String(s), Varchar(Some(n))) if s.chars().count() > n as usize => {
                if self.explicit {
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
            (Value::Int32(n), Int2 | Int4 | Int8) => integer(i64::from(*n))?,
            (Value::Int64(n), Int2 | Int4 | Int8) => integer(*n)?,
            (Value::Int32(n), Float4 | Float8) => Value::Double(f64::from(*n)),
            (Value::Int64(n), Float4 | Float8) => Value::Double(*n as f64),
            (Value::Int32(n), Numeric { precision, scale }) => {
                numeric(whole(i64::from(*n)), precision, scale)?
            }
            (Value::Int64(n), Numeric { precision, scale }) => {
                numeric(whole(*n), precision, scale)?
            }
            (Value::Decimal(d), Numeric { precision, scale }) => numeric(*d, precision, scale)?,
            (Value::Decimal(d), Float4 | Float8) => {
                Value::Double(d.to_string().parse().unwrap_or(f64::NAN))
            }
            (Value::Int32(n), Text | Varchar(_)) => text(n.to_string())?,
            (Value::Int64(n), Text | Varchar(_)) => text(n.to_string())?,
            (Value::Decimal(d), Text | Varchar(_)) => text(d.to_string())?,
            (Value::Boolean(b), Text | Varchar(_)) => text(b.to_string())?,
            (Value::Date(_) | Value::DateTime(_), Date) => {
                let days = wall(&value).map(|w| w.div_euclid(DAY));
                match days.and_then(|d| i32::try_from(d).ok()) {
                    Some(days) => Value::Date(crate::model::Date(days)),
                    None => return Err(SqlError::value("22008", "date out of range")),
                }
            }
            (Value::Date(_) | Value::DateTime(_), Timestamp) => match wall(&value) {
                Some(wall) => Value::DateTime(DateTime(wall)),
                None => value,
            },
            (Value::Date(_) | Value::DateTime(_), Timestamptz) if self.from != Timestamptz => {
                match wall(&value).and_then(|wall| self.zone.instant_of(wall)) {
                    Some(instant) => Value::DateTime(DateTime(instant)),
                    None => return Err(SqlError::value("22008", "timestamp out of range")),
                }
            }
            _ => value,
        })
    }
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
        let convert = |from, to, value, explicit| {
            Retype::new(from, to, explicit, SessionZone::utc())
                .unwrap()
                .value(value)
        };
        let numeric = |precision, scale| SqlType::Numeric { precision, scale };
        let decimal = |unscaled, scale| Value::Decimal(Decimal { unscaled, scale });
        let (int4, int8, text) = (SqlType::Int4, SqlType::Int8, SqlType::Text);
        assert_eq!(
            convert(int4, numeric(5, 2), Value::Int32(12), false).unwrap(),
            decimal(1200, 2)
        );
        let (wide, narrow) = (numeric(10, 3), numeric(4, 1));
        assert_eq!(
            convert(wide, narrow, decimal(-1255, 2), false).unwrap(),
            decimal(-126, 1)
        );
        assert_eq!(
            convert(wide, narrow, decimal(1244, 2), false).unwrap(),
            decimal(124, 1)
        );
        let overflow = convert(int4, numeric(3, 2), Value::Int32(12), false).unwrap_err();
        assert_eq!(overflow.to_string(), "numeric field overflow");
        let spaced = Value::String(" 42 ".into());
        assert_eq!(
            convert(text, int4, spaced, false).unwrap(),
            Value::Int32(42)
        );
        let not_a_number = convert(text, int8, Value::String("4x".into()), false).unwrap_err();
        assert_eq!(
            not_a_number.to_string(),
            "invalid input syntax for type bigint: \"4x\""
        );
        let wide = convert(int8, SqlType::Int2, Value::Int64(40_000), false).unwrap_err();
        assert_eq!(wide.to_string(), "smallint out of range");
        let short = SqlType::Varchar(Some(5));
        let money = convert(numeric(10, 2), short, decimal(150, 2), false).unwrap();
        assert_eq!(money, Value::String("1.50".into()));
        let yes = convert(SqlType::Bool, text, Value::Boolean(true), false).unwrap();
        assert_eq!(yes, Value::String("true".into()));
        let two = SqlType::Varchar(Some(2));
        let long = convert(int4, two, Value::Int32(123), false).unwrap_err();
        assert_eq!(
            long.to_string(),
            "value too long for type character varying(2)"
        );
        // An explicit cast cuts it.
        let cut = convert(int4, two, Value::Int32(123), true).unwrap();
        assert_eq!(cut, Value::String("12".into()));
    }

    #[test]
    fn dates_and_timestamps_convert_in_the_session_time_zone() {
        use crate::model::Date;
        use SqlType::{Date as DateType, Timestamp, Timestamptz};
        let zone = SessionZone::of("America/New_York").unwrap();
        let convert = |from, to, value| {
            Retype::new(from, to, false, zone.clone())
                .unwrap()
                .value(value)
                .unwrap()
        };
        let hour = 3_600_000_000;
        // 2024-01-02 (19724 days) at midnight, 05:00 UTC in New York.
        let day = Date(19_724);
        let midnight = 19_724 * 24 * hour;
        assert_eq!(
            convert(DateType, Timestamp, Value::Date(day)),
            Value::DateTime(DateTime(midnight))
        );
        assert_eq!(
            convert(DateType, Timestamptz, Value::Date(day)),
            Value::DateTime(DateTime(midnight + 5 * hour))
        );
        assert_eq!(
            convert(Timestamp, Timestamptz, Value::DateTime(DateTime(midnight))),
            Value::DateTime(DateTime(midnight + 5 * hour))
        );
        // 03:00 UTC is still the day before in New York.
        let early = Value::DateTime(DateTime(midnight + 3 * hour));
        assert_eq!(
            convert(Timestamptz, DateType, early.clone()),
            Value::Date(Date(19_723))
        );
        assert_eq!(
            convert(Timestamptz, Timestamp, early),
            Value::DateTime(DateTime(midnight - 2 * hour))
        );
    }
}
