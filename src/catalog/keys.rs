//! Key columns as PartitionKey / RowKey strings whose byte order is the SQL
//! order of the values, so that a range on a key column is a key range.
//!
//! Each component is text the Azure service accepts in a key (no control
//! characters, none of `/ \ # ?`):
//!
//! | type | encoding | example |
//! |---|---|---|
//! | text, varchar, char | the text itself | `Sales` |
//! | int2 / int4 / int8 | zero-padded to 5 / 10 / 19 digits; negatives `-` + (value - MIN) | `0000000042`, `-2147483647` (= -1) |
//! | numeric(p, s) | the unscaled value as an integer of p digits, with the point | `00012.50` |
//! | float4 / float8 | 16 hex digits of the order-preserving bit pattern | `c045000000000000` |
//! | bool | `f` / `t` | |
//! | date | `YYYY-MM-DD` (years 1 to 9999) | `2026-11-21` |
//! | timestamp(tz) | `YYYY-MM-DDTHH:MM:SS.ffffff` (+ `Z` with a time zone) | |
//! | uuid | lowercase canonical text | |
//! | bytea | lowercase hex | |
//!
//! Several columns in one key are joined like the store's own key tuples,
//! with a printable escape: inside every component but the last, a space
//! becomes ` !`, and the component ends with two spaces. Two spaces sort below
//! an escaped space and below every other character, so a shorter component
//! sorts first, as in SQL. A key of one column is just that column's text.

use std::borrow::Cow;

use chrono::{DateTime as ChronoDateTime, NaiveDate, NaiveDateTime};

use super::types::SqlType;
use crate::model::{Date, DateTime, Decimal, Guid, Value};

/// A value that cannot be (or is not) a key component.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error("key column {column:?} cannot be NULL")]
    Null { column: String },
    #[error("key column {column:?} contains the character {character:?}, which keys cannot hold (control characters and / \\ # ?)")]
    ForbiddenCharacter { column: String, character: char },
    #[error("key column {column:?}: {reason}")]
    Unsupported { column: String, reason: String },
    #[error("stored key {key:?} does not decode as the table's key columns")]
    Malformed { key: String },
}

fn is_forbidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '/' | '\\' | '#' | '?')
}

fn digits(ty: SqlType) -> usize {
    match ty {
        SqlType::Int2 => 5,
        SqlType::Int4 => 10,
        _ => 19,
    }
}

fn min_of(ty: SqlType) -> i128 {
    match ty {
        SqlType::Int2 => i128::from(i16::MIN),
        SqlType::Int4 => i128::from(i32::MIN),
        _ => i128::from(i64::MIN),
    }
}

/// A signed integer as fixed-width, order-preserving digits: `v` in at
/// least `width` decimal digits; a negative `v` as `-` and `v - offset`
/// (`offset` is below every value, so the digits sort as the values do).
fn encode_signed(v: i128, width: usize, offset: i128) -> String {
    const TEN_19: u128 = 10_000_000_000_000_000_000;
    let (sign, magnitude) = if v >= 0 { ("", v) } else { ("-", v - offset) };
    let magnitude = magnitude.unsigned_abs();
    // Digits from the last, 19 at a time in a u64 (its division is cheaper).
    let mut digits = [b'0'; 40];
    let mut start = digits.len();
    let mut push = |mut m: u64, at_least: usize| {
        let end = start;
        while m > 0 || end - start < at_least {
            start -= 1;
            digits[start] = b'0' + (m % 10) as u8;
            m /= 10;
        }
    };
    if magnitude >= TEN_19 {
        push((magnitude % TEN_19) as u64, 19);
        push((magnitude / TEN_19) as u64, 1);
    } else {
        push(magnitude as u64, 1);
    }
    let start = start.min(digits.len().saturating_sub(width));
    let mut out = String::with_capacity(sign.len() + digits.len() - start);
    out.push_str(sign);
    out.extend(digits[start..].iter().map(|&d| char::from(d)));
    out
}

fn decode_signed(s: &str, offset: i128) -> Option<i128> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    // Reading 19 digits or fewer as a u64 costs less than as an i128.
    let magnitude = if digits.len() <= 19 {
        i128::from(digits.parse::<u64>().ok()?)
    } else {
        digits.parse::<i128>().ok()?
    };
    Some(if negative {
        magnitude + offset
    } else {
        magnitude
    })
}

fn sortable_float(v: f64) -> u64 {
    let v = if v == 0.0 { 0.0 } else { v };
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn float_from_sortable(bits: u64) -> f64 {
    if bits >> 63 == 1 {
        f64::from_bits(bits & !(1 << 63))
    } else {
        f64::from_bits(!bits)
    }
}

const TS_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6f";

fn epoch() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()
}

/// Encodes one value of an index entry's key: like a key component, but
/// text may hold the characters keys cannot: they and `%` are written as
/// `%XX` (their code in hex, `%uXXXXXX` beyond one byte). Equal values stay
/// equal; the order of values that hold such characters is not their text
/// order.
pub fn encode_index_component(
    column: &str,
    ty: SqlType,
    value: &Value,
) -> Result<String, KeyError> {
    match value {
        Value::String(s) if s.chars().any(|c| c == '%' || is_forbidden(c)) => {
            let mut escaped = String::with_capacity(s.len() + 8);
            for c in s.chars() {
                if c == '%' || is_forbidden(c) {
                    let code = u32::from(c);
                    if code < 0x100 {
                        escaped.push_str(&format!("%{code:02X}"));
                    } else {
                        escaped.push_str(&format!("%u{code:06X}"));
                    }
                } else {
                    escaped.push(c);
                }
            }
            encode_component(column, ty, &Value::String(escaped))
        }
        _ => encode_component(column, ty, value),
    }
}

/// Encodes one key component.
pub fn encode_component(column: &str, ty: SqlType, value: &Value) -> Result<String, KeyError> {
    let unsupported = |reason: String| KeyError::Unsupported {
        column: column.to_owned(),
        reason,
    };
    let text = match (ty, value) {
        (SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_), Value::String(s)) => {
            if let Some(c) = s.chars().find(|&c| is_forbidden(c)) {
                return Err(KeyError::ForbiddenCharacter {
                    column: column.to_owned(),
                    character: c,
                });
            }
            s.clone()
        }
        (SqlType::Int2 | SqlType::Int4, Value::Int32(v)) => {
            encode_signed(i128::from(*v), digits(ty), min_of(ty))
        }
        (SqlType::Int8, Value::Int64(v)) => encode_signed(i128::from(*v), digits(ty), min_of(ty)),
        (SqlType::Numeric { precision, scale }, Value::Decimal(d)) => {
            if d.scale != scale {
                return Err(unsupported(format!(
                    "decimal of scale {} for numeric scale {scale}",
                    d.scale
                )));
            }
            let p = usize::from(precision);
            let s = encode_signed(d.unscaled, p, -(10i128.pow(u32::from(precision))));
            if scale == 0 {
                s
            } else {
                let cut = s.len() - usize::from(scale);
                format!("{}.{}", &s[..cut], &s[cut..])
            }
        }
        (SqlType::Float4 | SqlType::Float8, Value::Double(v)) => {
            format!("{:016x}", sortable_float(*v))
        }
        (SqlType::Bool, Value::Boolean(b)) => if *b { "t" } else { "f" }.to_owned(),
        (SqlType::Date, Value::Date(Date(days))) => {
            let date = epoch()
                .checked_add_signed(chrono::Duration::days(i64::from(*days)))
                .filter(|d| (1..=9999).contains(&chrono::Datelike::year(d)))
                .ok_or_else(|| {
                    unsupported("dates in keys must be in the years 1 to 9999".into())
                })?;
            date.format("%Y-%m-%d").to_string()
        }
        // `HH:MM:SS.ffffff`, to 24:00:00.000000.
        (SqlType::Time, Value::Int64(micros)) => {
            let seconds = micros.div_euclid(1_000_000);
            format!(
                "{:02}:{:02}:{:02}.{:06}",
                seconds / 3600,
                seconds / 60 % 60,
                seconds % 60,
                micros.rem_euclid(1_000_000)
            )
        }
        (SqlType::Timestamp | SqlType::Timestamptz, Value::DateTime(DateTime(micros))) => {
            let ts = ChronoDateTime::from_timestamp_micros(*micros)
                .map(|t| t.naive_utc())
                .filter(|t| (1..=9999).contains(&chrono::Datelike::year(t)))
                .ok_or_else(|| {
                    unsupported("timestamps in keys must be in the years 1 to 9999".into())
                })?;
            let mut s = ts.format(TS_FORMAT).to_string();
            if ty == SqlType::Timestamptz {
                s.push('Z');
            }
            s
        }
        (SqlType::Uuid, Value::Guid(g)) => g.to_string(),
        (SqlType::Bytea, Value::Binary(b)) => b.iter().map(|x| format!("{x:02x}")).collect(),
        (SqlType::Json | SqlType::Jsonb, _) => {
            return Err(unsupported("json columns cannot be key columns".into()))
        }
        (SqlType::Interval, _) => {
            return Err(unsupported("interval columns cannot be key columns".into()))
        }
        (SqlType::Array(_), _) => {
            return Err(unsupported("array columns cannot be key columns".into()))
        }
        (ty, v) => {
            return Err(unsupported(format!(
                "a {} value cannot be stored in a {} column",
                v.property_type().edm_name(),
                ty.pg_name()
            )))
        }
    };
    Ok(text)
}

/// Decodes one index component written by [`encode_index_component`].
pub fn decode_index_component(ty: SqlType, s: &str) -> Option<Value> {
    match decode_component(ty, s)? {
        Value::String(escaped) if escaped.contains('%') => {
            let mut text = String::with_capacity(escaped.len());
            let mut rest = escaped.as_str();
            while let Some(at) = rest.find('%') {
                text.push_str(&rest[..at]);
                let (digits, width) = match rest[at + 1..].strip_prefix('u') {
                    Some(long) => (long.get(..6)?, 8),
                    None => (rest.get(at + 1..at + 3)?, 3),
                };
                text.push(char::from_u32(u32::from_str_radix(digits, 16).ok()?)?);
                rest = &rest[at + width..];
            }
            text.push_str(rest);
            Some(Value::String(text))
        }
        value => Some(value),
    }
}

/// Decodes one key component written by [`encode_component`].
pub fn decode_component(ty: SqlType, s: &str) -> Option<Value> {
    Some(match ty {
        SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_) => Value::String(s.to_owned()),
        SqlType::Int2 | SqlType::Int4 => {
            Value::Int32(i32::try_from(decode_signed(s, min_of(ty))?).ok()?)
        }
        SqlType::Int8 => Value::Int64(i64::try_from(decode_signed(s, min_of(ty))?).ok()?),
        SqlType::Numeric { precision, scale } => {
            let digits: String = s.chars().filter(|&c| c != '.').collect();
            let unscaled = decode_signed(&digits, -(10i128.pow(u32::from(precision))))?;
            Value::Decimal(Decimal::new(unscaled, scale)?)
        }
        SqlType::Float4 | SqlType::Float8 => {
            Value::Double(float_from_sortable(u64::from_str_radix(s, 16).ok()?))
        }
        SqlType::Bool => Value::Boolean(s == "t"),
        SqlType::Date => {
            let d = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
            Value::Date(Date(i32::try_from((d - epoch()).num_days()).ok()?))
        }
        SqlType::Time => {
            let (clock, fraction) = s.split_once('.')?;
            let mut parts = clock.splitn(3, ':').map(|p| p.parse::<i64>().ok());
            let (h, m, sec) = (parts.next()??, parts.next()??, parts.next()??);
            Value::Int64(((h * 60 + m) * 60 + sec) * 1_000_000 + fraction.parse::<i64>().ok()?)
        }
        SqlType::Timestamp | SqlType::Timestamptz => {
            let t = NaiveDateTime::parse_from_str(s.trim_end_matches('Z'), TS_FORMAT).ok()?;
            Value::DateTime(DateTime(t.and_utc().timestamp_micros()))
        }
        SqlType::Uuid => {
            let hex: String = s.chars().filter(|&c| c != '-').collect();
            let bytes = decode_hex(&hex)?;
            Value::Guid(Guid(bytes.try_into().ok()?))
        }
        SqlType::Bytea => Value::Binary(decode_hex(s)?),
        SqlType::Json | SqlType::Jsonb | SqlType::Array(_) | SqlType::Interval => return None,
    })
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Joins encoded components into one key (see the module docs).
pub fn join_components(components: &[String]) -> String {
    if let [only] = components {
        return only.clone();
    }
    let mut out = String::new();
    for (i, c) in components.iter().enumerate() {
        if i + 1 == components.len() {
            out.push_str(c);
        } else {
            out.push_str(&c.replace(' ', " !"));
            out.push_str("  ");
        }
    }
    out
}

/// Splits a key into `count` encoded components.
pub fn split_components(key: &str, count: usize) -> Option<Vec<String>> {
    let mut parts = Vec::with_capacity(count);
    key_components(key, count, &mut parts)?;
    Some(parts.into_iter().map(Cow::into_owned).collect())
}

/// Splits a key into `count` encoded components, borrowed from the key
/// unless they hold an escaped space; `out` is cleared first.
pub fn key_components<'a>(key: &'a str, count: usize, out: &mut Vec<Cow<'a, str>>) -> Option<()> {
    out.clear();
    let mut rest = key;
    for _ in 1..count {
        let end = rest.find("  ")?;
        let (component, after) = (&rest[..end], &rest[end + 2..]);
        let component = match component.contains(' ') {
            false => Cow::Borrowed(component),
            // Inside a component every space is escaped as ` !`.
            true if component.matches(' ').count() == component.matches(" !").count() => {
                Cow::Owned(component.replace(" !", " "))
            }
            true => return None,
        };
        out.push(component);
        rest = after;
    }
    if count > 0 {
        out.push(Cow::Borrowed(rest));
    } else if !rest.is_empty() {
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(ty: SqlType, v: Value) -> String {
        encode_component("c", ty, &v).unwrap()
    }

    #[test]
    fn examples() {
        assert_eq!(enc(SqlType::Int4, Value::Int32(42)), "0000000042");
        assert_eq!(enc(SqlType::Int4, Value::Int32(-1)), "-2147483647");
        assert_eq!(
            enc(
                SqlType::Numeric {
                    precision: 5,
                    scale: 2
                },
                Value::Decimal(Decimal::new(1250, 2).unwrap())
            ),
            "012.50"
        );
        assert_eq!(enc(SqlType::Date, Value::Date(Date(0))), "1970-01-01");
        assert_eq!(
            enc(SqlType::Timestamptz, Value::DateTime(DateTime(1))),
            "1970-01-01T00:00:00.000001Z"
        );
        assert_eq!(join_components(&["a b".into(), "x y".into()]), "a !b  x y");
        assert!(encode_component("c", SqlType::Text, &Value::String("a/b".into())).is_err());
    }

    fn order_check(
        ty: SqlType,
        a: Value,
        b: Value,
        cmp: std::cmp::Ordering,
    ) -> Result<(), TestCaseError> {
        let (ea, eb) = (enc(ty, a.clone()), enc(ty, b.clone()));
        prop_assert_eq!(ea.cmp(&eb), cmp, "{:?} {:?} -> {} {}", a, b, ea, eb);
        prop_assert_eq!(decode_component(ty, &ea), Some(a));
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn int_order(a in any::<i64>(), b in any::<i64>(), c in any::<i32>(), d in any::<i32>(), e in any::<i16>(), f in any::<i16>()) {
            order_check(SqlType::Int8, Value::Int64(a), Value::Int64(b), a.cmp(&b))?;
            order_check(SqlType::Int4, Value::Int32(c), Value::Int32(d), c.cmp(&d))?;
            order_check(SqlType::Int2, Value::Int32(e.into()), Value::Int32(f.into()), e.cmp(&f))?;
        }

        #[test]
        fn signed_digits_are_those_formatting_gives_and_read_back(small in any::<i64>(), big in -(10i128.pow(38)) + 1..10i128.pow(38), width in 0usize..40) {
            let offset = -(10i128.pow(38));
            for v in [i128::from(small), big] {
                let formatted = if v >= 0 {
                    format!("{v:0width$}")
                } else {
                    format!("-{:0width$}", v - offset)
                };
                prop_assert_eq!(encode_signed(v, width, offset), formatted.clone());
                prop_assert_eq!(decode_signed(&formatted, offset), Some(v));
            }
        }

        #[test]
        fn numeric_order(a in -99_999i128..99_999, b in -99_999i128..99_999) {
            let ty = SqlType::Numeric { precision: 5, scale: 2 };
            let d = |u| Value::Decimal(Decimal::new(u, 2).unwrap());
            order_check(ty, d(a), d(b), a.cmp(&b))?;
        }

        #[test]
        fn float_order(a in any::<f64>().prop_filter("not nan", |v| !v.is_nan()), b in any::<f64>().prop_filter("not nan", |v| !v.is_nan())) {
            let (ea, eb) = (enc(SqlType::Float8, Value::Double(a)), enc(SqlType::Float8, Value::Double(b)));
            prop_assert_eq!(ea.cmp(&eb), a.partial_cmp(&b).unwrap());
        }

        #[test]
        fn timestamp_order(a in -62_135_596_800_000_000i64..253_402_300_799_999_999, b in -62_135_596_800_000_000i64..253_402_300_799_999_999) {
            order_check(SqlType::Timestamp, Value::DateTime(DateTime(a)), Value::DateTime(DateTime(b)), a.cmp(&b))?;
        }

        #[test]
        fn time_order(a in 0i64..=86_400_000_000, b in 0i64..=86_400_000_000) {
            order_check(SqlType::Time, Value::Int64(a), Value::Int64(b), a.cmp(&b))?;
        }

        #[test]
        fn date_order(a in -719_162i32..2_932_896, b in -719_162i32..2_932_896) {
            order_check(SqlType::Date, Value::Date(Date(a)), Value::Date(Date(b)), a.cmp(&b))?;
        }

        #[test]
        fn bytea_and_uuid_order(a in proptest::collection::vec(any::<u8>(), 0..8), b in proptest::collection::vec(any::<u8>(), 0..8), g in any::<[u8; 16]>(), h in any::<[u8; 16]>()) {
            order_check(SqlType::Bytea, Value::Binary(a.clone()), Value::Binary(b.clone()), a.cmp(&b))?;
            order_check(SqlType::Uuid, Value::Guid(Guid(g)), Value::Guid(Guid(h)), g.cmp(&h))?;
        }

        #[test]
        fn compound_keys_order_as_tuples(a in ("[ !a-c]{0,4}", "[ !a-c]{0,4}", "[ !a-c]{0,3}"), b in ("[ !a-c]{0,4}", "[ !a-c]{0,4}", "[ !a-c]{0,3}")) {
            let ja = join_components(&[a.0.clone(), a.1.clone(), a.2.clone()]);
            let jb = join_components(&[b.0.clone(), b.1.clone(), b.2.clone()]);
            prop_assert_eq!(ja.cmp(&jb), a.cmp(&b));
            prop_assert_eq!(split_components(&ja, 3), Some(vec![a.0, a.1, a.2]));
        }
    }
}

#[cfg(test)]
mod index_component_tests {
    use super::*;

    #[test]
    fn index_values_escape_what_keys_cannot_hold() {
        let text = |s: &str| encode_index_component("c", SqlType::Text, &Value::String(s.into()));
        assert_eq!(text("Supplier#1").unwrap(), "Supplier%231");
        assert_eq!(text("a/b?c\\d").unwrap(), "a%2Fb%3Fc%5Cd");
        assert_eq!(text("100%").unwrap(), "100%25");
        assert_eq!(text("\u{85}").unwrap(), "%85");
        assert_eq!(text("plain").unwrap(), "plain");
        // Distinct values stay distinct.
        assert_ne!(text("%23").unwrap(), text("#").unwrap());
        // And read back as they were.
        for original in [
            "Supplier#1",
            "a/b?c\\d",
            "100%",
            "\u{85}",
            "%23",
            "x\u{2028}y",
            "plain",
        ] {
            let encoded = text(original).unwrap();
            assert_eq!(
                decode_index_component(SqlType::Text, &encoded),
                Some(Value::String(original.into())),
                "{encoded}"
            );
        }
    }
}
