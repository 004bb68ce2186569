//! The stored form of an entity: its version and its properties.
//!
//! ```text
//! u8   format = 1
//! u64  version (little-endian; also the entity's Timestamp in microseconds)
//! u32  billed size (the entity's size in the service's formula, for statistics)
//! u16  property count
//! per property:
//!   u16 name length, name (UTF-8)
//!   u8  type tag
//!   payload: fixed width for numbers, dates, GUIDs, booleans, decimals;
//!            u32 length + bytes for strings, JSON and binary
//! ```
//!
//! Keys are not repeated here: they are the record's key in the store.

use super::CodecError;
use crate::model::{Date, DateTime, Decimal, Guid, Properties, Value, ValueRef};

const FORMAT: u8 = 1;
const HEADER: usize = 1 + 8 + 4 + 2;

const T_STRING: u8 = 1;
const T_INT32: u8 = 2;
const T_INT64: u8 = 3;
const T_DOUBLE: u8 = 4;
const T_BOOLEAN: u8 = 5;
const T_DATETIME: u8 = 6;
const T_GUID: u8 = 7;
const T_BINARY: u8 = 8;
const T_DECIMAL: u8 = 9;
const T_DATE: u8 = 10;
const T_JSON: u8 = 11;

/// The fixed part of a record, readable without decoding properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub version: u64,
    pub billed_size: u32,
}

/// Encodes a record.
pub fn encode_record(header: RecordHeader, properties: &Properties) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + properties.len() * 24);
    let properties = properties
        .iter()
        .map(|(name, value)| (name.as_str(), value));
    encode_record_into(&mut out, header, properties);
    out
}

/// Encodes a record at the end of `out`; the properties come in name order.
pub fn encode_record_into<'a>(
    out: &mut Vec<u8>,
    header: RecordHeader,
    properties: impl Iterator<Item = (&'a str, &'a Value)>,
) {
    out.push(FORMAT);
    out.extend_from_slice(&header.version.to_le_bytes());
    out.extend_from_slice(&header.billed_size.to_le_bytes());
    let count_at = out.len();
    out.extend_from_slice(&[0, 0]);
    // The model caps properties at 252, so the count fits.
    let mut count: u16 = 0;
    for (name, value) in properties {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        push_value(out, value);
        count += 1;
    }
    out[count_at..count_at + 2].copy_from_slice(&count.to_le_bytes());
}

/// Sets the version of an encoded record in place, so that a record can be
/// encoded before its version is known.
pub fn set_record_version(record: &mut [u8], version: u64) {
    if let Some(slot) = record.get_mut(1..9) {
        slot.copy_from_slice(&version.to_le_bytes());
    }
}

fn push_bytes(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn push_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(s) => push_bytes(out, T_STRING, s.as_bytes()),
        Value::Json(s) => push_bytes(out, T_JSON, s.as_bytes()),
        Value::Binary(b) => push_bytes(out, T_BINARY, b),
        Value::Int32(v) => {
            out.push(T_INT32);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Int64(v) => {
            out.push(T_INT64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Double(v) => {
            out.push(T_DOUBLE);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Boolean(v) => out.extend_from_slice(&[T_BOOLEAN, u8::from(*v)]),
        Value::DateTime(DateTime(v)) => {
            out.push(T_DATETIME);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Guid(Guid(g)) => {
            out.push(T_GUID);
            out.extend_from_slice(g);
        }
        Value::Decimal(d) => {
            out.push(T_DECIMAL);
            out.extend_from_slice(&d.unscaled.to_le_bytes());
            out.push(d.scale);
        }
        Value::Date(Date(d)) => {
            out.push(T_DATE);
            out.extend_from_slice(&d.to_le_bytes());
        }
    }
}

/// A cursor over record bytes; every read checks bounds.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(CodecError::Truncated(self.pos))?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.array::<1>()?[0])
    }

    #[inline]
    fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// The payload length of a value with this tag (reading a length prefix if it has one).
    #[inline]
    fn payload_len(&mut self, tag: u8) -> Result<usize, CodecError> {
        Ok(match tag {
            T_STRING | T_JSON | T_BINARY => self.u32()? as usize,
            T_INT32 | T_DATE => 4,
            T_INT64 | T_DOUBLE | T_DATETIME => 8,
            T_BOOLEAN => 1,
            T_GUID => 16,
            T_DECIMAL => 17,
            other => return Err(CodecError::UnknownTypeTag(other)),
        })
    }
}

/// A stored value not yet decoded: its type tag and payload bytes.
#[derive(Debug, Clone, Copy)]
pub struct RawValue<'a> {
    tag: u8,
    payload: &'a [u8],
}

impl<'a> RawValue<'a> {
    /// The value, borrowing text and bytes from the record.
    #[inline]
    pub fn get(&self) -> Result<ValueRef<'a>, CodecError> {
        let p = self.payload;
        let fixed = |n: usize| p.get(..n).ok_or(CodecError::Truncated(0));
        let text = || std::str::from_utf8(p).map_err(|_| CodecError::NotUtf8);
        Ok(match self.tag {
            T_STRING => ValueRef::String(text()?),
            T_JSON => ValueRef::Json(text()?),
            T_BINARY => ValueRef::Binary(p),
            T_INT32 => {
                ValueRef::Int32(i32::from_le_bytes(fixed(4)?.try_into().unwrap_or_default()))
            }
            T_INT64 => {
                ValueRef::Int64(i64::from_le_bytes(fixed(8)?.try_into().unwrap_or_default()))
            }
            T_DOUBLE => {
                ValueRef::Double(f64::from_le_bytes(fixed(8)?.try_into().unwrap_or_default()))
            }
            T_BOOLEAN => ValueRef::Boolean(fixed(1)?[0] != 0),
            T_DATETIME => ValueRef::DateTime(DateTime(i64::from_le_bytes(
                fixed(8)?.try_into().unwrap_or_default(),
            ))),
            T_GUID => ValueRef::Guid(Guid(fixed(16)?.try_into().unwrap_or_default())),
            T_DECIMAL => {
                let bytes = fixed(17)?;
                let unscaled = i128::from_le_bytes(bytes[..16].try_into().unwrap_or_default());
                ValueRef::Decimal(Decimal::new(unscaled, bytes[16]).ok_or(CodecError::BadDecimal)?)
            }
            T_DATE => ValueRef::Date(Date(i32::from_le_bytes(
                fixed(4)?.try_into().unwrap_or_default(),
            ))),
            other => return Err(CodecError::UnknownTypeTag(other)),
        })
    }
}

/// The properties of a record, read in place in their stored order: each
/// property's name and its value, decoded only when asked
/// ([`RawValue::get`]). Ends with an error if the record has bytes past
/// its last property.
pub struct RecordProperties<'a> {
    reader: Reader<'a>,
    left: u16,
    failed: bool,
}

impl<'a> RecordProperties<'a> {
    #[inline]
    fn next_property(&mut self) -> Result<(&'a [u8], RawValue<'a>), CodecError> {
        let r = &mut self.reader;
        let name_len = usize::from(r.u16()?);
        let name = r.take(name_len)?;
        let tag = r.u8()?;
        let len = r.payload_len(tag)?;
        let payload = r.take(len)?;
        Ok((name, RawValue { tag, payload }))
    }
}

impl<'a> Iterator for RecordProperties<'a> {
    type Item = Result<(&'a [u8], RawValue<'a>), CodecError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = if self.left == 0 {
            if self.reader.pos == self.reader.bytes.len() {
                return None;
            }
            Err(CodecError::Truncated(self.reader.pos))
        } else {
            self.left -= 1;
            self.next_property()
        };
        self.failed = item.is_err();
        Some(item)
    }
}

/// Reads a record's header, and gives its properties to read in place.
#[inline]
pub fn read_record(bytes: &[u8]) -> Result<(RecordHeader, RecordProperties<'_>), CodecError> {
    let mut reader = Reader { bytes, pos: 0 };
    let format = reader.u8()?;
    if format != FORMAT {
        return Err(CodecError::UnknownFormat(format));
    }
    let version = u64::from_le_bytes(reader.array()?);
    let billed_size = reader.u32()?;
    let left = reader.u16()?;
    let header = RecordHeader {
        version,
        billed_size,
    };
    let properties = RecordProperties {
        reader,
        left,
        failed: false,
    };
    Ok((header, properties))
}

/// Reads only the fixed header of a record.
pub fn record_header(bytes: &[u8]) -> Result<RecordHeader, CodecError> {
    read_record(bytes).map(|(header, _)| header)
}

/// Decodes a record's header and properties. With a projection, only the
/// named properties are decoded; the others are skipped over.
pub fn decode_record(
    bytes: &[u8],
    projection: Option<&[String]>,
) -> Result<(RecordHeader, Properties), CodecError> {
    let (header, stored) = read_record(bytes)?;
    let mut properties = Properties::new();
    for property in stored {
        let (name, value) = property?;
        if projection.is_none_or(|p| p.iter().any(|n| n.as_bytes() == name)) {
            let name = std::str::from_utf8(name).map_err(|_| CodecError::NotUtf8)?;
            properties.insert(name.to_owned(), value.get()?.to_value());
        }
    }
    Ok((header, properties))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HDR: RecordHeader = RecordHeader {
        version: 7,
        billed_size: 100,
    };

    fn any_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<String>().prop_map(Value::String),
            any::<i32>().prop_map(Value::Int32),
            any::<i64>().prop_map(Value::Int64),
            // NaN != NaN, so compare through bits below; keep finite here.
            (-1e300f64..1e300).prop_map(Value::Double),
            any::<bool>().prop_map(Value::Boolean),
            any::<i64>().prop_map(|v| Value::DateTime(DateTime(v))),
            any::<[u8; 16]>().prop_map(|g| Value::Guid(Guid(g))),
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::Binary),
            (-(10i128.pow(38) - 1)..10i128.pow(38), 0u8..=38)
                .prop_map(|(u, s)| Value::Decimal(Decimal::new(u, s).unwrap())),
            any::<i32>().prop_map(|d| Value::Date(Date(d))),
            "[{}\\[\\]\":,a-z0-9 ]{0,20}".prop_map(Value::Json),
        ]
    }

    fn any_properties() -> impl Strategy<Value = Properties> {
        proptest::collection::btree_map("[A-Za-z][A-Za-z0-9_]{0,12}", any_value(), 0..20)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn decode_inverts_encode(version in any::<u64>(), billed_size in any::<u32>(), props in any_properties()) {
            let header = RecordHeader { version, billed_size };
            let bytes = encode_record(header, &props);
            prop_assert_eq!(record_header(&bytes).unwrap(), header);
            prop_assert_eq!(decode_record(&bytes, None).unwrap(), (header, props));
        }

        #[test]
        fn projection_keeps_only_asked(props in any_properties(), pick in proptest::collection::vec(any::<bool>(), 20)) {
            let asked: Vec<String> = props.keys().zip(&pick).filter(|(_, &p)| p).map(|(k, _)| k.clone()).collect();
            let (_, got) = decode_record(&encode_record(HDR, &props), Some(&asked)).unwrap();
            let want: Properties = props.into_iter().filter(|(k, _)| asked.contains(k)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_record(&bytes, None);
        }

        /// Valid records with bytes changed, inserted or removed reach
        /// deeper into the decoder than random bytes: each decodes or
        /// fails, never panics.
        #[test]
        fn mutated_records_are_errors_not_panics(
            props in any_properties(),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..4),
        ) {
            let mut bytes = encode_record(HDR, &props);
            for (at, byte, how) in edits {
                let at = at % (bytes.len() + 1);
                match how {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ if at < bytes.len() => { bytes.remove(at); }
                    _ => bytes.push(byte),
                }
            }
            let _ = decode_record(&bytes, None);
            let _ = decode_record(&bytes, Some(&["a".to_owned()]));
        }

        #[test]
        fn every_truncation_is_detected(props in any_properties()) {
            let bytes = encode_record(HDR, &props);
            for cut in 0..bytes.len() {
                prop_assert!(decode_record(&bytes[..cut], None).is_err());
            }
        }
    }

    #[test]
    fn version_is_set_in_place() {
        let props = Properties::from([("x".to_string(), Value::Int32(1))]);
        let mut bytes = encode_record(HDR, &props);
        set_record_version(&mut bytes, 99);
        let (header, got) = decode_record(&bytes, None).unwrap();
        assert_eq!(header, RecordHeader { version: 99, ..HDR });
        assert_eq!(got, props);
    }

    #[test]
    fn nan_round_trips_bit_exact() {
        let props = Properties::from([("x".to_string(), Value::Double(f64::NAN))]);
        let (_, got) = decode_record(&encode_record(HDR, &props), None).unwrap();
        match got.get("x") {
            Some(Value::Double(v)) => assert_eq!(v.to_bits(), f64::NAN.to_bits()),
            other => panic!("{other:?}"),
        }
    }
}
