//! Numerics as PostgreSQL writes them, in text and in binary.
//!
//! A numeric is an Arrow `Decimal128`: 38 digits with one scale for its
//! whole column. A column declared `numeric(p, s)` has its scale, and its
//! values are written with `s` decimals, as PostgreSQL writes them. Plain
//! `numeric` has no scale in PostgreSQL (each value keeps its own); here it
//! is held with [`DEFAULT_NUMERIC`]'s 10 decimals and written without the
//! trailing zeros those add (`2.5`, not `2.5000000000`). Written straight
//! from the digits: a value past the 28 digits that `rust_decimal` holds is
//! written too.

use bytes::BufMut;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Decimal128Type};
use datafusion::common::{exec_err, Result};

use crate::catalog::DEFAULT_NUMERIC;

/// A number written with an exponent (`1.5e3`, `-1.50E1`) in plain
/// digits, as PostgreSQL's numeric writes it (`1500`, `-15.0`): as many
/// decimals as the digits after the point less the exponent, none below
/// zero. `None` for text without an exponent, text that is no such number,
/// and a number of more than `max_digits` digits so written.
pub fn without_exponent(text: &str, max_digits: usize) -> Option<String> {
    let (sign, text) = match text.strip_prefix('-') {
        Some(unsigned) => ("-", unsigned),
        None => ("", text),
    };
    let (mantissa, exponent) = text.split_once(['e', 'E'])?;
    let exponent: i64 = exponent.parse().ok()?;
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Where the decimal point falls among `digits`.
    let point = whole.len() as i64 + exponent;
    if point.unsigned_abs() > (digits.len() + max_digits) as u64 {
        return None;
    }
    let (whole, fraction) = if point <= 0 {
        (
            String::new(),
            "0".repeat(point.unsigned_abs() as usize) + &digits,
        )
    } else if point as usize >= digits.len() {
        (
            digits.clone() + &"0".repeat(point as usize - digits.len()),
            String::new(),
        )
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        (whole.to_owned(), fraction.to_owned())
    };
    let whole = match whole.trim_start_matches('0') {
        "" => "0",
        whole => whole,
    };
    if whole.trim_start_matches('0').len() + fraction.len() > max_digits {
        return None;
    }
    Some(match fraction.as_str() {
        "" => format!("{sign}{whole}"),
        fraction => format!("{sign}{whole}.{fraction}"),
    })
}

/// Whether a decimal of this precision and scale is plain `numeric`.
fn is_plain(precision: u8, scale: i8) -> bool {
    (precision, scale) == (DEFAULT_NUMERIC.0, DEFAULT_NUMERIC.1 as i8)
}

/// A decimal's digits: at least one before the point, the decimals
/// without trailing zeros for plain `numeric`.
struct Parts<'a> {
    negative: bool,
    whole: &'a [u8],
    /// Zeros after `whole` (a negative scale).
    zeros: usize,
    decimals: &'a [u8],
}

/// Splits `mantissa` × 10^-`scale` into its [`Parts`], its digits written
/// into `buffer` (39 digits of an i128, at most 38 decimals, one zero before
/// the point).
fn parts(mantissa: i128, precision: u8, scale: i8, buffer: &mut [u8; 40]) -> Parts<'_> {
    let mut start = put_digits(mantissa.unsigned_abs(), buffer);
    let decimals = usize::try_from(scale).unwrap_or(0).min(buffer.len() - 1);
    while buffer.len() - start <= decimals {
        start -= 1;
        buffer[start] = b'0';
    }
    let (whole, mut decimals) = buffer[start..].split_at(buffer.len() - start - decimals);
    if is_plain(precision, scale) {
        let kept = decimals.len() - decimals.iter().rev().take_while(|d| **d == b'0').count();
        decimals = &decimals[..kept];
    }
    Parts {
        negative: mantissa < 0,
        whole,
        zeros: if scale < 0 {
            usize::from(scale.unsigned_abs())
        } else {
            0
        },
        decimals,
    }
}

/// Writes `value`'s decimal digits at the end of `buffer` (which must hold
/// them all) and returns where they start.
pub fn put_digits(value: u128, buffer: &mut [u8]) -> usize {
    // Dividing a u128 is a library call that showed in the profile of
    // integer results: only digits past 64 bits are divided as u128.
    const NINETEEN_DIGITS: u128 = 10u128.pow(19);
    let mut start = buffer.len();
    let mut wide = value;
    while wide > u128::from(u64::MAX) {
        let mut low = (wide % NINETEEN_DIGITS) as u64;
        for _ in 0..19 {
            start -= 1;
            buffer[start] = b'0' + (low % 10) as u8;
            low /= 10;
        }
        wide /= NINETEEN_DIGITS;
    }
    let mut rest = wide as u64;
    loop {
        start -= 1;
        buffer[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            return start;
        }
    }
}

/// Writes a decimal in PostgreSQL's text form (`-12.50`).
pub fn put_decimal(mantissa: i128, precision: u8, scale: i8, out: &mut impl BufMut) {
    let mut buffer = [0; 40];
    let parts = parts(mantissa, precision, scale, &mut buffer);
    if parts.negative {
        out.put_u8(b'-');
    }
    out.put_slice(parts.whole);
    out.put_bytes(b'0', parts.zeros);
    if !parts.decimals.is_empty() {
        out.put_u8(b'.');
        out.put_slice(parts.decimals);
    }
}

/// Writes a decimal in PostgreSQL's binary `numeric` form: the number of
/// base-10000 digits, the weight of the first, the sign, the display scale,
/// then the digits, leading and trailing zero digits left out.
pub fn put_decimal_binary(mantissa: i128, precision: u8, scale: i8, out: &mut impl BufMut) {
    let mut buffer = [0; 40];
    let parts = parts(mantissa, precision, scale, &mut buffer);
    let whole_len = parts.whole.len() + parts.zeros;
    // The digits in groups of four, the first group and the last padded.
    let mut digits = vec![b'0'; (4 - whole_len % 4) % 4];
    digits.extend_from_slice(parts.whole);
    digits.resize(digits.len() + parts.zeros, b'0');
    let first_decimal = digits.len();
    digits.extend_from_slice(parts.decimals);
    digits.resize(digits.len().next_multiple_of(4), b'0');
    let mut groups: Vec<i16> = digits
        .chunks(4)
        .map(|group| group.iter().fold(0, |n, d| n * 10 + i16::from(d - b'0')))
        .collect();
    let mut weight = (first_decimal / 4) as i16 - 1;
    let leading = groups.iter().take_while(|g| **g == 0).count();
    groups.drain(..leading);
    weight -= leading as i16;
    groups.truncate(groups.len() - groups.iter().rev().take_while(|g| **g == 0).count());
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(groups.len() as i16);
    out.put_i16(weight);
    out.put_u16(if parts.negative && !groups.is_empty() {
        0x4000
    } else {
        0
    });
    out.put_u16(parts.decimals.len() as u16);
    for group in groups {
        out.put_i16(group);
    }
}

/// Decimals' text, for a decimal cast to text.
pub fn decimal_texts(decimals: &ArrayRef) -> Result<ArrayRef> {
    let DataType::Decimal128(precision, scale) = decimals.data_type() else {
        return exec_err!("not a decimal: {}", decimals.data_type());
    };
    let mut texts = StringBuilder::with_capacity(decimals.len(), decimals.len() * 8);
    let mut text = Vec::new();
    for value in decimals.as_primitive::<Decimal128Type>().iter() {
        match value {
            Some(mantissa) => {
                text.clear();
                put_decimal(mantissa, *precision, *scale, &mut text);
                texts.append_value(String::from_utf8_lossy(&text));
            }
            None => texts.append_null(),
        }
    }
    Ok(std::sync::Arc::new(texts.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(mantissa: i128, precision: u8, scale: i8) -> String {
        let mut out = Vec::new();
        put_decimal(mantissa, precision, scale, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn binary(mantissa: i128, precision: u8, scale: i8) -> Vec<i16> {
        let mut out = Vec::new();
        put_decimal_binary(mantissa, precision, scale, &mut out);
        out.chunks(2)
            .map(|pair| i16::from_be_bytes([pair[0], pair[1]]))
            .collect()
    }

    #[test]
    fn a_declared_scale_is_written_in_full() {
        assert_eq!(text(1250, 10, 2), "12.50");
        assert_eq!(text(-5, 10, 2), "-0.05");
        assert_eq!(text(0, 10, 2), "0.00");
        assert_eq!(text(7, 5, 0), "7");
        assert_eq!(text(-12, 5, -2), "-1200");
        assert_eq!(text(i128::MIN + 1, 38, 0), (i128::MIN + 1).to_string());
        assert_eq!(text(1, 38, 38), format!("0.{}1", "0".repeat(37)));
    }

    #[test]
    fn digits_on_both_sides_of_64_bits() {
        let digits = |value: u128| {
            let mut buffer = [0u8; 39];
            let start = put_digits(value, &mut buffer);
            String::from_utf8(buffer[start..].to_vec()).unwrap()
        };
        for value in [
            0,
            7,
            u128::from(u64::MAX),
            u128::from(u64::MAX) + 1,
            10u128.pow(19) * 5,
            10u128.pow(38) + 3,
            u128::MAX,
        ] {
            assert_eq!(digits(value), value.to_string());
        }
    }

    #[test]
    fn plain_numeric_is_written_without_the_zeros_of_its_held_scale() {
        assert_eq!(text(25_000_000_000, 38, 10), "2.5");
        assert_eq!(text(100_000_000_000, 38, 10), "10");
        assert_eq!(text(-1, 38, 10), "-0.0000000001");
        assert_eq!(text(0, 38, 10), "0");
        // Past rust_decimal's 28 digits.
        let big = 18_000_000_000_000_000_000i128 * 10i128.pow(10);
        assert_eq!(text(big, 38, 10), "18000000000000000000");
    }

    #[test]
    fn binary_numerics_have_base_10000_digits_weight_sign_and_scale() {
        // 12.50: digits 12 and 5000, weight 0, positive, scale 2.
        assert_eq!(binary(1250, 10, 2), vec![2, 0, 0, 2, 12, 5000]);
        // -0.05: digit 500 at weight -1.
        assert_eq!(binary(-5, 10, 2), vec![1, -1, 0x4000, 2, 500]);
        // 1000000: 100 at weight 1, trailing zero digit left out.
        assert_eq!(binary(1_000_000, 10, 0), vec![1, 1, 0, 0, 100]);
        // zero: no digits.
        assert_eq!(binary(0, 10, 2), vec![0, 0, 0, 2]);
        // 1200 held with scale -2.
        assert_eq!(binary(12, 5, -2), vec![1, 0, 0, 0, 1200]);
        // plain 2.5: scale 1.
        assert_eq!(binary(25_000_000_000, 38, 10), vec![2, 0, 0, 1, 2, 5000]);
    }
}
