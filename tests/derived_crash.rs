//! Crash consistency of indexes and materialized views: the server process
//! (`tablegate serve`) runs the random workload of `common::workload` from
//! two connections and is killed with SIGKILL at a random moment, then
//! restarted over the same data dir. After every restart each index and
//! view verifies clean against its tables (the base write and its derived
//! writes commit in one atomic write), and every statement a client saw
//! acknowledged is there.
//!
//! Rounds: `DERIVED_CRASH_ROUNDS` (default 4).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::workload::{differences, statement, SCHEMA};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Server {
    child: Child,
    port: u16,
}

/// Starts `tablegate serve` on a free port and waits until it listens.
fn start(dir: &std::path::Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tablegate"))
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tablegate");
    // It logs to stderr.
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("tablegate exited before it listened")
            .expect("read");
        if let Some(rest) = line.split("listening on ").nth(1) {
            let address = rest.split_whitespace().next().unwrap_or_default();
            let port = address.rsplit(':').next().unwrap_or_default();
            break port.parse().expect("port");
        }
    };
    // Keep reading its log so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server { child, port }
}

async fn connect(port: u16) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=test"),
        tokio_postgres::NoTls,
    )
    .await
    .expect("connect");
    tokio::spawn(connection);
    client
}

/// Runs random statements until the connection breaks; returns the keys
/// of the rows of `acks` its acknowledged inserts made.
async fn write_until_killed(port: u16, seed: u64, writer: i32, round: i32) -> Vec<i32> {
    let client = connect(port).await;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut acknowledged = Vec::new();
    for n in 0.. {
        let sql = if rng.random_ratio(1, 5) {
            // An acknowledged marker row, written with a workload statement
            // in one transaction.
            let id = round * 1_000_000 + writer * 100_000 + n;
            format!(
                "BEGIN; INSERT INTO acks VALUES ({id}); {}; COMMIT",
                statement(&mut rng)
            )
        } else {
            statement(&mut rng)
        };
        match client.batch_execute(&sql).await {
            Ok(()) => {
                if let Some(id) = sql.strip_prefix("BEGIN; INSERT INTO acks VALUES (") {
                    acknowledged.push(id.split(')').next().unwrap().parse().unwrap());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_and_views_survive_sigkill() {
    let rounds: i32 = common::env_number("DERIVED_CRASH_ROUNDS", 4);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut acknowledged: Vec<i32> = Vec::new();
    let mut server = start(dir.path());
    connect(server.port)
        .await
        .batch_execute(&format!("{SCHEMA}; CREATE TABLE acks (id int PRIMARY KEY)"))
        .await
        .unwrap();
    for round in 0..rounds {
        let writers: Vec<_> = (0..2)
            .map(|w| tokio::spawn(write_until_killed(server.port, rng.random(), w, round)))
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..1500))).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().unwrap();
        for writer in writers {
            acknowledged.extend(writer.await.unwrap());
        }

        server = start(dir.path());
        let client = connect(server.port).await;
        let found = differences(&client).await;
        assert!(found.is_empty(), "round {round}: {found:?}");
        let there: std::collections::HashSet<i32> = client
            .query("SELECT id FROM acks", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let lost: Vec<&i32> = acknowledged
            .iter()
            .filter(|id| !there.contains(id))
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged and lost: {lost:?}"
        );
        let items: i64 = client
            .query_one("SELECT count(*) FROM items", &[])
            .await
            .unwrap()
            .get(0);
        println!(
            "round {round}: killed; {} acknowledged transactions there, {items} items; indexes and views verify clean",
            acknowledged.len()
        );
    }
    server.child.kill().ok();
    server.child.wait().ok();
}
