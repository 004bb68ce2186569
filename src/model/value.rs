//! Typed property values.
//!
//! The first eight types are the Azure Table service's own (`Edm.String`,
//! `Edm.Int32`, ...). `Decimal`, `Date` and `Json` are tablegate's additions so
//! that relational data (PostgreSQL `numeric`, `date`, `json`) round-trips
//! without loss; the remote backend carries them in annotated string properties.

use std::fmt;

/// Microseconds since 1970-01-01T00:00:00Z (PostgreSQL's and Arrow's unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime(pub i64);

/// Days since 1970-01-01.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(pub i32);

/// A 128-bit GUID, bytes in RFC 4122 (big-endian) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Guid(pub [u8; 16]);

/// A fixed-point decimal: `unscaled * 10^-scale`, at most 38 significant digits
/// (the range of Arrow's `Decimal128` and of `numeric(38, s)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decimal {
    pub unscaled: i128,
    pub scale: u8,
}

/// Largest number of significant digits a [`Decimal`] holds.
pub const DECIMAL_MAX_PRECISION: u8 = 38;

impl Decimal {
    /// Builds a decimal, refusing more than 38 digits or a scale past 38.
    pub fn new(unscaled: i128, scale: u8) -> Option<Decimal> {
        let max = 10i128.pow(u32::from(DECIMAL_MAX_PRECISION));
        (scale <= DECIMAL_MAX_PRECISION && unscaled.unsigned_abs() < max.unsigned_abs())
            .then_some(Decimal { unscaled, scale })
    }
}

impl Decimal {
    /// The unscaled value at another scale; `None` when a larger scale
    /// overflows. A smaller scale truncates toward zero.
    pub fn rescaled(&self, scale: u8) -> Option<i128> {
        if scale >= self.scale {
            self.unscaled
                .checked_mul(10i128.checked_pow(u32::from(scale - self.scale))?)
        } else {
            Some(self.unscaled / 10i128.checked_pow(u32::from(self.scale - scale))?)
        }
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.unscaled.unsigned_abs().to_string();
        let sign = if self.unscaled < 0 { "-" } else { "" };
        let scale = usize::from(self.scale);
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{int}.{frac}")
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The type of a property, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PropertyType {
    String,
    Int32,
    Int64,
    Double,
    Boolean,
    DateTime,
    Guid,
    Binary,
    Decimal,
    Date,
    Json,
}

impl PropertyType {
    /// The Entity Data Model name the Azure service uses (tablegate's own
    /// names for the three types it adds).
    pub fn edm_name(self) -> &'static str {
        match self {
            PropertyType::String => "Edm.String",
            PropertyType::Int32 => "Edm.Int32",
            PropertyType::Int64 => "Edm.Int64",
            PropertyType::Double => "Edm.Double",
            PropertyType::Boolean => "Edm.Boolean",
            PropertyType::DateTime => "Edm.DateTime",
            PropertyType::Guid => "Edm.Guid",
            PropertyType::Binary => "Edm.Binary",
            PropertyType::Decimal => "Tablegate.Decimal",
            PropertyType::Date => "Tablegate.Date",
            PropertyType::Json => "Tablegate.Json",
        }
    }
}

/// A property value. NULL is not a value: a NULL column is an absent property.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(String),
    Int32(i32),
    Int64(i64),
    Double(f64),
    Boolean(bool),
    DateTime(DateTime),
    Guid(Guid),
    Binary(Vec<u8>),
    Decimal(Decimal),
    Date(Date),
    /// JSON text, kept as the client sent it.
    Json(String),
}

/// A property value borrowed from where it is held: a [`Value`], or a
/// stored record read in place (see `codec::record`), so that reads can
/// copy values into their destination without an owned value between.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    String(&'a str),
    Int32(i32),
    Int64(i64),
    Double(f64),
    Boolean(bool),
    DateTime(DateTime),
    Guid(Guid),
    Binary(&'a [u8]),
    Decimal(Decimal),
    Date(Date),
    Json(&'a str),
}

impl ValueRef<'_> {
    pub fn property_type(&self) -> PropertyType {
        match self {
            ValueRef::String(_) => PropertyType::String,
            ValueRef::Int32(_) => PropertyType::Int32,
            ValueRef::Int64(_) => PropertyType::Int64,
            ValueRef::Double(_) => PropertyType::Double,
            ValueRef::Boolean(_) => PropertyType::Boolean,
            ValueRef::DateTime(_) => PropertyType::DateTime,
            ValueRef::Guid(_) => PropertyType::Guid,
            ValueRef::Binary(_) => PropertyType::Binary,
            ValueRef::Decimal(_) => PropertyType::Decimal,
            ValueRef::Date(_) => PropertyType::Date,
            ValueRef::Json(_) => PropertyType::Json,
        }
    }

    pub fn to_value(self) -> Value {
        match self {
            ValueRef::String(s) => Value::String(s.to_owned()),
            ValueRef::Int32(v) => Value::Int32(v),
            ValueRef::Int64(v) => Value::Int64(v),
            ValueRef::Double(v) => Value::Double(v),
            ValueRef::Boolean(v) => Value::Boolean(v),
            ValueRef::DateTime(v) => Value::DateTime(v),
            ValueRef::Guid(v) => Value::Guid(v),
            ValueRef::Binary(b) => Value::Binary(b.to_vec()),
            ValueRef::Decimal(d) => Value::Decimal(d),
            ValueRef::Date(d) => Value::Date(d),
            ValueRef::Json(s) => Value::Json(s.to_owned()),
        }
    }
}

impl Value {
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::String(s) => ValueRef::String(s),
            Value::Int32(v) => ValueRef::Int32(*v),
            Value::Int64(v) => ValueRef::Int64(*v),
            Value::Double(v) => ValueRef::Double(*v),
            Value::Boolean(v) => ValueRef::Boolean(*v),
            Value::DateTime(v) => ValueRef::DateTime(*v),
            Value::Guid(v) => ValueRef::Guid(*v),
            Value::Binary(b) => ValueRef::Binary(b),
            Value::Decimal(d) => ValueRef::Decimal(*d),
            Value::Date(d) => ValueRef::Date(*d),
            Value::Json(s) => ValueRef::Json(s),
        }
    }

    pub fn property_type(&self) -> PropertyType {
        self.as_ref().property_type()
    }

    /// SQL order between two values of one type (decimals of any scales;
    /// Int32 with Int64). `None` for values of different types, and for
    /// NaN.
    pub fn compare(&self, other: &Value) -> Option<std::cmp::Ordering> {
        use Value as V;
        match (self, other) {
            (V::String(a), V::String(b)) | (V::Json(a), V::String(b) | V::Json(b)) => {
                Some(a.cmp(b))
            }
            (V::Int32(a), V::Int32(b)) => Some(a.cmp(b)),
            (V::Int32(_) | V::Int64(_), V::Int32(_) | V::Int64(_)) => {
                Some(self.as_i64()?.cmp(&other.as_i64()?))
            }
            (V::Double(a), V::Double(b)) => a.partial_cmp(b),
            (V::Boolean(a), V::Boolean(b)) => Some(a.cmp(b)),
            (V::DateTime(a), V::DateTime(b)) => Some(a.cmp(b)),
            (V::Date(a), V::Date(b)) => Some(a.cmp(b)),
            (V::Guid(a), V::Guid(b)) => Some(a.cmp(b)),
            (V::Binary(a), V::Binary(b)) => Some(a.cmp(b)),
            (V::Decimal(a), V::Decimal(b)) => {
                let scale = a.scale.max(b.scale);
                Some(a.rescaled(scale)?.cmp(&b.rescaled(scale)?))
            }
            _ => None,
        }
    }

    /// An integer value as i64.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int32(v) => Some(i64::from(*v)),
            Value::Int64(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as JSON: numbers and booleans as such, JSON as itself,
    /// the rest as the text PostgreSQL shows.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Int32(v) => (*v).into(),
            Value::Int64(v) => (*v).into(),
            Value::Double(v) => serde_json::Number::from_f64(*v)
                .map_or_else(|| v.to_string().into(), serde_json::Value::Number),
            Value::Boolean(v) => (*v).into(),
            Value::Json(text) => serde_json::from_str(text).unwrap_or_else(|_| text.clone().into()),
            other => other.to_string().into(),
        }
    }

    /// The value's size in the Azure service's entity-size formula
    /// (strings count two bytes a character plus four).
    pub fn billed_size(&self) -> usize {
        match self {
            Value::String(s) | Value::Json(s) => 4 + 2 * utf16_len(s),
            Value::Binary(b) => 4 + b.len(),
            Value::Int32(_) | Value::Date(_) => 4,
            Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
            Value::Boolean(_) => 1,
            Value::Guid(_) | Value::Decimal(_) => 16,
        }
    }
}

/// Values as PostgreSQL prints them in messages (not a SQL literal).
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) | Value::Json(s) => f.write_str(s),
            Value::Int32(v) => write!(f, "{v}"),
            Value::Int64(v) => write!(f, "{v}"),
            Value::Double(v) => write!(f, "{v}"),
            Value::Boolean(v) => f.write_str(if *v { "t" } else { "f" }),
            Value::DateTime(DateTime(micros)) => {
                match chrono::DateTime::from_timestamp_micros(*micros) {
                    Some(t) => write!(f, "{}", t.naive_utc().format("%Y-%m-%d %H:%M:%S%.f")),
                    None => write!(f, "{micros}us"),
                }
            }
            Value::Date(Date(days)) => {
                let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
                match epoch.checked_add_signed(chrono::Duration::days(i64::from(*days))) {
                    Some(d) => write!(f, "{d}"),
                    None => write!(f, "{days}d"),
                }
            }
            Value::Guid(g) => write!(f, "{g}"),
            Value::Binary(b) => {
                f.write_str("\\x")?;
                b.iter().try_for_each(|x| write!(f, "{x:02x}"))
            }
            Value::Decimal(d) => write!(f, "{d}"),
        }
    }
}

/// The number of UTF-16 code units of `s` (what the service bills strings by).
pub fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.encode_utf16().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_billed_by_utf16_code_units() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("héllo"), 5);
        assert_eq!(utf16_len("漢字"), 2);
        assert_eq!(utf16_len("a😀"), 3);
        assert_eq!(Value::String("a😀".into()).billed_size(), 4 + 2 * 3);
    }

    #[test]
    fn decimal_display() {
        let check = |u, s, want: &str| assert_eq!(Decimal::new(u, s).unwrap().to_string(), want);
        check(12345, 2, "123.45");
        check(-5, 3, "-0.005");
        check(7, 0, "7");
        check(0, 2, "0.00");
    }

    #[test]
    fn decimal_precision_limit() {
        assert!(Decimal::new(10i128.pow(38) - 1, 0).is_some());
        assert!(Decimal::new(10i128.pow(38), 0).is_none());
        assert!(Decimal::new(1, 39).is_none());
    }

    #[test]
    fn guid_display() {
        let g = Guid([
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ]);
        assert_eq!(g.to_string(), "12345678-9abc-def0-0123-456789abcdef");
    }
}
