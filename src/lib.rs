//! tablegate: a PostgreSQL-wire SQL gateway over partitioned entity tables in
//! the Azure Table Storage model.
//!
//! # Architecture
//!
//! Layers, each depending only on the ones below it:
//!
//! ```text
//! pg        wire protocol: sessions, COPY, parameters, result encoding, SQLSTATEs
//!   |
//! sql       DataFusion sessions; table provider and scan; pushdown; DDL, DML,
//!   |       COPY, transactions; the point-query fast path
//! catalog   table definitions (SQL columns <-> entity properties, key columns
//!   |       <-> PartitionKey/RowKey), persisted in a system table of the store
//! store     the TableStore traits and their backends (native: embedded, default)
//!   |
//! model     Entity, Value, keys and their order-preserving encodings, limits
//! ```
//!
//! # Layout
//!
//! - [`model`]: the data model every layer agrees on, and its byte encodings
//!   ([`model::codec`]).
//! - [`store`]: the operations of the model as capability traits
//!   ([`store::EntityRead`], [`store::EntityWrite`], ...), paged queries with
//!   continuation tokens, and the native backend ([`store::native`]).
//! - [`catalog`]: [`catalog::TableDef`] and the [`catalog::Catalog`] that keeps them.
//! - [`sql`]: [`sql::Session`] runs statements; [`sql::pushdown`] decides how
//!   each scan reads the store.
//! - [`pg`]: [`pg::Server`] serves sessions over the PostgreSQL protocol.
//!
//! # Invariants
//!
//! - Byte order of encoded entity keys is the order of `(PartitionKey, RowKey)`,
//!   and the text of key columns sorts like their SQL values, so a range on
//!   key columns is a range of keys.
//! - A write is acknowledged only once it survives a process kill; a batch is
//!   visible whole or not at all, before and after a crash.
//! - Every entity write gets a new version; writes are conditional on the
//!   version read, so of concurrent writers of one row exactly one wins and
//!   no update is lost.
//! - A transaction's definition changes (CREATE, ALTER, DROP TABLE) and row
//!   changes commit in one atomic write; outside a block every DDL statement
//!   is such a transaction of its own.
//! - A scan applies every filter it is given; the access path only narrows
//!   what it reads; the pieces of a parallel scan together read its range.
//! - Bad input yields an error that names the limit, key or table involved;
//!   nothing input can reach panics.

pub mod catalog;
pub mod model;
pub mod pg;
pub mod sql;
pub mod store;

/// How long a thread of this process has run, for tests of threads that
/// must sleep.
#[cfg(test)]
pub(crate) fn thread_run_time(tid: libc::pid_t) -> std::time::Duration {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    std::time::Duration::from_nanos(stat.split_whitespace().next().unwrap().parse().unwrap())
}
