//! Property: after thousands of random writes (INSERT, UPDATE that moves rows
//! between index values, between keys and between groups, DELETE, upserts,
//! multi-row statements, transaction blocks that commit or roll back, and
//! writes to a joined table) to tables with a unique and a non-unique index
//! and materialized views of every maintained shape (a copy under another
//! key, an inner and a left key join, a grouped aggregate), each index and
//! view holds exactly what its tables' rows make it (`VERIFY INDEX` and
//! `VERIFY MATERIALIZED VIEW` return nothing), and every lookup through an
//! index returns the rows a whole-table scan finds.
//!
//! Statements come from a seeded generator (`INDEX_SEED`, default 1;
//! `INDEX_STATEMENTS`, default 2000); a failure prints the seed.

use crate::common;

use common::workload::{differences, statement, SCHEMA};
use common::TestServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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
async fn indexes_and_views_match_their_tables_after_random_writes() {
    let seed: u64 = common::env_number("INDEX_SEED", 1);
    let statements: u64 = common::env_number("INDEX_STATEMENTS", 2000);
    let mut rng = StdRng::seed_from_u64(seed);
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute(SCHEMA).await.unwrap();

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
                assert!(state == "23505", "seed {seed}: {sql}: {e:?}");
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

    let found = differences(&client).await;
    assert!(found.is_empty(), "seed {seed}: {found:?}");

    // Lookups through the indexes (values and ranges) find what
    // whole-table scans find.
    let lookups = (0..8).flat_map(|group| {
        [
            format!("SELECT part, id FROM items WHERE grp = {group}"),
            format!("SELECT part, id FROM items WHERE grp > {group}"),
            format!(
                "SELECT part, id FROM items WHERE grp BETWEEN {group} AND {}",
                group + 2
            ),
            // Through the intra-partition index.
            format!(
                "SELECT part, id FROM items WHERE part = {} AND grp = {group}",
                group % 4
            ),
            format!("SELECT part, id, code FROM items WHERE part IN (1, 2) AND grp > {group}"),
        ]
    });
    for sql in lookups {
        let plan = client.query(&format!("EXPLAIN {sql}"), &[]).await.unwrap();
        let plan: String = plan.iter().map(|r| r.get::<_, String>(1)).collect();
        assert!(plan.contains("access=index items_grp"), "{sql}: {plan}");
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
    println!("seed {seed}: {n} statements, {done} done, {refused} refused with 23505; indexes and views verify clean");
}

/// The check itself finds what is wrong: a view row that no base row makes,
/// and a base row whose view row is gone, written behind the gateway's back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_reports_every_difference() {
    use tablegate::model::{Entity, EntityKey, IfMatch, Value};
    use tablegate::store::{EntityWrite, WriteOp};

    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute(SCHEMA).await.unwrap();
    client
        .batch_execute(
            "INSERT INTO groups VALUES (1, 'one', true);
             INSERT INTO items VALUES (0, 1, 'a', 1), (0, 2, 'b', 1), (1, 1, NULL, 1)",
        )
        .await
        .unwrap();
    assert_eq!(differences(&client).await, Vec::<String>::new());
    drop(client);
    let dir = server.stop().await;
    {
        let store = tablegate::store::native::NativeStore::open(dir.path()).unwrap();
        // A group no row makes.
        let stray = Entity::new("0000000009", "")
            .with("n", Value::Int64(1))
            .with("_rows", Value::Int64(1));
        store
            .write("group_sizes", WriteOp::Insert(stray))
            .await
            .unwrap();
        // A joined row's view row taken away: the first row of the view.
        let first =
            tablegate::store::query_all(&store, "items_labeled", &tablegate::store::Query::table())
                .await
                .unwrap()
                .remove(0);
        store
            .write(
                "items_labeled",
                WriteOp::Delete {
                    key: EntityKey::new(first.key.partition_key, first.key.row_key),
                    if_match: IfMatch::Any,
                },
            )
            .await
            .unwrap();
    }
    let server = TestServer::start_in(dir).await;
    let client = server.client().await;
    let found = differences(&client).await;
    assert_eq!(
        found,
        vec![
            "VERIFY MATERIALIZED VIEW items_labeled: missing 0\t1\tone\ta".to_owned(),
            "VERIFY MATERIALIZED VIEW group_sizes: extra 9\t1\t\\N\t\\N\t\\N\t\\N\t\\N".to_owned(),
        ]
    );
}

/// An index built outside a transaction block is built a page at a time
/// while other sessions write the table: its progress shows in
/// `pg_stat_progress_create_index`, the writes go on meanwhile, and the
/// index verifies clean at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_build_while_writes_go_on() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE big (part int, id int, v int NOT NULL, PRIMARY KEY (part, id));
             INSERT INTO big SELECT x % 50, x, x % 997 FROM generate_series(1, 30000) AS t(x)",
        )
        .await
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));

    let writer = {
        let client = server.client().await;
        let done = done.clone();
        tokio::spawn(async move {
            let mut writes = 0;
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                n += 1;
                let sql = match n % 3 {
                    0 => format!(
                        "UPDATE big SET v = v + 1 WHERE part = {} AND id < {}",
                        n % 50,
                        n * 7 % 30000
                    ),
                    1 => format!(
                        "INSERT INTO big VALUES ({}, {}, {})",
                        n % 50,
                        100_000 + n,
                        n % 997
                    ),
                    _ => format!(
                        "DELETE FROM big WHERE part = {} AND id = {}",
                        n % 50,
                        n * 13 % 30000
                    ),
                };
                client.batch_execute(&sql).await.unwrap();
                writes += 1;
            }
            writes
        })
    };
    let watcher = {
        let client = server.client().await;
        let done = done.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                for row in client
                    .query(
                        "SELECT tuples_done, tuples_total FROM pg_stat_progress_create_index",
                        &[],
                    )
                    .await
                    .unwrap()
                {
                    seen.push((row.get::<_, i64>(0), row.get::<_, i64>(1)));
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            seen
        })
    };
    client
        .batch_execute("CREATE INDEX big_v ON big (v)")
        .await
        .unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let writes = writer.await.unwrap();
    let seen = watcher.await.unwrap();
    assert!(writes > 0, "no write went on during the build");
    assert!(
        seen.iter()
            .any(|&(done, total)| done > 0 && done < total && total >= 30000),
        "progress seen: {seen:?}"
    );
    let differences = client.query("VERIFY INDEX big_v", &[]).await.unwrap();
    assert!(differences.is_empty(), "{} differences", differences.len());
    let plan: String = client
        .query("EXPLAIN SELECT id FROM big WHERE v = 5", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(1))
        .collect();
    assert!(plan.contains("access=index big_v"), "{plan}");
    assert!(client
        .query("SELECT * FROM pg_stat_progress_create_index", &[])
        .await
        .unwrap()
        .is_empty());
    println!(
        "{writes} writes during the build; progress seen {} times",
        seen.len()
    );
}

/// A build a restart interrupts leaves no index: the index marked as being
/// built is dropped when the catalog opens, store table and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_build_leaves_no_index() {
    use std::sync::Arc;
    use tablegate::catalog::{Catalog, DefinitionChange, IndexDef};

    let (_dir, store) = common::temp_store();
    let store: Arc<dyn tablegate::store::TableStore> = Arc::new(store);
    {
        let server_store = store.clone();
        let engine = tablegate::sql::Engine::open(server_store).await.unwrap();
        let mut session = tablegate::sql::session::Session::new(engine.clone());
        for result in session
            .execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
            .await
        {
            result.unwrap();
        }
        // The state a crash leaves between the definition's commit and the
        // end of the build.
        let catalog = &engine.catalog;
        let before = catalog.table("t").unwrap();
        let mut after = (*before).clone();
        after.indexes.push(IndexDef {
            name: "t_v".into(),
            columns: vec!["v".into()],
            unique: false,
            intra_partition: false,
            building: true,
            stored_as: None,
            constraint: false,
        });
        let change = DefinitionChange {
            name: "t".into(),
            before: Some(before),
            after: Some(Arc::new(after)),
            recreated: false,
        };
        catalog.commit(vec![change], vec![], vec![]).await.unwrap();
        assert!(store
            .list_tables()
            .await
            .unwrap()
            .iter()
            .any(|t| t.ends_with(".index.t_v")));
    }
    let catalog = Catalog::open(store.clone()).await.unwrap();
    assert!(catalog.table("t").unwrap().indexes.is_empty());
    assert!(!store
        .list_tables()
        .await
        .unwrap()
        .iter()
        .any(|t| t.ends_with(".index.t_v")));
}

/// Each index verifies clean: its entries are what its table's rows make.
async fn verify_clean(client: &tokio_postgres::Client, indexes: &[&str]) {
    for index in indexes {
        let differences = client
            .query(&format!("VERIFY INDEX {index}"), &[])
            .await
            .unwrap();
        assert!(
            differences.is_empty(),
            "{index}: {} differences",
            differences.len()
        );
    }
}

/// A simple query's rows, their values on lines of their own.
async fn text(client: &tokio_postgres::Client, sql: &str) -> String {
    common::simple_rows(client, sql).await.concat().join("\n")
}

/// A renamed index keeps its entries (nothing is built again) and a new
/// index may take its old name: after writes under the new names and a
/// restart, both indexes hold exactly what their rows make them and
/// queries read them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renamed_indexes_and_columns_keep_their_entries() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE r (id int PRIMARY KEY, v int, w text);
             INSERT INTO r SELECT i, i % 7, 'w' || i FROM generate_series(1, 500) AS s(i);
             CREATE INDEX r_v ON r (v);
             ALTER INDEX r_v RENAME TO r_by_v;
             ALTER TABLE r RENAME COLUMN v TO weight;
             CREATE INDEX r_v ON r (w);
             UPDATE r SET weight = 9 WHERE id <= 10;
             DELETE FROM r WHERE id > 490;",
        )
        .await
        .unwrap();
    drop(client);
    let server = TestServer::start_in(server.stop().await).await;
    let client = server.client().await;
    verify_clean(&client, &["r_by_v", "r_v"]).await;
    let plan = text(&client, "EXPLAIN SELECT id FROM r WHERE weight = 9").await;
    assert!(plan.contains("access=index r_by_v"), "{plan}");
    assert_eq!(
        text(&client, "SELECT count(*) FROM r WHERE weight = 9").await,
        "10"
    );
    assert_eq!(
        text(&client, "SELECT id FROM r WHERE w = 'w42'").await,
        "42"
    );
}

/// A renamed table keeps its rows and its indexes under the new name,
/// after a restart too, and its old name is free for a new table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_table_keeps_its_rows_and_indexes() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE old_name (id int PRIMARY KEY, v int);
             INSERT INTO old_name SELECT i, i % 7 FROM generate_series(1, 300) AS s(i);
             CREATE INDEX old_name_v ON old_name (v);
             ALTER TABLE old_name RENAME TO new_name;",
        )
        .await
        .unwrap();
    // A name dropped and taken again in one transaction is refused for a
    // table with indexes: the new table comes in a transaction of its own.
    client
        .batch_execute(
            "CREATE TABLE old_name (id int PRIMARY KEY, v int);
             CREATE INDEX old_name_v2 ON old_name (v);
             INSERT INTO old_name VALUES (1, 5);
             UPDATE new_name SET v = 9 WHERE id <= 5;",
        )
        .await
        .unwrap();
    drop(client);
    let server = TestServer::start_in(server.stop().await).await;
    let client = server.client().await;
    verify_clean(&client, &["old_name_v", "old_name_v2"]).await;
    assert_eq!(
        text(&client, "SELECT count(*) FROM new_name WHERE v = 9").await,
        "5"
    );
    assert_eq!(
        text(&client, "SELECT count(*), sum(id) FROM new_name").await,
        "300\n45150"
    );
    assert_eq!(
        text(&client, "SELECT id FROM old_name WHERE v = 5").await,
        "1"
    );
}
