//! Many connections doing read-modify-write on the same rows: every
//! successful commit counts, and a conflict comes back as SQLSTATE 40001,
//! never as a lost update.

use crate::common;

use common::TestServer;
use tokio_postgres::error::SqlState;

const CONNECTIONS: usize = 8;

async fn value(client: &tokio_postgres::Client, k: i32) -> i32 {
    client
        .query_one("SELECT n FROM counters WHERE k = $1", &[&k])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn increments_in_place_all_count() {
    let server = TestServer::start().await;
    let setup = server.client().await;
    setup
        .batch_execute(
            "CREATE TABLE counters (k int PRIMARY KEY, n int NOT NULL);
             INSERT INTO counters VALUES (1, 0)",
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let client = server.client().await;
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            for _ in 0..25 {
                // A statement outside a block is re-run on a fresh snapshot
                // when it loses a race, as PostgreSQL re-checks the row.
                let updated = client
                    .execute("UPDATE counters SET n = n + 1 WHERE k = 1", &[])
                    .await
                    .expect("an increment in place succeeds");
                assert_eq!(updated, 1);
                done += 1;
            }
            done
        }));
    }
    let mut done = 0;
    for t in tasks {
        done += t.await.unwrap();
    }
    assert_eq!(done, CONNECTIONS * 25);
    assert_eq!(value(&setup, 1).await, done as i32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_then_write_transactions_conflict_with_40001() {
    let server = TestServer::start().await;
    let setup = server.client().await;
    setup
        .batch_execute(
            "CREATE TABLE counters (k int PRIMARY KEY, n int NOT NULL);
             INSERT INTO counters VALUES (1, 0), (2, 0)",
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let mut client = server.client().await;
        tasks.push(tokio::spawn(async move {
            let (mut committed, mut conflicts) = (0, 0);
            for i in 0..20 {
                // Read the value, then write what was read plus one, in
                // one block: a block that read a value another committed
                // over must not commit.
                let txn = client.transaction().await.unwrap();
                let result = async {
                    let n: i32 = txn
                        .query_one("SELECT n FROM counters WHERE k = 1", &[])
                        .await?
                        .get(0);
                    txn.execute("UPDATE counters SET n = $1 WHERE k = 1", &[&(n + 1)])
                        .await?;
                    // A second row in the same block: both change or neither.
                    txn.execute("UPDATE counters SET n = n + 1 WHERE k = 2", &[])
                        .await?;
                    if (c + i) % 7 == 0 {
                        tokio::task::yield_now().await;
                    }
                    txn.commit().await
                }
                .await;
                match result {
                    Ok(()) => committed += 1,
                    Err(e) => {
                        assert_eq!(
                            e.code(),
                            Some(&SqlState::T_R_SERIALIZATION_FAILURE),
                            "{e:?}"
                        );
                        conflicts += 1;
                    }
                }
            }
            (committed, conflicts)
        }));
    }
    let (mut committed, mut conflicts) = (0, 0);
    for t in tasks {
        let (c, f) = t.await.unwrap();
        committed += c;
        conflicts += f;
    }
    assert_eq!(committed + conflicts, CONNECTIONS * 20);
    assert!(committed > 0);
    assert_eq!(
        value(&setup, 1).await,
        committed as i32,
        "{conflicts} conflicts"
    );
    assert_eq!(value(&setup, 2).await, committed as i32);
    eprintln!("{committed} committed, {conflicts} conflicts (40001)");
}
