//! Diagnostics: the seeds' design advice, checked against live tables.
//!
//! - [`traffic`]: reads and writes per partition, and the shape of each
//!   table's recent writes (hot partition, append-only, prepend-only);
//! - [`queries`]: the recent-queries log, with each scan's access path,
//!   entities read and rows returned (query density);
//! - [`monitor`]: what every session shares, and the warnings statements
//!   earn, sent as NOTICE messages and written to the log;
//! - [`schema`]: the `tablegate` schema that shows all of it to SQL;
//! - [`advise`]: `TABLEGATE ADVISE table`, concrete changes drawn from the
//!   key distribution and the query log.

pub mod advise;
pub mod monitor;
pub mod queries;
pub mod schema;
pub mod traffic;

pub use monitor::{Monitor, Watched};
pub(super) use schema::relations;
pub use schema::{DiagnosticsSchema, SCHEMA};
