//! Column types: the PostgreSQL types tablegate stores, and how each maps to
//! an entity property type.

use serde::{Deserialize, Serialize};

use crate::model::PropertyType;

/// A column's declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SqlType {
    Text,
    /// `varchar(n)`; `None` is unbounded.
    Varchar(Option<u32>),
    /// `char(n)`, blank-padded.
    Char(u32),
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    /// `numeric(precision, scale)`; plain `numeric` is stored as (38, 10).
    Numeric {
        precision: u8,
        scale: u8,
    },
    Bool,
    Date,
    Timestamp,
    Timestamptz,
    Uuid,
    Bytea,
    Json,
    Jsonb,
}

/// Precision and scale of a `numeric` declared without them.
pub const DEFAULT_NUMERIC: (u8, u8) = (38, 10);

impl SqlType {
    /// The property type a value of this column is stored as.
    pub fn property_type(self) -> PropertyType {
        match self {
            SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_) => PropertyType::String,
            SqlType::Int2 | SqlType::Int4 => PropertyType::Int32,
            SqlType::Int8 => PropertyType::Int64,
            SqlType::Float4 | SqlType::Float8 => PropertyType::Double,
            SqlType::Numeric { .. } => PropertyType::Decimal,
            SqlType::Bool => PropertyType::Boolean,
            SqlType::Date => PropertyType::Date,
            SqlType::Timestamp | SqlType::Timestamptz => PropertyType::DateTime,
            SqlType::Uuid => PropertyType::Guid,
            SqlType::Bytea => PropertyType::Binary,
            SqlType::Json | SqlType::Jsonb => PropertyType::Json,
        }
    }

    /// The name PostgreSQL shows for the type (as in `format_type`).
    pub fn pg_name(self) -> String {
        match self {
            SqlType::Text => "text".into(),
            SqlType::Varchar(None) => "character varying".into(),
            SqlType::Varchar(Some(n)) => format!("character varying({n})"),
            SqlType::Char(n) => format!("character({n})"),
            SqlType::Int2 => "smallint".into(),
            SqlType::Int4 => "integer".into(),
            SqlType::Int8 => "bigint".into(),
            SqlType::Float4 => "real".into(),
            SqlType::Float8 => "double precision".into(),
            SqlType::Numeric { precision, scale } => format!("numeric({precision},{scale})"),
            SqlType::Bool => "boolean".into(),
            SqlType::Date => "date".into(),
            SqlType::Timestamp => "timestamp without time zone".into(),
            SqlType::Timestamptz => "timestamp with time zone".into(),
            SqlType::Uuid => "uuid".into(),
            SqlType::Bytea => "bytea".into(),
            SqlType::Json => "json".into(),
            SqlType::Jsonb => "jsonb".into(),
        }
    }

    /// Whether values of this type can be part of a key (every type but JSON).
    pub fn can_be_key(self) -> bool {
        !matches!(self, SqlType::Json | SqlType::Jsonb)
    }
}
