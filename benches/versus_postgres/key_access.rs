//! What a key-partitioned store is for: point selects, single-row inserts,
//! bulk load and reads inside one partition, each timed on both servers with
//! the same client, the same statements and the same rows.

use std::time::{Duration, Instant};

use futures::SinkExt;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::servers::Server;

/// Rows of the `readings` table per device (one partition per device in
/// tablegate, the second key column the RowKey).
pub const READINGS_PER_DEVICE: u64 = 1_000;

/// One statement a connection runs over and over.
#[derive(Clone, Copy)]
pub enum Workload {
    /// `SELECT ... FROM accounts WHERE id = $1`, random ids below `rows`.
    PointSelect { rows: u64 },
    /// The same, its statement prepared again for each query (an unnamed
    /// statement, as many drivers send a query with parameters).
    PointSelectUnnamed { rows: u64 },
    /// The same as `PointSelect`, its clients connected over the Unix
    /// socket.
    PointSelectLocal { rows: u64 },
    /// The same with the id in the text, over the simple protocol (as
    /// psql, scripts and drivers that inline values send it).
    PointSelectSimple { rows: u64 },
    /// `SELECT id, balance FROM accounts WHERE owner = $1`: a lookup by a
    /// column with a unique secondary index, not the key.
    PointSelectByIndex { rows: u64 },
    /// `SELECT * FROM orders WHERE o_orderkey = $1`: a row of ten columns,
    /// with numeric, date, char(n) and timestamptz among them.
    PointSelectWide { rows: u64 },
    /// `INSERT INTO inserts VALUES (...)`, a new key each time.
    Insert,
    /// 100 consecutive readings of a random device.
    Range100 { devices: u64 },
    /// A random device's last 10 readings, newest first.
    LogTail { devices: u64 },
}

impl Workload {
    fn sql(self) -> &'static str {
        match self {
            Workload::PointSelect { .. }
            | Workload::PointSelectLocal { .. }
            | Workload::PointSelectUnnamed { .. }
            | Workload::PointSelectSimple { .. } => {
                "SELECT owner, balance FROM accounts WHERE id = $1"
            }
            Workload::PointSelectByIndex { .. } => {
                "SELECT id, balance FROM accounts WHERE owner = $1"
            }
            Workload::PointSelectWide { .. } => "SELECT * FROM orders WHERE o_orderkey = $1",
            Workload::Insert => {
                "INSERT INTO inserts (id, owner, amount, note) VALUES ($1, $2, $3, $4)"
            }
            Workload::Range100 { .. } => {
                "SELECT seq, value FROM readings WHERE device = $1 AND seq >= $2 AND seq < $3"
            }
            Workload::LogTail { .. } => {
                "SELECT seq, value FROM readings WHERE device = $1 ORDER BY seq DESC LIMIT 10"
            }
        }
    }

    /// Runs the statement once and checks its answer.
    async fn once(
        self,
        client: &tokio_postgres::Client,
        statement: &tokio_postgres::Statement,
        rng: &mut rand::rngs::StdRng,
        sequence: &mut i64,
    ) {
        match self {
            Workload::PointSelect { rows } | Workload::PointSelectLocal { rows } => {
                let id = rng.random_range(0..rows) as i32;
                let row = client
                    .query_one(statement, &[&id])
                    .await
                    .expect("point select");
                assert_eq!(row.get::<_, i64>(1), id as i64 * 7);
            }
            Workload::PointSelectUnnamed { rows } => {
                let id = rng.random_range(0..rows) as i32;
                let row = client
                    .query_one(self.sql(), &[&id])
                    .await
                    .expect("point select");
                assert_eq!(row.get::<_, i64>(1), id as i64 * 7);
            }
            Workload::PointSelectSimple { rows } => {
                let id = rng.random_range(0..rows);
                let sql = self.sql().replace("$1", &id.to_string());
                let messages = client.simple_query(&sql).await.expect("point select");
                let balance = messages.iter().find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => row.get(1),
                    _ => None,
                });
                assert_eq!(balance, Some((id * 7).to_string().as_str()));
            }
            Workload::PointSelectByIndex { rows } => {
                let id = rng.random_range(0..rows) as i32;
                let owner = format!("owner {id}");
                let row = client
                    .query_one(statement, &[&owner])
                    .await
                    .expect("select by index");
                assert_eq!(row.get::<_, i32>(0), id);
                assert_eq!(row.get::<_, i64>(1), id as i64 * 7);
            }
            Workload::PointSelectWide { rows } => {
                let key = rng.random_range(0..rows) as i64;
                let row = client
                    .query_one(statement, &[&key])
                    .await
                    .expect("point select");
                assert_eq!(row.get::<_, i64>(0), key);
                assert_eq!(row.get::<_, i64>(1), key % 15_000);
            }
            Workload::Insert => {
                *sequence += 1;
                let id = *sequence;
                let owner = format!("owner {}", id % 1000);
                let note = format!("inserted row {id}");
                let n = client
                    .execute(statement, &[&id, &owner, &(id * 3), &note])
                    .await
                    .expect("insert");
                assert_eq!(n, 1);
            }
            Workload::Range100 { devices } => {
                let device = rng.random_range(0..devices) as i32;
                let start = rng.random_range(0..READINGS_PER_DEVICE - 100) as i32;
                let rows = client
                    .query(statement, &[&device, &start, &(start + 100)])
                    .await
                    .expect("range");
                assert_eq!(rows.len(), 100);
            }
            Workload::LogTail { devices } => {
                let device = rng.random_range(0..devices) as i32;
                let rows = client.query(statement, &[&device]).await.expect("log tail");
                assert_eq!(rows.len(), 10);
                assert_eq!(rows[0].get::<_, i32>(0), READINGS_PER_DEVICE as i32 - 1);
            }
        }
    }
}

pub struct Figures {
    pub per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// `connections` clients run the workload for `seconds`; each prepares its
/// statement once (extended protocol).
pub async fn run(server: &Server, workload: Workload, connections: usize, seconds: f64) -> Figures {
    static RUN: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..connections {
        let client = match workload {
            Workload::PointSelectLocal { .. } => server.connect_local().await,
            _ => server.connect().await,
        };
        tasks.push(tokio::spawn(async move {
            let statement = client.prepare(workload.sql()).await.expect("prepare");
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            // Insert keys: each run and connection its own range.
            let mut sequence = (run * 1_000 + c as i64) * 100_000_000;
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                workload
                    .once(&client, &statement, &mut rng, &mut sequence)
                    .await;
                latencies.push(t.elapsed().as_micros() as u32);
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
    };
    Figures {
        per_second: all.len() as f64 / elapsed,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    }
}

pub fn median(mut runs: Vec<Figures>) -> Figures {
    runs.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
    runs.swap_remove(runs.len() / 2)
}

/// Creates the tables of the key workloads (`readings` is made by [`copy_readings`]).
pub async fn create_tables(server: &Server) {
    server
        .connect()
        .await
        .batch_execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL, note text);
             CREATE TABLE inserts (id bigint PRIMARY KEY, owner text NOT NULL, amount bigint NOT NULL, note text);
             CREATE TABLE orders (o_orderkey bigint PRIMARY KEY, o_custkey bigint NOT NULL,
               o_orderstatus char(1) NOT NULL, o_totalprice numeric(15, 2) NOT NULL,
               o_orderdate date NOT NULL, o_orderpriority char(15) NOT NULL,
               o_clerk char(15) NOT NULL, o_shippriority int NOT NULL,
               o_comment varchar(79) NOT NULL, o_updated timestamptz NOT NULL);",
        )
        .await
        .expect("create tables");
}

/// A table `name` keyed by one column, as `inserts` is (a partition a row
/// in tablegate).
fn keyed_table(name: &str) -> String {
    format!(
        "CREATE TABLE {name} (id bigint PRIMARY KEY, owner text NOT NULL, amount bigint NOT NULL, note text)"
    )
}

/// Inserts `rows` rows into a new table `name` one prepared INSERT at a
/// time inside one transaction block (as a migration script or an ORM's
/// unit of work does); returns the seconds from BEGIN to the end of COMMIT.
pub async fn insert_block(server: &Server, name: &str, rows: u64) -> f64 {
    let client = server.connect().await;
    client
        .batch_execute(&keyed_table(name))
        .await
        .expect("create block table");
    let insert = client
        .prepare(&format!(
            "INSERT INTO {name} (id, owner, amount, note) VALUES ($1, $2, $3, $4)"
        ))
        .await
        .expect("prepare");
    let started = Instant::now();
    client.batch_execute("BEGIN").await.expect("begin");
    for id in 0..rows as i64 {
        let owner = format!("owner {}", id % 1000);
        let note = format!("inserted row {id}");
        client
            .execute(&insert, &[&id, &owner, &(id * 3), &note])
            .await
            .expect("insert");
    }
    client.batch_execute("COMMIT").await.expect("commit");
    let seconds = started.elapsed().as_secs_f64();
    let count: i64 = client
        .query_one(&format!("SELECT count(*) FROM {name}"), &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, rows as i64);
    seconds
}

/// Sends `lines` to `COPY table FROM STDIN` in 1 MiB messages.
pub async fn copy_lines(
    client: &tokio_postgres::Client,
    copy: &str,
    lines: impl Iterator<Item = String>,
) -> u64 {
    let sink = client.copy_in(copy).await.expect("copy");
    futures::pin_mut!(sink);
    let mut chunk = String::with_capacity(1 << 20);
    for line in lines {
        chunk.push_str(&line);
        if chunk.len() >= 1 << 20 {
            sink.send(bytes::Bytes::from(std::mem::take(&mut chunk)))
                .await
                .expect("send");
        }
    }
    sink.send(bytes::Bytes::from(chunk)).await.expect("send");
    sink.finish().await.expect("finish copy")
}

pub async fn load_accounts(server: &Server, rows: u64) {
    let client = server.connect().await;
    let lines = (0..rows).map(|i| {
        format!(
            "{i}\towner {i}\t{}\tnote for account {i} of the point select benchmark\n",
            i * 7
        )
    });
    let copied = copy_lines(&client, "COPY accounts FROM STDIN", lines).await;
    assert_eq!(copied, rows);
}

/// Loads `rows` orders, keys 0 to `rows` - 1 (values made from the key).
pub async fn load_orders(server: &Server, rows: u64) {
    let client = server.connect().await;
    let lines = (0..rows).map(|i| {
        let day = 1 + i % 28;
        let month = 1 + i / 28 % 12;
        format!(
            "{i}\t{}\t{}\t{}.{:02}\t{}-{month:02}-{day:02}\t{}-PRIORITY\tClerk#{:09}\t0\t\
             final deposits of order {i} sleep quickly\t2020-{month:02}-{day:02} \
             {:02}:{:02}:{:02}.{:06}+00\n",
            i % 15_000,
            ["O", "F", "P"][(i % 3) as usize],
            1_000 + i * 37 % 500_000,
            i % 100,
            1992 + i % 7,
            1 + i % 5,
            i % 1_000,
            i % 24,
            i % 60,
            i * 7 % 60,
            i * 7919 % 1_000_000,
        )
    });
    let copied = copy_lines(&client, "COPY orders FROM STDIN", lines).await;
    assert_eq!(copied, rows);
}

/// Loads `devices` × [`READINGS_PER_DEVICE`] rows into a new table `name`
/// with one COPY; returns the seconds it took.
pub async fn copy_readings(server: &Server, name: &str, devices: u64) -> f64 {
    let client = server.connect().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE {name} (device int NOT NULL, seq int NOT NULL, value bigint NOT NULL, note text, PRIMARY KEY (device, seq))"
        ))
        .await
        .expect("create readings");
    let lines = (0..devices).flat_map(|d| {
        (0..READINGS_PER_DEVICE).map(move |s| {
            format!(
                "{d}\t{s}\t{}\treading {s} of device {d}\n",
                d * 1_000_003 + s
            )
        })
    });
    let started = Instant::now();
    let copied = copy_lines(&client, &format!("COPY {name} FROM STDIN"), lines).await;
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(copied, devices * READINGS_PER_DEVICE);
    seconds
}

/// Loads `rows` rows keyed by one column (each a partition of its own in
/// tablegate), their keys in random order, into a new table `name` with
/// one COPY, then `rows` more with a second; returns the seconds each took.
pub async fn copy_keyed(server: &Server, name: &str, rows: u64) -> [f64; 2] {
    let client = server.connect().await;
    client
        .batch_execute(&keyed_table(name))
        .await
        .expect("create keyed table");
    let mut ids: Vec<u64> = (0..2 * rows).collect();
    ids.shuffle(&mut rand::rngs::StdRng::seed_from_u64(7));
    let mut seconds = [0.0; 2];
    for (keys, time) in ids.chunks(rows as usize).zip(&mut seconds) {
        let lines = keys
            .iter()
            .map(|id| format!("{id}\towner {}\t{}\tnote of row {id}\n", id % 1_000, id * 3));
        let started = Instant::now();
        let copied = copy_lines(&client, &format!("COPY {name} FROM STDIN"), lines).await;
        *time = started.elapsed().as_secs_f64();
        assert_eq!(copied, rows);
    }
    seconds
}
