//! Entities to Arrow record batches (reads) and Arrow record batches to rows
//! of entity values (writes).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryBuilder, BooleanArray, BooleanBuilder, Date32Array,
    Date32Builder, Decimal128Array, Decimal128Builder, Float32Array, Float32Builder, Float64Array,
    Float64Builder, Int16Array, Int16Builder, Int32Array, Int32Builder, Int64Array, Int64Builder,
    RecordBatch, StringArray, StringBuilder, TimestampMicrosecondArray,
    TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::SchemaRef;

use super::error::{Result, SqlError};
use super::types::{arrow_type, parse_uuid};
use crate::catalog::{KeyParts, Row, SqlType, TableDef};
use crate::model::{Date, DateTime, Decimal, Entity, Value};
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
    Timestamp(TimestampMicrosecondBuilder),
    Binary(BinaryBuilder),
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
            DataType::Timestamp(_, zone) => Builder::Timestamp(
                TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone_opt(zone),
            ),
            DataType::Binary => {
                Builder::Binary(BinaryBuilder::with_capacity(capacity, capacity * 16))
            }
            _ => Builder::Utf8(StringBuilder::with_capacity(capacity, capacity * 16)),
        }
    }

    /// Appends a stored value; the catalog has checked that its property type
    /// matches the column.
    fn append(&mut self, value: Option<&Value>) {
        match (self, value) {
            (Builder::Utf8(b), Some(Value::String(s) | Value::Json(s))) => b.append_value(s),
            (Builder::Utf8(b), Some(Value::Guid(g))) => b.append_value(g.to_string()),
            (Builder::Int16(b), Some(Value::Int32(v))) => b.append_option(i16::try_from(*v).ok()),
            (Builder::Int32(b), Some(Value::Int32(v))) => b.append_value(*v),
            (Builder::Int64(b), Some(Value::Int64(v))) => b.append_value(*v),
            (Builder::Float32(b), Some(Value::Double(v))) => b.append_value(*v as f32),
            (Builder::Float64(b), Some(Value::Double(v))) => b.append_value(*v),
            (Builder::Decimal(b, scale), Some(Value::Decimal(d))) => {
                b.append_option(rescale(*d, *scale))
            }
            (Builder::Bool(b), Some(Value::Boolean(v))) => b.append_value(*v),
            (Builder::Date(b), Some(Value::Date(Date(d)))) => b.append_value(*d),
            (Builder::Timestamp(b), Some(Value::DateTime(DateTime(t)))) => b.append_value(*t),
            (Builder::Binary(b), Some(Value::Binary(v))) => b.append_value(v),
            (Builder::Utf8(b), _) => b.append_null(),
            (Builder::Int16(b), _) => b.append_null(),
            (Builder::Int32(b), _) => b.append_null(),
            (Builder::Int64(b), _) => b.append_null(),
            (Builder::Float32(b), _) => b.append_null(),
            (Builder::Float64(b), _) => b.append_null(),
            (Builder::Decimal(b, _), _) => b.append_null(),
            (Builder::Bool(b), _) => b.append_null(),
            (Builder::Date(b), _) => b.append_null(),
            (Builder::Timestamp(b), _) => b.append_null(),
            (Builder::Binary(b), _) => b.append_null(),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Builder::Utf8(mut b) => Arc::new(b.finish()),
            Builder::Int16(mut b) => Arc::new(b.finish()),
            Builder::Int32(mut b) => Arc::new(b.finish()),
            Builder::Int64(mut b) => Arc::new(b.finish()),
            Builder::Float32(mut b) => Arc::new(b.finish()),
            Builder::Float64(mut b) => Arc::new(b.finish()),
            Builder::Decimal(mut b, _) => Arc::new(b.finish()),
            Builder::Bool(mut b) => Arc::new(b.finish()),
            Builder::Date(mut b) => Arc::new(b.finish()),
            Builder::Timestamp(mut b) => Arc::new(b.finish()),
            Builder::Binary(mut b) => Arc::new(b.finish()),
        }
    }
}

/// A decimal at another scale, if it fits without losing digits.
fn rescale(d: Decimal, scale: u8) -> Option<i128> {
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
    let mut builders: Vec<Builder> = columns
        .iter()
        .map(|&i| Builder::new(def.columns[i].ty, entities.len()))
        .collect();
    // Key columns come from parsing the keys, which only they need.
    let wants_key = columns.iter().any(|&i| def.is_key_column(i));
    for entity in entities {
        let parts = match wants_key {
            true => def.key_parts(&entity.key)?,
            false => KeyParts::default(),
        };
        for (builder, &i) in builders.iter_mut().zip(columns) {
            builder.append(def.column_value(entity, &parts, i)?.as_deref());
        }
    }
    let arrays: Vec<ArrayRef> = builders.into_iter().map(Builder::finish).collect();
    if arrays.is_empty() {
        let options = datafusion::arrow::array::RecordBatchOptions::new()
            .with_row_count(Some(entities.len()));
        return Ok(RecordBatch::try_new_with_options(schema, arrays, &options)?);
    }
    Ok(RecordBatch::try_new(schema, arrays)?)
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

/// Checks and normalizes a text value for its column type.
fn text_value(ty: SqlType, column: &str, s: &str) -> Result<Value> {
    let too_long = |n: u32| {
        SqlError::value(
            "22001",
            format!("value too long for type character varying({n}) in column {column:?}"),
        )
    };
    Ok(match ty {
        SqlType::Varchar(Some(n)) if s.chars().count() > n as usize => return Err(too_long(n)),
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
            serde_json::from_str::<serde_json::Value>(s).map_err(|e| {
                SqlError::value("22P02", format!("invalid input syntax for type json: {e}"))
            })?;
            Value::Json(s.to_owned())
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
                        row[i] = Some(text_value(column.ty, name, a.value(r))?);
                    }
                }
            }
            SqlType::Int2 => fill!(Int16Array, |v| Value::Int32(i32::from(v))),
            SqlType::Int4 => fill!(Int32Array, |v| Value::Int32(v)),
            SqlType::Int8 => fill!(Int64Array, |v| Value::Int64(v)),
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
            SqlType::Timestamp | SqlType::Timestamptz => {
                fill!(TimestampMicrosecondArray, |v| Value::DateTime(DateTime(v)))
            }
            SqlType::Bytea => fill!(BinaryArray, |v| Value::Binary(v.to_vec())),
        }
    }
    Ok(rows)
}
