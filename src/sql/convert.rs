//! Entities to Arrow record batches (reads) and Arrow record batches to rows
//! of entity values (writes).

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryBuilder, BooleanArray, BooleanBuilder,
    Date32Array, Date32Builder, Decimal128Array, Decimal128Builder, Float32Array, Float32Builder,
    Float64Array, Float64Builder, Int16Array, Int16Builder, Int32Array, Int32Builder, Int64Array,
    Int64Builder, IntervalMonthDayNanoArray, IntervalMonthDayNanoBuilder, ListArray, RecordBatch,
    StringArray, StringBuilder, Time64MicrosecondArray, Time64MicrosecondBuilder,
    TimestampMicrosecondArray, TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::{IntervalMonthDayNano, SchemaRef};

use super::arrays::{stored_json, StoredLists};
use super::error::{Result, SqlError};
use super::types::{arrow_type, parse_uuid};
use crate::catalog::{
    decode_component, key_components, Element, KeyError, Row, RowError, SqlType, SystemField,
    TableDef,
};
use crate::model::codec::record::read_record;
use crate::model::codec::CodecError;
use crate::model::{Date, DateTime, Decimal, Entity, EntityKey, PropertyType, Value, ValueRef};
use crate::store::EncodedRows;
use datafusion::arrow::datatypes::DataType;

/// One column's values being collected into an Arrow array.
enum Builder {
    Utf8(StringBuilder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Decimal(Decimal128Builder, u8),
    Bool(BooleanBuilder),
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    Interval(IntervalMonthDayNanoBuilder),
    Timestamp(TimestampMicrosecondBuilder),
    Binary(BinaryBuilder),
    List(StoredLists),
}

impl Builder {
    /// A builder for the column's Arrow type (see `types::arrow_type`).
    fn new(ty: SqlType, capacity: usize) -> Self {
        match arrow_type(ty) {
            DataType::Int16 => Builder::Int16(Int16Builder::with_capacity(capacity)),
            DataType::Int32 => Builder::Int32(Int32Builder::with_capacity(capacity)),
            DataType::Int64 => Builder::Int64(Int64Builder::with_capacity(capacity)),
            DataType::Float32 => Builder::Float32(Float32Builder::with_capacity(capacity)),
            DataType::Float64 => Builder::Float64(Float64Builder::with_capacity(capacity)),
            DataType::Decimal128(precision, scale) => Builder::Decimal(
                Decimal128Builder::with_capacity(capacity)
                    .with_precision_and_scale(precision, scale)
                    .unwrap_or_default(),
                scale as u8,
            ),
            DataType::Boolean => Builder::Bool(BooleanBuilder::with_capacity(capacity)),
            DataType::Date32 => Builder::Date(Date32Builder::with_capacity(capacity)),
            DataType::Time64(_) => Builder::Time(Time64MicrosecondBuilder::with_capacity(capacity)),
            DataType::Interval(_) => {
                Builder::Interval(IntervalMonthDayNanoBuilder::with_capacity(capacity))
            }
            DataType::Timestamp(_, zone) => Builder::Timestamp(
                TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone_opt(zone),
            ),
            DataType::Binary => {
                Builder::Binary(BinaryBuilder::with_capacity(capacity, capacity * 16))
            }
            list @ DataType::List(_) => Builder::List(StoredLists::new(list, capacity)),
            _ => Builder::Utf8(StringBuilder::with_capacity(capacity, capacity * 16)),
        }
    }

    /// Appends a stored value of the column's property type (see
    /// `RowDecoder`, which checks it).
    fn append(&mut self, value: Option<ValueRef>) {
        match (self, value) {
            (Builder::Utf8(b), Some(ValueRef::String(s) | ValueRef::Json(s))) => b.append_value(s),
            (Builder::Utf8(b), Some(ValueRef::Guid(g))) => b.append_value(g.to_string()),
            (Builder::Int16(b), Some(ValueRef::Int32(v))) => b.append_option(i16::try_from(v).ok()),
            (Builder::Int32(b), Some(ValueRef::Int32(v))) => b.append_value(v),
            (Builder::Int64(b), Some(ValueRef::Int64(v))) => b.append_value(v),
            (Builder::Float32(b), Some(ValueRef::Double(v))) => b.append_value(v as f32),
            (Builder::Float64(b), Some(ValueRef::Double(v))) => b.append_value(v),
            (Builder::Decimal(b, scale), Some(ValueRef::Decimal(d))) => {
                b.append_option(rescale(d, *scale))
            }
            (Builder::Bool(b), Some(ValueRef::Boolean(v))) => b.append_value(v),
            (Builder::Date(b), Some(ValueRef::Date(Date(d)))) => b.append_value(d),
            (Builder::Time(b), Some(ValueRef::Int64(v))) => b.append_value(v),
            (Builder::Interval(b), Some(ValueRef::Binary(v))) => {
                b.append_option(stored_interval(v))
            }
            (Builder::Timestamp(b), Some(ValueRef::DateTime(DateTime(t)))) => b.append_value(t),
            (Builder::Binary(b), Some(ValueRef::Binary(v))) => b.append_value(v),
            (Builder::List(b), Some(ValueRef::Json(s))) => b.append(Some(s)),
            (Builder::Utf8(b), _) => b.append_null(),
            (Builder::Int16(b), _) => b.append_null(),
            (Builder::Int32(b), _) => b.append_null(),
            (Builder::Int64(b), _) => b.append_null(),
            (Builder::Float32(b), _) => b.append_null(),
            (Builder::Float64(b), _) => b.append_null(),
            (Builder::Decimal(b, _), _) => b.append_null(),
            (Builder::Bool(b), _) => b.append_null(),
            (Builder::Date(b), _) => b.append_null(),
            (Builder::Time(b), _) => b.append_null(),
            (Builder::Interval(b), _) => b.append_null(),
            (Builder::Timestamp(b), _) => b.append_null(),
            (Builder::Binary(b), _) => b.append_null(),
            (Builder::List(b), _) => b.append(None),
        }
    }

    fn finish(self) -> Result<ArrayRef> {
        Ok(match self {
            Builder::Utf8(mut b) => Arc::new(b.finish()),
            Builder::Int16(mut b) => Arc::new(b.finish()),
            Builder::Int32(mut b) => Arc::new(b.finish()),
            Builder::Int64(mut b) => Arc::new(b.finish()),
            Builder::Float32(mut b) => Arc::new(b.finish()),
            Builder::Float64(mut b) => Arc::new(b.finish()),
            Builder::Decimal(mut b, _) => Arc::new(b.finish()),
            Builder::Bool(mut b) => Arc::new(b.finish()),
            Builder::Date(mut b) => Arc::new(b.finish()),
            Builder::Time(mut b) => Arc::new(b.finish()),
            Builder::Interval(mut b) => Arc::new(b.finish()),
            Builder::Timestamp(mut b) => Arc::new(b.finish()),
            Builder::Binary(mut b) => Arc::new(b.finish()),
            Builder::List(b) => b.finish()?,
        })
    }
}

/// An interval as an `interval` column stores it: its months, days and
/// microseconds (PostgreSQL's precision), big-endian.
fn interval_bytes(interval: IntervalMonthDayNano) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(16);
    bytes.extend_from_slice(&interval.months.to_be_bytes());
    bytes.extend_from_slice(&interval.days.to_be_bytes());
    bytes.extend_from_slice(&(interval.nanoseconds / 1_000).to_be_bytes());
    bytes
}

/// The interval [`interval_bytes`] stored; `None` for bytes that are not one.
fn stored_interval(bytes: &[u8]) -> Option<IntervalMonthDayNano> {
    let months = i32::from_be_bytes(bytes.get(0..4)?.try_into().ok()?);
    let days = i32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
    let micros = i64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some(IntervalMonthDayNano::new(
        months,
        days,
        micros.checked_mul(1_000)?,
    ))
}

/// A decimal at another scale, if it fits without losing digits.
pub fn rescale(d: Decimal, scale: u8) -> Option<i128> {
    match scale.cmp(&d.scale) {
        std::cmp::Ordering::Equal => Some(d.unscaled),
        std::cmp::Ordering::Greater => d
            .unscaled
            .checked_mul(10i128.checked_pow(u32::from(scale - d.scale))?),
        std::cmp::Ordering::Less => {
            let div = 10i128.checked_pow(u32::from(d.scale - scale))?;
            (d.unscaled % div == 0).then_some(d.unscaled / div)
        }
    }
}

/// The record batch of the given columns (by index) of some entities.
pub fn entities_to_batch(
    def: &TableDef,
    columns: &[usize],
    schema: SchemaRef,
    entities: &[Entity],
) -> Result<RecordBatch> {
    let mut rows = EncodedRows::new();
    rows.push_entities(entities);
    RowDecoder::new(def, columns).decode(def, schema, &rows)
}

/// Where a decoded column's values come from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// The property of the column's name.
    Property,
    /// Component `index` of the PartitionKey (`partition`) or RowKey.
    Key {
        partition: bool,
        index: usize,
    },
    System(SystemField),
}

/// Decodes stored rows into the record batch of some table columns,
/// copying each value from its stored record straight into its column.
#[derive(Debug)]
pub struct RowDecoder {
    columns: Vec<usize>,
    /// The property type of each column.
    types: Vec<PropertyType>,
    sources: Vec<Source>,
    /// The decoded properties' names in byte order, each with the output
    /// column it fills.
    properties: Vec<(Vec<u8>, usize)>,
    /// How many components the PartitionKey and RowKey split into, when a
    /// key column is decoded.
    key_counts: Option<(usize, usize)>,
}

impl RowDecoder {
    pub fn new(def: &TableDef, columns: &[usize]) -> Self {
        let (partition, row) = def.key_columns();
        let mut properties = Vec::new();
        let sources = columns
            .iter()
            .enumerate()
            .map(|(out, &i)| {
                let column = &def.columns[i];
                if let Some(field) = column.system {
                    return Source::System(field);
                }
                if let Some(index) = partition.iter().position(|&k| k == i) {
                    return Source::Key {
                        partition: true,
                        index,
                    };
                }
                if let Some(index) = row.iter().position(|&k| k == i) {
                    return Source::Key {
                        partition: false,
                        index,
                    };
                }
                properties.push((column.name.as_bytes().to_vec(), out));
                Source::Property
            })
            .collect::<Vec<_>>();
        properties.sort();
        let key_counts = sources
            .iter()
            .any(|s| matches!(s, Source::Key { .. }))
            .then_some((partition.len(), row.len()));
        RowDecoder {
            columns: columns.to_vec(),
            types: columns
                .iter()
                .map(|&i| def.columns[i].ty.property_type())
                .collect(),
            sources,
            properties,
            key_counts,
        }
    }

    /// The output column of a property `name` of a record; `None` for a
    /// property not decoded. Records hold their properties in name order
    /// (`encode_record_into`), as `properties` is sorted: `next` is where
    /// the walk along `properties` stands in the record, so the property
    /// decoded is mostly the one it stands at. A name not found there is
    /// looked for among all (a record in another order is read right).
    fn property_column(&self, next: &mut usize, name: &[u8]) -> Option<usize> {
        let ahead = &self.properties[*next..];
        let step = ahead.iter().position(|(n, _)| n.as_slice() >= name);
        if let Some(step) = step.filter(|&i| ahead[i].0.as_slice() == name) {
            *next += step + 1;
            return Some(ahead[step].1);
        }
        (self.properties)
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()
            .map(|p| self.properties[p].1)
    }

    pub fn decode(
        &self,
        def: &TableDef,
        schema: SchemaRef,
        rows: &EncodedRows,
    ) -> Result<RecordBatch> {
        let mut builders = Builders(
            self.columns
                .iter()
                .map(|&i| Builder::new(def.columns[i].ty, rows.len()))
                .collect(),
        );
        self.decode_into(def, rows, &mut builders)?;
        let arrays = builders
            .0
            .into_iter()
            .map(Builder::finish)
            .collect::<Result<Vec<ArrayRef>>>()?;
        if arrays.is_empty() {
            let options = datafusion::arrow::array::RecordBatchOptions::new()
                .with_row_count(Some(rows.len()));
            return Ok(RecordBatch::try_new_with_options(schema, arrays, &options)?);
        }
        Ok(RecordBatch::try_new(schema, arrays)?)
    }

    /// Passes each row's values to `sink`, one per decoded column in the
    /// columns' order, then ends the row.
    pub fn decode_into<S: RowSink>(
        &self,
        def: &TableDef,
        rows: &EncodedRows,
        sink: &mut S,
    ) -> std::result::Result<(), S::Error> {
        self.decode_range_into(def, rows, 0..rows.len(), sink)
    }

    /// [`RowDecoder::decode_into`] of the rows at positions `range`.
    pub fn decode_range_into<S: RowSink>(
        &self,
        def: &TableDef,
        rows: &EncodedRows,
        range: Range<usize>,
        sink: &mut S,
    ) -> std::result::Result<(), S::Error> {
        // The value of each column the row's record holds.
        let mut found: Vec<Option<ValueRef>> = vec![None; self.sources.len()];
        let (mut partition_parts, mut row_parts) = (Vec::new(), Vec::new());
        for r in range {
            let row = rows.get(r);
            found.fill(None);
            let (_, properties) = read_record(row.record).map_err(corrupt)?;
            let mut next = 0;
            for property in properties {
                let (name, value) = property.map_err(corrupt)?;
                let Some(out) = self.property_column(&mut next, name) else {
                    continue;
                };
                let value = value.get().map_err(corrupt)?;
                if value.property_type() != self.types[out] || found[out].is_some() {
                    let column = &def.columns[self.columns[out]];
                    return Err(SqlError::from(RowError::PropertyType {
                        property: column.name.clone(),
                        key: EntityKey::new(row.partition_key, row.row_key),
                        found: value.property_type().edm_name(),
                        expected: column.ty.pg_name(),
                    })
                    .into());
                }
                found[out] = Some(value);
            }
            if let Some((partition_count, row_count)) = self.key_counts {
                let malformed = |key: &str| {
                    SqlError::from(KeyError::Malformed {
                        key: key.to_owned(),
                    })
                };
                key_components(row.partition_key, partition_count, &mut partition_parts)
                    .ok_or_else(|| malformed(row.partition_key))?;
                key_components(row.row_key, row_count, &mut row_parts)
                    .ok_or_else(|| malformed(row.row_key))?;
            }
            for (out, source) in self.sources.iter().enumerate() {
                match *source {
                    Source::Property => sink.value(out, found[out])?,
                    Source::Key { partition, index } => {
                        let (key, parts) = match partition {
                            true => (row.partition_key, &partition_parts),
                            false => (row.row_key, &row_parts),
                        };
                        let part = &parts[index];
                        let ty = def.columns[self.columns[out]].ty;
                        if self.types[out] == PropertyType::String {
                            sink.value(out, Some(ValueRef::String(part)))?;
                        } else {
                            let value = decode_component(ty, part).ok_or_else(|| {
                                SqlError::from(KeyError::Malformed {
                                    key: key.to_owned(),
                                })
                            })?;
                            sink.value(out, Some(value.as_ref()))?;
                        }
                    }
                    Source::System(SystemField::Timestamp) => {
                        sink.value(out, row.timestamp.map(ValueRef::DateTime))?
                    }
                    Source::System(SystemField::ETag) => {
                        let etag = row.etag.text();
                        sink.value(out, etag.as_deref().map(ValueRef::String))?
                    }
                    Source::System(SystemField::Properties) => {
                        let entity = rows.entity(r, None).map_err(corrupt)?;
                        let all = def.undeclared_properties(&entity.properties);
                        sink.value(out, Some(all.as_ref()))?;
                    }
                }
            }
            sink.row_done()?;
        }
        Ok(())
    }
}

/// Where [`RowDecoder::decode_into`] puts what it decodes.
pub trait RowSink {
    type Error: From<SqlError>;
    /// The value of output column `column` of the current row (`None` for
    /// NULL); called for each column in order.
    fn value(
        &mut self,
        column: usize,
        value: Option<ValueRef>,
    ) -> std::result::Result<(), Self::Error>;
    /// The current row has all its values.
    fn row_done(&mut self) -> std::result::Result<(), Self::Error>;
}

/// A record batch's columns being built.
struct Builders(Vec<Builder>);

impl RowSink for Builders {
    type Error = SqlError;

    fn value(&mut self, column: usize, value: Option<ValueRef>) -> Result<()> {
        self.0[column].append(value);
        Ok(())
    }

    fn row_done(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The error of a stored record that does not decode.
fn corrupt(e: CodecError) -> SqlError {
    SqlError::Store(e.into())
}

fn downcast<'a, T: 'static>(array: &'a ArrayRef, column: &str) -> Result<&'a T> {
    array.as_any().downcast_ref::<T>().ok_or_else(|| {
        SqlError::value(
            "42804",
            format!(
                "column {column:?} has an unexpected type {}",
                array.data_type()
            ),
        )
    })
}

/// Refuses a text longer than a `varchar(n)` takes.
fn check_varchar(n: u32, column: &str, s: &str) -> Result<()> {
    if s.chars().count() > n as usize {
        return Err(SqlError::value(
            "22001",
            format!("value too long for type character varying({n}) in column {column:?}"),
        ));
    }
    Ok(())
}

/// Checks and normalizes a text value for its column type.
fn text_value(ty: SqlType, column: &str, s: &str) -> Result<Value> {
    if let SqlType::Varchar(Some(n)) = ty {
        check_varchar(n, column, s)?;
    }
    Ok(match ty {
        // Stored without its trailing spaces, which PostgreSQL does not
        // compare; they are added back when the column is sent.
        SqlType::Char(n) => {
            let n = n as usize;
            let chars: Vec<char> = s.chars().collect();
            if chars.len() > n {
                if chars[n..].iter().any(|&c| c != ' ') {
                    return Err(SqlError::value(
                        "22001",
                        format!("value too long for type character({n}) in column {column:?}"),
                    ));
                }
                Value::String(
                    chars[..n]
                        .iter()
                        .collect::<String>()
                        .trim_end_matches(' ')
                        .to_owned(),
                )
            } else {
                Value::String(s.trim_end_matches(' ').to_owned())
            }
        }
        SqlType::Uuid => Value::Guid(parse_uuid(s).ok_or_else(|| {
            SqlError::value(
                "22P02",
                format!("invalid input syntax for type uuid: {s:?}"),
            )
        })?),
        SqlType::Json | SqlType::Jsonb => {
            let doc = serde_json::from_str::<serde_json::Value>(s).map_err(|e| {
                SqlError::value("22P02", format!("invalid input syntax for type json: {e}"))
            })?;
            // jsonb holds the value, not its spelling.
            Value::Json(match ty {
                SqlType::Jsonb => super::json::jsonb_text(&doc),
                _ => s.to_owned(),
            })
        }
        _ => Value::String(s.to_owned()),
    })
}

/// Rows of table columns from a batch whose columns are, in order, the
/// table's columns listed in `columns`, already cast to their Arrow types.
/// Columns of the table not listed are NULL.
pub fn batch_to_rows(def: &TableDef, columns: &[usize], batch: &RecordBatch) -> Result<Vec<Row>> {
    let mut rows: Vec<Row> = vec![vec![None; def.columns.len()]; batch.num_rows()];
    for (array, &i) in batch.columns().iter().zip(columns) {
        let column = &def.columns[i];
        let name = column.name.as_str();
        macro_rules! fill {
            ($ty:ty, |$v:ident| $make:expr) => {{
                let a = downcast::<$ty>(array, name)?;
                for (r, row) in rows.iter_mut().enumerate() {
                    if a.is_valid(r) {
                        let $v = a.value(r);
                        row[i] = Some($make);
                    }
                }
            }};
        }
        match column.ty {
            SqlType::Text
            | SqlType::Varchar(_)
            | SqlType::Char(_)
            | SqlType::Uuid
            | SqlType::Json
            | SqlType::Jsonb => {
                let a = downcast::<StringArray>(array, name)?;
                for (r, row) in rows.iter_mut().enumerate() {
                    if a.is_valid(r) {
                        let text = a.value(r);
                        if let Some(ty) = &column.enum_type {
                            super::enums::check_label(ty, text)?;
                        }
                        row[i] = Some(text_value(column.ty, name, text)?);
                    }
                }
            }
            SqlType::Int2 => fill!(Int16Array, |v| Value::Int32(i32::from(v))),
            SqlType::Int4 => fill!(Int32Array, |v| Value::Int32(v)),
            SqlType::Int8 => fill!(Int64Array, |v| Value::Int64(v)),
            SqlType::Time => match column.precision {
                Some(digits) => fill!(Time64MicrosecondArray, |v| Value::Int64(
                    super::precision::round_time(v, digits)
                )),
                None => fill!(Time64MicrosecondArray, |v| Value::Int64(v)),
            },
            SqlType::Interval => {
                fill!(IntervalMonthDayNanoArray, |v| Value::Binary(
                    interval_bytes(v)
                ))
            }
            SqlType::Float4 => fill!(Float32Array, |v| Value::Double(f64::from(v))),
            SqlType::Float8 => fill!(Float64Array, |v| Value::Double(v)),
            SqlType::Numeric { scale, .. } => {
                let a = downcast::<Decimal128Array>(array, name)?;
                for (r, row) in rows.iter_mut().enumerate() {
                    if a.is_valid(r) {
                        let d = Decimal::new(a.value(r), scale).ok_or_else(|| {
                            SqlError::value(
                                "22003",
                                format!("numeric field overflow in column {name:?}"),
                            )
                        })?;
                        row[i] = Some(Value::Decimal(d));
                    }
                }
            }
            SqlType::Bool => fill!(BooleanArray, |v| Value::Boolean(v)),
            SqlType::Date => fill!(Date32Array, |v| Value::Date(Date(v))),
            SqlType::Timestamp | SqlType::Timestamptz => match column.precision {
                Some(digits) => fill!(TimestampMicrosecondArray, |v| Value::DateTime(DateTime(
                    super::precision::round_timestamp(v, digits)
                ))),
                None => fill!(TimestampMicrosecondArray, |v| Value::DateTime(DateTime(v))),
            },
            SqlType::Bytea => fill!(BinaryArray, |v| Value::Binary(v.to_vec())),
            SqlType::Array(element) => {
                let a = downcast::<ListArray>(array, name)?;
                for (r, row) in rows.iter_mut().enumerate() {
                    if a.is_valid(r) {
                        let values = a.value(r);
                        if let Element::Varchar(Some(n)) = element {
                            for text in values.as_string::<i32>().iter().flatten() {
                                check_varchar(n, name, text)?;
                            }
                        }
                        row[i] = Some(Value::Json(stored_json(&values)?));
                    }
                }
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Column, Keys};
    use crate::model::codec::record::{encode_record_into, RecordHeader};
    use crate::store::RowETag;

    /// Collects each row's values as text.
    #[derive(Default)]
    struct Collected(Vec<Vec<String>>, Vec<String>);

    impl RowSink for Collected {
        type Error = SqlError;
        fn value(&mut self, _: usize, value: Option<ValueRef>) -> Result<()> {
            self.1.push(format!("{value:?}"));
            Ok(())
        }
        fn row_done(&mut self) -> Result<()> {
            self.0.push(std::mem::take(&mut self.1));
            Ok(())
        }
    }

    #[test]
    fn properties_are_found_whatever_order_a_record_holds_them_in() {
        let def = TableDef::new(
            "t",
            vec![
                Column::new("id", SqlType::Int8),
                Column::new("b", SqlType::Text),
                Column::new("a", SqlType::Int8),
                Column::new("c", SqlType::Text),
            ],
            Keys::Columns {
                partition: vec![0],
                row: vec![],
            },
        );
        let (one, seven) = (Value::Int64(1), Value::Int64(7));
        let (x, y, z) = (
            Value::String("x".into()),
            Value::String("y".into()),
            Value::String("z".into()),
        );
        let mut rows = EncodedRows::new();
        let header = RecordHeader {
            version: 0,
            billed_size: 0,
        };
        let mut record = |properties: Vec<(&str, &Value)>| {
            let mut bytes = Vec::new();
            encode_record_into(&mut bytes, header, properties.into_iter());
            rows.push(("p", ""), RowETag::None, None, &bytes);
        };
        // In name order, with a property no column decodes between two
        // that are; backwards; without `a`; out of order, then in order
        // again after a name the walk passed.
        record(vec![("a", &one), ("b", &x), ("bb", &y), ("c", &z)]);
        record(vec![("c", &z), ("b", &x), ("a", &seven)]);
        record(vec![("b", &y), ("c", &x)]);
        record(vec![("c", &z), ("a", &seven), ("b", &y)]);
        // `c`, `a` and `b`, in that order.
        let decoder = RowDecoder::new(&def, &[3, 2, 1]);
        let mut sink = Collected::default();
        decoder.decode_into(&def, &rows, &mut sink).unwrap();
        assert_eq!(
            sink.0,
            [
                [
                    "Some(String(\"z\"))",
                    "Some(Int64(1))",
                    "Some(String(\"x\"))"
                ],
                [
                    "Some(String(\"z\"))",
                    "Some(Int64(7))",
                    "Some(String(\"x\"))"
                ],
                ["Some(String(\"x\"))", "None", "Some(String(\"y\"))"],
                [
                    "Some(String(\"z\"))",
                    "Some(Int64(7))",
                    "Some(String(\"y\"))"
                ],
            ]
        );
    }
}
