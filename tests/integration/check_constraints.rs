//! CHECK constraints hold on every path a row is written by: a prepared
//! INSERT (whose rows are built without planning a query), UPDATE,
//! INSERT ... ON CONFLICT DO UPDATE, and COPY FROM STDIN.

use crate::common;

use common::TestServer;
use futures::SinkExt;
use tokio_postgres::error::SqlState;

async fn count(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM items", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_keeps_the_check_constraints() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE items (id int PRIMARY KEY, qty int CHECK (qty >= 0), \
             lo int, hi int, CONSTRAINT ordered CHECK (lo < hi))",
        )
        .await
        .unwrap();

    // A prepared INSERT with parameters; NULL passes a CHECK.
    let insert = client
        .prepare("INSERT INTO items VALUES ($1, $2, $3, $4)")
        .await
        .unwrap();
    client
        .execute(&insert, &[&1i32, &5i32, &1i32, &2i32])
        .await
        .unwrap();
    client
        .execute(&insert, &[&2i32, &None::<i32>, &None::<i32>, &3i32])
        .await
        .unwrap();
    let error = client
        .execute(&insert, &[&3i32, &-1i32, &1i32, &2i32])
        .await
        .unwrap_err();
    let db = error.as_db_error().unwrap();
    assert_eq!(db.code(), &SqlState::CHECK_VIOLATION);
    assert_eq!(
        db.message(),
        "new row for relation \"items\" violates check constraint \"items_qty_check\""
    );
    assert_eq!(db.detail(), Some("Failing row contains (3, -1, 1, 2)."));
    assert_eq!(count(&client).await, 2);

    // UPDATE, and an upsert's update.
    let error = client
        .execute("UPDATE items SET hi = 0 WHERE id = 1", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::CHECK_VIOLATION));
    let error = client
        .execute(
            "INSERT INTO items VALUES (1, 1, 1, 2) ON CONFLICT (id) DO UPDATE SET qty = -3",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::CHECK_VIOLATION));
    let qty: i32 = client
        .query_one("SELECT qty FROM items WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(qty, 5);

    // COPY: a row that fails leaves none of the COPY's rows.
    let sink = client.copy_in("COPY items FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"10\t1\t1\t2\n11\t1\t5\t4\n"))
        .await
        .unwrap();
    let error = sink.finish().await.unwrap_err();
    let db = error.as_db_error().unwrap();
    assert_eq!(db.code(), &SqlState::CHECK_VIOLATION);
    assert_eq!(
        db.message(),
        "new row for relation \"items\" violates check constraint \"ordered\""
    );
    assert_eq!(count(&client).await, 2);

    // Dropped, the constraint no longer holds.
    client
        .batch_execute("ALTER TABLE items DROP CONSTRAINT ordered")
        .await
        .unwrap();
    client
        .execute(&insert, &[&4i32, &1i32, &5i32, &4i32])
        .await
        .unwrap();
    assert_eq!(count(&client).await, 3);
}
