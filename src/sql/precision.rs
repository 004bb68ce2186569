//! `timestamp(p)`, `timestamptz(p)` and `time(p)`: values that keep `p`
//! digits of a second's fraction, rounded to them as PostgreSQL rounds
//! (half away from zero, timestamps counted from its epoch, 2000-01-01).
//!
//! A column declared so keeps its precision (`Column::precision`), and each
//! write rounds its values (`convert::batch_to_rows`); a cast to such a
//! type rounds its value ([`ROUND_FRACTION`]; see [`split_cast`]).
//! Prisma declares `TIMESTAMP(3)`, and compares the milliseconds it read
//! with those stored.

use datafusion::arrow::array::{Array, ArrayRef, Int64Array};
use datafusion::arrow::compute::cast as cast_array;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{exec_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{CastKind, DataType as AstType, Expr, Value as AstValue};

/// `round_fraction(t, p)`: a timestamp or time of day rounded to `p` digits
/// of a second.
pub const ROUND_FRACTION: &str = "round_fraction";

/// The most digits of a second PostgreSQL keeps (microseconds).
pub const MAX_DIGITS: u8 = 6;

/// Microseconds from 1970-01-01 (tablegate's epoch) to 2000-01-01
/// (PostgreSQL's), from which it rounds.
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The digits a declared `timestamp(p)` or `time(p)` keeps, when it names
/// fewer than six (PostgreSQL reduces more to six).
pub fn declared_digits(ast: &AstType) -> Option<u8> {
    match ast {
        AstType::Timestamp(Some(p), _) | AstType::Time(Some(p), _) => {
            Some((*p).min(u64::from(MAX_DIGITS)) as u8)
        }
        _ => None,
    }
}

/// `count` units of which a second has `per_second_digits` digits
/// (microseconds: 6) rounded to `digits` digits, half away from zero.
fn round(count: i64, per_second_digits: u32, digits: u8) -> i64 {
    let Some(shift) = per_second_digits
        .checked_sub(u32::from(digits))
        .filter(|s| *s > 0)
    else {
        return count;
    };
    let scale = 10i64.pow(shift);
    let half = scale / 2;
    let away = count.unsigned_abs().saturating_add(half as u64) / scale as u64 * scale as u64;
    let away = i64::try_from(away).unwrap_or(i64::MAX);
    if count < 0 {
        -away
    } else {
        away
    }
}

/// A timestamp's microseconds since 1970 rounded to `digits` digits.
pub fn round_timestamp(micros: i64, digits: u8) -> i64 {
    round(micros - POSTGRES_EPOCH_MICROS, 6, digits) + POSTGRES_EPOCH_MICROS
}

/// A time of day's microseconds rounded to `digits` digits.
pub fn round_time(micros: i64, digits: u8) -> i64 {
    round(micros, 6, digits)
}

/// A cast to `timestamp(p)`, `timestamptz(p)` or `time(p)` with fewer than
/// six digits, as the cast without them and the digits to round it to
/// (written `round_fraction(CAST(x AS TIMESTAMP), 3)`); `None` for other
/// expressions.
pub fn split_cast(expr: &Expr) -> Option<(Expr, Expr)> {
    let Expr::Cast {
        kind: CastKind::DoubleColon | CastKind::Cast,
        expr: inner,
        data_type,
        array,
        format,
    } = expr
    else {
        return None;
    };
    let digits = declared_digits(data_type).filter(|d| *d < MAX_DIGITS)?;
    let whole = match data_type {
        AstType::Timestamp(_, zone) => AstType::Timestamp(None, *zone),
        AstType::Time(_, zone) => AstType::Time(None, *zone),
        _ => return None,
    };
    let cast = Expr::Cast {
        kind: CastKind::Cast,
        expr: inner.clone(),
        data_type: whole,
        array: *array,
        format: format.clone(),
    };
    let digits = Expr::Value(AstValue::Number(digits.to_string(), false).into());
    Some((cast, digits))
}

/// [`ROUND_FRACTION`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RoundFraction {
    signature: Signature,
}

impl Default for RoundFraction {
    fn default() -> Self {
        RoundFraction {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

/// How many digits of a second a time unit counts.
fn unit_digits(unit: &TimeUnit) -> u32 {
    match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}

impl ScalarUDFImpl for RoundFraction {
    fn name(&self) -> &str {
        ROUND_FRACTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(args[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [value, digits] = args.args.as_slice() else {
            return exec_err!("{ROUND_FRACTION} takes a value and a number of digits");
        };
        let digits = match digits {
            ColumnarValue::Scalar(s) => match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(Some(d)) => d.clamp(0, i64::from(MAX_DIGITS)) as u8,
                _ => return Ok(value.clone()),
            },
            ColumnarValue::Array(_) => {
                return exec_err!("{ROUND_FRACTION} takes a constant number of digits")
            }
        };
        let ty = value.data_type();
        let (unit, epoch) = match &ty {
            DataType::Timestamp(unit, _) => {
                let per_second = 10i64.pow(unit_digits(unit));
                (*unit, POSTGRES_EPOCH_MICROS / 1_000_000 * per_second)
            }
            DataType::Time64(unit) | DataType::Time32(unit) => (*unit, 0),
            _ => return Ok(value.clone()),
        };
        let per_second_digits = unit_digits(&unit);
        let rounded = |array: &ArrayRef| -> DfResult<ArrayRef> {
            let counts = cast_array(array, &DataType::Int64)?;
            let counts = counts
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("a cast to Int64 gives an Int64Array");
            let rounded: Int64Array = counts
                .iter()
                .map(|c| c.map(|c| round(c - epoch, per_second_digits, digits) + epoch))
                .collect();
            Ok(cast_array(
                &(std::sync::Arc::new(rounded) as ArrayRef),
                &ty,
            )?)
        };
        Ok(match value {
            ColumnarValue::Array(array) => ColumnarValue::Array(rounded(array)?),
            ColumnarValue::Scalar(scalar) => {
                let array = rounded(&scalar.to_array()?)?;
                ColumnarValue::Scalar(ScalarValue::try_from_array(array.as_ref(), 0)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_round_away_from_zero_from_postgresql_s_epoch() {
        // 2024-01-01 12:00:00.123556, to 3 digits: .124.
        let t = 1_704_110_400_123_556;
        assert_eq!(round_timestamp(t, 3), 1_704_110_400_124_000);
        assert_eq!(round_timestamp(t, 6), t);
        assert_eq!(round_timestamp(t, 0), 1_704_110_400_000_000);
        // 1990-01-01 00:00:00.5 is before PostgreSQL's epoch: its half
        // rounds back, to 00:00:00 (from 1970 it would round forward).
        let t = 631_152_000_500_000;
        assert_eq!(round_timestamp(t, 0), 631_152_000_000_000);
        // 2010-01-01 00:00:00.5 rounds forward.
        let t = 1_262_304_000_500_000;
        assert_eq!(round_timestamp(t, 0), 1_262_304_001_000_000);
        // 23:59:59.9999 as time(2) is 24:00:00.
        assert_eq!(round_time(86_399_999_900, 2), 86_400_000_000);
    }

    #[test]
    fn six_digits_or_more_are_all_kept() {
        use datafusion::sql::sqlparser::ast::TimezoneInfo;
        assert_eq!(
            declared_digits(&AstType::Timestamp(Some(9), TimezoneInfo::None)),
            Some(6)
        );
        assert_eq!(
            declared_digits(&AstType::Timestamp(None, TimezoneInfo::None)),
            None
        );
        assert_eq!(
            declared_digits(&AstType::Time(Some(0), TimezoneInfo::None)),
            Some(0)
        );
    }
}
