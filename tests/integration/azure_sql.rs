//! SQL over the Azure backend (Azurite): statements over several
//! partitions through the outbox, indexes, the transaction block rule, two
//! gateway processes over one account, and a table other clients made.

use crate::common;

use common::azurite::Azurite;
use common::{simple_rows, TestServer};
use tokio_postgres::error::SqlState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_indexes_and_blocks() {
    let azurite = Azurite::start();
    let server = TestServer::start_azure(&azurite).await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE t (k int PRIMARY KEY, v text);
             INSERT INTO t SELECT x, 'v' || x FROM generate_series(1, 300) AS s(x);
             UPDATE t SET v = v || '!' WHERE k % 2 = 0;
             DELETE FROM t WHERE k > 250",
        )
        .await
        .unwrap();
    assert_eq!(
        simple_rows(&client, "SELECT count(*), min(v), max(k) FROM t").await,
        [["250", "v1", "250"]]
    );
    assert_eq!(
        simple_rows(&client, "SELECT v FROM t WHERE k = 42").await,
        [["v42!"]]
    );

    // A duplicate key fails the whole statement.
    let error = client
        .batch_execute("INSERT INTO t VALUES (1000, 'new'), (7, 'dup')")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION), "{error:?}");
    assert_eq!(
        simple_rows(&client, "SELECT count(*) FROM t").await,
        [["250"]]
    );
    assert_eq!(
        simple_rows(&client, "SELECT v FROM t WHERE k = 7").await,
        [["v7"]]
    );

    // An index, kept by later writes and used by lookups.
    client
        .batch_execute(
            "CREATE INDEX t_v ON t (v);
             INSERT INTO t VALUES (500, 'five hundred');
             UPDATE t SET v = 'changed' WHERE k = 3",
        )
        .await
        .unwrap();
    assert_eq!(
        simple_rows(&client, "SELECT k FROM t WHERE v = 'five hundred'").await,
        [["500"]]
    );
    assert_eq!(
        simple_rows(&client, "SELECT k FROM t WHERE v = 'v3'")
            .await
            .len(),
        0
    );
    assert!(simple_rows(&client, "VERIFY INDEX t_v").await.is_empty());
    // Nothing waits in the outbox once the statements are acknowledged.
    assert_eq!(
        simple_rows(&client, "SELECT lag_seconds FROM tablegate.indexes").await,
        [["0"]]
    );

    // A block may write one partition of a table without derived rows.
    client
        .batch_execute(
            "CREATE TABLE events (tenant text, id int, body text, PRIMARY KEY (tenant, id));
             BEGIN;
             INSERT INTO events VALUES ('acme', 1, 'a'), ('acme', 2, 'b');
             UPDATE events SET body = 'B' WHERE tenant = 'acme' AND id = 2;
             COMMIT",
        )
        .await
        .unwrap();
    assert_eq!(
        simple_rows(&client, "SELECT body FROM events ORDER BY id").await,
        [["a"], ["B"]]
    );
    // More than that is refused with a clear error, and nothing is written.
    client.batch_execute("BEGIN").await.unwrap();
    let error = client
        .batch_execute("INSERT INTO events VALUES ('acme', 3, 'c'), ('zeta', 1, 'z')")
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(&SqlState::FEATURE_NOT_SUPPORTED),
        "{error:?}"
    );
    assert!(error
        .as_db_error()
        .unwrap()
        .message()
        .contains("outside BEGIN ... COMMIT"));
    client.batch_execute("ROLLBACK").await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    let error = client
        .batch_execute("INSERT INTO t VALUES (600, 'indexed')")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::FEATURE_NOT_SUPPORTED));
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        simple_rows(&client, "SELECT count(*) FROM events").await,
        [["2"]]
    );
    assert_eq!(
        simple_rows(&client, "SELECT count(*) FROM t WHERE k = 600").await,
        [["0"]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateway_processes_over_one_account() {
    let azurite = Azurite::start();
    let first = azurite.start_gateway(|_| {});
    let second = azurite.start_gateway(|_| {});
    let a = common::connect(first.port).await;
    let b = common::connect(second.port).await;

    a.batch_execute(
        "CREATE TABLE counters (name text PRIMARY KEY, n int);
         INSERT INTO counters VALUES ('hits', 0)",
    )
    .await
    .unwrap();
    // Made through one gateway, seen and written through the other.
    assert_eq!(simple_rows(&b, "SELECT n FROM counters").await, [["0"]]);
    b.batch_execute("INSERT INTO counters VALUES ('misses', 0)")
        .await
        .unwrap();
    assert_eq!(
        simple_rows(&a, "SELECT count(*) FROM counters").await,
        [["2"]]
    );

    // Racing increments through both: each lands, or fails with 40001.
    let run = |client: tokio_postgres::Client| async move {
        let mut done = 0;
        for _ in 0..20 {
            match client
                .execute("UPDATE counters SET n = n + 1 WHERE name = 'hits'", &[])
                .await
            {
                Ok(1) => done += 1,
                Ok(n) => panic!("updated {n} rows"),
                Err(e) => assert_eq!(
                    e.code(),
                    Some(&SqlState::T_R_SERIALIZATION_FAILURE),
                    "{e:?}"
                ),
            }
        }
        done
    };
    let (x, y) = tokio::join!(
        run(common::connect(first.port).await),
        run(common::connect(second.port).await)
    );
    assert_eq!(
        simple_rows(&a, "SELECT n FROM counters WHERE name = 'hits'").await,
        [[(x + y).to_string()]]
    );
    eprintln!("{x} + {y} increments through two gateways");
}

/// A table another Azure client made and filled is declared under its own
/// name and queried; the properties no column names are in "Properties".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_other_clients_wrote_is_declared_and_read() {
    use tablegate::model::{Entity, EntityKey, Value};
    use tablegate::store::azure::AzureStore;
    use tablegate::store::{EntityRead, EntityWrite, TableAdmin, WriteOp};

    let azurite = Azurite::start();
    let other_client = AzureStore::connect(&azurite.connection_string()).unwrap();
    other_client.create_table("Customers").await.unwrap();
    for entity in [
        Entity::new("west", "001")
            .with("Name", Value::String("Ann".into()))
            .with("Age", Value::Int32(30))
            .with("Tier", Value::String("gold".into())),
        Entity::new("east", "002")
            .with("Name", Value::String("Bob".into()))
            .with("Score", Value::Double(1.5)),
    ] {
        other_client
            .write("Customers", WriteOp::Insert(entity))
            .await
            .unwrap();
    }

    let server = TestServer::start_azure(&azurite).await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE \"Customers\" (\"PartitionKey\" text, \"RowKey\" text, \"Name\" text, \
             \"Age\" int, \"Properties\" json)",
        )
        .await
        .unwrap();
    assert_eq!(
        simple_rows(
            &client,
            "SELECT \"RowKey\", \"Name\", \"Age\", \"Properties\" FROM \"Customers\" ORDER BY \"RowKey\""
        )
        .await,
        [
            ["001", "Ann", "30", "{\"Tier\":\"gold\"}"],
            ["002", "Bob", "NULL", "{\"Score\":1.5}"]
        ]
    );
    // Point reads on the declared keys, and writes the other client sees.
    assert_eq!(
        simple_rows(
            &client,
            "SELECT \"Name\" FROM \"Customers\" WHERE \"PartitionKey\" = 'east' AND \"RowKey\" = '002'"
        )
        .await,
        [["Bob"]]
    );
    client
        .batch_execute(
            "INSERT INTO \"Customers\" (\"PartitionKey\", \"RowKey\", \"Name\", \"Age\") \
             VALUES ('west', '003', 'Cy', 41)",
        )
        .await
        .unwrap();
    let seen = other_client
        .get("Customers", &EntityKey::new("west", "003"), None)
        .await
        .unwrap()
        .expect("written through SQL");
    assert_eq!(seen.properties["Age"], Value::Int32(41));
    // "Properties" is read-only.
    let error = client
        .batch_execute(
            "INSERT INTO \"Customers\" (\"PartitionKey\", \"RowKey\", \"Properties\") \
             VALUES ('x', 'y', '{}')",
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::GENERATED_ALWAYS), "{error:?}");
    // A name that differs only in case would be the same service table.
    let error = client
        .batch_execute("CREATE TABLE customers (id int PRIMARY KEY)")
        .await
        .unwrap_err();
    let message = error
        .as_db_error()
        .map(|e| e.message().to_owned())
        .unwrap_or_default();
    assert!(message.contains("without case"), "{message}");
}
