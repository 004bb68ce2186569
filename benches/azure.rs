//! Reads over the Azure Table service (Azurite on loopback), through
//! tablegate and directly: the gateway's overhead as a measured ratio.
//!
//! `cargo bench --bench azure` (release build) starts Azurite and
//! `tablegate serve --backend azure`, loads `ROWS` rows (default 20000:
//! partitions of 1000 consecutive ids) through tablegate, then times, for 1
//! and 8 clients, for `SECONDS` each (default 5):
//! - point reads: tablegate's prepared `SELECT * FROM bench WHERE part = $1
//!   AND id = $2` against the SDK's `get_entity`;
//! - range reads of 100 consecutive rows in one partition: a prepared
//!   `... WHERE part = $1 AND id >= $2 AND id < $3` against the SDK's
//!   `query_entities` with the same key range.
//!
//! The SDK side is `benches/azure_sdk.py`, run with Microsoft's Azure Tables
//! SDK for Python (`azure-data-tables`, installed into `target/bench-venv`).
//! Prints queries per second, p50 and p99 latency, and the ratio tablegate /
//! SDK; each figure the median of 3 runs. Without `--bench` (under `cargo
//! test`) it runs a short tablegate-only check.

#[path = "../tests/common/azurite.rs"]
mod azurite;
#[path = "../tests/common/process.rs"]
mod process;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tokio_postgres::NoTls;

const PER_PARTITION: i32 = 1000;

async fn connect(port: u16) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user=bench"), NoTls)
            .await
            .expect("connect");
    tokio::spawn(connection);
    client
}

#[derive(Clone, Copy, Debug)]
struct Figures {
    qps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn figures(mut latencies: Vec<Duration>, seconds: f64) -> Figures {
    latencies.sort();
    let n = latencies.len().max(1);
    let at = |q: usize| {
        latencies
            .get((n * q / 100).min(n - 1))
            .copied()
            .unwrap_or_default()
    };
    Figures {
        qps: latencies.len() as f64 / seconds,
        p50_ms: at(50).as_secs_f64() * 1000.0,
        p99_ms: at(99).as_secs_f64() * 1000.0,
    }
}

/// `clients` connections reading for `seconds`.
async fn tablegate_run(port: u16, range: bool, clients: usize, seconds: f64, rows: i32) -> Figures {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = connect(port).await;
        tasks.push(tokio::spawn(async move {
            let sql = if range {
                "SELECT * FROM bench WHERE part = $1 AND id >= $2 AND id < $3"
            } else {
                "SELECT * FROM bench WHERE part = $1 AND id = $2"
            };
            let statement = client.prepare(sql).await.expect("prepare");
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let started = Instant::now();
                if range {
                    let first = rng.random_range(0..rows / PER_PARTITION) * PER_PARTITION
                        + rng.random_range(0..PER_PARTITION - 100);
                    let part = format!("p{}", first / PER_PARTITION);
                    let found = client
                        .query(&statement, &[&part, &first, &(first + 100)])
                        .await
                        .expect("range");
                    assert_eq!(found.len(), 100);
                } else {
                    let x = rng.random_range(0..rows);
                    let part = format!("p{}", x / PER_PARTITION);
                    let found = client.query(&statement, &[&part, &x]).await.expect("point");
                    assert_eq!(found.len(), 1);
                }
                latencies.push(started.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client"));
    }
    figures(all, seconds)
}

/// A Python with azure-data-tables, in `target/bench-venv`.
fn sdk_python() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "python3 -m venv failed");
    }
    let installed = Command::new(&python)
        .args(["-c", "import azure.data.tables"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        let ok = Command::new(&python)
            .args(["-m", "pip", "install", "-q", "azure-data-tables==12.7.0"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "pip install azure-data-tables failed");
    }
    python
}

fn sdk_run(connection: &str, range: bool, clients: usize, seconds: f64, rows: i32) -> Figures {
    let output = Command::new(sdk_python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/azure_sdk.py"))
        .args([
            connection,
            "bench",
            if range { "range" } else { "point" },
            &clients.to_string(),
            &seconds.to_string(),
            &rows.to_string(),
        ])
        .output()
        .expect("run the SDK benchmark");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON figures");
    Figures {
        qps: json["qps"].as_f64().unwrap_or_default(),
        p50_ms: json["p50_ms"].as_f64().unwrap_or_default(),
        p99_ms: json["p99_ms"].as_f64().unwrap_or_default(),
    }
}

fn median(mut runs: Vec<Figures>) -> Figures {
    let mid = runs.len() / 2;
    let pick = |runs: &mut Vec<Figures>, key: fn(&Figures) -> f64| {
        runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
        key(&runs[mid])
    };
    Figures {
        qps: pick(&mut runs, |f| f.qps),
        p50_ms: pick(&mut runs, |f| f.p50_ms),
        p99_ms: pick(&mut runs, |f| f.p99_ms),
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let env = |k: &str, d: f64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (rows, seconds, repeats) = if bench {
        (env("ROWS", 20_000.0) as i32, env("SECONDS", 5.0), 3)
    } else {
        (2_000, 0.5, 1)
    };
    let emulator = azurite::Azurite::start();
    let connection = emulator.connection_string();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let gateway = emulator.start_gateway(|_| {});
        let client = connect(gateway.port).await;
        let load = Instant::now();
        client
            .batch_execute(&format!(
                "CREATE TABLE bench (part text, id int, name text, amount double precision, \
                 PRIMARY KEY (part, id));
                 INSERT INTO bench SELECT 'p' || (x / {PER_PARTITION}), x, 'name ' || x, x * 1.5 \
                 FROM generate_series(0, {}) AS s(x)",
                rows - 1
            ))
            .await
            .expect("load");
        println!(
            "loaded {rows} rows through tablegate in {:.1} s",
            load.elapsed().as_secs_f64()
        );
        println!(
            "{:<8} {:>7} | {:>10} {:>8} {:>8} | {:>10} {:>8} {:>8} | {:>6}",
            "read", "clients", "tg q/s", "p50 ms", "p99 ms", "sdk q/s", "p50 ms", "p99 ms", "ratio"
        );
        for range in [false, true] {
            for clients in [1, 8] {
                let mut ours = Vec::new();
                let mut theirs = Vec::new();
                for _ in 0..repeats {
                    ours.push(tablegate_run(gateway.port, range, clients, seconds, rows).await);
                    if bench {
                        theirs.push(sdk_run(&connection, range, clients, seconds, rows));
                    }
                }
                let ours = median(ours);
                let name = if range { "range100" } else { "point" };
                match theirs.is_empty() {
                    true => println!(
                        "{name:<8} {clients:>7} | {:>10.0} {:>8.2} {:>8.2} |",
                        ours.qps, ours.p50_ms, ours.p99_ms
                    ),
                    false => {
                        let sdk = median(theirs);
                        println!(
                            "{name:<8} {clients:>7} | {:>10.0} {:>8.2} {:>8.2} | {:>10.0} {:>8.2} {:>8.2} | {:>5.2}x",
                            ours.qps, ours.p50_ms, ours.p99_ms, sdk.qps, sdk.p50_ms, sdk.p99_ms,
                            ours.qps / sdk.qps
                        );
                    }
                }
            }
        }
    });
}
