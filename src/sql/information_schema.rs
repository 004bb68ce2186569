//! `information_schema`: the SQL standard's view of the tables, in
//! PostgreSQL's shape (type names such as `character varying`, `YES`/`NO`
//! flags), built like [`super::pg_catalog`] from the tables the session sees.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::Result as DfResult;

use super::pg_catalog::{
    constraints_of, primary_key_name, table, type_info, type_name, Cell, Constraint,
    ConstraintKind, Ty, DATABASE, OWNER,
};
use super::provider::ReadView;
use crate::catalog::{Catalog, SqlType, TableDef};

pub const SCHEMA: &str = "information_schema";

use Ty::{Int4, Text};

const SCHEMATA: &[(&str, Ty)] = &[
    ("catalog_name", Text),
    ("schema_name", Text),
    ("schema_owner", Text),
    ("default_character_set_catalog", Text),
    ("default_character_set_schema", Text),
    ("default_character_set_name", Text),
    ("sql_path", Text),
];

const TABLES: &[(&str, Ty)] = &[
    ("table_catalog", Text),
    ("table_schema", Text),
    ("table_name", Text),
    ("table_type", Text),
    ("self_referencing_column_name", Text),
    ("reference_generation", Text),
    ("user_defined_type_catalog", Text),
    ("user_defined_type_schema", Text),
    ("user_defined_type_name", Text),
    ("is_insertable_into", Text),
    ("is_typed", Text),
    ("commit_action", Text),
];

const COLUMNS: &[(&str, Ty)] = &[
    ("table_catalog", Text),
    ("table_schema", Text),
    ("table_name", Text),
    ("column_name", Text),
    ("ordinal_position", Int4),
    ("column_default", Text),
    ("is_nullable", Text),
    ("data_type", Text),
    ("character_maximum_length", Int4),
    ("character_octet_length", Int4),
    ("numeric_precision", Int4),
    ("numeric_precision_radix", Int4),
    ("numeric_scale", Int4),
    ("datetime_precision", Int4),
    ("udt_catalog", Text),
    ("udt_schema", Text),
    ("udt_name", Text),
    ("is_identity", Text),
    ("is_generated", Text),
    ("is_updatable", Text),
];

const TABLE_CONSTRAINTS: &[(&str, Ty)] = &[
    ("constraint_catalog", Text),
    ("constraint_schema", Text),
    ("constraint_name", Text),
    ("table_catalog", Text),
    ("table_schema", Text),
    ("table_name", Text),
    ("constraint_type", Text),
    ("is_deferrable", Text),
    ("initially_deferred", Text),
    ("enforced", Text),
];

const KEY_COLUMN_USAGE: &[(&str, Ty)] = &[
    ("constraint_catalog", Text),
    ("constraint_schema", Text),
    ("constraint_name", Text),
    ("table_catalog", Text),
    ("table_schema", Text),
    ("table_name", Text),
    ("column_name", Text),
    ("ordinal_position", Int4),
    ("position_in_unique_constraint", Int4),
];

const REFERENTIAL_CONSTRAINTS: &[(&str, Ty)] = &[
    ("constraint_catalog", Text),
    ("constraint_schema", Text),
    ("constraint_name", Text),
    ("unique_constraint_catalog", Text),
    ("unique_constraint_schema", Text),
    ("unique_constraint_name", Text),
    ("match_option", Text),
    ("update_rule", Text),
    ("delete_rule", Text),
];

const VIEWS: &[(&str, Ty)] = &[
    ("table_catalog", Text),
    ("table_schema", Text),
    ("table_name", Text),
    ("view_definition", Text),
    ("check_option", Text),
    ("is_updatable", Text),
    ("is_insertable_into", Text),
];

const NAMES: &[&str] = &[
    "schemata",
    "tables",
    "columns",
    "table_constraints",
    "key_column_usage",
    "referential_constraints",
    "views",
];

/// The `information_schema` schema of a session.
pub struct InformationSchema {
    catalog: Arc<Catalog>,
    view: Arc<ReadView>,
}

impl std::fmt::Debug for InformationSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InformationSchema")
    }
}

impl InformationSchema {
    pub fn new(catalog: Arc<Catalog>, view: Arc<ReadView>) -> Self {
        InformationSchema { catalog, view }
    }
}

fn yes_no(b: bool) -> Cell {
    (if b { "YES" } else { "NO" }).into()
}

/// The standard's name of a type (without its length or precision), and
/// PostgreSQL's internal one.
fn type_names(ty: SqlType) -> (&'static str, &'static str) {
    match ty {
        SqlType::Text => ("text", "text"),
        SqlType::Varchar(_) => ("character varying", "varchar"),
        SqlType::Char(_) => ("character", "bpchar"),
        SqlType::Int2 => ("smallint", "int2"),
        SqlType::Int4 => ("integer", "int4"),
        SqlType::Int8 => ("bigint", "int8"),
        SqlType::Float4 => ("real", "float4"),
        SqlType::Float8 => ("double precision", "float8"),
        SqlType::Numeric { .. } => ("numeric", "numeric"),
        SqlType::Bool => ("boolean", "bool"),
        SqlType::Date => ("date", "date"),
        SqlType::Time => ("time without time zone", "time"),
        SqlType::Interval => ("interval", "interval"),
        SqlType::Timestamp => ("timestamp without time zone", "timestamp"),
        SqlType::Timestamptz => ("timestamp with time zone", "timestamptz"),
        SqlType::Uuid => ("uuid", "uuid"),
        SqlType::Bytea => ("bytea", "bytea"),
        SqlType::Json => ("json", "json"),
        SqlType::Jsonb => ("jsonb", "jsonb"),
        SqlType::Array(_) => ("ARRAY", type_name(type_info(ty).0).unwrap_or("anyarray")),
    }
}

/// The columns a constraint's rows start with: constraint catalog, schema
/// and name, then table catalog, schema and name.
fn constraint_of(c: &Constraint) -> Vec<Cell> {
    vec![
        DATABASE.into(),
        "public".into(),
        c.name.clone().into(),
        DATABASE.into(),
        "public".into(),
        c.table.clone().into(),
    ]
}

/// Where a referenced column stands in its table's primary key (1-based).
fn unique_position(tables: &[Arc<TableDef>], table: &str, column: &str) -> Cell {
    tables
        .iter()
        .find(|t| t.name == table)
        .and_then(|t| {
            constraints_of(t)
                .into_iter()
                .find(|c| matches!(c.kind, ConstraintKind::PrimaryKey))
        })
        .and_then(|key| key.columns.iter().position(|c| c == column))
        .map_or(Cell::Null, |n| (n as i32 + 1).into())
}

fn column_rows(t: &TableDef) -> Vec<Vec<Cell>> {
    t.columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (data_type, udt_schema, udt) = match &c.enum_type {
                Some(e) => ("USER-DEFINED".to_owned(), "public", e.name.clone()),
                None => {
                    let (data_type, udt) = type_names(c.ty);
                    (data_type.to_string(), "pg_catalog", udt.to_string())
                }
            };
            let int = |v: Option<i64>| v.map_or(Cell::Null, Cell::from);
            let length = match c.ty {
                SqlType::Varchar(n) => n.map(i64::from),
                SqlType::Char(n) => Some(i64::from(n)),
                _ => None,
            };
            let (precision, radix, scale) = match c.ty {
                SqlType::Int2 => (Some(16), Some(2), Some(0)),
                SqlType::Int4 => (Some(32), Some(2), Some(0)),
                SqlType::Int8 => (Some(64), Some(2), Some(0)),
                SqlType::Float4 => (Some(24), Some(2), None),
                SqlType::Float8 => (Some(53), Some(2), None),
                SqlType::Numeric { precision, scale } => {
                    (Some(i64::from(precision)), Some(10), Some(i64::from(scale)))
                }
                _ => (None, None, None),
            };
            let datetime = matches!(
                c.ty,
                SqlType::Time | SqlType::Interval | SqlType::Timestamp | SqlType::Timestamptz
            )
            .then_some(c.precision.map_or(6, i64::from))
            .or(matches!(c.ty, SqlType::Date).then_some(0));
            vec![
                DATABASE.into(),
                "public".into(),
                t.name.clone().into(),
                c.name.clone().into(),
                (i as i32 + 1).into(),
                c.default.clone().map_or(Cell::Null, Cell::from),
                yes_no(c.nullable && !t.is_key_column(i)),
                data_type.into(),
                int(length),
                int(length.map(|n| n * 4)),
                int(precision),
                int(radix),
                int(scale),
                int(datetime),
                DATABASE.into(),
                udt_schema.into(),
                udt.into(),
                "NO".into(),
                "NEVER".into(),
                yes_no(c.system.is_none()),
            ]
        })
        .collect()
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        NAMES.iter().map(|n| (*n).to_owned()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let tables = self.view.tables(&self.catalog);
        let constraints = || tables.iter().flat_map(|t| constraints_of(t));
        let provider = match name {
            "schemata" => table(
                SCHEMATA,
                ["public", "pg_catalog", "information_schema"]
                    .into_iter()
                    .map(|s| {
                        vec![
                            DATABASE.into(),
                            s.into(),
                            OWNER.into(),
                            Cell::Null,
                            Cell::Null,
                            "UTF8".into(),
                            Cell::Null,
                        ]
                    })
                    .collect(),
            ),
            "tables" => table(
                TABLES,
                tables
                    .iter()
                    // As in PostgreSQL, materialized views are not listed.
                    .filter(|t| t.view.is_none())
                    .map(|t| {
                        let view = t.plain_view.is_some();
                        let mut row = vec![Cell::Null; TABLES.len()];
                        row[0] = DATABASE.into();
                        row[1] = "public".into();
                        row[2] = t.name.clone().into();
                        row[3] = if view { "VIEW" } else { "BASE TABLE" }.into();
                        row[9] = if view { "NO" } else { "YES" }.into();
                        row[10] = "NO".into();
                        row
                    })
                    .collect(),
            ),
            "columns" => table(
                COLUMNS,
                tables.iter().flat_map(|t| column_rows(t)).collect(),
            ),
            "table_constraints" => table(
                TABLE_CONSTRAINTS,
                constraints()
                    .map(|c| {
                        let (kind, deferrable, deferred) = match &c.kind {
                            ConstraintKind::PrimaryKey => ("PRIMARY KEY", false, false),
                            ConstraintKind::Unique => ("UNIQUE", false, false),
                            ConstraintKind::ForeignKey(fk) => {
                                ("FOREIGN KEY", fk.deferrable, fk.deferred)
                            }
                            ConstraintKind::Check { .. } => ("CHECK", false, false),
                        };
                        let mut row = constraint_of(&c);
                        row.extend([
                            kind.into(),
                            yes_no(deferrable),
                            yes_no(deferred),
                            yes_no(true),
                        ]);
                        row
                    })
                    .collect(),
            ),
            "key_column_usage" => table(
                KEY_COLUMN_USAGE,
                constraints()
                    .flat_map(|c| {
                        c.columns
                            .iter()
                            .enumerate()
                            .map(|(n, column)| {
                                let mut row = constraint_of(&c);
                                let position = n as i32 + 1;
                                row.extend([
                                    column.clone().into(),
                                    position.into(),
                                    match &c.kind {
                                        ConstraintKind::ForeignKey(fk) => {
                                            unique_position(&tables, &fk.table, &fk.referenced[n])
                                        }
                                        _ => Cell::Null,
                                    },
                                ]);
                                row
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect(),
            ),
            "referential_constraints" => table(
                REFERENTIAL_CONSTRAINTS,
                constraints()
                    .filter_map(|c| {
                        let ConstraintKind::ForeignKey(fk) = &c.kind else {
                            return None;
                        };
                        Some(vec![
                            DATABASE.into(),
                            "public".into(),
                            c.name.clone().into(),
                            DATABASE.into(),
                            "public".into(),
                            primary_key_name(&fk.table).into(),
                            "NONE".into(),
                            fk.on_update.sql().into(),
                            fk.on_delete.sql().into(),
                        ])
                    })
                    .collect(),
            ),
            "views" => table(
                VIEWS,
                tables
                    .iter()
                    .filter_map(|t| Some((t, t.plain_view.as_ref()?)))
                    .map(|(t, view)| {
                        vec![
                            DATABASE.into(),
                            "public".into(),
                            t.name.clone().into(),
                            super::pg_catalog::view_definition(&view.query).into(),
                            "NONE".into(),
                            "NO".into(),
                            "NO".into(),
                        ]
                    })
                    .collect(),
            ),
            _ => return Ok(None),
        };
        provider.map(Some)
    }

    fn table_exist(&self, name: &str) -> bool {
        NAMES.contains(&name)
    }
}
