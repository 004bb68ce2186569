//! Floats as PostgreSQL writes and narrows them.
//!
//! Written: the shortest digits that read back the same value (`0.1`,
//! `1e+20`, `-571`). Result columns are written so, and a float cast to
//! text is too: Arrow's cast writes `-571.0` and `1e20`, so an analyzer rule
//! ([`FloatCasts`]) puts a function of its own in place of each such cast.
//!
//! Narrowed: a value cast to `real` that f32 cannot hold is an error
//! (22003), where Arrow's cast makes it infinite or zero; the same rule
//! replaces those casts.

use std::sync::{Arc, OnceLock};

use bytes::BufMut;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float32Array, Float64Array, StringArray, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_err, DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{Cast, ScalarFunction};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::plan_nodes::rewrite_nodes_holding;

/// Writes a float in PostgreSQL's text form: the shortest digits that read
/// back the same value, positional for exponents from -4 up to the type's
/// decimal digits (6 for real, 15 for double precision, C's FLT_DIG and
/// DBL_DIG), else `1.5e+20`. Written straight into `out`: a result's floats
/// are many.
pub fn put_float<F: ryu::Float + Into<f64>>(v: F, out: &mut impl BufMut) {
    let f: f64 = v.into();
    let special = match f {
        f if f.is_nan() => "NaN",
        f64::INFINITY => "Infinity",
        f64::NEG_INFINITY => "-Infinity",
        0.0 if f.is_sign_negative() => "-0",
        0.0 => "0",
        _ => "",
    };
    if !special.is_empty() {
        out.put_slice(special.as_bytes());
        return;
    }
    // Ryu's shortest digits, as `1.25`, `0.001`, `1e-7` or `1.5e300`.
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(v).as_bytes();
    let (negative, text) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    let (mantissa, mut exponent) = match text.iter().position(|&b| b == b'e') {
        Some(e) => (&text[..e], exponent_value(&text[e + 1..])),
        None => (text, 0),
    };
    // The significant digits, and the power of ten of the first.
    let mut digits = [0u8; 32];
    let mut len = 0;
    let mut point = mantissa.len();
    for (i, &b) in mantissa.iter().enumerate() {
        if b == b'.' {
            point = i;
        } else {
            digits[len] = b;
            len += 1;
        }
    }
    let leading = digits[..len].iter().take_while(|&&d| d == b'0').count();
    let digits = &digits[leading..len];
    let digits = &digits[..digits.len() - digits.iter().rev().take_while(|&&d| d == b'0').count()];
    exponent += point as i32 - 1 - leading as i32;
    if negative {
        out.put_u8(b'-');
    }
    let digits_of_type = if std::mem::size_of::<F>() == 4 { 6 } else { 15 };
    if (-4..digits_of_type).contains(&exponent) {
        let point = exponent + 1;
        if point <= 0 {
            out.put_slice(b"0.");
            out.put_bytes(b'0', (-point) as usize);
            out.put_slice(digits);
        } else if point as usize >= digits.len() {
            out.put_slice(digits);
            out.put_bytes(b'0', point as usize - digits.len());
        } else {
            let (whole, fraction) = digits.split_at(point as usize);
            out.put_slice(whole);
            out.put_u8(b'.');
            out.put_slice(fraction);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.put_slice(first);
        if !rest.is_empty() {
            out.put_u8(b'.');
            out.put_slice(rest);
        }
        out.put_u8(b'e');
        out.put_u8(if exponent < 0 { b'-' } else { b'+' });
        // At least two digits; a double's exponent has at most three.
        let exponent = exponent.unsigned_abs();
        if exponent >= 100 {
            out.put_u8(b'0' + (exponent / 100) as u8);
        }
        out.put_u8(b'0' + (exponent / 10 % 10) as u8);
        out.put_u8(b'0' + (exponent % 10) as u8);
    }
}

/// The value of an exponent's text as Ryu writes it (`-7`, `300`).
fn exponent_value(text: &[u8]) -> i32 {
    let (sign, digits) = match text {
        [b'-', rest @ ..] => (-1, rest),
        _ => (1, text),
    };
    sign * digits
        .iter()
        .fold(0i32, |n, &d| n * 10 + i32::from(d - b'0'))
}

/// Puts a [`PostgresCast`] in place of each cast of a float to text, and of
/// each cast to `real` of a double, a number or a text, after DataFusion's
/// type coercion (which adds the casts of `x || 'a'`); the text of a literal
/// cast to a timestamp is made one Arrow reads (see
/// [`super::types::timestamp_input`]). Result columns keep their names.
#[derive(Debug)]
pub struct FloatCasts;

impl AnalyzerRule for FloatCasts {
    fn name(&self) -> &str {
        "postgres_float_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_nodes_holding(plan, |e| matches!(e, Expr::Cast(_)), postgres_casts)
    }
}

/// `expr`, over columns of `inputs`, with a [`PostgresCast`] in place of
/// each cast PostgreSQL does otherwise (see [`FloatCasts`]).
pub fn postgres_casts(expr: Expr, inputs: &DFSchema) -> Result<Transformed<Expr>> {
    static CASTS: OnceLock<(Arc<ScalarUDF>, Arc<ScalarUDF>)> = OnceLock::new();
    let (float_text, real) = CASTS.get_or_init(|| {
        let float_text = PostgresCast {
            name: "__tablegate_float_text",
            returns: DataType::Utf8,
            cast: float_texts,
        };
        let real = PostgresCast {
            name: "__tablegate_real",
            returns: DataType::Float32,
            cast: to_real,
        };
        (Arc::new(float_text.into()), Arc::new(real.into()))
    });
    expr.transform_up(|e| match e {
        Expr::Cast(Cast { expr, field })
            if is_text(field.data_type())
                && expr.get_type(inputs).is_ok_and(|t| t.is_floating()) =>
        {
            let text =
                Expr::ScalarFunction(ScalarFunction::new_udf(float_text.clone(), vec![*expr]));
            Ok(Transformed::yes(match field.data_type() {
                DataType::Utf8 => text,
                _ => Expr::Cast(Cast::new_from_field(Box::new(text), field)),
            }))
        }
        // A literal timestamp's text as Arrow reads it.
        Expr::Cast(Cast { expr, field })
            if matches!(field.data_type(), DataType::Timestamp(..)) =>
        {
            match *expr {
                Expr::Literal(ScalarValue::Utf8(Some(text)), meta) => {
                    let read = super::types::timestamp_input(&text).into_owned();
                    let changed = read != text;
                    let literal = Expr::Literal(ScalarValue::Utf8(Some(read)), meta);
                    let cast = Expr::Cast(Cast::new_from_field(Box::new(literal), field));
                    Ok(Transformed::new_transformed(cast, changed))
                }
                expr => Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                    Box::new(expr),
                    field,
                )))),
            }
        }
        Expr::Cast(Cast { expr, field })
            if field.data_type() == &DataType::Float32
                && expr.get_type(inputs).is_ok_and(|t| narrows_to_real(&t)) =>
        {
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(real.clone(), vec![*expr]),
            )))
        }
        e => Ok(Transformed::no(e)),
    })
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

/// Refuses what a `real` cannot hold, as PostgreSQL does (22003): a finite
/// value past f32's range, which the cast made infinite, or a nonzero one
/// it made zero. `source` holds the values before the cast, `real` after.
pub fn check_real_range(source: &ArrayRef, real: &ArrayRef) -> Result<()> {
    let (Some(real), Ok(wide)) = (
        real.as_any().downcast_ref::<Float32Array>(),
        datafusion::arrow::compute::cast(source, &DataType::Float64),
    ) else {
        return Ok(());
    };
    let Some(wide) = wide.as_any().downcast_ref::<Float64Array>() else {
        return Ok(());
    };
    for row in 0..real.len() {
        if real.is_null(row) || wide.is_null(row) {
            continue;
        }
        let (wide, narrow) = (wide.value(row), real.value(row));
        let problem = if wide.is_finite() && narrow.is_infinite() {
            "overflow"
        } else if wide != 0.0 && narrow == 0.0 {
            "underflow"
        } else {
            continue;
        };
        let message = match source.as_any().downcast_ref::<StringArray>() {
            Some(texts) => format!("{:?} is out of range for type real", texts.value(row)),
            None => format!("value out of range: {problem}"),
        };
        let error = crate::sql::SqlError::value("22003", message);
        return Err(datafusion::error::DataFusionError::External(Box::new(
            error,
        )));
    }
    Ok(())
}

/// A cast done as PostgreSQL does it, of one value or a column of them.
#[derive(Debug)]
struct PostgresCast {
    name: &'static str,
    returns: DataType,
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

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
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
fn float_texts(floats: &ArrayRef) -> Result<ArrayRef> {
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

#[cfg(test)]
mod tests {
    use super::put_float;

    fn float_text<F: ryu::Float + Into<f64>>(v: F) -> String {
        let mut out = Vec::new();
        put_float(v, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_print_like_postgres() {
        for (v, want) in [
            (21.0, "21"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e15, "1e+15"),
            (-1e15, "-1e+15"),
            (123456789012345.0, "123456789012345"),
            (100.0, "100"),
            (1234.5678, "1234.5678"),
            (0.0001, "0.0001"),
            (-0.00012, "-0.00012"),
            (0.00001, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (1.5e300, "1.5e+300"),
            (2.2250738585072014e-308, "2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.0, "0"),
            (-0.0, "-0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(float_text(v), want, "{v}");
        }
        assert_eq!(float_text(1.1f32), "1.1");
        assert_eq!(float_text(3.4028235e38f32), "3.4028235e+38");
        assert_eq!(float_text(1e-5f32), "1e-05");
        assert_eq!(float_text(999999f32), "999999");
        assert_eq!(float_text(1000000f32), "1e+06");
        assert_eq!(float_text(123456.7f32), "123456.7");
    }
}
