//! Point selects by primary key over the extended protocol, tablegate against
//! PostgreSQL 15 on the same machine, same table, same rows, same client.
//!
//! `cargo bench --bench point_select` (release build). It starts
//! `tablegate serve` and a PostgreSQL server (Debian's `postgres` binaries,
//! `initdb` into a temporary directory, run as the `postgres` user when
//! started as root) on free ports, loads both, then runs 1, 8 and 32
//! connections that each prepare `SELECT ... WHERE k = $1` once and execute
//! it with random keys. Prints queries per second, p50 and p99 latency, and
//! the ratio tablegate / PostgreSQL; each figure is the median of 3 runs.
//! Settings: `ROWS` (default 100000), `SECONDS` per run (default 5),
//! `CONNS` (connection counts, default `1,8,32`).
//! Without `--bench` (under `cargo test`) it runs a short tablegate-only check.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tokio_postgres::NoTls;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Server {
    name: &'static str,
    port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_ready(port: u16, user: &str) {
    for _ in 0..200 {
        if tokio_postgres::connect(
            &format!("host=127.0.0.1 port={port} user={user} dbname=postgres"),
            NoTls,
        )
        .await
        .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server on port {port} did not start");
}

async fn start_tablegate() -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tablegate"))
        .args(["serve", "--port", &port.to_string(), "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start tablegate");
    wait_ready(port, "bench").await;
    Server {
        name: "tablegate",
        port,
        child,
        _dir: dir,
    }
}

fn pg_bin(name: &str) -> PathBuf {
    for dir in ["/usr/lib/postgresql/15/bin", "/usr/local/bin", "/usr/bin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("PostgreSQL 15's {name} not found: apt-get install postgresql-15");
}

/// Runs a PostgreSQL binary, as the `postgres` user when we are root (initdb refuses root).
fn pg_command(bin: &str) -> Command {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false);
    if is_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(pg_bin(bin));
        c
    } else {
        Command::new(pg_bin(bin))
    }
}

async fn start_postgres() -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let _ = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(dir.path())
        .status();
    let status = pg_command("initdb")
        .args(["-A", "trust", "-U", "bench", "-D"])
        .arg(&data)
        .stdout(Stdio::null())
        .status()
        .expect("initdb");
    assert!(status.success(), "initdb failed");
    let port = free_port();
    let child = pg_command("postgres")
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir.path())
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "shared_buffers=256MB",
            "-c",
            "max_connections=100",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start postgres");
    wait_ready(port, "bench").await;
    Server {
        name: "PostgreSQL 15",
        port,
        child,
        _dir: dir,
    }
}

async fn connect(port: u16) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=bench dbname=postgres"),
        NoTls,
    )
    .await
    .expect("connect");
    tokio::spawn(connection);
    client
}

async fn load(port: u16, rows: u64) {
    let client = connect(port).await;
    client
        .batch_execute("CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL, note text)")
        .await
        .expect("create");
    use futures::SinkExt;
    let sink = client
        .copy_in("COPY accounts FROM STDIN")
        .await
        .expect("copy");
    futures::pin_mut!(sink);
    let mut chunk = String::new();
    for i in 0..rows {
        chunk.push_str(&format!(
            "{i}\towner {i}\t{}\tnote for account {i} of the point select benchmark\n",
            i * 7
        ));
        if chunk.len() > 1 << 20 {
            sink.send(bytes::Bytes::from(std::mem::take(&mut chunk)))
                .await
                .expect("send");
        }
    }
    sink.send(bytes::Bytes::from(chunk)).await.expect("send");
    sink.finish().await.expect("finish");
}

struct Figures {
    qps: f64,
    p50_us: f64,
    p99_us: f64,
}

async fn run(port: u16, connections: usize, rows: u64, seconds: f64) -> Figures {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..connections {
        tasks.push(tokio::spawn(async move {
            let client = connect(port).await;
            let statement = client
                .prepare("SELECT owner, balance FROM accounts WHERE id = $1")
                .await
                .expect("prepare");
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let id = rng.random_range(0..rows) as i32;
                let t = Instant::now();
                let row = client.query_one(&statement, &[&id]).await.expect("query");
                latencies.push(t.elapsed().as_micros() as u32);
                let balance: i64 = row.get(1);
                assert_eq!(balance, id as i64 * 7);
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
        qps: all.len() as f64 / elapsed,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    }
}

fn median(mut runs: Vec<Figures>) -> Figures {
    runs.sort_by(|a, b| a.qps.total_cmp(&b.qps));
    runs.swap_remove(runs.len() / 2)
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (rows, seconds, repeats, levels): (u64, f64, usize, Vec<usize>) = if bench {
        (
            env("ROWS", 100_000),
            env("SECONDS", 5) as f64,
            3,
            std::env::var("CONNS")
                .ok()
                .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
                .unwrap_or_else(|| vec![1, 8, 32]),
        )
    } else {
        (2_000, 0.5, 1, vec![1, 4])
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let mut servers = vec![start_tablegate().await];
        if bench {
            servers.push(start_postgres().await);
        }
        for s in &servers {
            let t = Instant::now();
            load(s.port, rows).await;
            println!("{}: loaded {rows} rows with COPY in {:.1}s", s.name, t.elapsed().as_secs_f64());
        }
        println!("point selects by primary key, extended protocol, prepared once; median of {repeats} runs of {seconds}s");
        println!("{:<14} {:>6} {:>12} {:>9} {:>9}", "server", "conns", "queries/s", "p50 us", "p99 us");
        let servers = Arc::new(servers);
        for &connections in &levels {
            let mut figures = Vec::new();
            for s in servers.iter() {
                let mut runs = Vec::new();
                for _ in 0..repeats {
                    runs.push(run(s.port, connections, rows, seconds).await);
                }
                let f = median(runs);
                println!("{:<14} {:>6} {:>12.0} {:>9.0} {:>9.0}", s.name, connections, f.qps, f.p50_us, f.p99_us);
                figures.push(f);
            }
            if let [tg, pg] = figures.as_slice() {
                println!("{:<14} {:>6} {:>11.2}x", "ratio", connections, tg.qps / pg.qps);
            }
        }
    });
}
