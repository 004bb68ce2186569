//! The SQL layer: DataFusion planning over the catalog's tables, key pushdown,
//! DDL, DML and transactions.
//!
//! Layer rule: `sql` depends on `catalog`, `store` and `model`; it knows
//! nothing of the wire protocol.

mod convert;
mod error;
mod provider;
mod pushdown;
mod scan;
mod types;

pub use error::{Result, SqlError};
pub use pushdown::{access_path, AccessPath};
