//! Floats as PostgreSQL writes and narrows them.
//!
//! Written: the shortest digits that read back the same value (`0.1`,
//! `1e+20`, `-571`), where Arrow writes `-571.0` and `1e20`: result columns,
//! and floats cast to text ([`super::casts`]).
//!
//! Narrowed: a value cast to `real` that f32 cannot hold is an error
//! (22003), where Arrow's cast makes it infinite or zero.

use bytes::BufMut;
use datafusion::arrow::array::{Array, ArrayRef, Float32Array, Float64Array, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;

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
        return Err(crate::sql::SqlError::value("22003", message).into());
    }
    Ok(())
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
