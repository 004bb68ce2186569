//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod azurite;
pub mod process;
pub mod workload;

use tablegate::model::{Entity, Value};
use tablegate::store::native::NativeStore;

/// A store in a fresh temporary directory (removed when the guard drops).
pub fn temp_store() -> (tempfile::TempDir, NativeStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = NativeStore::open(dir.path()).expect("open store");
    (dir, store)
}

/// An engine over a store in a fresh temporary directory.
pub async fn temp_engine() -> (tempfile::TempDir, std::sync::Arc<tablegate::sql::Engine>) {
    let (dir, store) = temp_store();
    let engine = tablegate::sql::Engine::open(std::sync::Arc::new(store))
        .await
        .expect("open engine");
    (dir, engine)
}

pub fn entity(pk: &str, rk: &str) -> Entity {
    Entity::new(pk, rk)
}

pub fn employee(dept: &str, id: &str, name: &str, age: i32) -> Entity {
    Entity::new(dept, id)
        .with("Name", Value::String(name.into()))
        .with("Age", Value::Int32(age))
}

pub fn int(e: &Entity, name: &str) -> i64 {
    match e.get(name) {
        Some(Value::Int32(v)) => i64::from(*v),
        Some(Value::Int64(v)) => *v,
        other => panic!("{name} is {other:?}"),
    }
}

/// The number of rows of `table`.
pub async fn count(client: &tokio_postgres::Client, table: &str) -> i64 {
    client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0)
}

/// A client of the server on `port`, as user `test` (trust authentication).
pub async fn connect(port: u16) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=test"),
        tokio_postgres::NoTls,
    )
    .await
    .expect("connect");
    tokio::spawn(connection);
    client
}

/// Runs psql (unaligned, `|` between columns) with one command over the
/// connection `conninfo` names; returns what it printed and its messages
/// (notices) on stderr. Fails the test if psql fails.
pub async fn psql(conninfo: &str, command: &str) -> (String, String) {
    let (conninfo, owned) = (conninfo.to_owned(), command.to_owned());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("psql")
            .arg(conninfo)
            .args(["-X", "-A", "-F", "|", "-c", &owned])
            .output()
            .expect("psql is installed (scripts/test installs it)")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A server whose users (`name:password` lines) log in with SCRAM-SHA-256,
/// over a fresh data dir; its port, and the dir to keep.
pub async fn start_scram(
    users: &str,
    tls: Option<tablegate::pg::TlsAcceptor>,
) -> (u16, tempfile::TempDir) {
    use tablegate::pg::{Authentication, Server, Users};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(NativeStore::open(dir.path()).expect("open store"));
    let engine = tablegate::sql::Engine::open(store).await.expect("engine");
    let users = Users::parse(users).expect("users");
    let server = Server::bind_with(
        "127.0.0.1:0",
        engine,
        Authentication::Scram(std::sync::Arc::new(users)),
        tls,
    )
    .await
    .expect("bind");
    let port = server.local_addr().expect("addr").port();
    tokio::spawn(server.run(std::future::pending()));
    (port, dir)
}

/// A number from the environment (a test's size or seed), or the default.
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Counts panics from here on, split between tablegate's own code and its
/// dependencies (by where each panic was raised); restores the previous
/// hook when dropped.
pub struct PanicCounter {
    own: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    dependencies: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl PanicCounter {
    pub fn install() -> PanicCounter {
        use std::sync::atomic::Ordering;
        let counter = PanicCounter {
            own: Default::default(),
            dependencies: Default::default(),
        };
        let (own, dependencies) = (counter.own.clone(), counter.dependencies.clone());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_dependency = info
                .location()
                .is_some_and(|l| l.file().contains(".cargo/registry"));
            if in_dependency {
                dependencies.fetch_add(1, Ordering::SeqCst);
            } else {
                own.fetch_add(1, Ordering::SeqCst);
                previous(info);
            }
        }));
        counter
    }

    /// Panics raised in tablegate's code (and in the test's).
    pub fn own(&self) -> usize {
        self.own.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Panics raised inside dependencies.
    pub fn dependencies(&self) -> usize {
        self.dependencies.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for PanicCounter {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::panic::take_hook();
        }
    }
}

/// `COPY table FROM STDIN` of `lines` (text format); the rows copied.
pub async fn copy_lines(
    client: &tokio_postgres::Client,
    table: &str,
    lines: String,
) -> Result<u64, tokio_postgres::Error> {
    use futures::SinkExt;
    let sink = client.copy_in(&format!("COPY {table} FROM STDIN")).await?;
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(lines)).await?;
    sink.finish().await
}

/// A metric of the scan of `table` in `EXPLAIN ANALYZE sql`, such as
/// `entities_read` (DataFusion prints 30000 as `30.00 K`).
pub async fn scan_metric(
    client: &tokio_postgres::Client,
    sql: &str,
    table: &str,
    metric: &str,
) -> u64 {
    let plan: Vec<String> = client
        .query(&format!("EXPLAIN ANALYZE {sql}"), &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get::<_, String>(1))
        .collect();
    let plan = plan.join("\n");
    let line = plan
        .lines()
        .find(|l| l.contains(&format!("StoreScan: table={table},")))
        .unwrap_or_else(|| panic!("no scan of {table}: {plan}"));
    let value = line
        .split(&format!("{metric}="))
        .nth(1)
        .unwrap_or_else(|| panic!("no {metric}: {line}"));
    let number: String = value
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let scale = match value[number.len()..].trim_start().chars().next() {
        Some('K') => 1e3,
        Some('M') => 1e6,
        _ => 1.0,
    };
    (number.parse::<f64>().expect(line) * scale).round() as u64
}

/// The first column of a query's rows.
pub async fn first_column<T, C>(client: &tokio_postgres::Client, sql: &str) -> C
where
    T: for<'a> tokio_postgres::types::FromSql<'a>,
    C: FromIterator<T>,
{
    client
        .query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The rows of a simple query, as text (NULL as "NULL").
pub async fn simple_rows(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<String>> {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("NULL").to_owned())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// A tablegate server on an ephemeral port over a fresh data dir, stopped when dropped.
pub struct TestServer {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    run: Option<tokio::task::JoinHandle<()>>,
    dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_in(tempfile::tempdir().expect("tempdir")).await
    }

    /// A server over an existing data dir (to restart over the same data).
    pub async fn start_in(dir: tempfile::TempDir) -> TestServer {
        Self::start_configured(dir, |server| server).await
    }

    /// A server changed by `configure` before it serves.
    pub async fn start_configured(
        dir: tempfile::TempDir,
        configure: impl FnOnce(tablegate::pg::Server) -> tablegate::pg::Server,
    ) -> TestServer {
        let store = std::sync::Arc::new(NativeStore::open(dir.path()).expect("open store"));
        Self::start_over(store, dir, configure).await
    }

    /// A server over the Azure backend on `azurite`'s account; it finishes
    /// outbox records left by stopped gateways, as `tablegate serve` does.
    pub async fn start_azure(azurite: &azurite::Azurite) -> TestServer {
        let store = tablegate::store::azure::AzureStore::connect(&azurite.connection_string())
            .expect("connect");
        store.spawn_recovery();
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_over(std::sync::Arc::new(store), dir, |server| server).await
    }

    async fn start_over(
        store: std::sync::Arc<dyn tablegate::store::TableStore>,
        dir: tempfile::TempDir,
        configure: impl FnOnce(tablegate::pg::Server) -> tablegate::pg::Server,
    ) -> TestServer {
        let engine = tablegate::sql::Engine::open(store).await.expect("engine");
        let server = tablegate::pg::Server::bind("127.0.0.1:0", engine)
            .await
            .expect("bind");
        let server = configure(server);
        let port = server.local_addr().expect("addr").port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        TestServer {
            port,
            stop: Some(stop),
            run: Some(run),
            dir,
        }
    }

    pub async fn client(&self) -> tokio_postgres::Client {
        self.client_as("test").await
    }

    /// A client logged in as `user` (trust authentication).
    pub async fn client_as(&self, user: &str) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={} user={user}", self.port),
            tokio_postgres::NoTls,
        )
        .await
        .expect("connect");
        tokio::spawn(connection);
        client
    }

    /// A client, and the notices the server sends it.
    pub async fn client_with_notices(
        &self,
    ) -> (
        tokio_postgres::Client,
        tokio::sync::mpsc::UnboundedReceiver<String>,
    ) {
        let (client, mut connection) = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={} user=test", self.port),
            tokio_postgres::NoTls,
        )
        .await
        .expect("connect");
        let (notices, received) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = futures::StreamExt::next(&mut messages).await {
                if let tokio_postgres::AsyncMessage::Notice(notice) = message {
                    let _ = notices.send(notice.message().to_owned());
                }
            }
        });
        (client, received)
    }
}

impl TestServer {
    /// Stops the server and hands back its data dir.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(run) = self.run.take() {
            run.await.expect("the server stops");
        }
        // Let the connection threads drop the store before the dir is reused.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
