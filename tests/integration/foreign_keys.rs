//! Foreign keys hold on the paths rows are written by that the SQL files do
//! not take: a prepared INSERT with parameters, and COPY FROM STDIN (whose
//! rows may reference rows of the same COPY).

use crate::common;

use common::{count, TestServer};
use futures::SinkExt;
use tokio_postgres::error::SqlState;

async fn copy(
    client: &tokio_postgres::Client,
    sql: &str,
    data: String,
) -> Result<u64, tokio_postgres::Error> {
    let sink = client.copy_in(sql).await?;
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(data)).await?;
    sink.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_inserts_and_copies_keep_the_foreign_keys() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE customers (id bigint PRIMARY KEY, name text);
             CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL REFERENCES customers);
             CREATE TABLE staff (id int PRIMARY KEY, boss int REFERENCES staff);
             INSERT INTO customers SELECT i, 'c' || i FROM generate_series(1, 1000) i",
        )
        .await
        .unwrap();

    let insert = client
        .prepare("INSERT INTO orders VALUES ($1, $2)")
        .await
        .unwrap();
    client.execute(&insert, &[&1i32, &7i32]).await.unwrap();
    let error = client
        .execute(&insert, &[&2i32, &1001i32])
        .await
        .unwrap_err();
    let db = error.as_db_error().unwrap();
    assert_eq!(db.code(), &SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(
        db.detail(),
        Some("Key (customer)=(1001) is not present in table \"customers\".")
    );

    // A COPY whose rows all reference customers there are.
    let rows: String = (10..5010)
        .map(|i| format!("{i}\t{}\n", 1 + i % 1000))
        .collect();
    assert_eq!(
        copy(&client, "COPY orders FROM STDIN", rows).await.unwrap(),
        5000
    );
    assert_eq!(count(&client, "orders").await, 5001);

    // One row that references no customer fails the COPY, and leaves none
    // of its rows.
    let rows: String = (6000..6100)
        .map(|i| format!("{i}\t{}\n", if i == 6050 { 5000 } else { 1 }))
        .collect();
    let error = copy(&client, "COPY orders FROM STDIN", rows)
        .await
        .unwrap_err();
    let db = error.as_db_error().unwrap();
    assert_eq!(db.code(), &SqlState::FOREIGN_KEY_VIOLATION);
    assert_eq!(
        db.message(),
        "insert or update on table \"orders\" violates foreign key constraint \"orders_customer_fkey\""
    );
    assert_eq!(
        db.detail(),
        Some("Key (customer)=(5000) is not present in table \"customers\".")
    );
    assert_eq!(count(&client, "orders").await, 5001);

    // Of two keys not there, the one the earlier row names is reported,
    // whatever their order.
    let rows = "6200\t1\n6201\t3000\n6202\t2\n6203\t2500\n".to_owned();
    let error = copy(&client, "COPY orders FROM STDIN", rows)
        .await
        .unwrap_err();
    assert_eq!(
        error.as_db_error().unwrap().detail(),
        Some("Key (customer)=(3000) is not present in table \"customers\".")
    );

    // In a transaction block, the block's own writes count: a customer it
    // inserted is there, one it inserted and deleted is not.
    client
        .batch_execute(
            "BEGIN;
             INSERT INTO customers VALUES (2001, 'new'), (2002, 'gone');
             DELETE FROM customers WHERE id = 2002",
        )
        .await
        .unwrap();
    let rows = "7000\t2001\n7001\t5\n".to_owned();
    assert_eq!(
        copy(&client, "COPY orders FROM STDIN", rows).await.unwrap(),
        2
    );
    let error = copy(&client, "COPY orders FROM STDIN", "7002\t2002\n".to_owned())
        .await
        .unwrap_err();
    assert_eq!(
        error.as_db_error().unwrap().detail(),
        Some("Key (customer)=(2002) is not present in table \"customers\".")
    );
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(count(&client, "orders").await, 5001);

    // Rows of a table referencing itself may reference rows later in the
    // same COPY, not rows nowhere.
    let rows = "1\t2\n2\t\\N\n3\t1\n".to_owned();
    assert_eq!(
        copy(&client, "COPY staff FROM STDIN", rows).await.unwrap(),
        3
    );
    let error = copy(&client, "COPY staff FROM STDIN", "4\t9\n5\t4\n".to_owned())
        .await
        .unwrap_err();
    assert_eq!(
        error.as_db_error().unwrap().detail(),
        Some("Key (boss)=(9) is not present in table \"staff\".")
    );
    assert_eq!(count(&client, "staff").await, 3);

    // A referenced row that is deleted takes its rows' constraint with it:
    // NO ACTION refuses.
    let error = client
        .execute("DELETE FROM customers WHERE id = 7", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::FOREIGN_KEY_VIOLATION));
    assert_eq!(count(&client, "customers").await, 1000);
}
