//! tablegate against PostgreSQL 15 on the same machine: the same tables,
//! keys and indexes, the same rows, the same client (tokio-postgres, in this
//! process).
//!
//! `cargo bench --bench versus_postgres` (release build) starts `tablegate
//! serve` and a PostgreSQL server on free ports and prints, for each
//! workload, tablegate's figure, PostgreSQL's and the ratio (above 1: tablegate
//! is faster), each the median of `RUNS` runs (default 3):
//!
//! 1. `point`: point selects by primary key, prepared once, 1 / 8 / 32
//!    connections (`CONNS`), over `ROWS` accounts (default 100,000); then
//!    with 8 connections, prepared for each query (an unnamed statement),
//!    and over the simple protocol with the id in the text; then as first,
//!    over Unix-domain sockets instead of TCP; then, 8 connections, of a
//!    row of ten columns from `orders` (`ROWS` of them); then by `owner`,
//!    which a unique secondary index holds;
//! 2. `insert`: single-row INSERTs from 8 connections, each acknowledged
//!    durably; then 20,000 of them in one transaction block;
//! 3. `copy`: COPY FROM STDIN of `DEVICES` × 1,000 readings (default 1,000,
//!    so 1,000,000 rows) into a new table; then as many rows of a table
//!    keyed by one column, their keys in random order, into a new table
//!    and as many again into it once it holds rows;
//! 4. `range`: 100 consecutive rows of one partition, and its last 10 rows
//!    newest first (`ORDER BY seq DESC LIMIT 10`), 8 connections;
//! 5. `tpch`: TPC-H at scale factor `SF` (default 1): load time, then each
//!    query's time on tablegate, PostgreSQL and DataFusion over the same rows
//!    in memory, tablegate's answers checked against PostgreSQL's; and
//!    tablegate's peak memory while it scans all of `lineitem`.
//!
//! `WORKLOADS` (default `point,insert,copy,range,tpch`) picks some;
//! `QUERY_TIMEOUT` bounds each TPC-H query on a server (default 300 s);
//! `SECONDS` is the length of a timed run (default 5); `BENCH_DIR` is where
//! the servers keep their data. Without `--bench` (under `cargo test`) it
//! runs a short tablegate-only check of workloads 1 to 4.

mod key_access;
mod servers;
mod tpch;

use std::time::{Duration, Instant};

use key_access::{Figures, Workload};

/// The rows of the transaction block of workload 2b.
const BLOCK_ROWS: u64 = 20_000;
use servers::Server;

struct Settings {
    bench: bool,
    workloads: Vec<String>,
    runs: usize,
    seconds: f64,
    rows: u64,
    devices: u64,
    connections: Vec<usize>,
    scale: String,
    /// Seconds a TPC-H query may run on a server.
    query_timeout: u64,
}

impl Settings {
    fn from_env() -> Self {
        let bench = std::env::args().any(|a| a == "--bench");
        let var = |k: &str| std::env::var(k).ok();
        let number = |k: &str, d: u64| var(k).and_then(|v| v.parse().ok()).unwrap_or(d);
        let list = |v: String| {
            v.split(',')
                .map(|s| s.trim().to_owned())
                .collect::<Vec<_>>()
        };
        if !bench {
            return Settings {
                bench,
                workloads: list("point,insert,copy,range".into()),
                runs: 1,
                seconds: 0.3,
                rows: 2_000,
                devices: 5,
                connections: vec![1, 4],
                scale: String::new(),
                query_timeout: 0,
            };
        }
        Settings {
            bench,
            workloads: list(var("WORKLOADS").unwrap_or("point,insert,copy,range,tpch".into())),
            runs: number("RUNS", 3) as usize,
            seconds: number("SECONDS", 5) as f64,
            rows: number("ROWS", 100_000),
            devices: number("DEVICES", 1_000),
            connections: var("CONNS")
                .map(|v| list(v).iter().filter_map(|c| c.parse().ok()).collect())
                .unwrap_or_else(|| vec![1, 8, 32]),
            scale: var("SF").unwrap_or("1".into()),
            query_timeout: number("QUERY_TIMEOUT", 300),
        }
    }

    fn wants(&self, workload: &str) -> bool {
        self.workloads.iter().any(|w| w == workload)
    }
}

/// A section's title (`what`, and how many runs of how long) and its
/// table's header.
fn print_header(settings: &Settings, what: &str, unit: &str) {
    println!();
    println!(
        "{what}; median of {} runs of {}s",
        settings.runs, settings.seconds
    );
    println!(
        "{:<14} {:>6} {:>12} {:>9} {:>9}",
        "server", "conns", unit, "p50 us", "p99 us"
    );
}

/// Runs a workload on every server, `runs` times each, interleaved, and
/// prints the medians and the ratio.
async fn compare(servers: &[Server], settings: &Settings, workload: Workload, connections: usize) {
    let mut runs: Vec<Vec<Figures>> = servers.iter().map(|_| Vec::new()).collect();
    for _ in 0..settings.runs {
        for (server, figures) in servers.iter().zip(runs.iter_mut()) {
            figures.push(key_access::run(server, workload, connections, settings.seconds).await);
        }
    }
    let medians: Vec<Figures> = runs.into_iter().map(key_access::median).collect();
    for (server, f) in servers.iter().zip(&medians) {
        println!(
            "{:<14} {:>6} {:>12.0} {:>9.0} {:>9.0}",
            server.name, connections, f.per_second, f.p50_us, f.p99_us
        );
    }
    if let [tg, pg] = medians.as_slice() {
        println!(
            "{:<14} {:>6} {:>11.2}x",
            "ratio",
            connections,
            tg.per_second / pg.per_second
        );
    }
}

/// A section of one workload on 8 connections (2 under `cargo test`).
async fn section(servers: &[Server], s: &Settings, what: &str, unit: &str, workload: Workload) {
    print_header(s, what, unit);
    compare(servers, s, workload, if s.bench { 8 } else { 2 }).await;
}

fn ratio_text(ours: f64, theirs: f64) -> String {
    format!("{:.2}x", theirs / ours)
}

/// Prints a server's rows a second and seconds at the median of its runs'
/// `times`, and adds that median to `medians`.
fn print_rate(server: &Server, rows: u64, medians: &mut Vec<f64>, times: Vec<f64>) {
    let median = median_seconds(times);
    println!(
        "{:<14} {:>12.0} {:>10.2}",
        server.name,
        rows as f64 / median,
        median
    );
    medians.push(median);
}

/// Prints the ratio of tablegate's median time to PostgreSQL's, when both ran.
fn print_ratio(medians: &[f64]) {
    if let [tg, pg] = medians {
        println!("{:<14} {:>12}", "ratio", ratio_text(*tg, *pg));
    }
}

/// The middle one of some runs' times.
fn median_seconds(mut seconds: Vec<f64>) -> f64 {
    seconds.sort_by(f64::total_cmp);
    seconds[seconds.len() / 2]
}

async fn drop_table(server: &Server, name: &str) {
    server
        .connect()
        .await
        .batch_execute(&format!("DROP TABLE {name}"))
        .await
        .expect("drop");
}

async fn key_workloads(servers: &[Server], s: &Settings) {
    for server in servers {
        key_access::create_tables(server).await;
        let started = Instant::now();
        key_access::load_accounts(server, s.rows).await;
        println!(
            "{}: {} accounts loaded with COPY in {:.1}s",
            server.name,
            s.rows,
            started.elapsed().as_secs_f64()
        );
        if s.wants("point") {
            key_access::load_orders(server, s.rows).await;
            server
                .connect()
                .await
                .batch_execute("CREATE UNIQUE INDEX accounts_owner ON accounts (owner)")
                .await
                .expect("create index");
        }
    }
    if s.wants("point") {
        print_header(
            s,
            "1. point selects by primary key, extended protocol, prepared once",
            "queries/s",
        );
        for &c in &s.connections {
            compare(servers, s, Workload::PointSelect { rows: s.rows }, c).await;
        }
        let rows = s.rows;
        section(
            servers,
            s,
            "1b. the same, the statement prepared for each query (unnamed)",
            "queries/s",
            Workload::PointSelectUnnamed { rows },
        )
        .await;
        section(
            servers,
            s,
            "1c. the same, simple protocol, the id in the text",
            "queries/s",
            Workload::PointSelectSimple { rows },
        )
        .await;
        print_header(
            s,
            "1d. the same as 1, over Unix-domain sockets",
            "queries/s",
        );
        for &c in &s.connections {
            compare(servers, s, Workload::PointSelectLocal { rows }, c).await;
        }
        section(
            servers,
            s,
            "1e. as 1, a row of ten columns (numeric, date, char(n), timestamptz among them)",
            "queries/s",
            Workload::PointSelectWide { rows },
        )
        .await;
        section(
            servers,
            s,
            "1f. as 1, by a column with a unique secondary index (not the key)",
            "queries/s",
            Workload::PointSelectByIndex { rows },
        )
        .await;
    }
    if s.wants("insert") {
        section(
            servers,
            s,
            "2. single-row INSERTs, each committed durably",
            "inserts/s",
            Workload::Insert,
        )
        .await;
        let rows = if s.bench { BLOCK_ROWS } else { 200 };
        let mut medians = Vec::new();
        println!();
        println!(
            "2b. {rows} single-row INSERTs in one transaction block, one connection; median of {} runs",
            s.runs
        );
        println!("{:<14} {:>12} {:>10}", "server", "inserts/s", "seconds");
        for server in servers {
            let mut times = Vec::new();
            for run in 0..s.runs {
                let name = format!("block_{run}");
                times.push(key_access::insert_block(server, &name, rows).await);
                drop_table(server, &name).await;
            }
            print_rate(server, rows, &mut medians, times);
        }
        print_ratio(&medians);
    }
    if s.wants("copy") || s.wants("range") {
        let rows = s.devices * key_access::READINGS_PER_DEVICE;
        println!();
        println!(
            "3. COPY FROM STDIN of {rows} rows (text format) into a new table; median of {} runs",
            s.runs
        );
        println!("{:<14} {:>12} {:>10}", "server", "rows/s", "seconds");
        let mut medians = Vec::new();
        for server in servers {
            let mut times = Vec::new();
            for run in 0..s.runs {
                // The last run's table is kept as `readings` for workload 4.
                let name = if run + 1 == s.runs {
                    "readings".to_owned()
                } else {
                    format!("readings_{run}")
                };
                times.push(key_access::copy_readings(server, &name, s.devices).await);
                if name != "readings" {
                    drop_table(server, &name).await;
                }
            }
            print_rate(server, rows, &mut medians, times);
        }
        print_ratio(&medians);
    }
    if s.wants("copy") {
        let rows = s.devices * key_access::READINGS_PER_DEVICE;
        println!();
        println!(
            "3b. COPY FROM STDIN of {rows} rows keyed by one column (a partition each), keys in \
             random order, into a new table, then {rows} more into it; median of {} runs",
            s.runs
        );
        println!(
            "{:<14} {:>14} {:>16}",
            "server", "new rows/s", "holding rows/s"
        );
        let mut medians = Vec::new();
        for server in servers {
            let mut times = [Vec::new(), Vec::new()];
            for run in 0..s.runs {
                let name = format!("keyed_{run}");
                let seconds = key_access::copy_keyed(server, &name, rows).await;
                for (time, all) in seconds.into_iter().zip(&mut times) {
                    all.push(time);
                }
                drop_table(server, &name).await;
            }
            let median = times.map(median_seconds);
            println!(
                "{:<14} {:>14.0} {:>16.0}",
                server.name,
                rows as f64 / median[0],
                rows as f64 / median[1]
            );
            medians.push(median);
        }
        if let [tg, pg] = medians.as_slice() {
            println!(
                "{:<14} {:>14} {:>16}",
                "ratio",
                ratio_text(tg[0], pg[0]),
                ratio_text(tg[1], pg[1])
            );
        }
    }
    if s.wants("range") {
        let devices = s.devices;
        section(
            servers,
            s,
            "4. 100 consecutive rows of one partition",
            "queries/s",
            Workload::Range100 { devices },
        )
        .await;
        section(
            servers,
            s,
            "4. log tail: ORDER BY seq DESC LIMIT 10 in one partition",
            "queries/s",
            Workload::LogTail { devices },
        )
        .await;
    }
}

async fn tpch_workload(s: &Settings) {
    let data = tpch::generate(&s.scale);
    println!();
    println!(
        "5. TPC-H at scale factor {} (tpchgen-cli 4.0.0), clients/tpch/schema.sql on both servers",
        s.scale
    );
    // A server of its own each, so the key workloads' tables are not in the way.
    let servers = [
        servers::start_tablegate().await,
        servers::start_postgres().await,
    ];
    let mut totals = Vec::new();
    for server in &servers {
        let loaded = tpch::load(server, &data).await;
        let mut total: f64 = loaded.iter().map(|(_, t)| t).sum();
        if server.name != "tablegate" {
            let started = Instant::now();
            server
                .connect()
                .await
                .batch_execute("ANALYZE")
                .await
                .expect("analyze");
            total += started.elapsed().as_secs_f64();
        }
        let per_table: Vec<String> = loaded.iter().map(|(t, s)| format!("{t} {s:.1}s")).collect();
        println!(
            "{}: loaded in {total:.1}s ({})",
            server.name,
            per_table.join(", ")
        );
        totals.push(total);
    }
    println!("load time ratio: {}", ratio_text(totals[0], totals[1]));

    let started = Instant::now();
    let memory = tpch::in_memory(&data);
    println!(
        "DataFusion: read the CSV files into memory in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    println!();
    println!(
        "TPC-H queries, milliseconds, median of {} runs; ratios above 1 mean tablegate is faster",
        s.runs
    );
    println!(
        "{:<6} {:>6} {:>11} {:>11} {:>11} {:>9} {:>9}  answer",
        "query", "rows", "tablegate", "PostgreSQL", "DataFusion", "vs PG", "vs DF"
    );
    let clients = [servers[0].connect().await, servers[1].connect().await];
    // PostgreSQL runs q17 and q20 as a subplan per outer row, over all of
    // lineitem each time (no index on l_partkey): hours at scale factor 1.
    for client in &clients {
        let limit = format!("SET statement_timeout = '{}s'", s.query_timeout);
        client
            .batch_execute(&limit)
            .await
            .expect("statement_timeout");
    }
    let (mut sum_tg, mut sum_pg, mut sum_df) = (0.0, 0.0, 0.0);
    for (name, sql) in tpch::queries() {
        let mut times: [Vec<Duration>; 3] = Default::default();
        let mut answers: [Option<Vec<Vec<Option<String>>>>; 2] = [None, None];
        let mut df_rows = 0;
        for run in 0..s.runs {
            for (i, client) in clients.iter().enumerate() {
                // A server that timed out once is not asked again.
                if run == 0 || answers[i].is_some() {
                    answers[i] = tpch::run_query(client, &sql).await.map(|(rows, t)| {
                        times[i].push(t);
                        rows
                    });
                }
            }
            let t;
            (df_rows, t) = tpch::run_in_memory(&memory, &sql).await;
            times[2].push(t);
        }
        let [tg, pg, df] = times.map(|mut t| {
            t.sort();
            t.get(t.len() / 2).map(|d| d.as_secs_f64() * 1000.0)
        });
        let df = df.unwrap_or_default();
        let shown =
            |ms: Option<f64>| ms.map_or(format!(">{}s", s.query_timeout), |ms| format!("{ms:.1}"));
        let ratio = |theirs: Option<f64>| match (tg, theirs) {
            (Some(ours), Some(theirs)) => ratio_text(ours, theirs),
            _ => "-".to_owned(),
        };
        let answer = match (&answers[0], &answers[1]) {
            (Some(got), Some(expected)) if !tpch::same_rows(got, expected) => {
                format!(
                    "DIFFERS from PostgreSQL: {:?} vs {:?}",
                    got.first(),
                    expected.first()
                )
            }
            (Some(got), _) if df_rows != got.len() => format!("DataFusion gave {df_rows} rows"),
            (Some(_), Some(_)) => "same as PostgreSQL".to_owned(),
            (Some(_), None) => "PostgreSQL timed out; as many rows as DataFusion".to_owned(),
            (None, _) => "tablegate timed out".to_owned(),
        };
        if let (Some(tg), Some(pg)) = (tg, pg) {
            (sum_tg, sum_pg, sum_df) = (sum_tg + tg, sum_pg + pg, sum_df + df);
        }
        let rows = answers[0]
            .as_ref()
            .or(answers[1].as_ref())
            .map_or(df_rows, Vec::len);
        println!(
            "{name:<6} {rows:>6} {:>11} {:>11} {df:>11.1} {:>9} {:>9}  {answer}",
            shown(tg),
            shown(pg),
            ratio(pg),
            ratio(Some(df))
        );
    }
    println!(
        "{:<6} {:>6} {sum_tg:>11.1} {sum_pg:>11.1} {sum_df:>11.1} {:>9} {:>9}  (queries both servers finished)",
        "all",
        "",
        ratio_text(sum_tg, sum_pg),
        ratio_text(sum_tg, sum_df)
    );

    // Peak memory of the server while one query reads every lineitem row:
    // from the table's column copy (what a whole-table scan reads once the
    // table is copied), then from the store's records.
    let tablegate = &servers[0];
    println!();
    for (read_from, switch) in [("the column copy", "on"), ("the store's records", "off")] {
        clients[0]
            .batch_execute(&format!("SET tablegate.column_copies = {switch}"))
            .await
            .expect("column copies switch");
        let (seconds, before, peak) = scan_peak(tablegate, &clients[0]).await;
        println!(
            "full scan of lineitem ({FULL_SCAN}) from {read_from}: {seconds:.1}s; tablegate RSS \
             {:.0} MiB before, peak {:.0} MiB during; without mapped files (RssAnon) {:.0} MiB \
             before, peak {:.0} MiB during",
            before.0, peak.0, before.1, peak.1
        );
    }
}

const FULL_SCAN: &str = "SELECT count(*), sum(l_extendedprice), max(l_comment) FROM lineitem";

/// Runs [`FULL_SCAN`]: its seconds, and the server's (RSS, RssAnon) in
/// MiB before it and at their highest while it ran (sampled every 10 ms).
async fn scan_peak(
    server: &Server,
    client: &tokio_postgres::Client,
) -> (f64, (f64, f64), (f64, f64)) {
    let memory = |field| server.memory_mib(field).unwrap_or(0.0);
    let before = (memory("VmRSS"), memory("RssAnon"));
    let query = client.simple_query(FULL_SCAN);
    tokio::pin!(query);
    let mut peak = before;
    let started = Instant::now();
    loop {
        tokio::select! {
            result = &mut query => { result.expect("full scan"); break; }
            _ = tokio::time::sleep(Duration::from_millis(10)) => {
                peak = (peak.0.max(memory("VmRSS")), peak.1.max(memory("RssAnon")));
            }
        }
    }
    (started.elapsed().as_secs_f64(), before, peak)
}

fn main() {
    let settings = Settings::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        if ["point", "insert", "copy", "range"]
            .iter()
            .any(|w| settings.wants(w))
        {
            let mut servers = vec![servers::start_tablegate().await];
            if settings.bench {
                servers.push(servers::start_postgres().await);
            }
            key_workloads(&servers, &settings).await;
        }
        if settings.wants("tpch") {
            tpch_workload(&settings).await;
        }
    });
}
