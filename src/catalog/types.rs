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
    /// `time` (without time zone): microseconds since midnight, to 24:00.
    Time,
    /// `interval`: months, days and microseconds, apart as PostgreSQL
    /// keeps them.
    Interval,
    Timestamp,
    Timestamptz,
    Uuid,
    Bytea,
    Json,
    Jsonb,
    /// A one-dimensional array (`text[]`, `integer[]`), stored as a JSON
    /// array.
    Array(Element),
}

/// The types an array's elements may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Element {
    Text,
    Varchar(Option<u32>),
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric { precision: u8, scale: u8 },
    Bool,
    Date,
    Timestamp,
    Timestamptz,
    Uuid,
}

impl Element {
    /// The element type of arrays of `ty`, if arrays of it are stored.
    pub fn of(ty: SqlType) -> Option<Element> {
        Some(match ty {
            SqlType::Text => Element::Text,
            SqlType::Varchar(n) => Element::Varchar(n),
            SqlType::Int2 => Element::Int2,
            SqlType::Int4 => Element::Int4,
            SqlType::Int8 => Element::Int8,
            SqlType::Float4 => Element::Float4,
            SqlType::Float8 => Element::Float8,
            SqlType::Numeric { precision, scale } => Element::Numeric { precision, scale },
            SqlType::Bool => Element::Bool,
            SqlType::Date => Element::Date,
            SqlType::Timestamp => Element::Timestamp,
            SqlType::Timestamptz => Element::Timestamptz,
            SqlType::Uuid => Element::Uuid,
            SqlType::Char(_)
            | SqlType::Time
            | SqlType::Interval
            | SqlType::Bytea
            | SqlType::Json
            | SqlType::Jsonb
            | SqlType::Array(_) => return None,
        })
    }

    /// The type of one element.
    pub fn sql_type(self) -> SqlType {
        match self {
            Element::Text => SqlType::Text,
            Element::Varchar(n) => SqlType::Varchar(n),
            Element::Int2 => SqlType::Int2,
            Element::Int4 => SqlType::Int4,
            Element::Int8 => SqlType::Int8,
            Element::Float4 => SqlType::Float4,
            Element::Float8 => SqlType::Float8,
            Element::Numeric { precision, scale } => SqlType::Numeric { precision, scale },
            Element::Bool => SqlType::Bool,
            Element::Date => SqlType::Date,
            Element::Timestamp => SqlType::Timestamp,
            Element::Timestamptz => SqlType::Timestamptz,
            Element::Uuid => SqlType::Uuid,
        }
    }
}

/// Precision and scale of a `numeric` declared without them.
pub const DEFAULT_NUMERIC: (u8, u8) = (38, 10);

impl SqlType {
    /// The property type a value of this column is stored as.
    pub fn property_type(self) -> PropertyType {
        match self {
            SqlType::Text | SqlType::Varchar(_) | SqlType::Char(_) => PropertyType::String,
            SqlType::Int2 | SqlType::Int4 => PropertyType::Int32,
            SqlType::Int8 | SqlType::Time => PropertyType::Int64,
            SqlType::Float4 | SqlType::Float8 => PropertyType::Double,
            SqlType::Numeric { .. } => PropertyType::Decimal,
            SqlType::Bool => PropertyType::Boolean,
            SqlType::Date => PropertyType::Date,
            SqlType::Timestamp | SqlType::Timestamptz => PropertyType::DateTime,
            SqlType::Uuid => PropertyType::Guid,
            SqlType::Bytea | SqlType::Interval => PropertyType::Binary,
            SqlType::Json | SqlType::Jsonb | SqlType::Array(_) => PropertyType::Json,
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
            SqlType::Time => "time without time zone".into(),
            SqlType::Interval => "interval".into(),
            SqlType::Timestamp => "timestamp without time zone".into(),
            SqlType::Timestamptz => "timestamp with time zone".into(),
            SqlType::Uuid => "uuid".into(),
            SqlType::Bytea => "bytea".into(),
            SqlType::Json => "json".into(),
            SqlType::Jsonb => "jsonb".into(),
            SqlType::Array(element) => format!("{}[]", element.sql_type().pg_name()),
        }
    }

    /// The type [`SqlType::pg_name`] names.
    pub fn from_pg_name(name: &str) -> Option<SqlType> {
        if let Some(element) = name.strip_suffix("[]") {
            return Element::of(SqlType::from_pg_name(element)?).map(SqlType::Array);
        }
        let bounded = |prefix: &str| -> Option<u32> {
            name.strip_prefix(prefix)?.strip_suffix(')')?.parse().ok()
        };
        if let Some(n) = bounded("character varying(") {
            return Some(SqlType::Varchar(Some(n)));
        }
        if let Some(n) = bounded("character(") {
            return Some(SqlType::Char(n));
        }
        if let Some(rest) = name
            .strip_prefix("numeric(")
            .and_then(|r| r.strip_suffix(')'))
        {
            let (precision, scale) = rest.split_once(',')?;
            return Some(SqlType::Numeric {
                precision: precision.trim().parse().ok()?,
                scale: scale.trim().parse().ok()?,
            });
        }
        Some(match name {
            "text" => SqlType::Text,
            "character varying" => SqlType::Varchar(None),
            "smallint" => SqlType::Int2,
            "integer" => SqlType::Int4,
            "bigint" => SqlType::Int8,
            "real" => SqlType::Float4,
            "double precision" => SqlType::Float8,
            "boolean" => SqlType::Bool,
            "date" => SqlType::Date,
            "time without time zone" => SqlType::Time,
            "interval" => SqlType::Interval,
            "timestamp without time zone" => SqlType::Timestamp,
            "timestamp with time zone" => SqlType::Timestamptz,
            "uuid" => SqlType::Uuid,
            "bytea" => SqlType::Bytea,
            "json" => SqlType::Json,
            "jsonb" => SqlType::Jsonb,
            _ => return None,
        })
    }

    /// Whether values of this type can be part of a key (every type but
    /// JSON, arrays and intervals).
    pub fn can_be_key(self) -> bool {
        !matches!(
            self,
            SqlType::Json | SqlType::Jsonb | SqlType::Array(_) | SqlType::Interval
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_read_back_from_its_name() {
        let types = [
            SqlType::Text,
            SqlType::Varchar(None),
            SqlType::Varchar(Some(5)),
            SqlType::Char(3),
            SqlType::Int2,
            SqlType::Int4,
            SqlType::Int8,
            SqlType::Float4,
            SqlType::Float8,
            SqlType::Numeric {
                precision: 10,
                scale: 2,
            },
            SqlType::Bool,
            SqlType::Date,
            SqlType::Time,
            SqlType::Interval,
            SqlType::Timestamp,
            SqlType::Timestamptz,
            SqlType::Uuid,
            SqlType::Bytea,
            SqlType::Json,
            SqlType::Jsonb,
            SqlType::Array(Element::Text),
            SqlType::Array(Element::Varchar(Some(10))),
            SqlType::Array(Element::Numeric {
                precision: 12,
                scale: 2,
            }),
            SqlType::Array(Element::Timestamptz),
        ];
        for ty in types {
            assert_eq!(SqlType::from_pg_name(&ty.pg_name()), Some(ty), "{ty:?}");
        }
        assert_eq!(SqlType::from_pg_name("numeric(10)"), None);
        assert_eq!(SqlType::from_pg_name("money"), None);
        assert_eq!(SqlType::from_pg_name("jsonb[]"), None);
        assert_eq!(SqlType::from_pg_name("integer[][]"), None);
    }
}
