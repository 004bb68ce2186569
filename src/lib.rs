//! tablegate: a PostgreSQL-wire SQL gateway over partitioned entity tables in
//! the Azure Table Storage model.
//!
//! # Architecture
//!
//! Layers, each depending only on the ones below it:
//!
//! ```text
//! store     the TableStore traits and their backends (native: embedded, default)
//!   |
//! model     Entity, Value, keys and their order-preserving encodings, limits
//! ```
//!
//! The SQL gateway (catalog, sql, pg) is built on top of these.
//!
//! # Layout
//!
//! - [`model`]: the data model every layer agrees on, and its byte encodings
//!   ([`model::codec`]).
//! - [`store`]: the operations of the model as capability traits
//!   ([`store::EntityRead`], [`store::EntityWrite`], ...), paged queries with
//!   continuation tokens, and the native backend ([`store::native`]).
//!
//! # Invariants
//!
//! - Byte order of encoded entity keys is the order of `(PartitionKey, RowKey)`.
//! - A write is acknowledged only once it survives a process kill; a batch is
//!   visible whole or not at all, before and after a crash.
//! - Every entity write gets a new version; conditional writes compare it, so
//!   of concurrent conditional writers on one entity exactly one wins.
//! - Bad input yields an error that names the limit, key or table involved;
//!   nothing input can reach panics.

pub mod catalog;
pub mod model;
pub mod pg;
pub mod sql;
pub mod store;
