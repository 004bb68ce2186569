//! The two servers under test, each on a free port over a temporary
//! directory: `tablegate serve` (this build) and PostgreSQL 15 (Debian's
//! binaries, `initdb` defaults plus `shared_buffers=256MB`, run as the
//! `postgres` user when started as root).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio_postgres::NoTls;

pub struct Server {
    pub name: &'static str,
    pub port: u16,
    /// Where the server's Unix-domain socket is (`.s.PGSQL.<port>`).
    socket_dir: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Server {
    /// The server's resident memory now, in MiB: `VmRSS` (all of it) or
    /// `RssAnon` (without the pages of mapped files, which are the system's
    /// file cache).
    pub fn memory_mib(&self, field: &str) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status
            .lines()
            .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }

    pub async fn connect(&self) -> tokio_postgres::Client {
        connect(self.port).await
    }

    /// A client over the server's Unix-domain socket.
    pub async fn connect_local(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::Config::new()
            .host_path(&self.socket_dir)
            .port(self.port)
            .user("bench")
            .dbname("postgres")
            .connect(NoTls)
            .await
            .expect("connect over the Unix socket");
        tokio::spawn(connection);
        client
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary directory for a server's data, under `BENCH_DIR` if set.
fn data_dir() -> tempfile::TempDir {
    match std::env::var("BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d),
        Err(_) => tempfile::tempdir(),
    }
    .expect("tempdir")
}

fn url(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=bench dbname=postgres")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

async fn connect(port: u16) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&url(port), NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

async fn wait_ready(port: u16) {
    for _ in 0..200 {
        if tokio_postgres::connect(&url(port), NoTls).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server on port {port} did not start");
}

pub async fn start_tablegate() -> Server {
    let dir = data_dir();
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tablegate"))
        .args(["serve", "--port", &port.to_string(), "--data-dir"])
        .arg(dir.path())
        .arg("--socket-dir")
        .arg(dir.path())
        // Its diagnostics (low query density and the like) would fill the report.
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .expect("start tablegate");
    wait_ready(port).await;
    Server {
        name: "tablegate",
        port,
        socket_dir: dir.path().to_owned(),
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

pub async fn start_postgres() -> Server {
    let dir = data_dir();
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
    wait_ready(port).await;
    Server {
        name: "PostgreSQL 15",
        port,
        socket_dir: dir.path().to_owned(),
        child,
        _dir: dir,
    }
}
