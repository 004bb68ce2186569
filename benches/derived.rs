//! What secondary indexes and materialized views buy and cost, on one table
//! of the native engine, against the same queries and writes without them.
//!
//! `cargo bench --bench derived` (release build). It starts a tablegate
//! server in process over a fresh data dir under `target/`, loads `ROWS`
//! rows (default 200000) with COPY, and prints:
//! - lookups by a non-key column (`email = '...'`, one row) and by a range of
//!   another (`age BETWEEN a AND a + 1`, about 0.1% of the rows): median
//!   latency scanning the table, then through an index, and the ratio;
//! - the time CREATE INDEX takes over the loaded rows;
//! - single-row INSERTs from 8 connections, each acknowledged durably, into
//!   the table alone, with one index, with one grouped view, with both:
//!   writes per second (median of 3 runs of `SECONDS`, default 5) and the
//!   ratio to the table alone.
//!
//! Without `--bench` (under `cargo test`) it runs a small, short version
//! that checks the index is used and finds what the scan finds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

struct Settings {
    rows: usize,
    seconds: u64,
    lookups: usize,
    runs: usize,
}

async fn connect(port: u16) -> Client {
    let (client, connection) =
        tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user=bench"), NoTls)
            .await
            .expect("connect");
    tokio::spawn(connection);
    client
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// Median latency in microseconds of the query `sql` makes of each key;
/// also returns the rows each returned.
async fn latency(client: &Client, sql: impl Fn(i32) -> String, keys: &[i32]) -> (f64, Vec<usize>) {
    let mut times = Vec::with_capacity(keys.len());
    let mut counts = Vec::with_capacity(keys.len());
    for &key in keys {
        let sql = sql(key);
        let start = Instant::now();
        let rows = client.query(&sql, &[]).await.expect(&sql);
        times.push(start.elapsed().as_secs_f64() * 1e6);
        counts.push(rows.len());
    }
    (median(times), counts)
}

/// Single-row INSERTs from 8 connections for `seconds`: writes per second.
async fn insert_rate(port: u16, table: &str, seconds: u64, base: i32) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..8 {
        let table = table.to_owned();
        tasks.push(tokio::spawn(async move {
            let client = connect(port).await;
            let insert = client
                .prepare(&format!("INSERT INTO {table} VALUES ($1, $2, $3, $4)"))
                .await
                .unwrap();
            let mut n = 0i32;
            while Instant::now() < deadline {
                let id = base + c * 10_000_000 + n;
                let email = format!("w{id}@example.com");
                client
                    .execute(&insert, &[&(id % 100), &id, &email, &(id % 90)])
                    .await
                    .unwrap();
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    f64::from(total) / seconds as f64
}

async fn run(settings: Settings, bench: bool) {
    let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
    let store = Arc::new(tablegate::store::native::NativeStore::open(dir.path()).unwrap());
    let engine = tablegate::sql::Engine::open(store).await.unwrap();
    let server = tablegate::pg::Server::bind("127.0.0.1:0", engine)
        .await
        .unwrap();
    let port = server.local_addr().unwrap().port();
    tokio::spawn(server.run(std::future::pending::<()>()));
    let client = connect(port).await;

    let schema = "(region int, id int, email text, age int, PRIMARY KEY (region, id))";
    client
        .batch_execute(&format!("CREATE TABLE people {schema}"))
        .await
        .unwrap();
    let start = Instant::now();
    let mut data = String::new();
    for id in 0..settings.rows {
        data.push_str(&format!(
            "{}\t{id}\tuser{id}@example.com\t{}\n",
            id % 100,
            (id * 7919) % 1000
        ));
    }
    let sink = client.copy_in("COPY people FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    use futures::SinkExt;
    sink.send(bytes::Bytes::from(data)).await.unwrap();
    sink.finish().await.unwrap();
    println!(
        "loaded {} rows with COPY in {:.1}s",
        settings.rows,
        start.elapsed().as_secs_f64()
    );

    let keys: Vec<i32> = (0..settings.lookups)
        .map(|i| ((i * 104_729) % settings.rows) as i32)
        .collect();
    let ages: Vec<i32> = (0..settings.lookups)
        .map(|i| ((i * 37) % 999) as i32)
        .collect();
    let by_email =
        |k: i32| format!("SELECT region, id FROM people WHERE email = 'user{k}@example.com'");
    let by_age = |a: i32| {
        format!(
            "SELECT region, id FROM people WHERE age BETWEEN {a} AND {}",
            a + 1
        )
    };
    let (email_scan, email_scan_rows) = latency(&client, by_email, &keys).await;
    let (age_scan, age_scan_rows) = latency(&client, by_age, &ages).await;

    for (index, column) in [("people_email", "email"), ("people_age", "age")] {
        let start = Instant::now();
        client
            .batch_execute(&format!("CREATE INDEX {index} ON people ({column})"))
            .await
            .unwrap();
        println!(
            "CREATE INDEX {index} over {} rows: {:.2}s",
            settings.rows,
            start.elapsed().as_secs_f64()
        );
    }
    for sql in [by_email(1), by_age(1)] {
        let explain = format!("EXPLAIN {sql}");
        let plan: String = client
            .query(&explain, &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(1))
            .collect();
        assert!(plan.contains("access=index"), "{explain}: {plan}");
    }
    let (email_index, email_index_rows) = latency(&client, by_email, &keys).await;
    let (age_index, age_index_rows) = latency(&client, by_age, &ages).await;
    assert_eq!(
        email_scan_rows, email_index_rows,
        "the index finds what the scan finds"
    );
    assert_eq!(
        age_scan_rows, age_index_rows,
        "the index finds what the scan finds"
    );

    println!(
        "lookup ({} queries each)       scan us   index us   speedup",
        keys.len()
    );
    println!(
        "email = '...' (1 row)       {email_scan:>8.0} {email_index:>10.0} {:>8.0}x",
        email_scan / email_index
    );
    println!(
        "age BETWEEN (~{} rows)       {age_scan:>8.0} {age_index:>10.0} {:>8.0}x",
        age_scan_rows.iter().sum::<usize>() / age_scan_rows.len().max(1),
        age_scan / age_index
    );

    // Write cost: the same inserts into tables with nothing, an index, a
    // view, both.
    let setups = [
        ("plain", ""),
        ("indexed", "CREATE INDEX indexed_email ON indexed (email)"),
        (
            "viewed",
            "CREATE MATERIALIZED VIEW viewed_regions AS SELECT region, count(*) AS n, max(id) AS newest FROM viewed GROUP BY region",
        ),
        (
            "both",
            "CREATE INDEX both_email ON both (email); \
             CREATE MATERIALIZED VIEW both_regions AS SELECT region, count(*) AS n, max(id) AS newest FROM both GROUP BY region",
        ),
    ];
    let mut plain = 0.0;
    println!(
        "single-row INSERTs, 8 connections, median of {} runs of {}s",
        settings.runs, settings.seconds
    );
    println!("table            writes/s   vs plain");
    for (table, derived) in setups {
        client
            .batch_execute(&format!("CREATE TABLE {table} {schema}; {derived}"))
            .await
            .unwrap();
        let mut rates = Vec::new();
        for run in 0..settings.runs {
            rates.push(insert_rate(port, table, settings.seconds, run as i32 * 1_000_000).await);
        }
        let rate = median(rates);
        if table == "plain" {
            plain = rate;
        }
        println!("{table:<14} {rate:>10.0} {:>9.2}x", rate / plain);
    }
    let verify: Vec<String> = client
        .query("VERIFY MATERIALIZED VIEW both_regions", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(1))
        .collect();
    assert!(verify.is_empty(), "{verify:?}");
    if !bench {
        println!("(short check run; figures are not benchmarks)");
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let number = |name: &str, default: u64| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let settings = if bench {
        Settings {
            rows: number("ROWS", 200_000) as usize,
            seconds: number("SECONDS", 5),
            lookups: 30,
            runs: 3,
        }
    } else {
        Settings {
            rows: 2_000,
            seconds: 1,
            lookups: 5,
            runs: 1,
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(settings, bench));
}
