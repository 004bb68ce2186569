//! Property: after thousands of random writes (INSERT, UPDATE that moves rows
//! between index values and between keys, DELETE, upserts, multi-row
//! statements, transaction blocks that commit or roll back) to a table with a
//! unique and a non-unique index, each index holds exactly what its table's
//! rows make it (`VERIFY INDEX` returns nothing), and every lookup through an
//! index returns the rows a whole-table scan finds.
//!
//! Statements come from a seeded generator (`INDEX_SEED`, default 1;
//! `INDEX_STATEMENTS`, default 2000); a failure prints the seed.

mod common;

use common::TestServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A value for the unique column: few, so that collisions are frequent.
fn code(rng: &mut StdRng) -> String {
    if rng.random_ratio(1, 8) {
        "NULL".into()
    } else {
        format!("'c{}#{}'", rng.random_range(0..40), rng.random_range(0..2))
    }
}

fn statement(rng: &mut StdRng) -> String {
    let part = rng.random_range(0..4);
    let id = rng.random_range(0..30);
    let group = rng.random_range(0..6);
    match rng.random_range(0..10) {
        0..=2 => format!(
            "INSERT INTO items VALUES ({part}, {id}, {}, {group})",
            code(rng)
        ),
        3 => format!(
            "INSERT INTO items VALUES ({part}, {id}, {}, {group}), ({part}, {}, {}, {group})",
            code(rng),
            id + 1,
            code(rng)
        ),
        4 => format!(
            "UPDATE items SET code = {} WHERE part = {part} AND id = {id}",
            code(rng)
        ),
        5 => format!("UPDATE items SET grp = grp + 1 WHERE grp = {group}"),
        6 => format!("UPDATE items SET id = id + 100 WHERE part = {part} AND id = {id}"),
        7 => format!("DELETE FROM items WHERE grp = {group} AND id < {id}"),
        8 => format!(
            "INSERT INTO items VALUES ({part}, {id}, {}, {group}) \
             ON CONFLICT (part, id) DO UPDATE SET code = excluded.code, grp = excluded.grp",
            code(rng)
        ),
        _ => format!("UPDATE items SET code = {} WHERE grp = {group}", code(rng)),
    }
}

async fn rows(client: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    let mut out: Vec<String> = client
        .query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| format!("{}/{}", r.get::<_, i32>(0), r.get::<_, i32>(1)))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_match_their_tables_after_random_writes() {
    let seed = env_number("INDEX_SEED", 1);
    let statements = env_number("INDEX_STATEMENTS", 2000);
    let mut rng = StdRng::seed_from_u64(seed);
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE items (part int, id int, code text, grp int, PRIMARY KEY (part, id));
             CREATE UNIQUE INDEX items_code ON items (code);
             CREATE INDEX items_grp ON items (grp)",
        )
        .await
        .unwrap();

    let (mut done, mut refused) = (0, 0);
    let mut n = 0;
    while n < statements {
        // Now and then a block of a few statements, committed or rolled back.
        let block = rng.random_ratio(1, 10);
        let sql = if block {
            let body: Vec<String> = (0..rng.random_range(2..5))
                .map(|_| statement(&mut rng))
                .collect();
            let end = if rng.random_ratio(1, 3) {
                "ROLLBACK"
            } else {
                "COMMIT"
            };
            n += body.len() as u64;
            format!("BEGIN; {}; {end}", body.join("; "))
        } else {
            n += 1;
            statement(&mut rng)
        };
        match client.batch_execute(&sql).await {
            Ok(()) => done += 1,
            Err(e) => {
                let state = e.code().map(|c| c.code().to_owned()).unwrap_or_default();
                // Unique violations and conflicts are expected; anything else is not.
                assert!(state == "23505", "seed {seed}: {sql}: {e}");
                refused += 1;
                if block {
                    client.batch_execute("ROLLBACK").await.unwrap();
                }
            }
        }
    }
    assert!(
        done > 0 && refused > 0,
        "seed {seed}: {done} done, {refused} refused"
    );

    for index in ["items_code", "items_grp"] {
        let differences = client
            .query(&format!("VERIFY INDEX {index}"), &[])
            .await
            .unwrap();
        let shown: Vec<String> = differences
            .iter()
            .map(|r| format!("{} {}", r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect();
        assert!(shown.is_empty(), "seed {seed}: {index}: {shown:?}");
    }

    // Lookups through the indexes find what whole-table scans find.
    for group in 0..8 {
        let sql = format!("SELECT part, id FROM items WHERE grp = {group}");
        let plan = client.query(&format!("EXPLAIN {sql}"), &[]).await.unwrap();
        let plan: String = plan.iter().map(|r| r.get::<_, String>(1)).collect();
        assert!(plan.contains("access=index items_grp"), "{plan}");
        let through_index = rows(&client, &sql).await;
        client
            .batch_execute("SET tablegate.pushdown = off")
            .await
            .unwrap();
        let scanned = rows(&client, &sql).await;
        client
            .batch_execute("SET tablegate.pushdown = on")
            .await
            .unwrap();
        assert_eq!(through_index, scanned, "seed {seed}: {sql}");
    }
    let sql = "SELECT part, id FROM items WHERE code IN ('c1#0', 'c2#1', 'c3#0', 'c7#1')";
    let through_index = rows(&client, sql).await;
    client
        .batch_execute("SET tablegate.pushdown = off")
        .await
        .unwrap();
    assert_eq!(
        through_index,
        rows(&client, sql).await,
        "seed {seed}: {sql}"
    );
    println!("seed {seed}: {n} statements, {done} done, {refused} refused with 23505; indexes verify clean");
}
