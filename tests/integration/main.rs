//! The integration tests, one module a scenario, built as one test binary:
//! the engine is linked once instead of once a file. `cargo test --test
//! integration NAME` runs the tests whose path contains NAME (a module name
//! such as `hostile_wire` runs that module).

#[path = "../common/mod.rs"]
mod common;

mod access_control;
mod authentication;
mod azure_crash;
mod azure_sql;
mod azure_store;
mod batch_atomicity;
mod bulk_load;
mod check_constraints;
mod column_copies;
mod concurrent_updates;
mod derived_crash;
mod derived_maintenance;
mod diagnostics;
mod direct_inserts;
mod entity_operations;
mod enums;
mod etag_races;
mod foreign_keys;
mod hostile_sql;
mod hostile_wire;
mod key_lookup_join;
mod limits;
mod parallel_scans;
mod partition_delete;
mod point_queries;
mod psql_client;
mod pushdown_equivalence;
mod range_queries;
mod resource_limits;
mod temporary_tables;
mod unix_socket;
mod wire_protocol;
