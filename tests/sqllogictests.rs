//! Runs `sql/*.slt` against a real server on an ephemeral port through a real
//! PostgreSQL client (tokio-postgres, simple query protocol), over each
//! backend: the native engine (a fresh data dir per file) and the Azure
//! Table service (a fresh Azurite per file). Errors are reported as
//! `SQLSTATE: message`, followed by ` DETAIL: detail` and ` HINT: hint`
//! when the error has them, so `statement error 23505` asserts the code.
//!
//! Records where the Azure service's semantics differ are marked
//! `skipif azure` / `onlyif azure` (the engine names are `native` and
//! `azure`), next to a comment saying why; `azure_*.slt` files run on the
//! Azure backend only.
//!
//! `cargo test --test sqllogictests [NAME]` runs the files whose name
//! contains NAME; `SLT_BACKENDS=native` (or `azure`) runs one backend.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Runner};
use tablegate::pg::Server;
use tablegate::sql::Engine;
use tablegate::store::azure::AzureStore;
use tablegate::store::native::NativeStore;
use tablegate::store::TableStore;
use tokio_postgres::{NoTls, SimpleQueryMessage};

#[derive(Debug)]
struct PgError(String);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PgError {}

struct Postgres {
    client: tokio_postgres::Client,
    backend: &'static str,
}

impl Postgres {
    async fn connect(port: u16, backend: &'static str) -> Result<Self, PgError> {
        let (client, connection) =
            tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user=test"), NoTls)
                .await
                .map_err(|e| PgError(e.to_string()))?;
        tokio::spawn(connection);
        Ok(Postgres { client, backend })
    }
}

#[async_trait]
impl AsyncDB for Postgres {
    type Error = PgError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let messages = self
            .client
            .simple_query(sql)
            .await
            .map_err(|e| match e.as_db_error() {
                Some(db) => {
                    let mut text = format!("{}: {}", db.code().code(), db.message());
                    if let Some(detail) = db.detail() {
                        text += &format!(" DETAIL: {detail}");
                    }
                    if let Some(hint) = db.hint() {
                        text += &format!(" HINT: {hint}");
                    }
                    PgError(text)
                }
                None => PgError(e.to_string()),
            })?;
        let mut rows = Vec::new();
        let mut columns = None;
        let mut count = 0;
        for message in messages {
            match message {
                SimpleQueryMessage::RowDescription(d) => columns = Some(d.len()),
                SimpleQueryMessage::Row(row) => {
                    let cells: Vec<String> = (0..row.len())
                        .map(|i| match row.get(i) {
                            None => "NULL".to_owned(),
                            Some("") => "(empty)".to_owned(),
                            Some(v) => v.to_owned(),
                        })
                        .collect();
                    // A cell of several lines (a plan) becomes several rows.
                    let mut first = Vec::new();
                    let mut more = Vec::new();
                    for cell in cells {
                        let mut lines = cell.lines();
                        first.push(lines.next().unwrap_or_default().to_owned());
                        more.extend(lines.map(|l| vec![l.to_owned()]));
                    }
                    rows.push(first);
                    rows.extend(more);
                }
                SimpleQueryMessage::CommandComplete(n) => count = n,
                _ => {}
            }
        }
        Ok(match columns {
            Some(n) => DBOutput::Rows {
                types: vec![DefaultColumnType::Any; n],
                rows,
            },
            None => DBOutput::StatementComplete(count),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        self.backend
    }
}

async fn run_file(path: PathBuf, backend: &'static str) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut azurite = None;
    let store: Arc<dyn TableStore> = match backend {
        "azure" => {
            let emulator = azurite.insert(common::azurite::Azurite::start());
            let store =
                AzureStore::connect(&emulator.connection_string()).map_err(|e| e.to_string())?;
            store.spawn_recovery();
            Arc::new(store)
        }
        _ => Arc::new(NativeStore::open(dir.path()).map_err(|e| e.to_string())?),
    };
    let engine = Engine::open(store).await.map_err(|e| e.to_string())?;
    let server = Server::bind("127.0.0.1:0", engine)
        .await
        .map_err(|e| e.to_string())?;
    let port = server.local_addr().map_err(|e| e.to_string())?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    let mut runner = Runner::new(move || Postgres::connect(port, backend));
    runner.with_column_validator(|_, _| true);
    let result = runner
        .run_file_async(&path)
        .await
        .map_err(|e| e.display(true).to_string());
    let _ = stop.send(());
    let _ = serving.await;
    drop(azurite);
    result
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut files: Vec<PathBuf> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
        .expect("sql/ directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .filter(|p| {
            filter
                .as_ref()
                .is_none_or(|f| p.to_string_lossy().contains(f.as_str()))
        })
        .collect();
    files.sort();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let backends = std::env::var("SLT_BACKENDS").unwrap_or_else(|_| "native,azure".into());
    let (mut passed, mut failed) = (0, 0);
    for backend in ["native", "azure"] {
        if !backends.split(',').any(|b| b.trim() == backend) {
            continue;
        }
        for file in &files {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // `azure_*.slt`: what only the Azure backend does.
            if name.starts_with("azure_") && backend != "azure" {
                continue;
            }
            match runtime.block_on(run_file(file.clone(), backend)) {
                Ok(()) => {
                    println!("sqllogictest {name} ({backend}) ... ok");
                    passed += 1;
                }
                Err(e) => {
                    println!("sqllogictest {name} ({backend}) ... FAILED\n{e}");
                    failed += 1;
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
