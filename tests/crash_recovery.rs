//! Crash consistency: a writer process is killed with SIGKILL at random
//! moments; after each kill the data dir is reopened and checked against the
//! log of writes the writer saw acknowledged.
//!
//! This file is its own test harness: run with `CRASH_CHILD_DIR` set, the
//! binary is the writer; otherwise it is the checker that starts and kills it.
//! Rounds: `TABLEGATE_CRASH_ROUNDS` (default 20).
//!
//! What is checked after every kill:
//! - every acknowledged batch is there whole, and every batch found is whole
//!   (none is there in part, acknowledged or not);
//! - every acknowledged single insert is there;
//! - every counter (incremented by conditional replace) is at its last
//!   acknowledged value or one more (the one write in flight);
//! - every acknowledged partition delete left its partition empty;
//! - the table's statistics equal what a full scan counts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use tablegate::model::{Entity, EntityKey, IfMatch, Value};
use tablegate::store::native::NativeStore;
use tablegate::store::{
    query_all, BulkDelete, EntityRead, EntityWrite, Query, Statistics, StoreError, TableAdmin,
    WriteOp,
};

const TABLE: &str = "crash";
const WRITERS: u32 = 3;

fn main() {
    match std::env::var("CRASH_CHILD_DIR") {
        Ok(dir) => child(&dir),
        Err(_) => parent(),
    }
}

/// Prints one acknowledgement line; the parent trusts only complete lines.
fn ack(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn child(dir: &str) {
    let round: u32 = std::env::var("CRASH_ROUND")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = Arc::new(NativeStore::open(dir).unwrap());
        match store.create_table(TABLE).await {
            Ok(()) | Err(StoreError::TableAlreadyExists(_)) => {}
            Err(e) => panic!("{e}"),
        }
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                write_forever(&store, round, w).await
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

async fn write_forever(store: &NativeStore, round: u32, w: u32) {
    let counter = EntityKey::new("counter", format!("w{w}"));
    let mut n: u64 = 0;
    loop {
        n += 1;
        let id = format!("r{round:03}w{w}n{n:06}");
        let kind = rand::rng().random_range(0..10);
        match kind {
            0..=4 => {
                let size = rand::rng().random_range(1..=100usize);
                let ops = (0..size)
                    .map(|i| {
                        WriteOp::Insert(
                            Entity::new(format!("batch{w}"), format!("{id}-{i:03}"))
                                .with("batch", Value::String(id.clone()))
                                .with("size", Value::Int32(size as i32))
                                .with("pad", Value::Binary(vec![0xAB; 200])),
                        )
                    })
                    .collect();
                store.write_batch(TABLE, ops).await.unwrap();
                ack(format!("B {id} {size}"));
            }
            5..=7 => {
                let e = Entity::new(format!("single{}", n % 7), id.clone())
                    .with("v", Value::Int64(n as i64));
                store.write(TABLE, WriteOp::Insert(e)).await.unwrap();
                ack(format!("S single{} {id}", n % 7));
            }
            8 => {
                let current = store.get(TABLE, &counter, None).await.unwrap();
                let (value, op) = match current {
                    None => (
                        1,
                        WriteOp::Insert(
                            Entity::new("counter", format!("w{w}")).with("n", Value::Int64(1)),
                        ),
                    ),
                    Some(e) => {
                        let Some(Value::Int64(v)) = e.get("n").cloned() else {
                            panic!("bad counter")
                        };
                        let next =
                            Entity::new("counter", format!("w{w}")).with("n", Value::Int64(v + 1));
                        (
                            v + 1,
                            WriteOp::Replace {
                                entity: next,
                                if_match: IfMatch::ETag(e.etag.unwrap()),
                            },
                        )
                    }
                };
                store.write(TABLE, op).await.unwrap();
                ack(format!("C w{w} {value}"));
            }
            _ => {
                let pk = format!("doomed-{id}");
                let ops = (0..50)
                    .map(|i| WriteOp::Insert(Entity::new(pk.clone(), format!("{i:03}"))))
                    .collect();
                store.write_batch(TABLE, ops).await.unwrap();
                store.delete_partition(TABLE, &pk).await.unwrap();
                ack(format!("D {pk}"));
            }
        }
    }
}

#[derive(Default)]
struct Acks {
    batches: HashMap<String, usize>,
    singles: Vec<EntityKey>,
    counters: HashMap<String, i64>,
    deleted: Vec<String>,
}

impl Acks {
    fn read(&mut self, line: &str) {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["B", id, size] => {
                self.batches.insert(id.to_string(), size.parse().unwrap());
            }
            ["S", pk, rk] => self.singles.push(EntityKey::new(*pk, *rk)),
            ["C", w, v] => {
                let v: i64 = v.parse().unwrap();
                let e = self.counters.entry(w.to_string()).or_default();
                *e = (*e).max(v);
            }
            ["D", pk] => self.deleted.push(pk.to_string()),
            _ => panic!("unexpected line from the writer: {line:?}"),
        }
    }
}

fn parent() {
    let rounds: u32 = std::env::var("TABLEGATE_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut acks = Acks::default();
    let mut total_batches = 0;
    let started = Instant::now();
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .env("CRASH_CHILD_DIR", dir.path())
            .env("CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = BufReader::new(stdout).read_to_end(&mut bytes);
            bytes
        });
        let wait = rand::rng().random_range(150..700);
        std::thread::sleep(Duration::from_millis(wait));
        if let Ok(Some(status)) = child.try_wait() {
            panic!("round {round}: the writer exited on its own ({status})");
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let output = String::from_utf8(reader.join().unwrap()).unwrap();
        // Only lines ending in a newline were printed whole; the last piece is
        // empty or cut by the kill.
        let mut lines: Vec<&str> = output.split('\n').collect();
        lines.pop();
        for line in lines {
            acks.read(line);
        }
        let found = runtime.block_on(verify(dir.path(), &acks, round));
        total_batches = found;
    }
    println!(
        "crash_recovery: {rounds} rounds, {} acknowledged batches, {} acknowledged inserts, {} partition deletes checked; {total_batches} batches found whole; {:.1}s",
        acks.batches.len(),
        acks.singles.len(),
        acks.deleted.len(),
        started.elapsed().as_secs_f64()
    );
    println!("1 passed, 0 failed");
}

/// Returns the number of batches found in the store.
async fn verify(dir: &std::path::Path, acks: &Acks, round: u32) -> usize {
    let store = NativeStore::open(dir).unwrap();
    let all = match query_all(&store, TABLE, &Query::table()).await {
        Ok(all) => all,
        Err(StoreError::TableNotFound(_)) if acks.batches.is_empty() && acks.singles.is_empty() => {
            return 0
        }
        Err(e) => panic!("{e}"),
    };
    let keys: HashSet<&EntityKey> = all.iter().map(|e| &e.key).collect();

    let mut batches: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for e in &all {
        if let (Some(Value::String(id)), Some(Value::Int32(size))) = (e.get("batch"), e.get("size"))
        {
            let entry = batches.entry(id.clone()).or_insert((0, *size as usize));
            entry.0 += 1;
        }
    }
    for (id, (found, size)) in &batches {
        assert_eq!(
            found, size,
            "round {round}: batch {id} is there in part ({found} of {size})"
        );
    }
    for (id, size) in &acks.batches {
        let (found, _) = batches.get(id).copied().unwrap_or((0, 0));
        assert_eq!(found, *size, "round {round}: acknowledged batch {id} lost");
    }
    for key in &acks.singles {
        assert!(
            keys.contains(key),
            "round {round}: acknowledged insert {key} lost"
        );
    }
    for (w, acked) in &acks.counters {
        let e = store
            .get(TABLE, &EntityKey::new("counter", w), None)
            .await
            .unwrap();
        let Some(Value::Int64(v)) = e.as_ref().and_then(|e| e.get("n")).cloned() else {
            panic!("round {round}: counter {w} lost")
        };
        assert!(
            v == *acked || v == *acked + 1,
            "round {round}: counter {w} is {v}, acknowledged {acked}"
        );
    }
    for pk in &acks.deleted {
        assert!(
            !all.iter().any(|e| &e.key.partition_key == pk),
            "round {round}: deleted partition {pk} has entities"
        );
    }
    let stats = store.table_stats(TABLE).await.unwrap();
    let partitions: HashSet<&str> = all.iter().map(|e| e.partition_key()).collect();
    let bytes: u64 = all.iter().map(|e| e.billed_size() as u64).sum();
    assert_eq!(
        stats.entities,
        all.len() as u64,
        "round {round}: entity count"
    );
    assert_eq!(
        stats.partitions,
        partitions.len() as u64,
        "round {round}: partition count"
    );
    assert_eq!(stats.bytes, bytes, "round {round}: byte count");
    batches.len()
}
