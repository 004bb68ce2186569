//! `pg_catalog`: PostgreSQL's system catalogs, describing tablegate's own
//! tables (as the session sees them, its open transaction included), so that
//! psql's `\d` commands, JDBC's `DatabaseMetaData` and SQLAlchemy's inspector
//! find the real tables, columns, types and primary keys.
//!
//! Object ids are stable: a table's is derived from its name, so they agree
//! between sessions and across restarts. Each table is built when a query
//! names it; none holds more than a few rows per user table.
//!
//! Catalogs without a tablegate counterpart (triggers, policies, rules,
//! inheritance, publications, ...) exist with their columns and no rows, so
//! clients that look into them get the right answer: there are none.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{new_empty_array, ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::MemTable;

use super::provider::ReadView;
use crate::catalog::{
    Catalog, EnumType, EnumTypes, ForeignKey, Keys, RefAction, SqlType, TableDef,
};

pub const SCHEMA: &str = "pg_catalog";

/// Object ids of the fixed objects, as in PostgreSQL.
pub const PG_CATALOG_OID: i32 = 11;
pub const PUBLIC_OID: i32 = 2200;
pub const INFORMATION_SCHEMA_OID: i32 = 13_000;
/// The `tablegate` schema of diagnostics views.
pub const TABLEGATE_OID: i32 = 13_100;
/// The diagnostics schema and its views, shown as the members of a
/// built-in extension (as PostgreSQL shows plpgsql): tools that copy a
/// database, pg_dump first, leave them out, as they leave out
/// `information_schema`. An oid below 16,384 is how pg_dump tells a
/// built-in extension.
const EXTENSION_OID: i32 = 13_200;
const NAMESPACE_CATALOG_OID: i32 = 2615;
const EXTENSION_CATALOG_OID: i32 = 3079;
const DATABASE_OID: i32 = 16_384 - 1;
const OWNER_OID: i32 = 10;
const BTREE_OID: i32 = 403;
const HEAP_OID: i32 = 2;
const DEFAULT_TABLESPACE_OID: i32 = 1663;
const PG_INDEX_RELKIND: &str = "i";

/// The name of the server's only database and of the role that owns everything.
pub const DATABASE: &str = "tablegate";
pub const OWNER: &str = "tablegate";

/// A stable object id for a named object of some kind, above PostgreSQL's
/// reserved range.
pub fn oid_of(kind: &str, name: &str) -> i32 {
    // FNV-1a: stable across builds and platforms.
    let mut hash: u32 = 0x811c_9dc5;
    for byte in kind.bytes().chain([0]).chain(name.bytes()) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    16_384 + (hash % 1_000_000_000) as i32
}

pub fn table_oid(table: &str) -> i32 {
    oid_of("table", table)
}

pub fn sequence_oid(sequence: &str) -> i32 {
    oid_of("sequence", sequence)
}

pub fn primary_key_name(table: &str) -> String {
    format!("{table}_pkey")
}

/// The object id of a table's primary key index.
pub fn primary_key_oid(table: &str) -> i32 {
    oid_of("index", &primary_key_name(table))
}

/// The object id of a table's primary key constraint.
pub fn primary_key_constraint_oid(table: &str) -> i32 {
    oid_of("constraint", &primary_key_name(table))
}

/// A type's object id, type modifier (`-1` for none) and storage length.
pub fn type_info(ty: SqlType) -> (i32, i32, i16) {
    match ty {
        SqlType::Bool => (16, -1, 1),
        SqlType::Bytea => (17, -1, -1),
        SqlType::Int8 => (20, -1, 8),
        SqlType::Int2 => (21, -1, 2),
        SqlType::Int4 => (23, -1, 4),
        SqlType::Text => (25, -1, -1),
        SqlType::Json => (114, -1, -1),
        SqlType::Float4 => (700, -1, 4),
        SqlType::Float8 => (701, -1, 8),
        SqlType::Char(n) => (1042, n as i32 + 4, -1),
        SqlType::Varchar(n) => (1043, n.map_or(-1, |n| n as i32 + 4), -1),
        SqlType::Date => (1082, -1, 4),
        SqlType::Time => (1083, -1, 8),
        SqlType::Interval => (1186, -1, 16),
        SqlType::Timestamp => (1114, -1, 8),
        SqlType::Timestamptz => (1184, -1, 8),
        SqlType::Numeric { precision, scale } => (
            1700,
            ((i32::from(precision) << 16) | i32::from(scale)) + 4,
            -1,
        ),
        SqlType::Uuid => (2950, -1, 16),
        SqlType::Jsonb => (3802, -1, -1),
        // An array column's modifier is its element's (`varchar(10)[]`).
        SqlType::Array(element) => {
            let (oid, modifier, _) = type_info(element.sql_type());
            (array_of(oid).unwrap_or(0), modifier, -1)
        }
    }
}

/// The array type of an element type in [`TYPES`], if it has one.
pub fn array_of(element: i32) -> Option<i32> {
    TYPES
        .iter()
        .find(|t| t.0 == element)
        .map(|t| t.4)
        .filter(|&array| array != 0)
}

/// A type's name in `pg_type` (`_text` for `text[]`).
pub fn type_name(oid: i32) -> Option<&'static str> {
    TYPES.iter().find(|t| t.0 == oid).map(|t| t.1)
}

/// The types `pg_type` lists: (oid, name, length, category, array type oid).
const TYPES: &[(i32, &str, i16, &str, i32)] = &[
    (16, "bool", 1, "B", 1000),
    (17, "bytea", -1, "U", 1001),
    (18, "char", 1, "Z", 1002),
    (19, "name", 64, "S", 1003),
    (20, "int8", 8, "N", 1016),
    (21, "int2", 2, "N", 1005),
    (22, "int2vector", -1, "A", 1006),
    (23, "int4", 4, "N", 1007),
    (25, "text", -1, "S", 1009),
    (26, "oid", 4, "N", 1028),
    (114, "json", -1, "U", 199),
    (700, "float4", 4, "N", 1021),
    (701, "float8", 8, "N", 1022),
    (1042, "bpchar", -1, "S", 1014),
    (1043, "varchar", -1, "S", 1015),
    (1082, "date", 4, "D", 1182),
    (1083, "time", 8, "D", 1183),
    (1186, "interval", 16, "T", 1187),
    (1114, "timestamp", 8, "D", 1115),
    (1184, "timestamptz", 8, "D", 1185),
    (1700, "numeric", -1, "N", 1231),
    (2950, "uuid", 16, "U", 2951),
    (3802, "jsonb", -1, "U", 3807),
    (1000, "_bool", -1, "A", 0),
    (1005, "_int2", -1, "A", 0),
    (1007, "_int4", -1, "A", 0),
    (1009, "_text", -1, "A", 0),
    (1016, "_int8", -1, "A", 0),
    (1021, "_float4", -1, "A", 0),
    (1022, "_float8", -1, "A", 0),
    (1015, "_varchar", -1, "A", 0),
    (1014, "_bpchar", -1, "A", 0),
    (1182, "_date", -1, "A", 0),
    (1183, "_time", -1, "A", 0),
    (1187, "_interval", -1, "A", 0),
    (1115, "_timestamp", -1, "A", 0),
    (1185, "_timestamptz", -1, "A", 0),
    (1231, "_numeric", -1, "A", 0),
    (2951, "_uuid", -1, "A", 0),
];

/// The element type of an array type in [`TYPES`].
fn element_of(array: i32) -> i32 {
    TYPES.iter().find(|t| t.4 == array).map_or(0, |t| t.0)
}

/// The name `format_type` gives a type id and modifier.
pub fn format_type(oid: i64, typmod: Option<i64>) -> Option<String> {
    let typmod = typmod.unwrap_or(-1);
    let with_length = |base: &str| {
        if typmod >= 4 {
            format!("{base}({})", typmod - 4)
        } else {
            base.to_owned()
        }
    };
    // `timestamp(3) without time zone`: a time's modifier is its digits.
    let with_digits = |base: &str, zone: &str| match typmod {
        0.. => format!("{base}({typmod}) {zone} time zone"),
        _ => format!("{base} {zone} time zone"),
    };
    Some(match oid {
        16 => "boolean".into(),
        17 => "bytea".into(),
        18 => "\"char\"".into(),
        19 => "name".into(),
        20 => "bigint".into(),
        21 => "smallint".into(),
        22 => "int2vector".into(),
        23 => "integer".into(),
        25 => "text".into(),
        26 => "oid".into(),
        114 => "json".into(),
        700 => "real".into(),
        701 => "double precision".into(),
        1042 => with_length("character"),
        1043 => with_length("character varying"),
        1082 => "date".into(),
        1083 => with_digits("time", "without"),
        1114 => with_digits("timestamp", "without"),
        1184 => with_digits("timestamp", "with"),
        1700 if typmod >= 4 => {
            let m = typmod - 4;
            format!("numeric({},{})", m >> 16, m & 0xffff)
        }
        1700 => "numeric".into(),
        2950 => "uuid".into(),
        3802 => "jsonb".into(),
        other => {
            let (oid, name, ..) = TYPES.iter().find(|t| i64::from(t.0) == other)?;
            match element_of(*oid) {
                0 => (*name).to_owned(),
                element => format!("{}[]", format_type(element.into(), Some(typmod))?),
            }
        }
    })
}

/// The object ids of pg_class and pg_attrdef, as PostgreSQL's.
const CLASS_CATALOG_OID: i32 = 1259;
const ATTRDEF_CATALOG_OID: i32 = 2604;
const REWRITE_CATALOG_OID: i32 = 2618;

/// PostgreSQL's object ids of the catalogs clients name with `::regclass`
/// (as `classoid` values, say).
pub fn catalog_oid(name: &str) -> Option<i32> {
    let name = name.strip_prefix("pg_catalog.").unwrap_or(name);
    Some(match name {
        "pg_type" => 1247,
        "pg_attribute" => 1249,
        "pg_proc" => 1255,
        "pg_class" => CLASS_CATALOG_OID,
        "pg_attrdef" => ATTRDEF_CATALOG_OID,
        "pg_constraint" => 2606,
        "pg_description" => 2609,
        "pg_index" => 2610,
        "pg_namespace" => NAMESPACE_CATALOG_OID,
        "pg_database" => 1262,
        "pg_default_acl" => 826,
        "pg_tablespace" => 1213,
        "pg_authid" => 1260,
        "pg_foreign_server" => 1417,
        "pg_sequence" => 2224,
        "pg_foreign_data_wrapper" => 2328,
        "pg_am" => 2601,
        "pg_amop" => 2602,
        "pg_amproc" => 2603,
        "pg_cast" => 2605,
        "pg_conversion" => 2607,
        "pg_depend" => 2608,
        "pg_inherits" => 2611,
        "pg_language" => 2612,
        "pg_largeobject" => 2613,
        "pg_opclass" => 2616,
        "pg_operator" => 2617,
        "pg_rewrite" => REWRITE_CATALOG_OID,
        "pg_trigger" => 2620,
        "pg_opfamily" => 2753,
        "pg_largeobject_metadata" => 2995,
        "pg_extension" => EXTENSION_CATALOG_OID,
        "pg_policy" => 3256,
        "pg_statistic_ext" => 3381,
        "pg_collation" => 3456,
        "pg_event_trigger" => 3466,
        "pg_transform" => 3576,
        "pg_ts_dict" => 3600,
        "pg_ts_parser" => 3601,
        "pg_ts_config" => 3602,
        "pg_ts_template" => 3764,
        "pg_subscription" => 6100,
        "pg_publication" => 6104,
        "pg_publication_rel" => 6106,
        "pg_publication_namespace" => 6237,
        _ => return None,
    })
}

/// The object id of a type named as in SQL (`integer`, `int4`,
/// `character varying`, `text[]`, optionally `pg_catalog.`-qualified).
pub fn type_oid(name: &str) -> Option<i32> {
    let name = name.trim().to_lowercase();
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    if let Some(element) = name.strip_suffix("[]") {
        return array_of(type_oid(element)?);
    }
    let by_format = TYPES
        .iter()
        .find(|t| format_type(t.0.into(), None).as_deref() == Some(name));
    let by_name = TYPES.iter().find(|t| t.1 == name);
    let alias = match name {
        "int" => Some(23),
        "float" => Some(701),
        "decimal" => Some(1700),
        "varchar" => Some(1043),
        "char" | "character" => Some(1042),
        _ => None,
    };
    by_name.or(by_format).map(|t| t.0).or(alias)
}

/// The column kinds the catalogs use.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Bool,
    Text,
    /// Microseconds since 1970, shown in UTC.
    Timestamptz,
    Int2Array,
    /// `int2vector` (`indkey`): numbers printed `1 2`, where an array
    /// prints `{1,2}`; subscripted and unnested as an array here.
    Int2Vector,
    /// `oidvector` (`indclass`, `proargtypes`), as [`Ty::Int2Vector`].
    OidVector,
    TextArray,
}

impl Ty {
    /// The SQL type of a column of this kind.
    pub fn sql_type(self) -> SqlType {
        match self {
            Ty::Int2 => SqlType::Int2,
            Ty::Int4 => SqlType::Int4,
            Ty::Int8 => SqlType::Int8,
            Ty::Float4 => SqlType::Float4,
            Ty::Float8 => SqlType::Float8,
            Ty::Bool => SqlType::Bool,
            Ty::Text | Ty::Int2Array | Ty::Int2Vector | Ty::OidVector | Ty::TextArray => {
                SqlType::Text
            }
            Ty::Timestamptz => SqlType::Timestamptz,
        }
    }
}

/// One value of a catalog row.
#[derive(Clone)]
pub(super) enum Cell {
    Null,
    Int(i64),
    Double(f64),
    Bool(bool),
    Text(String),
    Ints(Vec<i64>),
}

impl From<i32> for Cell {
    fn from(v: i32) -> Self {
        Cell::Int(v.into())
    }
}
impl From<i16> for Cell {
    fn from(v: i16) -> Self {
        Cell::Int(v.into())
    }
}
impl From<i64> for Cell {
    fn from(v: i64) -> Self {
        Cell::Int(v)
    }
}
impl From<bool> for Cell {
    fn from(v: bool) -> Self {
        Cell::Bool(v)
    }
}
impl From<&str> for Cell {
    fn from(v: &str) -> Self {
        Cell::Text(v.to_owned())
    }
}
impl From<String> for Cell {
    fn from(v: String) -> Self {
        Cell::Text(v)
    }
}

fn arrow_type(ty: Ty) -> DataType {
    match ty {
        Ty::Int2 => DataType::Int16,
        Ty::Int4 => DataType::Int32,
        Ty::Int8 => DataType::Int64,
        Ty::Float4 => DataType::Float32,
        Ty::Float8 => DataType::Float64,
        Ty::Timestamptz => DataType::Timestamp(
            datafusion::arrow::datatypes::TimeUnit::Microsecond,
            Some(Arc::from(super::types::UTC)),
        ),
        Ty::Bool => DataType::Boolean,
        Ty::Text => DataType::Utf8,
        Ty::Int2Array | Ty::Int2Vector | Ty::OidVector => {
            DataType::List(Arc::new(Field::new("item", DataType::Int16, true)))
        }
        Ty::TextArray => DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
    }
}

fn scalar(ty: Ty, cell: &Cell) -> DfResult<ScalarValue> {
    Ok(match (ty, cell) {
        (Ty::Int2, Cell::Int(v)) => ScalarValue::Int16(Some(*v as i16)),
        (Ty::Int4, Cell::Int(v)) => ScalarValue::Int32(Some(*v as i32)),
        (Ty::Int8, Cell::Int(v)) => ScalarValue::Int64(Some(*v)),
        (Ty::Float4, Cell::Double(v)) => ScalarValue::Float32(Some(*v as f32)),
        (Ty::Float8, Cell::Double(v)) => ScalarValue::Float64(Some(*v)),
        (Ty::Timestamptz, Cell::Int(v)) => {
            ScalarValue::TimestampMicrosecond(Some(*v), Some(Arc::from(super::types::UTC)))
        }
        (Ty::Bool, Cell::Bool(v)) => ScalarValue::Boolean(Some(*v)),
        (Ty::Text, Cell::Text(v)) => ScalarValue::Utf8(Some(v.clone())),
        (Ty::Int2Array | Ty::Int2Vector | Ty::OidVector, Cell::Ints(v)) => {
            let items: Vec<ScalarValue> = v
                .iter()
                .map(|&x| ScalarValue::Int16(Some(x as i16)))
                .collect();
            ScalarValue::List(ScalarValue::new_list_nullable(&items, &DataType::Int16))
        }
        // Access lists and options (text arrays): none in tablegate.
        (ty, _) => ScalarValue::try_from(&arrow_type(ty))?,
    })
}

fn column(ty: Ty, rows: &[Vec<Cell>], i: usize) -> DfResult<ArrayRef> {
    if rows.is_empty() {
        return Ok(new_empty_array(&arrow_type(ty)));
    }
    let values = rows
        .iter()
        .map(|r| scalar(ty, &r[i]))
        .collect::<DfResult<Vec<_>>>()?;
    ScalarValue::iter_to_array(values)
}

/// The columns of a sequence read as a relation.
const SEQUENCE_RELATION: &[(&str, Ty)] = &[
    ("last_value", Ty::Int8),
    ("log_cnt", Ty::Int8),
    ("is_called", Ty::Bool),
];

/// A sequence read as a relation (`SELECT last_value, is_called FROM s`):
/// its one row.
pub(super) fn sequence_relation(
    sequence: &crate::catalog::Sequence,
) -> DfResult<Arc<dyn TableProvider>> {
    let (last, called) = sequence.last_value();
    table(
        SEQUENCE_RELATION,
        vec![vec![Cell::Int(last), Cell::Int(0), called.into()]],
    )
}

/// A catalog's columns and rows, as a table DataFusion can scan.
pub(super) fn table(
    columns: &[(&str, Ty)],
    rows: Vec<Vec<Cell>>,
) -> DfResult<Arc<dyn TableProvider>> {
    let schema: SchemaRef = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, ty)| {
                let field = Field::new(*name, arrow_type(*ty), true);
                let vector = match ty {
                    Ty::Int2Vector => "int2vector",
                    Ty::OidVector => "oidvector",
                    _ => return field,
                };
                let pg_type = (super::types::PG_TYPE_KEY.to_owned(), vector.to_owned());
                field.with_metadata(HashMap::from([pg_type]))
            })
            .collect::<Vec<_>>(),
    ));
    let arrays = columns
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| column(*ty, &rows, i))
        .collect::<DfResult<Vec<ArrayRef>>>()?;
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
}

use Ty::*;

const PG_NAMESPACE: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("nspname", Text),
    ("nspowner", Int4),
    ("nspacl", TextArray),
];

const PG_CLASS: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("relname", Text),
    ("relnamespace", Int4),
    ("reltype", Int4),
    ("reloftype", Int4),
    ("relowner", Int4),
    ("relam", Int4),
    ("relfilenode", Int4),
    ("reltablespace", Int4),
    ("relpages", Int4),
    ("reltuples", Float4),
    ("relallvisible", Int4),
    ("reltoastrelid", Int4),
    ("relhasindex", Bool),
    ("relisshared", Bool),
    ("relpersistence", Text),
    ("relkind", Text),
    ("relnatts", Int2),
    ("relchecks", Int2),
    ("relhasrules", Bool),
    ("relhastriggers", Bool),
    ("relhassubclass", Bool),
    ("relrowsecurity", Bool),
    ("relforcerowsecurity", Bool),
    ("relispopulated", Bool),
    ("relreplident", Text),
    ("relispartition", Bool),
    ("relrewrite", Int4),
    ("relfrozenxid", Int4),
    ("relminmxid", Int4),
    ("relacl", TextArray),
    ("reloptions", TextArray),
    ("relpartbound", Text),
];

const PG_ATTRIBUTE: &[(&str, Ty)] = &[
    ("attrelid", Int4),
    ("attname", Text),
    ("atttypid", Int4),
    ("attstattarget", Int4),
    ("attlen", Int2),
    ("attnum", Int2),
    ("attndims", Int4),
    ("attcacheoff", Int4),
    ("atttypmod", Int4),
    ("attbyval", Bool),
    ("attalign", Text),
    ("attstorage", Text),
    ("attcompression", Text),
    ("attnotnull", Bool),
    ("atthasdef", Bool),
    ("atthasmissing", Bool),
    ("attidentity", Text),
    ("attgenerated", Text),
    ("attisdropped", Bool),
    ("attislocal", Bool),
    ("attinhcount", Int4),
    ("attcollation", Int4),
    ("attacl", TextArray),
    ("attoptions", TextArray),
    ("attfdwoptions", TextArray),
    ("attmissingval", TextArray),
];

const PG_INDEX: &[(&str, Ty)] = &[
    ("indexrelid", Int4),
    ("indrelid", Int4),
    ("indnatts", Int2),
    ("indnkeyatts", Int2),
    ("indisunique", Bool),
    ("indnullsnotdistinct", Bool),
    ("indisprimary", Bool),
    ("indisexclusion", Bool),
    ("indimmediate", Bool),
    ("indisclustered", Bool),
    ("indisvalid", Bool),
    ("indcheckxmin", Bool),
    ("indisready", Bool),
    ("indislive", Bool),
    ("indisreplident", Bool),
    ("indkey", Int2Vector),
    ("indcollation", OidVector),
    ("indclass", OidVector),
    ("indoption", Int2Vector),
    ("indexprs", Text),
    ("indpred", Text),
];

const PG_CONSTRAINT: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("conname", Text),
    ("connamespace", Int4),
    ("contype", Text),
    ("condeferrable", Bool),
    ("condeferred", Bool),
    ("convalidated", Bool),
    ("conrelid", Int4),
    ("contypid", Int4),
    ("conindid", Int4),
    ("conparentid", Int4),
    ("confrelid", Int4),
    ("confupdtype", Text),
    ("confdeltype", Text),
    ("confmatchtype", Text),
    ("conislocal", Bool),
    ("coninhcount", Int4),
    ("connoinherit", Bool),
    ("conkey", Int2Array),
    ("confkey", Int2Array),
    ("conbin", Text),
];

const PG_DEPEND: &[(&str, Ty)] = &[
    ("classid", Int4),
    ("objid", Int4),
    ("objsubid", Int4),
    ("refclassid", Int4),
    ("refobjid", Int4),
    ("refobjsubid", Int4),
    ("deptype", Text),
];

const PG_EXTENSION: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("extname", Text),
    ("extowner", Int4),
    ("extnamespace", Int4),
    ("extrelocatable", Bool),
    ("extversion", Text),
    ("extconfig", TextArray),
    ("extcondition", TextArray),
];

const PG_ATTRDEF: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("adrelid", Int4),
    ("adnum", Int2),
    ("adbin", Text),
];

const PG_TYPE: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("typname", Text),
    ("typnamespace", Int4),
    ("typowner", Int4),
    ("typlen", Int2),
    ("typbyval", Bool),
    ("typtype", Text),
    ("typcategory", Text),
    ("typispreferred", Bool),
    ("typisdefined", Bool),
    ("typdelim", Text),
    ("typrelid", Int4),
    ("typsubscript", Text),
    ("typelem", Int4),
    ("typarray", Int4),
    ("typinput", Text),
    ("typoutput", Text),
    ("typreceive", Text),
    ("typsend", Text),
    ("typmodin", Text),
    ("typmodout", Text),
    ("typanalyze", Text),
    ("typalign", Text),
    ("typstorage", Text),
    ("typnotnull", Bool),
    ("typbasetype", Int4),
    ("typtypmod", Int4),
    ("typndims", Int4),
    ("typcollation", Int4),
    ("typdefaultbin", Text),
    ("typdefault", Text),
    ("typacl", TextArray),
];

const PG_ENUM: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("enumtypid", Int4),
    ("enumsortorder", Float4),
    ("enumlabel", Text),
];

const PG_DATABASE: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("datname", Text),
    ("datdba", Int4),
    ("encoding", Int4),
    ("datlocprovider", Text),
    ("datistemplate", Bool),
    ("datallowconn", Bool),
    ("datconnlimit", Int4),
    ("datfrozenxid", Int4),
    ("datminmxid", Int4),
    ("dattablespace", Int4),
    ("datcollate", Text),
    ("datctype", Text),
    ("daticulocale", Text),
    ("datcollversion", Text),
    ("datacl", TextArray),
];

const PG_ROLES: &[(&str, Ty)] = &[
    ("rolname", Text),
    ("rolsuper", Bool),
    ("rolinherit", Bool),
    ("rolcreaterole", Bool),
    ("rolcreatedb", Bool),
    ("rolcanlogin", Bool),
    ("rolreplication", Bool),
    ("rolconnlimit", Int4),
    ("rolpassword", Text),
    ("rolvaliduntil", Text),
    ("rolbypassrls", Bool),
    ("rolconfig", TextArray),
    ("oid", Int4),
];

const PG_AM: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("amname", Text),
    ("amhandler", Text),
    ("amtype", Text),
];

const PG_TABLES: &[(&str, Ty)] = &[
    ("schemaname", Text),
    ("tablename", Text),
    ("tableowner", Text),
    ("tablespace", Text),
    ("hasindexes", Bool),
    ("hasrules", Bool),
    ("hastriggers", Bool),
    ("rowsecurity", Bool),
];

const PG_INDEXES: &[(&str, Ty)] = &[
    ("schemaname", Text),
    ("tablename", Text),
    ("indexname", Text),
    ("tablespace", Text),
    ("indexdef", Text),
];

const PG_VIEWS: &[(&str, Ty)] = &[
    ("schemaname", Text),
    ("viewname", Text),
    ("viewowner", Text),
    ("definition", Text),
];

const PG_MATVIEWS: &[(&str, Ty)] = &[
    ("schemaname", Text),
    ("matviewname", Text),
    ("matviewowner", Text),
    ("tablespace", Text),
    ("hasindexes", Bool),
    ("ispopulated", Bool),
    ("definition", Text),
];

const PG_TABLESPACE: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("spcname", Text),
    ("spcowner", Int4),
    ("spcacl", TextArray),
    ("spcoptions", TextArray),
];

const PG_DESCRIPTION: &[(&str, Ty)] = &[
    ("objoid", Int4),
    ("classoid", Int4),
    ("objsubid", Int4),
    ("description", Text),
];

const PG_SETTINGS: &[(&str, Ty)] = &[
    ("name", Text),
    ("setting", Text),
    ("unit", Text),
    ("category", Text),
    ("short_desc", Text),
    ("extra_desc", Text),
    ("context", Text),
    ("vartype", Text),
    ("source", Text),
    ("min_val", Text),
    ("max_val", Text),
    ("enumvals", TextArray),
    ("boot_val", Text),
    ("reset_val", Text),
    ("sourcefile", Text),
    ("sourceline", Int4),
    ("pending_restart", Bool),
];

const PG_PROC: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("proname", Text),
    ("pronamespace", Int4),
    ("proowner", Int4),
    ("prolang", Int4),
    ("prokind", Text),
    ("prosecdef", Bool),
    ("proretset", Bool),
    ("provolatile", Text),
    ("pronargs", Int2),
    ("prorettype", Int4),
    ("proargtypes", OidVector),
    ("proargnames", TextArray),
    ("prosrc", Text),
    ("proacl", TextArray),
];

/// A view's rule: the query it is read as (`_RETURN`).
const PG_REWRITE: &[(&str, Ty)] = &[
    ("oid", Int4),
    ("rulename", Text),
    ("ev_class", Int4),
    ("ev_type", Text),
    ("ev_enabled", Text),
    ("is_instead", Bool),
];

/// Whether a catalog never has rows: one of [`EMPTY`].
pub fn is_always_empty(name: &str) -> bool {
    EMPTY.iter().any(|(n, _)| *n == name)
}

/// Catalogs that tablegate has nothing to put in: their columns, no rows.
const EMPTY: &[(&str, &[(&str, Ty)])] = &[
    (
        "pg_inherits",
        &[
            ("inhrelid", Int4),
            ("inhparent", Int4),
            ("inhseqno", Int4),
            ("inhdetachpending", Bool),
        ],
    ),
    (
        "pg_auth_members",
        &[
            ("roleid", Int4),
            ("member", Int4),
            ("grantor", Int4),
            ("admin_option", Bool),
        ],
    ),
    (
        "pg_trigger",
        &[
            ("oid", Int4),
            ("tgrelid", Int4),
            ("tgparentid", Int4),
            ("tgname", Text),
            ("tgfoid", Int4),
            ("tgtype", Int2),
            ("tgenabled", Text),
            ("tgisinternal", Bool),
            ("tgconstrrelid", Int4),
            ("tgconstrindid", Int4),
            ("tgconstraint", Int4),
        ],
    ),
    (
        "pg_policy",
        &[
            ("oid", Int4),
            ("polname", Text),
            ("polrelid", Int4),
            ("polcmd", Text),
            ("polpermissive", Bool),
            ("polroles", Int2Array),
            ("polqual", Text),
            ("polwithcheck", Text),
        ],
    ),
    (
        "pg_statistic_ext",
        &[
            ("oid", Int4),
            ("stxrelid", Int4),
            ("stxname", Text),
            ("stxnamespace", Int4),
            ("stxowner", Int4),
            ("stxstattarget", Int4),
            ("stxkeys", Int2Vector),
            ("stxkind", TextArray),
            ("stxexprs", Text),
        ],
    ),
    (
        "pg_publication",
        &[
            ("oid", Int4),
            ("pubname", Text),
            ("pubowner", Int4),
            ("puballtables", Bool),
            ("pubinsert", Bool),
            ("pubupdate", Bool),
            ("pubdelete", Bool),
            ("pubtruncate", Bool),
            ("pubviaroot", Bool),
        ],
    ),
    (
        "pg_publication_rel",
        &[
            ("oid", Int4),
            ("prpubid", Int4),
            ("prrelid", Int4),
            ("prqual", Text),
            ("prattrs", Int2Vector),
        ],
    ),
    (
        "pg_publication_namespace",
        &[("oid", Int4), ("pnpubid", Int4), ("pnnspid", Int4)],
    ),
    (
        "pg_foreign_table",
        &[
            ("ftrelid", Int4),
            ("ftserver", Int4),
            ("ftoptions", TextArray),
        ],
    ),
    (
        "pg_partitioned_table",
        &[
            ("partrelid", Int4),
            ("partstrat", Text),
            ("partnatts", Int2),
            ("partdefid", Int4),
            ("partattrs", Int2Vector),
        ],
    ),
    (
        "pg_collation",
        &[
            ("oid", Int4),
            ("collname", Text),
            ("collnamespace", Int4),
            ("collowner", Int4),
            ("collprovider", Text),
            ("collisdeterministic", Bool),
            ("collencoding", Int4),
            ("collcollate", Text),
            ("collctype", Text),
        ],
    ),
    (
        "pg_opclass",
        &[
            ("oid", Int4),
            ("opcmethod", Int4),
            ("opcname", Text),
            ("opcnamespace", Int4),
            ("opcowner", Int4),
            ("opcfamily", Int4),
            ("opcintype", Int4),
            ("opcdefault", Bool),
            ("opckeytype", Int4),
        ],
    ),
    (
        "pg_stat_user_tables",
        &[
            ("relid", Int4),
            ("schemaname", Text),
            ("relname", Text),
            ("seq_scan", Int8),
            ("n_live_tup", Int8),
        ],
    ),
    (
        "pg_language",
        &[
            ("oid", Int4),
            ("lanname", Text),
            ("lanowner", Int4),
            ("lanispl", Bool),
            ("lanpltrusted", Bool),
            ("lanplcallfoid", Int4),
            ("laninline", Int4),
            ("lanvalidator", Int4),
            ("lanacl", TextArray),
        ],
    ),
    (
        "pg_init_privs",
        &[
            ("objoid", Int4),
            ("classoid", Int4),
            ("objsubid", Int4),
            ("privtype", Text),
            ("initprivs", TextArray),
        ],
    ),
    (
        "pg_operator",
        &[
            ("oid", Int4),
            ("oprname", Text),
            ("oprnamespace", Int4),
            ("oprowner", Int4),
            ("oprkind", Text),
            ("oprcanmerge", Bool),
            ("oprcanhash", Bool),
            ("oprleft", Int4),
            ("oprright", Int4),
            ("oprresult", Int4),
            ("oprcom", Int4),
            ("oprnegate", Int4),
            ("oprcode", Int4),
            ("oprrest", Int4),
            ("oprjoin", Int4),
        ],
    ),
    (
        "pg_opfamily",
        &[
            ("oid", Int4),
            ("opfmethod", Int4),
            ("opfname", Text),
            ("opfnamespace", Int4),
            ("opfowner", Int4),
        ],
    ),
    (
        "pg_ts_parser",
        &[
            ("oid", Int4),
            ("prsname", Text),
            ("prsnamespace", Int4),
            ("prsstart", Int4),
            ("prstoken", Int4),
            ("prsend", Int4),
            ("prsheadline", Int4),
            ("prslextype", Int4),
        ],
    ),
    (
        "pg_ts_template",
        &[
            ("oid", Int4),
            ("tmplname", Text),
            ("tmplnamespace", Int4),
            ("tmplinit", Int4),
            ("tmpllexize", Int4),
        ],
    ),
    (
        "pg_ts_dict",
        &[
            ("oid", Int4),
            ("dictname", Text),
            ("dictnamespace", Int4),
            ("dictowner", Int4),
            ("dicttemplate", Int4),
            ("dictinitoption", Text),
        ],
    ),
    (
        "pg_ts_config",
        &[
            ("oid", Int4),
            ("cfgname", Text),
            ("cfgnamespace", Int4),
            ("cfgowner", Int4),
            ("cfgparser", Int4),
        ],
    ),
    (
        "pg_foreign_data_wrapper",
        &[
            ("oid", Int4),
            ("fdwname", Text),
            ("fdwowner", Int4),
            ("fdwhandler", Int4),
            ("fdwvalidator", Int4),
            ("fdwacl", TextArray),
            ("fdwoptions", TextArray),
        ],
    ),
    (
        "pg_foreign_server",
        &[
            ("oid", Int4),
            ("srvname", Text),
            ("srvowner", Int4),
            ("srvfdw", Int4),
            ("srvtype", Text),
            ("srvversion", Text),
            ("srvacl", TextArray),
            ("srvoptions", TextArray),
        ],
    ),
    (
        "pg_default_acl",
        &[
            ("oid", Int4),
            ("defaclrole", Int4),
            ("defaclnamespace", Int4),
            ("defaclobjtype", Text),
            ("defaclacl", TextArray),
        ],
    ),
    (
        "pg_conversion",
        &[
            ("oid", Int4),
            ("conname", Text),
            ("connamespace", Int4),
            ("conowner", Int4),
            ("conforencoding", Int4),
            ("contoencoding", Int4),
            ("conproc", Int4),
            ("condefault", Bool),
        ],
    ),
    (
        "pg_cast",
        &[
            ("oid", Int4),
            ("castsource", Int4),
            ("casttarget", Int4),
            ("castfunc", Int4),
            ("castcontext", Text),
            ("castmethod", Text),
        ],
    ),
    (
        "pg_transform",
        &[
            ("oid", Int4),
            ("trftype", Int4),
            ("trflang", Int4),
            ("trffromsql", Int4),
            ("trftosql", Int4),
        ],
    ),
    (
        "pg_event_trigger",
        &[
            ("oid", Int4),
            ("evtname", Text),
            ("evtevent", Text),
            ("evtowner", Int4),
            ("evtfoid", Int4),
            ("evtenabled", Text),
            ("evttags", TextArray),
        ],
    ),
    (
        "pg_subscription",
        &[
            ("oid", Int4),
            ("subdbid", Int4),
            ("subskiplsn", Text),
            ("subname", Text),
            ("subowner", Int4),
            ("subenabled", Bool),
            ("subbinary", Bool),
            ("substream", Bool),
            ("subtwophasestate", Text),
            ("subdisableonerr", Bool),
            ("subconninfo", Text),
            ("subslotname", Text),
            ("subsynccommit", Text),
            ("subpublications", TextArray),
        ],
    ),
    (
        "pg_amop",
        &[
            ("oid", Int4),
            ("amopfamily", Int4),
            ("amoplefttype", Int4),
            ("amoprighttype", Int4),
            ("amopstrategy", Int2),
            ("amoppurpose", Text),
            ("amopopr", Int4),
            ("amopmethod", Int4),
            ("amopsortfamily", Int4),
        ],
    ),
    (
        "pg_amproc",
        &[
            ("oid", Int4),
            ("amprocfamily", Int4),
            ("amproclefttype", Int4),
            ("amprocrighttype", Int4),
            ("amprocnum", Int2),
            ("amproc", Int4),
        ],
    ),
    (
        "pg_seclabels",
        &[
            ("objoid", Int4),
            ("classoid", Int4),
            ("objsubid", Int4),
            ("objtype", Text),
            ("objnamespace", Int4),
            ("objname", Text),
            ("provider", Text),
            ("label", Text),
        ],
    ),
    (
        "pg_range",
        &[
            ("rngtypid", Int4),
            ("rngsubtype", Int4),
            ("rngmultitypid", Int4),
            ("rngcollation", Int4),
            ("rngsubopc", Int4),
            ("rngcanonical", Int4),
            ("rngsubdiff", Int4),
        ],
    ),
    (
        "pg_aggregate",
        &[
            ("aggfnoid", Int4),
            ("aggkind", Text),
            ("aggnumdirectargs", Int2),
            ("aggtransfn", Int4),
            ("aggfinalfn", Int4),
            ("aggcombinefn", Int4),
            ("aggserialfn", Int4),
            ("aggdeserialfn", Int4),
            ("aggmtransfn", Int4),
            ("aggminvtransfn", Int4),
            ("aggmfinalfn", Int4),
            ("aggfinalextra", Bool),
            ("aggmfinalextra", Bool),
            ("aggfinalmodify", Text),
            ("aggmfinalmodify", Text),
            ("aggsortop", Int4),
            ("aggtranstype", Int4),
            ("aggtransspace", Int4),
            ("aggmtranstype", Int4),
            ("aggmtransspace", Int4),
            ("agginitval", Text),
            ("aggminitval", Text),
        ],
    ),
    (
        "pg_largeobject_metadata",
        &[("oid", Int4), ("lomowner", Int4), ("lomacl", TextArray)],
    ),
    (
        "pg_user_mappings",
        &[
            ("umid", Int4),
            ("srvid", Int4),
            ("srvname", Text),
            ("umuser", Int4),
            ("usename", Text),
            ("umoptions", TextArray),
        ],
    ),
];

const PG_SEQUENCE: &[(&str, Ty)] = &[
    ("seqrelid", Int4),
    ("seqtypid", Int4),
    ("seqstart", Int8),
    ("seqincrement", Int8),
    ("seqmax", Int8),
    ("seqmin", Int8),
    ("seqcache", Int8),
    ("seqcycle", Bool),
];

/// `pg_stat_progress_create_index`: the indexes being built, a row each.
const PG_STAT_PROGRESS_CREATE_INDEX: &[(&str, Ty)] = &[
    ("relid", Int4),
    ("index_relid", Int4),
    ("command", Text),
    ("phase", Text),
    ("tuples_total", Int8),
    ("tuples_done", Int8),
];

const NAMES: &[&str] = &[
    "pg_enum",
    "pg_stat_progress_create_index",
    "pg_depend",
    "pg_extension",
    "pg_sequence",
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_index",
    "pg_constraint",
    "pg_attrdef",
    "pg_type",
    "pg_database",
    "pg_roles",
    "pg_user",
    "pg_am",
    "pg_tables",
    "pg_indexes",
    "pg_views",
    "pg_rewrite",
    "pg_matviews",
    "pg_tablespace",
    "pg_description",
    "pg_settings",
    "pg_proc",
];

/// The `pg_catalog` schema of a session.
pub struct PgCatalogSchema {
    catalog: Arc<Catalog>,
    view: Arc<ReadView>,
    /// `SHOW`-able settings of the session, for `pg_settings`.
    settings: Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>,
}

impl std::fmt::Debug for PgCatalogSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgCatalogSchema")
    }
}

impl PgCatalogSchema {
    pub fn new(
        catalog: Arc<Catalog>,
        view: Arc<ReadView>,
        settings: Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>,
    ) -> Self {
        PgCatalogSchema {
            catalog,
            view,
            settings,
        }
    }

    fn build(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let tables = self.view.tables(&self.catalog);
        let provider = match name {
            "pg_namespace" => table(PG_NAMESPACE, namespaces()),
            "pg_class" => {
                let mut rows = classes(&tables);
                // The diagnostics views, in their own schema.
                rows.extend(super::diagnostics::relations().map(|(name, columns)| {
                    let mut row =
                        class_row(oid_of("view", name), name, "v", columns.len(), false, false);
                    row[2] = TABLEGATE_OID.into();
                    row
                }));
                rows.extend(self.catalog.sequences.list().iter().map(|s| {
                    class_row(sequence_oid(&s.def.name), &s.def.name, "S", 3, false, false)
                }));
                table(PG_CLASS, rows)
            }
            "pg_sequence" => table(
                PG_SEQUENCE,
                self.catalog
                    .sequences
                    .list()
                    .iter()
                    .map(|s| {
                        let d = &s.def;
                        vec![
                            sequence_oid(&d.name).into(),
                            type_info(d.ty).0.into(),
                            Cell::Int(d.start),
                            Cell::Int(d.increment),
                            Cell::Int(d.max),
                            Cell::Int(d.min),
                            Cell::Int(1),
                            d.cycle.into(),
                        ]
                    })
                    .collect(),
            ),
            "pg_attribute" => {
                let mut rows = attributes(&tables);
                for (name, columns) in super::diagnostics::relations() {
                    let relid = oid_of("view", name);
                    for (i, (column, ty)) in columns.iter().enumerate() {
                        rows.push(attribute_row(
                            relid,
                            column,
                            type_info(ty.sql_type()),
                            i as i64 + 1,
                            false,
                            false,
                            None,
                        ));
                    }
                }
                table(PG_ATTRIBUTE, rows)
            }
            "pg_index" => table(PG_INDEX, indexes(&tables)),
            "pg_constraint" => table(PG_CONSTRAINT, constraints(&tables)),
            "pg_attrdef" => table(PG_ATTRDEF, defaults(&tables)),
            "pg_depend" => table(
                PG_DEPEND,
                dependencies(&tables, &self.catalog.sequences.list()),
            ),
            "pg_extension" => table(
                PG_EXTENSION,
                vec![vec![
                    EXTENSION_OID.into(),
                    super::diagnostics::SCHEMA.into(),
                    OWNER_OID.into(),
                    TABLEGATE_OID.into(),
                    false.into(),
                    env!("CARGO_PKG_VERSION").into(),
                    Cell::Null,
                    Cell::Null,
                ]],
            ),
            "pg_type" => table(PG_TYPE, types(&self.catalog.types.list())),
            "pg_enum" => table(PG_ENUM, enum_labels(&self.catalog.types.list())),
            "pg_database" => table(
                PG_DATABASE,
                vec![vec![
                    DATABASE_OID.into(),
                    DATABASE.into(),
                    OWNER_OID.into(),
                    6.into(),
                    "c".into(),
                    false.into(),
                    true.into(),
                    (-1).into(),
                    0.into(),
                    0.into(),
                    DEFAULT_TABLESPACE_OID.into(),
                    "C.UTF-8".into(),
                    "C.UTF-8".into(),
                    Cell::Null,
                    Cell::Null,
                    Cell::Null,
                ]],
            ),
            "pg_roles" | "pg_user" => {
                // The owner (a superuser), then the roles made with SQL.
                let row = |name: &str, superuser: bool, oid: i32| {
                    vec![
                        name.into(),
                        superuser.into(),
                        true.into(),
                        superuser.into(),
                        superuser.into(),
                        true.into(),
                        false.into(),
                        (-1).into(),
                        "********".into(),
                        Cell::Null,
                        false.into(),
                        Cell::Null,
                        oid.into(),
                    ]
                };
                let mut rows = vec![row(OWNER, true, OWNER_OID)];
                rows.extend(
                    self.catalog
                        .roles
                        .list()
                        .iter()
                        .map(|r| row(&r.name, false, oid_of("role", &r.name))),
                );
                table(PG_ROLES, rows)
            }
            "pg_am" => table(
                PG_AM,
                vec![
                    vec![
                        HEAP_OID.into(),
                        "heap".into(),
                        "heap_tableam_handler".into(),
                        "t".into(),
                    ],
                    vec![
                        BTREE_OID.into(),
                        "btree".into(),
                        "bthandler".into(),
                        "i".into(),
                    ],
                ],
            ),
            "pg_tables" => table(
                PG_TABLES,
                tables
                    .iter()
                    .filter(|t| relkind(t) == "r")
                    .map(|t| {
                        vec![
                            "public".into(),
                            t.name.clone().into(),
                            OWNER.into(),
                            Cell::Null,
                            has_primary_key(t).into(),
                            false.into(),
                            false.into(),
                            false.into(),
                        ]
                    })
                    .collect(),
            ),
            "pg_indexes" => table(
                PG_INDEXES,
                tables
                    .iter()
                    .flat_map(|t| indexes_of(t))
                    .map(|index| {
                        vec![
                            "public".into(),
                            index.table.clone().into(),
                            index.name.clone().into(),
                            Cell::Null,
                            index.definition().into(),
                        ]
                    })
                    .collect(),
            ),
            "pg_rewrite" => table(
                PG_REWRITE,
                tables
                    .iter()
                    .filter(|t| t.plain_view.is_some())
                    .map(|t| {
                        vec![
                            rule_oid(&t.name).into(),
                            "_RETURN".into(),
                            table_oid(&t.name).into(),
                            "1".into(),
                            "O".into(),
                            true.into(),
                        ]
                    })
                    .collect(),
            ),
            "pg_views" => table(
                PG_VIEWS,
                tables
                    .iter()
                    .filter_map(|t| Some((t, t.plain_view.as_ref()?)))
                    .map(|(t, view)| {
                        vec![
                            "public".into(),
                            t.name.clone().into(),
                            OWNER.into(),
                            view_definition(&view.query).into(),
                        ]
                    })
                    .collect(),
            ),
            "pg_stat_progress_create_index" => table(
                PG_STAT_PROGRESS_CREATE_INDEX,
                self.catalog
                    .builds()
                    .into_iter()
                    .map(|(index, progress)| {
                        vec![
                            table_oid(&progress.table).into(),
                            oid_of("index", &index).into(),
                            "CREATE INDEX".into(),
                            "building index: scanning table".into(),
                            (progress.total as i64).into(),
                            (progress.done as i64).into(),
                        ]
                    })
                    .collect(),
            ),
            "pg_matviews" => table(
                PG_MATVIEWS,
                tables
                    .iter()
                    .filter_map(|t| Some((t, t.view.as_ref()?)))
                    .map(|(t, view)| {
                        vec![
                            "public".into(),
                            t.name.clone().into(),
                            OWNER.into(),
                            Cell::Null,
                            has_primary_key(t).into(),
                            true.into(),
                            view_definition(&view.query).into(),
                        ]
                    })
                    .collect(),
            ),
            "pg_tablespace" => table(
                PG_TABLESPACE,
                vec![vec![
                    DEFAULT_TABLESPACE_OID.into(),
                    "pg_default".into(),
                    OWNER_OID.into(),
                    Cell::Null,
                    Cell::Null,
                ]],
            ),
            "pg_description" => table(PG_DESCRIPTION, descriptions(&tables)),
            "pg_settings" => table(
                PG_SETTINGS,
                (self.settings)()
                    .into_iter()
                    .map(|(name, value)| {
                        let mut row = vec![Cell::Null; PG_SETTINGS.len()];
                        row[0] = name.into();
                        row[1] = value.clone().into();
                        row[6] = "user".into();
                        row[7] = "string".into();
                        row[8] = "session".into();
                        row[12] = value.clone().into();
                        row[13] = value.into();
                        row[16] = false.into();
                        row
                    })
                    .collect(),
            ),
            "pg_proc" => table(PG_PROC, Vec::new()),
            other => match EMPTY.iter().find(|(n, _)| *n == other) {
                Some((_, columns)) => table(columns, Vec::new()),
                None => return Ok(None),
            },
        };
        provider.map(Some)
    }
}

#[async_trait]
impl SchemaProvider for PgCatalogSchema {
    fn table_names(&self) -> Vec<String> {
        NAMES
            .iter()
            .copied()
            .chain(EMPTY.iter().map(|(n, _)| *n))
            .map(str::to_owned)
            .collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        self.build(name)
    }

    fn table_exist(&self, name: &str) -> bool {
        NAMES.contains(&name) || EMPTY.iter().any(|(n, _)| *n == name)
    }
}

pub(super) fn has_primary_key(def: &TableDef) -> bool {
    matches!(def.keys, Keys::Columns { .. })
}

/// An index of a table: its primary key's, or one CREATE INDEX made.
pub struct IndexInfo {
    pub oid: i32,
    pub name: String,
    pub table: String,
    pub columns: Vec<String>,
    pub unique: bool,
    pub primary: bool,
    pub intra_partition: bool,
}

impl IndexInfo {
    /// What `pg_get_indexdef` prints.
    pub fn definition(&self) -> String {
        let columns: Vec<String> = self.columns.iter().map(|c| quote_ident(c)).collect();
        format!(
            "CREATE {}INDEX {} ON public.{} USING btree ({}){}",
            if self.unique { "UNIQUE " } else { "" },
            quote_ident(&self.name),
            quote_ident(&self.table),
            columns.join(", "),
            if self.intra_partition {
                " WITH (intra_partition = true)"
            } else {
                ""
            }
        )
    }

    /// The indexed columns as attribute numbers of the table (1-based).
    fn attnums(&self, def: &TableDef) -> Vec<i64> {
        self.columns
            .iter()
            .filter_map(|c| def.column_index(c))
            .map(|i| i as i64 + 1)
            .collect()
    }
}

/// The indexes of a table: its primary key's first, then the others.
pub fn indexes_of(def: &TableDef) -> Vec<IndexInfo> {
    let mut out = Vec::new();
    if has_primary_key(def) {
        out.push(IndexInfo {
            oid: primary_key_oid(&def.name),
            name: primary_key_name(&def.name),
            table: def.name.clone(),
            columns: def.key_column_names(),
            unique: true,
            primary: true,
            intra_partition: false,
        });
    }
    out.extend(def.indexes.iter().map(|index| IndexInfo {
        oid: oid_of("index", &index.name),
        name: index.name.clone(),
        table: def.name.clone(),
        columns: index.columns.clone(),
        unique: index.unique,
        primary: false,
        intra_partition: index.intra_partition,
    }));
    out
}

/// A constraint of a table: its primary key, a UNIQUE constraint, a
/// foreign key it declares, or a CHECK.
pub struct Constraint {
    pub oid: i32,
    pub name: String,
    pub table: String,
    /// The key's columns (none for a CHECK).
    pub columns: Vec<String>,
    pub kind: ConstraintKind,
}

pub enum ConstraintKind {
    PrimaryKey,
    /// Its index is of the constraint's name.
    Unique,
    ForeignKey(ForeignKey),
    Check {
        condition: String,
    },
}

impl Constraint {
    /// `p`, `u`, `f` or `c`, as in `pg_constraint.contype`.
    pub fn contype(&self) -> &'static str {
        match self.kind {
            ConstraintKind::PrimaryKey => "p",
            ConstraintKind::Unique => "u",
            ConstraintKind::ForeignKey(_) => "f",
            ConstraintKind::Check { .. } => "c",
        }
    }

    /// What `pg_get_constraintdef` prints (`pretty`: a CHECK's condition
    /// without its own parentheses).
    pub fn definition(&self, pretty: bool) -> String {
        let list = |names: &[String]| {
            names
                .iter()
                .map(|n| quote_ident(n))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match &self.kind {
            ConstraintKind::PrimaryKey => format!("PRIMARY KEY ({})", list(&self.columns)),
            ConstraintKind::Unique => format!("UNIQUE ({})", list(&self.columns)),
            ConstraintKind::ForeignKey(fk) => {
                let mut text = format!(
                    "FOREIGN KEY ({}) REFERENCES {}({})",
                    list(&self.columns),
                    quote_ident(&fk.table),
                    list(&fk.referenced)
                );
                for (event, action) in [("UPDATE", fk.on_update), ("DELETE", fk.on_delete)] {
                    if action != RefAction::NoAction {
                        text += &format!(" ON {event} {}", action.sql());
                    }
                }
                if fk.deferrable {
                    text += " DEFERRABLE";
                }
                if fk.deferred {
                    text += " INITIALLY DEFERRED";
                }
                text
            }
            ConstraintKind::Check { condition } if pretty => format!("CHECK ({condition})"),
            ConstraintKind::Check { condition } => format!("CHECK (({condition}))"),
        }
    }
}

/// The constraints of a table: its primary key first, then its UNIQUE
/// constraints, its foreign keys, its CHECKs.
pub fn constraints_of(def: &TableDef) -> Vec<Constraint> {
    let mut out = Vec::new();
    if has_primary_key(def) {
        out.push(Constraint {
            oid: primary_key_constraint_oid(&def.name),
            name: primary_key_name(&def.name),
            table: def.name.clone(),
            columns: def.key_column_names(),
            kind: ConstraintKind::PrimaryKey,
        });
    }
    out.extend(
        def.indexes
            .iter()
            .filter(|i| i.constraint)
            .map(|index| Constraint {
                oid: oid_of("constraint", &format!("{}.{}", def.name, index.name)),
                name: index.name.clone(),
                table: def.name.clone(),
                columns: index.columns.clone(),
                kind: ConstraintKind::Unique,
            }),
    );
    out.extend(def.foreign_keys.iter().map(|fk| Constraint {
        oid: oid_of("constraint", &format!("{}.{}", def.name, fk.name)),
        name: fk.name.clone(),
        table: def.name.clone(),
        columns: fk.columns.clone(),
        kind: ConstraintKind::ForeignKey(fk.clone()),
    }));
    out.extend(def.checks.iter().map(|check| Constraint {
        oid: oid_of("constraint", &format!("{}.{}", def.name, check.name)),
        name: check.name.clone(),
        table: def.name.clone(),
        columns: Vec::new(),
        kind: ConstraintKind::Check {
            condition: check.expr.clone(),
        },
    }));
    out
}

/// An identifier as PostgreSQL prints it: quoted unless plain lower case.
pub fn quote_ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// The schemas, by object id.
pub const NAMESPACES: [(i32, &str); 4] = [
    (PG_CATALOG_OID, "pg_catalog"),
    (PUBLIC_OID, "public"),
    (INFORMATION_SCHEMA_OID, "information_schema"),
    (TABLEGATE_OID, super::diagnostics::SCHEMA),
];

fn namespaces() -> Vec<Vec<Cell>> {
    NAMESPACES
        .into_iter()
        .map(|(oid, name)| vec![oid.into(), name.into(), OWNER_OID.into(), Cell::Null])
        .collect()
}

/// Where `relpersistence` is in a `pg_class` row: `p`, or `t` for a
/// temporary table.
const RELPERSISTENCE: usize = 15;

/// Where `relchecks` (the number of CHECK constraints) is in a `pg_class` row.
const RELCHECKS: usize = 18;

/// A `pg_class` row. `has_triggers` is what PostgreSQL sets for tables
/// with foreign keys (its foreign keys are triggers), and what makes psql
/// list them.
fn class_row(
    oid: i32,
    name: &str,
    kind: &str,
    natts: usize,
    has_index: bool,
    has_triggers: bool,
) -> Vec<Cell> {
    vec![
        oid.into(),
        name.into(),
        PUBLIC_OID.into(),
        0.into(),
        0.into(),
        OWNER_OID.into(),
        (if kind == PG_INDEX_RELKIND {
            BTREE_OID
        } else {
            HEAP_OID
        })
        .into(),
        oid.into(),
        0.into(),
        0.into(),
        Cell::Double(-1.0),
        0.into(),
        0.into(),
        has_index.into(),
        false.into(),
        "p".into(),
        kind.into(),
        (natts as i16).into(),
        0i16.into(),
        false.into(),
        has_triggers.into(),
        false.into(),
        false.into(),
        false.into(),
        true.into(),
        "d".into(),
        false.into(),
        0.into(),
        0.into(),
        0.into(),
        Cell::Null,
        Cell::Null,
        Cell::Null,
    ]
}

/// The oid of a view's `_RETURN` rule.
fn rule_oid(view: &str) -> i32 {
    oid_of("rule", view)
}

/// A view's query as `pg_get_viewdef` and `pg_views.definition` give it.
pub(super) fn view_definition(query: &str) -> String {
    format!(" {query};")
}

/// `pg_class.relkind`: a table, a materialized view or a view.
fn relkind(def: &TableDef) -> &'static str {
    match super::ddl::Relation::of(def) {
        super::ddl::Relation::Table => "r",
        super::ddl::Relation::View => "v",
        super::ddl::Relation::MaterializedView => "m",
    }
}

fn classes(tables: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for t in tables {
        let referenced = tables
            .iter()
            .any(|other| other.foreign_keys.iter().any(|fk| fk.table == t.name));
        let indexes = indexes_of(t);
        let mut row = class_row(
            table_oid(&t.name),
            &t.name,
            relkind(t),
            t.columns.len(),
            !indexes.is_empty(),
            referenced || !t.foreign_keys.is_empty(),
        );
        if t.temporary.is_some() {
            row[RELPERSISTENCE] = "t".into();
        }
        row[RELCHECKS] = (t.checks.len() as i16).into();
        rows.push(row);
        for index in indexes {
            rows.push(class_row(
                index.oid,
                &index.name,
                PG_INDEX_RELKIND,
                index.columns.len(),
                false,
                false,
            ));
        }
    }
    rows
}

/// How PostgreSQL stores a type's values (`attstorage`, `typstorage`):
/// those of a fixed length plain, numerics compressed in line (`main`),
/// others compressed or out of line (`extended`).
fn storage(oid: i32, len: i16) -> &'static str {
    const NUMERIC: i32 = 1700;
    match (oid, len) {
        (_, 1..) => "p",
        (NUMERIC, _) => "m",
        _ => "x",
    }
}

/// Where `pg_attribute` has `atttypid`.
#[cfg(test)]
const ATTTYPID: usize = 2;

/// A column's type id, modifier and length (see [`type_info`]): an enum
/// type's is its own, a `timestamp(p)`'s modifier p.
fn column_type_info(c: &crate::catalog::Column) -> (i32, i32, i16) {
    match (&c.enum_type, c.precision) {
        (Some(e), _) => (enum_oid(&e.name), -1, 4),
        // `timestamp(p)`'s modifier is p.
        (None, Some(digits)) => {
            let (oid, _, len) = type_info(c.ty);
            (oid, i32::from(digits), len)
        }
        (None, None) => type_info(c.ty),
    }
}

/// A row of `pg_attribute`; `ty` is the column's [`type_info`].
fn attribute_row(
    relid: i32,
    name: &str,
    (oid, typmod, len): (i32, i32, i16),
    num: i64,
    not_null: bool,
    has_default: bool,
    identity: Option<crate::catalog::Identity>,
) -> Vec<Cell> {
    let identity = match identity {
        Some(crate::catalog::Identity::Always) => "a",
        Some(crate::catalog::Identity::ByDefault) => "d",
        None => "",
    };
    vec![
        relid.into(),
        name.into(),
        oid.into(),
        (-1).into(),
        len.into(),
        (num as i16).into(),
        0.into(),
        (-1).into(),
        typmod.into(),
        (len > 0 && len <= 8).into(),
        "i".into(),
        storage(oid, len).into(),
        "".into(),
        not_null.into(),
        has_default.into(),
        false.into(),
        identity.into(),
        "".into(),
        false.into(),
        true.into(),
        0.into(),
        0.into(),
        Cell::Null,
        Cell::Null,
        Cell::Null,
        Cell::Null,
    ]
}

fn attributes(tables: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for t in tables {
        let relid = table_oid(&t.name);
        for (i, c) in t.columns.iter().enumerate() {
            let not_null = !c.nullable || t.is_key_column(i);
            rows.push(attribute_row(
                relid,
                &c.name,
                column_type_info(c),
                i as i64 + 1,
                not_null,
                c.default.is_some(),
                c.identity,
            ));
        }
        for index in indexes_of(t) {
            for (n, attnum) in index.attnums(t).into_iter().enumerate() {
                let c = &t.columns[attnum as usize - 1];
                rows.push(attribute_row(
                    index.oid,
                    &c.name,
                    column_type_info(c),
                    n as i64 + 1,
                    !c.nullable || index.primary,
                    false,
                    None,
                ));
            }
        }
    }
    rows
}

fn indexes(tables: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for t in tables {
        for index in indexes_of(t) {
            let keys = index.attnums(t);
            let n = keys.len() as i16;
            rows.push(vec![
                index.oid.into(),
                table_oid(&t.name).into(),
                n.into(),
                n.into(),
                index.unique.into(),
                false.into(),
                index.primary.into(),
                false.into(),
                true.into(),
                false.into(),
                true.into(),
                false.into(),
                true.into(),
                true.into(),
                false.into(),
                Cell::Ints(keys.clone()),
                Cell::Ints(vec![0; keys.len()]),
                Cell::Ints(vec![0; keys.len()]),
                Cell::Ints(vec![0; keys.len()]),
                Cell::Null,
                Cell::Null,
            ]);
        }
    }
    rows
}

fn constraints(tables: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
    let attnums = |table: &str, columns: &[String]| -> Cell {
        let def = tables.iter().find(|t| t.name == table);
        Cell::Ints(
            columns
                .iter()
                .filter_map(|c| def.and_then(|d| d.column_index(c)))
                .map(|i| i as i64 + 1)
                .collect(),
        )
    };
    tables
        .iter()
        .flat_map(|t| constraints_of(t))
        .map(|c| {
            let fk = match &c.kind {
                ConstraintKind::ForeignKey(fk) => Some(fk),
                _ => None,
            };
            let (index, referenced, referenced_attnums) = match &c.kind {
                ConstraintKind::PrimaryKey => (primary_key_oid(&c.table), 0, Cell::Null),
                ConstraintKind::Unique => (oid_of("index", &c.name), 0, Cell::Null),
                ConstraintKind::ForeignKey(fk) => (
                    primary_key_oid(&fk.table),
                    table_oid(&fk.table),
                    attnums(&fk.table, &fk.referenced),
                ),
                ConstraintKind::Check { .. } => (0, 0, Cell::Null),
            };
            let action = |a: fn(&ForeignKey) -> RefAction| fk.map_or(" ", |fk| a(fk).code());
            vec![
                c.oid.into(),
                c.name.clone().into(),
                PUBLIC_OID.into(),
                c.contype().into(),
                fk.is_some_and(|fk| fk.deferrable).into(),
                fk.is_some_and(|fk| fk.deferred).into(),
                true.into(),
                table_oid(&c.table).into(),
                0.into(),
                index.into(),
                0.into(),
                referenced.into(),
                action(|fk| fk.on_update).into(),
                action(|fk| fk.on_delete).into(),
                (if fk.is_some() { "s" } else { " " }).into(),
                true.into(),
                0.into(),
                true.into(),
                attnums(&c.table, &c.columns),
                referenced_attnums,
                Cell::Null,
            ]
        })
        .collect()
}

/// What the diagnostics schema and its extension hold.
const DIAGNOSTICS: &str =
    "the store's tables, partitions, indexes, materialized views and recent queries";

/// Descriptions of the schemas (PostgreSQL's own for its two; pg_dump
/// leaves out public's as it stands after initdb) and of the extension.
const BUILT_IN_DESCRIPTIONS: [(i32, i32, &str); 4] = [
    (
        PG_CATALOG_OID,
        NAMESPACE_CATALOG_OID,
        "system catalog schema",
    ),
    (PUBLIC_OID, NAMESPACE_CATALOG_OID, "standard public schema"),
    (TABLEGATE_OID, NAMESPACE_CATALOG_OID, DIAGNOSTICS),
    (EXTENSION_OID, EXTENSION_CATALOG_OID, DIAGNOSTICS),
];

/// The description of a built-in schema or extension.
pub fn built_in_description(oid: i64) -> Option<&'static str> {
    BUILT_IN_DESCRIPTIONS
        .iter()
        .find(|d| i64::from(d.0) == oid)
        .map(|d| d.2)
}

/// The built-in descriptions, then the comments of tables (`objsubid` 0)
/// and their columns.
fn descriptions(tables: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
    let mut rows: Vec<Vec<Cell>> = BUILT_IN_DESCRIPTIONS
        .into_iter()
        .map(|(oid, catalog, description)| {
            vec![oid.into(), catalog.into(), 0.into(), description.into()]
        })
        .collect();
    for t in tables {
        let comments = std::iter::once((0, &t.comment)).chain(
            t.columns
                .iter()
                .enumerate()
                .map(|(i, c)| (i as i32 + 1, &c.comment)),
        );
        for (subid, comment) in comments {
            if let Some(comment) = comment {
                rows.push(vec![
                    table_oid(&t.name).into(),
                    CLASS_CATALOG_OID.into(),
                    subid.into(),
                    comment.clone().into(),
                ]);
            }
        }
    }
    rows
}

/// What pg_dump orders a dump by and leaves out of it: a sequence owned by
/// a column depends on its table (`a`uto), and the column's default on the
/// sequence (`n`ormal), so the sequence is made before the default that
/// calls it; the diagnostics schema and its views are members of the
/// built-in extension (`e`).
fn dependencies(
    tables: &[Arc<TableDef>],
    sequences: &[Arc<crate::catalog::Sequence>],
) -> Vec<Vec<Cell>> {
    let class = CLASS_CATALOG_OID;
    let member = |catalog: i32, oid: i32| {
        vec![
            catalog.into(),
            oid.into(),
            0.into(),
            EXTENSION_CATALOG_OID.into(),
            EXTENSION_OID.into(),
            0.into(),
            "e".into(),
        ]
    };
    let mut rows = vec![member(NAMESPACE_CATALOG_OID, TABLEGATE_OID)];
    rows.extend(
        super::diagnostics::relations().map(|(name, _)| member(class, oid_of("view", name))),
    );
    // A view's rule is part of it, and depends on what the view reads
    // (pg_dump creates a view after those).
    for (view, plain) in tables
        .iter()
        .filter_map(|t| Some((t, t.plain_view.as_ref()?)))
    {
        let rule = rule_oid(&view.name);
        let on = |oid: i32, deptype: &str| {
            vec![
                REWRITE_CATALOG_OID.into(),
                rule.into(),
                0.into(),
                class.into(),
                oid.into(),
                0.into(),
                deptype.into(),
            ]
        };
        rows.push(on(table_oid(&view.name), "i"));
        rows.extend(plain.reads.iter().map(|read| on(table_oid(read), "n")));
    }
    for sequence in sequences {
        let Some((table, column)) = &sequence.def.owned_by else {
            continue;
        };
        let Some(def) = tables.iter().find(|t| &t.name == table) else {
            continue;
        };
        let Some(i) = def.columns.iter().position(|c| &c.name == column) else {
            continue;
        };
        let seq = sequence_oid(&sequence.def.name);
        let attnum = i as i64 + 1;
        rows.push(vec![
            class.into(),
            seq.into(),
            0.into(),
            class.into(),
            table_oid(table).into(),
            Cell::Int(attnum),
            "a".into(),
        ]);
        if def.columns[i].default.is_some() {
            rows.push(vec![
                ATTRDEF_CATALOG_OID.into(),
                oid_of("default", &format!("{table}.{column}")).into(),
                0.into(),
                class.into(),
                seq.into(),
                0.into(),
                "n".into(),
            ]);
        }
    }
    rows
}

fn defaults(tables: &[Arc<TableDef>]) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for t in tables {
        for (i, c) in t.columns.iter().enumerate() {
            if let Some(default) = &c.default {
                rows.push(vec![
                    oid_of("default", &format!("{}.{}", t.name, c.name)).into(),
                    table_oid(&t.name).into(),
                    (i as i16 + 1).into(),
                    default.clone().into(),
                ]);
            }
        }
    }
    rows
}

fn types(enums: &[Arc<EnumType>]) -> Vec<Vec<Cell>> {
    let mut rows: Vec<Vec<Cell>> = TYPES
        .iter()
        .map(|&(oid, name, len, category, array)| {
            let is_array = category == "A" && name.starts_with('_');
            let element = if is_array { element_of(oid) } else { 0 };
            let io = if is_array { "array_" } else { name };
            let ty = PgType::new(oid, name, PG_CATALOG_OID, len, category, array, io);
            ty.row(element)
        })
        .collect();
    // Each enum type, and the type of its arrays, as PostgreSQL makes both.
    for e in enums {
        let (oid, array) = (enum_oid(&e.name), enum_array_oid(&e.name));
        let mut ty = PgType::new(oid, &e.name, PUBLIC_OID, 4, "E", array, "enum_");
        ty.kind = "e";
        rows.push(ty.row(0));
        let name = format!("_{}", e.name);
        rows.push(PgType::new(array, &name, PUBLIC_OID, -1, "A", 0, "array_").row(oid));
    }
    rows
}

/// A row of `pg_type`.
struct PgType<'a> {
    oid: i32,
    name: &'a str,
    namespace: i32,
    len: i16,
    /// `typtype`: `b` (base), `e` (enum).
    kind: &'static str,
    category: &'a str,
    array: i32,
    /// Its functions' prefix (`int4` of `int4in`, `array_` of `array_in`).
    io: &'a str,
}

impl<'a> PgType<'a> {
    fn new(
        oid: i32,
        name: &'a str,
        namespace: i32,
        len: i16,
        category: &'a str,
        array: i32,
        io: &'a str,
    ) -> Self {
        PgType {
            oid,
            name,
            namespace,
            len,
            kind: "b",
            category,
            array,
            io,
        }
    }

    /// The row; `element` is the type of an array type's elements.
    fn row(&self, element: i32) -> Vec<Cell> {
        let io = self.io;
        let values: Vec<Cell> = vec![
            self.oid.into(),
            self.name.into(),
            self.namespace.into(),
            OWNER_OID.into(),
            self.len.into(),
            (self.len > 0 && self.len <= 8).into(),
            self.kind.into(),
            self.category.into(),
            false.into(),
            true.into(),
            ",".into(),
            0.into(),
            (if element != 0 {
                "array_subscript_handler"
            } else {
                "-"
            })
            .into(),
            element.into(),
            self.array.into(),
            format!("{io}in").into(),
            format!("{io}out").into(),
            format!("{io}recv").into(),
            format!("{io}send").into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "i".into(),
            storage(self.oid, self.len).into(),
            false.into(),
            0.into(),
            (-1).into(),
            0.into(),
            0.into(),
        ];
        let mut row = vec![Cell::Null; PG_TYPE.len()];
        for (i, v) in values.into_iter().enumerate() {
            row[i] = v;
        }
        row
    }
}

/// The object id of an enum type, and of the type of its arrays.
pub fn enum_oid(name: &str) -> i32 {
    oid_of("type", name)
}

fn enum_array_oid(name: &str) -> i32 {
    oid_of("array type", name)
}

/// The name `format_type` gives an enum type's id (quoted as needed, and
/// after `public.` when `qualified`), and its arrays'.
pub fn enum_type_name(types: &EnumTypes, oid: i64, qualified: bool) -> Option<String> {
    types.list().iter().find_map(|e| {
        let name = match qualified {
            true => format!("public.{}", quote_ident(&e.name)),
            false => quote_ident(&e.name),
        };
        if i64::from(enum_oid(&e.name)) == oid {
            Some(name)
        } else if i64::from(enum_array_oid(&e.name)) == oid {
            Some(format!("{name}[]"))
        } else {
            None
        }
    })
}

/// The rows of `pg_enum`: each label of each type, in order.
fn enum_labels(enums: &[Arc<EnumType>]) -> Vec<Vec<Cell>> {
    enums
        .iter()
        .flat_map(|e| {
            let typid = enum_oid(&e.name);
            e.labels.iter().enumerate().map(move |(i, label)| {
                vec![
                    oid_of("enum label", &format!("{}\0{label}", e.name)).into(),
                    typid.into(),
                    Cell::Double((i + 1) as f64),
                    label.as_str().into(),
                ]
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relpersistence_is_where_pg_class_has_it() {
        assert_eq!(PG_CLASS[RELPERSISTENCE].0, "relpersistence");
    }

    #[test]
    fn oids_are_stable_and_outside_the_reserved_range() {
        assert_eq!(table_oid("employees"), table_oid("employees"));
        assert_ne!(table_oid("employees"), table_oid("employee"));
        assert!(table_oid("x") >= 16_384);
    }

    #[test]
    fn format_type_names() {
        for (ty, name) in [
            (SqlType::Varchar(Some(20)), "character varying(20)"),
            (SqlType::Char(3), "character(3)"),
            (
                SqlType::Numeric {
                    precision: 10,
                    scale: 2,
                },
                "numeric(10,2)",
            ),
            (SqlType::Int4, "integer"),
            (SqlType::Timestamptz, "timestamp with time zone"),
        ] {
            let (oid, typmod, _) = type_info(ty);
            assert_eq!(
                format_type(oid.into(), Some(typmod.into())).as_deref(),
                Some(name)
            );
            assert_eq!(ty.pg_name(), name);
        }
        assert_eq!(format_type(1009, None).as_deref(), Some("text[]"));
        assert_eq!(type_oid("integer"), Some(23));
        assert_eq!(type_oid("int4"), Some(23));
        assert_eq!(type_oid("pg_catalog.timestamptz"), Some(1184));
        assert_eq!(type_oid("text[]"), Some(1009));
        assert_eq!(type_oid("hstore"), None);
    }

    #[test]
    fn catalog_rows_match_their_columns() {
        let mood = Arc::new(EnumType {
            name: "mood".into(),
            labels: vec!["sad".into(), "ok".into()],
        });
        let def = Arc::new(TableDef::new(
            "T",
            vec![
                crate::catalog::Column {
                    name: "id".into(),
                    ty: SqlType::Int4,
                    nullable: false,
                    system: None,
                    default: Some("0".into()),
                    comment: None,
                    identity: None,
                    enum_type: None,
                    precision: None,
                },
                crate::catalog::Column {
                    name: "v".into(),
                    ty: SqlType::Text,
                    nullable: true,
                    system: None,
                    default: None,
                    comment: None,
                    identity: None,
                    enum_type: Some(mood.as_ref().clone()),
                    precision: None,
                },
            ],
            Keys::Columns {
                partition: vec![0],
                row: vec![],
            },
        ));
        let tables = vec![def];
        for (columns, rows) in [
            (PG_CLASS, classes(&tables)),
            (PG_ATTRIBUTE, attributes(&tables)),
            (PG_INDEX, indexes(&tables)),
            (PG_CONSTRAINT, constraints(&tables)),
            (PG_ATTRDEF, defaults(&tables)),
            (PG_NAMESPACE, namespaces()),
            (PG_TYPE, types(std::slice::from_ref(&mood))),
            (PG_ENUM, enum_labels(std::slice::from_ref(&mood))),
        ] {
            assert!(!rows.is_empty());
            for row in &rows {
                assert_eq!(row.len(), columns.len());
            }
            table(columns, rows).unwrap();
        }
        assert_eq!(quote_ident("T"), "\"T\"");
        let enum_column = &attributes(&tables)[1];
        assert!(
            matches!(enum_column[ATTTYPID], Cell::Int(oid) if oid == i64::from(enum_oid("mood")))
        );
        assert_eq!(
            indexes_of(&tables[0])[0].definition(),
            "CREATE UNIQUE INDEX \"T_pkey\" ON public.\"T\" USING btree (id)"
        );
    }
}
