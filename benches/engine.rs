//! Benchmark of the native engine through the store traits.
//!
//! `cargo bench --bench engine` (release build). Settings by environment:
//! `ENTITIES` (default 1,000,000), `PARTITIONS` (1,000), `DURABLE_SECONDS` (5),
//! `BENCH_DIR` (a temporary directory on the same disk by default).
//!
//! Entities are about 1 KiB in the service's size formula. Every write is
//! acknowledged only after its commit log write, as in normal operation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tablegate::model::{Entity, EntityKey, Value};
use tablegate::store::native::NativeStore;
use tablegate::store::{
    for_each_page, EntityRead, EntityWrite, Query, Statistics, TableAdmin, WriteOp,
};

/// The Azure service's scalability targets quoted by the performance checklist.
const SERVICE_PARTITION_TARGET: f64 = 2_000.0;
const SERVICE_ACCOUNT_TARGET: f64 = 20_000.0;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn entity(pk: &str, rk: &str, n: u64) -> Entity {
    Entity::new(pk, rk)
        .with("Name", Value::String(format!("employee {n}")))
        .with("Age", Value::Int32((n % 60) as i32 + 20))
        .with("Salary", Value::Double(n as f64 * 1.5))
        .with(
            "Hired",
            Value::DateTime(tablegate::model::DateTime(1_600_000_000_000_000 + n as i64)),
        )
        .with("Active", Value::Boolean(n % 2 == 0))
        .with("Notes", Value::String("x".repeat(440)))
}

fn key(i: u64, partitions: u64) -> (String, String) {
    (
        format!("p{:05}", i % partitions),
        format!("r{:09}", i / partitions),
    )
}

fn report(name: &str, count: u64, elapsed: Duration, unit: &str) -> f64 {
    let rate = count as f64 / elapsed.as_secs_f64();
    println!(
        "{name:<58} {rate:>12.0} {unit}/s  ({count} in {:.2}s; {:.0}x the service's account target, {:.0}x its partition target)",
        elapsed.as_secs_f64(),
        rate / SERVICE_ACCOUNT_TARGET,
        rate / SERVICE_PARTITION_TARGET
    );
    rate
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not, and
    // then a small run checks that the benchmark still works.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let (entities, partitions, durable_seconds) = if smoke {
        (2_000, 10, 1)
    } else {
        (
            env("ENTITIES", 1_000_000),
            env("PARTITIONS", 1_000),
            env("DURABLE_SECONDS", 5),
        )
    };
    let dir = match std::env::var("BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(dir.path(), entities, partitions, durable_seconds));
}

async fn run(dir: &std::path::Path, entities: u64, partitions: u64, durable_seconds: u64) {
    let store = Arc::new(NativeStore::open(dir).unwrap());
    store.create_table("bench").await.unwrap();
    println!(
        "tablegate engine benchmark: {entities} entities of {} bytes in {partitions} partitions, {} cores",
        entity("p00000", "r000000000", 0).billed_size(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );

    // 1. Batched inserts: 100-entity entity group transactions, 4 concurrent loaders.
    let per_partition = entities / partitions;
    let started = Instant::now();
    let loaders = 4;
    let mut tasks = Vec::new();
    for l in 0..loaders {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut p = l;
            while p < partitions {
                let mut row = 0;
                while row < per_partition {
                    let end = (row + 100).min(per_partition);
                    let ops = (row..end)
                        .map(|r| {
                            WriteOp::Insert(entity(
                                &format!("p{p:05}"),
                                &format!("r{r:09}"),
                                r * partitions + p,
                            ))
                        })
                        .collect();
                    store.write_batch("bench", ops).await.unwrap();
                    row = end;
                }
                p += loaders;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let loaded = per_partition * partitions;
    report(
        "batched inserts (100-entity batches, 4 loaders)",
        loaded,
        started.elapsed(),
        "entities",
    );
    let stats = store.table_stats("bench").await.unwrap();
    assert_eq!(stats.entities, loaded);

    // 2. Point gets of random keys.
    for threads in [1, 2] {
        let per_thread = (entities / 5).min(200_000);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..threads {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::from_os_rng();
                for _ in 0..per_thread {
                    let i = rng.random_range(0..loaded);
                    let (pk, rk) = key(i, partitions);
                    let got = store
                        .get("bench", &EntityKey::new(pk, rk), None)
                        .await
                        .unwrap();
                    assert!(got.is_some());
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        report(
            &format!("point gets, random keys, {threads} task(s)"),
            per_thread * threads,
            started.elapsed(),
            "gets",
        );
    }

    // 3. Range scans: every partition read in full, page by page.
    let started = Instant::now();
    let mut scanned = 0u64;
    for p in 0..partitions {
        for_each_page(
            &*store,
            "bench",
            &Query::partition(format!("p{p:05}")),
            |page| {
                scanned += page.entities.len() as u64;
                true
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(scanned, loaded);
    report(
        "partition range scans (1000-entity pages)",
        scanned,
        started.elapsed(),
        "entities",
    );

    let started = Instant::now();
    let mut scanned = 0u64;
    let snapshot = store.snapshot();
    for_each_page(
        &snapshot,
        "bench",
        &Query::table().page_size(10_000).project(["Age"]),
        |page| {
            scanned += page.entities.len() as u64;
            true
        },
    )
    .await
    .unwrap();
    assert_eq!(scanned, loaded);
    report(
        "table scan, one property decoded (10000-entity pages)",
        scanned,
        started.elapsed(),
        "entities",
    );

    // 4. Unbatched durable inserts, each its own acknowledged write.
    store.create_table("durable").await.unwrap();
    for writers in [1u64, 8, 64] {
        let done = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + Duration::from_secs(durable_seconds);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..writers {
            let (store, done) = (store.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let e = entity(&format!("w{writers}-{w}"), &format!("{n:09}"), n);
                    store.write("durable", WriteOp::Insert(e)).await.unwrap();
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        report(
            &format!("unbatched durable inserts, {writers} concurrent writer(s)"),
            done.load(Ordering::Relaxed),
            started.elapsed(),
            "entities",
        );
    }
}
