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

    /// The type [`SqlType::pg_name`] names.
    pub fn from_pg_name(name: &str) -> Option<SqlType> {
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
            "timestamp without time zone" => SqlType::Timestamp,
            "timestamp with time zone" => SqlType::Timestamptz,
            "uuid" => SqlType::Uuid,
            "bytea" => SqlType::Bytea,
            "json" => SqlType::Json,
            "jsonb" => SqlType::Jsonb,
            _ => return None,
        })
    }

    /// Whether values of this type can be part of a key (every type but JSON).
    pub fn can_be_key(self) -> bool {
        !matches!(self, SqlType::Json | SqlType::Jsonb)
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
            SqlType::Timestamp,
            SqlType::Timestamptz,
            SqlType::Uuid,
            SqlType::Bytea,
            SqlType::Json,
            SqlType::Jsonb,
        ];
        for ty in types {
            assert_eq!(SqlType::from_pg_name(&ty.pg_name()), Some(ty), "{ty:?}");
        }
        assert_eq!(SqlType::from_pg_name("numeric(10)"), None);
        assert_eq!(SqlType::from_pg_name("money"), None);
    }
}
