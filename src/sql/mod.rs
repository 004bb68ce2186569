//! The SQL layer: DataFusion planning over the catalog's tables, key pushdown,
//! DDL, DML and transactions.
//!
//! - [`session`]: a connection's context; routes each statement.
//! - `provider` / `scan`: the tables DataFusion reads, and the scan plan that
//!   turns filters into store calls ([`pushdown`] decides which).
//! - `ddl` / `dml`: statements tablegate runs itself.
//! - `txn`: changes conditional on what was read; transaction blocks.
//! - `convert` / `types`: entities and rows to and from Arrow.
//! - `names`: PostgreSQL's names for unnamed result columns.
//! - `pg_catalog` / `information_schema` / `functions` / `settings` / `rewrite`: what PostgreSQL
//!   clients ask before their own queries: system catalogs, session and
//!   catalog functions, run-time parameters, PostgreSQL-only spellings.
//!
//! Layer rule: `sql` depends on `catalog`, `store` and `model`; it knows
//! nothing of the wire protocol.

mod access;
mod arithmetic;
pub mod arrays;
mod casts;
mod checks;
mod columnar;
mod convert;
pub mod copy;
mod correlated;
mod cursor;
mod date_fields;
pub mod datetime_input;
mod ddl;
pub mod decimals;
mod diagnostics;
mod dml;
mod enums;
mod error;
mod fastpath;
pub mod floats;
mod foreign_keys;
mod functions;
mod information_schema;
mod json;
mod matview;
mod names;
mod ordered_sets;
mod parameters;
mod pg_catalog;
mod plan_nodes;
mod precision;
mod provider;
pub mod pushdown;
mod records;
mod recordsets;
mod rename;
mod result_limits;
mod retype;
mod rewrite;
mod scan;
pub mod session;
mod set_comparisons;
mod settings;
mod sizes;
mod sums;
mod templates;
pub mod time_zone;
mod txn;
pub mod types;
mod views;
mod wall_times;
mod writing_ctes;

pub use convert::{rescale, RowSink};
pub use error::{Result, SqlError};
pub use fastpath::StoredRows;
pub use pushdown::{access_path, AccessPath};
pub use session::{Engine, Output, Prepared, Session, DEFAULT_QUERY_MEMORY};
pub use settings::{Settings, REPORTED};
