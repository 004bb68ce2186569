//! Temporary tables: a session's own until it ends, then dropped; left
//! over from a process that stopped without dropping them, dropped when
//! the engine opens.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use tablegate::sql::{Engine, Session};

async fn temporary_tables(client: &tokio_postgres::Client) -> Vec<String> {
    common::first_column(
        client,
        "SELECT relname FROM pg_class WHERE relpersistence = 't' ORDER BY relname",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_table_goes_with_its_session() {
    let server = TestServer::start().await;
    let owner = server.client().await;
    owner
        .batch_execute(
            "CREATE TEMP TABLE staging (id int PRIMARY KEY, v text); \
             INSERT INTO staging VALUES (1, 'a'), (2, 'b'); \
             CREATE TEMPORARY TABLE picked AS SELECT id FROM staging WHERE id > 1; \
             CREATE TABLE kept (id int PRIMARY KEY)",
        )
        .await
        .unwrap();
    let count: i64 = owner
        .query_one("SELECT count(*) FROM staging", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 2);
    assert_eq!(temporary_tables(&owner).await, ["picked", "staging"]);
    let refused = owner
        .batch_execute("CREATE TEMP TABLE t (k int) ON COMMIT DROP")
        .await
        .unwrap_err();
    assert_eq!(refused.code().map(|c| c.code()), Some("0A000"));

    // DISCARD TEMP drops them at once.
    owner.batch_execute("DISCARD TEMP").await.unwrap();
    assert!(temporary_tables(&owner).await.is_empty());

    // Made again, they go when the session ends; the other table stays.
    owner
        .batch_execute("CREATE TEMP TABLE staging (id int PRIMARY KEY)")
        .await
        .unwrap();
    drop(owner);
    let other = server.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !temporary_tables(&other).await.is_empty() {
        assert!(Instant::now() < deadline, "the temporary table stayed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kept: i64 = other
        .query_one("SELECT count(*) FROM pg_class WHERE relname = 'kept'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);
    // Its name is free again.
    other
        .batch_execute("CREATE TEMP TABLE staging (id int PRIMARY KEY)")
        .await
        .unwrap();
}

/// A temporary view, and a view of a temporary table (temporary too, as
/// in PostgreSQL), go with their session; a view of other tables stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_views_go_with_their_session() {
    let server = TestServer::start().await;
    let owner = server.client().await;
    owner
        .batch_execute(
            "CREATE TABLE kept (id int PRIMARY KEY); \
             CREATE TEMP TABLE staging (id int PRIMARY KEY); \
             CREATE TEMP VIEW one AS SELECT 1 AS n; \
             CREATE VIEW staged AS SELECT id FROM staging; \
             CREATE VIEW stays AS SELECT id FROM kept",
        )
        .await
        .unwrap();
    assert_eq!(temporary_tables(&owner).await, ["one", "staged", "staging"]);
    drop(owner);
    let other = server.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !temporary_tables(&other).await.is_empty() {
        assert!(Instant::now() < deadline, "a temporary view stayed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let views: Vec<String> = common::first_column(
        &other,
        "SELECT table_name FROM information_schema.views ORDER BY 1",
    )
    .await;
    assert_eq!(views, ["stays"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_tables_left_over_are_dropped_at_open() {
    let (_dir, store) = common::temp_store();
    let store = Arc::new(store);
    let engine = Engine::open(store.clone()).await.unwrap();
    let mut session = Session::new(engine);
    for sql in [
        "CREATE TEMP TABLE leftover (id int PRIMARY KEY)",
        "CREATE TABLE kept (id int PRIMARY KEY)",
    ] {
        for result in session.execute(sql).await {
            result.unwrap();
        }
    }
    // A session of a process that stopped: it never drops its tables.
    std::mem::forget(session);
    let reopened = Engine::open(store).await.unwrap();
    assert!(reopened.catalog.get("leftover").is_none());
    assert!(reopened.catalog.get("kept").is_some());
}
