//! Crash consistency over the Azure backend: `tablegate serve --backend
//! azure` runs statements whose writes span partitions and tables (so they
//! go through the outbox: rows over several partitions, their index
//! entries and view rows) and is killed with SIGKILL at a random moment,
//! then started again over the same Azurite account. After each restart
//! the outbox records the killed gateway left are finished, and then:
//! - the index and the view verify clean against the table;
//! - every statement a client saw acknowledged is there;
//! - every statement found is there whole (each row carries its
//!   statement's size), acknowledged or not.
//!
//! Rounds: `AZURE_CRASH_ROUNDS` (default 6).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::azurite::{Azurite, Gateway};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A gateway that counts the outbox records it finishes (from its log).
fn start(azurite: &Azurite, finished: Arc<AtomicUsize>) -> Gateway {
    azurite.start_gateway(move |line| {
        if line.contains("finished outbox record") {
            finished.fetch_add(1, Ordering::SeqCst);
        }
    })
}

/// Statement `id`: `size` rows over as many partitions, in 3 groups of
/// the view; each row carries the statement's size.
fn insert(id: i32, size: i32) -> String {
    let rows: Vec<String> = (0..size)
        .map(|i| format!("({}, {id}, {size}, {})", id * 1000 + i, i % 3))
        .collect();
    format!("INSERT INTO items VALUES {}", rows.join(", "))
}

/// Statements found, with the number of their rows, and what each says
/// its size is.
async fn statements(client: &tokio_postgres::Client) -> Vec<(i32, i64, i32)> {
    client
        .query(
            "SELECT stmt, count(*), min(size) FROM items GROUP BY stmt ORDER BY stmt",
            &[],
        )
        .await
        .expect("read items")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

async fn verified(client: &tokio_postgres::Client) -> bool {
    for check in [
        "VERIFY INDEX items_size",
        "VERIFY MATERIALIZED VIEW by_group",
    ] {
        match client.simple_query(check).await {
            Ok(messages) => {
                if messages
                    .iter()
                    .any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_)))
                {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_gateways_leave_whole_statements_and_clean_indexes() {
    let rounds: usize = common::env_number("AZURE_CRASH_ROUNDS", 6);
    let mut rng = StdRng::seed_from_u64(common::env_number("AZURE_CRASH_SEED", 5));
    let azurite = Azurite::start();
    let finished = Arc::new(AtomicUsize::new(0));
    let mut gateway = start(&azurite, finished.clone());
    common::connect(gateway.port)
        .await
        .batch_execute(
            "CREATE TABLE items (k int PRIMARY KEY, stmt int NOT NULL, size int NOT NULL, grp int NOT NULL);
             CREATE INDEX items_size ON items (size);
             CREATE MATERIALIZED VIEW by_group AS
               SELECT grp, count(*) AS n, sum(size) AS total FROM items GROUP BY grp",
        )
        .await
        .unwrap();

    let mut next_id = 1;
    let mut acknowledged = Vec::new();
    for round in 0..rounds {
        let client = common::connect(gateway.port).await;
        let kill_after = Duration::from_millis(rng.random_range(300..1500));
        let started = Instant::now();
        // Writes until the gateway dies under them.
        loop {
            let (id, size) = (next_id, rng.random_range(2..120));
            next_id += 1;
            let statement = insert(id, size);
            let write = client.batch_execute(&statement);
            let outcome = if started.elapsed() >= kill_after {
                // Kill while this statement is on its way.
                let killer = async {
                    tokio::time::sleep(Duration::from_millis(rng.random_range(0..150))).await;
                    let _ = gateway.child.kill();
                };
                let (outcome, ()) = tokio::join!(write, killer);
                if outcome.is_ok() {
                    acknowledged.push(id);
                }
                break;
            } else {
                write.await
            };
            match outcome {
                Ok(()) => acknowledged.push(id),
                Err(e) => panic!("round {round}: {e:?}"),
            }
        }

        // A new gateway finishes what the killed one left.
        gateway = start(&azurite, finished.clone());
        let client = common::connect(gateway.port).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let found = statements(&client).await;
            let whole = found.iter().all(|&(_, rows, size)| rows == i64::from(size));
            if whole && verified(&client).await {
                let ids: std::collections::HashSet<i32> = found.iter().map(|f| f.0).collect();
                for id in &acknowledged {
                    assert!(ids.contains(id), "acknowledged statement {id} is missing");
                }
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: not whole or not verified after 60 s: {found:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    drop(gateway);
    eprintln!(
        "{rounds} kills: {} statements acknowledged, all there whole; \
         {} outbox records finished by the next gateway",
        acknowledged.len(),
        finished.load(Ordering::SeqCst)
    );
}
