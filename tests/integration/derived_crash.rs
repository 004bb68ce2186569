//! Crash consistency of the whole server: `tablegate serve` runs a mixed
//! workload from three connections (the random statements of
//! `common::workload` over tables with indexes and views, multi-row
//! transaction blocks, and COPY) and is killed with SIGKILL at a random
//! moment, then restarted over the same data dir. After every restart:
//! - each index and view verifies clean against its tables (the base write
//!   and its derived writes commit in one atomic write);
//! - every block and COPY a client saw acknowledged is there;
//! - every block and COPY found is there whole (`ledger` rows carry their
//!   transaction's size), acknowledged or not: none is there in part.
//!
//! Rounds: `DERIVED_CRASH_ROUNDS` (default 4).
//!
//! A second test kills the server during COPYs of one-row partitions large
//! enough that the load writes their headers into files of their own.

use crate::common;

use std::time::Duration;

use common::process::ServeProcess;
use common::workload::{differences, statement, SCHEMA};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Starts `tablegate serve` over `dir` on a free port.
fn start(dir: &std::path::Path) -> ServeProcess {
    common::process::serve(&["--data-dir".as_ref(), dir.as_os_str()], &[], |_| {})
}

/// The rows of transaction `id` in `ledger`, as COPY text: each carries
/// the transaction's size.
fn ledger_rows(id: i32, size: i32) -> String {
    (1..=size).map(|i| format!("{id}\t{i}\t{size}\n")).collect()
}

/// COPY of `rows` (COPY text) by `statement`; `Ok(false)` when the server
/// refused it, `Err` when the connection broke.
async fn copy_in(
    client: &tokio_postgres::Client,
    statement: &str,
    rows: String,
) -> Result<bool, ()> {
    use futures::SinkExt;
    let sink = match client.copy_in(statement).await {
        Ok(sink) => sink,
        Err(e) => {
            return if e.code().is_some() {
                Ok(false)
            } else {
                Err(())
            }
        }
    };
    futures::pin_mut!(sink);
    if sink.send(bytes::Bytes::from(rows)).await.is_err() {
        return Err(());
    }
    match sink.finish().await {
        Ok(_) => Ok(true),
        Err(e) if e.code().is_some() => Ok(false),
        Err(_) => Err(()),
    }
}

/// Runs the mixed workload until the connection breaks; returns the ids of
/// its acknowledged blocks (in `acks` and `ledger`) and COPYs (in `ledger`).
async fn write_until_killed(port: u16, seed: u64, writer: i32, round: i32) -> Acknowledged {
    let client = common::connect(port).await;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut acknowledged = Acknowledged::default();
    for n in 0.. {
        let id = round * 1_000_000 + writer * 100_000 + n;
        let size = rng.random_range(2..40);
        let sql = match rng.random_range(0..10) {
            // A block: a marker row, a transaction's ledger rows and a
            // workload statement, committed together.
            0 | 1 => format!(
                "BEGIN; INSERT INTO acks VALUES ({id}); \
                 INSERT INTO ledger SELECT {id}, x, {size} FROM generate_series(1, {size}) AS s(x); \
                 {}; COMMIT",
                statement(&mut rng)
            ),
            2 => {
                // One COPY in four is large enough to be written into
                // files of its own, beside the rows the table holds.
                let size = match rng.random_range(0..4) {
                    0 => rng.random_range(1_000..3_000),
                    _ => size,
                };
                match copy_in(&client, "COPY ledger FROM STDIN", ledger_rows(id, size)).await {
                    Ok(true) => {
                        acknowledged.copies.push(id);
                        continue;
                    }
                    Ok(false) => continue,
                    Err(()) => break,
                }
            }
            _ => statement(&mut rng),
        };
        match client.batch_execute(&sql).await {
            Ok(()) => {
                if sql.starts_with("BEGIN") {
                    acknowledged.blocks.push(id);
                }
            }
            Err(e) if e.code().is_some() => {
                let _ = client.batch_execute("ROLLBACK").await;
            }
            // The server is gone.
            Err(_) => break,
        }
    }
    acknowledged
}

#[derive(Default)]
struct Acknowledged {
    blocks: Vec<i32>,
    copies: Vec<i32>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_and_views_survive_sigkill() {
    let rounds: i32 = common::env_number("DERIVED_CRASH_ROUNDS", 4);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut acknowledged = Acknowledged::default();
    let mut server = start(dir.path());
    common::connect(server.port)
        .await
        .batch_execute(&format!(
            "{SCHEMA}; CREATE TABLE acks (id int PRIMARY KEY);
             CREATE TABLE ledger (txn int, i int, size int NOT NULL, PRIMARY KEY (txn, i))"
        ))
        .await
        .unwrap();
    for round in 0..rounds {
        let writers: Vec<_> = (0..3)
            .map(|w| tokio::spawn(write_until_killed(server.port, rng.random(), w, round)))
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..1500))).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().unwrap();
        for writer in writers {
            let done = writer.await.unwrap();
            acknowledged.blocks.extend(done.blocks);
            acknowledged.copies.extend(done.copies);
        }

        server = start(dir.path());
        let client = common::connect(server.port).await;
        let found = differences(&client).await;
        assert!(found.is_empty(), "round {round}: {found:?}");
        let there: std::collections::HashSet<i32> =
            common::first_column(&client, "SELECT id FROM acks").await;
        let lost: Vec<&i32> = acknowledged
            .blocks
            .iter()
            .filter(|id| !there.contains(id))
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged and lost: {lost:?}"
        );
        // Every transaction in the ledger is whole; every acknowledged one
        // is there.
        let ledger: std::collections::HashMap<i32, (i64, i32)> = client
            .query(
                "SELECT txn, count(*), min(size), max(size) FROM ledger GROUP BY txn",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| {
                let (min, max): (i32, i32) = (r.get(2), r.get(3));
                assert_eq!(
                    min,
                    max,
                    "round {round}: mixed sizes in {}",
                    r.get::<_, i32>(0)
                );
                (r.get(0), (r.get(1), max))
            })
            .collect();
        let partial: Vec<_> = ledger
            .iter()
            .filter(|(_, (count, size))| *count != i64::from(*size))
            .collect();
        assert!(partial.is_empty(), "round {round}: in part: {partial:?}");
        let missing: Vec<&i32> = acknowledged
            .blocks
            .iter()
            .chain(&acknowledged.copies)
            .filter(|id| !ledger.contains_key(id))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: acknowledged ledger transactions lost: {missing:?}"
        );
        let items: i64 = client
            .query_one("SELECT count(*) FROM items", &[])
            .await
            .unwrap()
            .get(0);
        println!(
            "round {round}: killed; {} acknowledged blocks and {} acknowledged COPYs there, \
             {} ledger transactions whole, {items} items; indexes and views verify clean",
            acknowledged.blocks.len(),
            acknowledged.copies.len(),
            ledger.len()
        );
    }
    server.child.kill().ok();
    server.child.wait().ok();
}

/// Rows of one COPY of `keyed`: more partitions than a load holds in its
/// batch (10,000), so their headers go into files of their own.
const KEYED_ROWS: i64 = 40_000;

/// The keys of COPY `n` of `keyed`, in random order.
fn keyed_keys(n: i64, rng: &mut StdRng) -> Vec<i64> {
    let mut keys: Vec<i64> = (n * KEYED_ROWS..(n + 1) * KEYED_ROWS).collect();
    keys.shuffle(rng);
    keys
}

fn keyed_rows(keys: &[i64]) -> String {
    keys.iter().map(|k| format!("{k}\t{}\n", k % 7)).collect()
}

/// The versions of the engine's keyspaces under a data directory: a
/// keyspace writes a new one when files join it.
fn store_versions(dir: &std::path::Path) -> std::collections::HashSet<std::path::PathBuf> {
    let keyspaces = std::fs::read_dir(dir.join("store").join("keyspaces")).unwrap();
    keyspaces
        .flat_map(|k| std::fs::read_dir(k.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .filter(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix('v'))
                .is_some_and(|n| n.parse::<u64>().is_ok())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_copy_killed_midway_is_there_whole_or_not_at_all() {
    let rounds: i64 = common::env_number("LOAD_CRASH_ROUNDS", 4);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut server = start(dir.path());
    let client = common::connect(server.port).await;
    client
        .batch_execute("CREATE TABLE keyed (id bigint PRIMARY KEY, v int NOT NULL)")
        .await
        .unwrap();
    // A COPY not killed: the later ones load into a table that holds rows.
    let rows = keyed_rows(&keyed_keys(0, &mut rng));
    assert_eq!(
        copy_in(&client, "COPY keyed FROM STDIN", rows).await,
        Ok(true)
    );
    let mut expected = KEYED_ROWS;
    for round in 1..=rounds {
        let keys = keyed_keys(round, &mut rng);
        let rows = keyed_rows(&keys);
        let port = server.port;
        let versions = store_versions(dir.path());
        let copy = tokio::spawn(async move {
            let client = common::connect(port).await;
            copy_in(&client, "COPY keyed FROM STDIN", rows).await
        });
        // The server writes a load's rows into new files, then its
        // partitions' headers, adds each set to its keyspace (which writes
        // a new version of the keyspace), then commits the batch that makes
        // them count. Each round kills it a random moment, up to 1 ms, after
        // two keyspaces have new versions.
        let wait = Duration::from_micros(rng.random_range(0..1_000));
        loop {
            let keyspaces: std::collections::HashSet<_> = store_versions(dir.path())
                .difference(&versions)
                .map(|v| v.parent().unwrap().to_owned())
                .collect();
            if copy.is_finished() || keyspaces.len() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        tokio::time::sleep(wait).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().unwrap();
        let acknowledged = copy.await.unwrap() == Ok(true);

        server = start(dir.path());
        let client = common::connect(server.port).await;
        let count: i64 = client
            .query_one("SELECT count(*) FROM keyed", &[])
            .await
            .unwrap()
            .get(0);
        let there = count == expected + KEYED_ROWS;
        assert!(
            there || count == expected,
            "round {round}: {count} rows, {expected} before a COPY of {KEYED_ROWS}"
        );
        assert!(
            there || !acknowledged,
            "round {round}: an acknowledged COPY is lost"
        );
        let entities: i64 = client
            .query_one(
                "SELECT entities FROM tablegate.tables WHERE table_name = 'keyed'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(entities, count, "round {round}: the table's count");
        // Keys of the COPY written again one at a time: each partition
        // holds that one row, whether the COPY is there or not.
        let again: Vec<i64> = keys.iter().step_by(2_000).copied().collect();
        for key in &again {
            if there {
                client
                    .execute("DELETE FROM keyed WHERE id = $1", &[key])
                    .await
                    .unwrap();
            }
            client
                .execute("INSERT INTO keyed VALUES ($1, 0)", &[key])
                .await
                .unwrap();
        }
        // The partitions of `keyed` written since the server started.
        let written: Vec<i64> = common::first_column(
            &client,
            "SELECT entities FROM tablegate.partitions WHERE table_name = 'keyed' AND writes > 0",
        )
        .await;
        assert_eq!(
            written,
            vec![1; again.len()],
            "round {round}: entities of the partitions written again"
        );
        expected = if there {
            count
        } else {
            count + again.len() as i64
        };
        println!(
            "round {round}: killed {wait:?} after two new versions; the COPY of {KEYED_ROWS} rows is {}{}",
            if there { "there" } else { "not there" },
            if acknowledged { ", acknowledged" } else { "" }
        );
    }
    server.child.kill().ok();
    server.child.wait().ok();
}
