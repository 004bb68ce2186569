//! The `tablegate` command.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tablegate::pg::{tls_acceptor, Authentication, Server, Users};
use tablegate::sql::Engine;
use tablegate::store::azure::AzureStore;
use tablegate::store::native::NativeStore;
use tablegate::store::TableStore;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    // mimalloc's own functions (linked in with the allocator).
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    fn mi_collect(force: bool);
}

/// `mi_option_purge_delay` in mimalloc 3's `mimalloc.h`: how long memory
/// freed stays with the process before it goes back to the system.
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Keeps memory freed by one statement for the next for ten seconds
/// (mimalloc's default is one): memory given back to the system comes back
/// cleared page by page at its first touch, which was 18% of the time of
/// a 1,000,000-row COPY run a few seconds after another (profiled).
/// `MIMALLOC_PURGE_DELAY` in the environment still decides, if set.
///
/// mimalloc gives freed memory back only when the program allocates or
/// frees again once the delay is over: a server that goes idle after a
/// large query would keep that query's memory (346 MiB after a
/// `count(DISTINCT ...)` of 2,000,000 texts, seen in `RssAnon`). So a
/// thread of its own has mimalloc give back, once per delay, the memory
/// whose delay is over.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an option of the allocator this program links, by
        // its number in mimalloc.h; options are read at each purge.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
    }
    // SAFETY: reads an option of the allocator, by its number.
    let delay = unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
    let Ok(delay) = u64::try_from(delay) else {
        return;
    };
    if delay == 0 {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("memory".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(delay));
            // SAFETY: a plain call into the allocator, which returns to
            // the system the freed memory of the whole program whose
            // delay is over (and this thread's own).
            unsafe { mi_collect(false) };
        });
    if let Err(e) = spawned {
        eprintln!("freed memory stays with the process: cannot start its thread: {e}");
    }
}

#[derive(Parser)]
#[command(
    name = "tablegate",
    version,
    about = "SQL over partitioned entity tables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the PostgreSQL wire protocol over the embedded store (or the
    /// Azure Table service).
    Serve {
        #[command(flatten)]
        store: StoreArgs,
        /// The address to listen on.
        #[arg(long, env = "TABLEGATE_HOST", default_value = "127.0.0.1")]
        host: IpAddr,
        /// The port to listen on.
        #[arg(long, env = "TABLEGATE_PORT", default_value_t = 5433)]
        port: u16,
        /// Also listen on a Unix-domain socket in this directory, named as
        /// PostgreSQL names its own (`.s.PGSQL.<port>`): `psql -h DIR -p
        /// PORT` connects through it.
        #[arg(long, env = "TABLEGATE_SOCKET_DIR", value_name = "DIR")]
        socket_dir: Option<PathBuf>,
        /// A file of `name:password` lines: clients then authenticate with
        /// SCRAM-SHA-256. Without users, any user connects without a
        /// password, which is allowed on a loopback address only.
        #[arg(long, env = "TABLEGATE_USERS")]
        users: Option<PathBuf>,
        /// A user, as `name:password` (repeatable; added to `--users`).
        #[arg(long = "user", value_name = "NAME:PASSWORD")]
        user: Vec<String>,
        /// PEM certificate chain for TLS (with `--tls-key`).
        #[arg(long, env = "TABLEGATE_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key for TLS (with `--tls-cert`).
        #[arg(long, env = "TABLEGATE_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Memory all running queries may hold at once, in MiB; past it a
        /// sort spills to disk and a join or grouping fails with 53200.
        #[arg(long, env = "TABLEGATE_QUERY_MEMORY_MB", default_value_t = tablegate::sql::DEFAULT_QUERY_MEMORY >> 20)]
        query_memory_mb: usize,
        /// Connections served at once; the next one gets SQLSTATE 53300.
        #[arg(long, env = "TABLEGATE_MAX_CONNECTIONS", default_value_t = tablegate::pg::DEFAULT_MAX_CONNECTIONS)]
        max_connections: usize,
    },
    /// List the store's tables with their entity counts and sizes.
    Tables {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Which store holds the tables.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// The embedded engine, under `--data-dir`.
    Native,
    /// The Azure Table service (Azure Storage, Cosmos DB Table API, or
    /// Azurite) of `--azure-connection-string`.
    Azure,
}

#[derive(clap::Args)]
struct StoreArgs {
    #[arg(long, env = "TABLEGATE_BACKEND", value_enum, default_value = "native")]
    backend: Backend,
    /// The data directory of the embedded engine; created if missing.
    #[arg(long, env = "TABLEGATE_DATA_DIR", default_value = "tablegate-data")]
    data_dir: PathBuf,
    /// The embedded engine's caches, in MiB: the memory reads use before
    /// they go to the files (half for decoded blocks, half for small
    /// partitions held whole).
    #[arg(long, env = "TABLEGATE_CACHE_MIB", default_value_t = tablegate::store::native::DEFAULT_CACHE_MIB)]
    cache_mib: u64,
    /// The storage account of the Azure backend, as a connection string
    /// (`UseDevelopmentStorage=true` for a local Azurite).
    #[arg(long, env = "AZURE_STORAGE_CONNECTION_STRING", hide_env_values = true)]
    azure_connection_string: Option<String>,
}

impl StoreArgs {
    fn open(&self) -> Result<Arc<dyn TableStore>, Box<dyn std::error::Error>> {
        Ok(match self.backend {
            Backend::Native => {
                std::fs::create_dir_all(&self.data_dir)?;
                Arc::new(NativeStore::open_with_cache(
                    &self.data_dir,
                    self.cache_mib,
                )?)
            }
            Backend::Azure => {
                let connection = self.azure_connection_string.as_deref().ok_or(
                    "--backend azure needs --azure-connection-string or AZURE_STORAGE_CONNECTION_STRING",
                )?;
                let store = AzureStore::connect(connection)?;
                // Writes a stopped gateway left half done are finished.
                store.spawn_recovery();
                Arc::new(store)
            }
        })
    }

    fn describe(&self) -> String {
        match self.backend {
            Backend::Native => format!("data dir {}", self.data_dir.display()),
            Backend::Azure => "the Azure Table service".to_owned(),
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    keep_freed_memory();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve {
            store,
            host,
            port,
            socket_dir,
            users,
            user,
            tls_cert,
            tls_key,
            max_connections,
            query_memory_mb,
        } => {
            let access = Access {
                users,
                user,
                tls: tls_cert.zip(tls_key),
            };
            let limits = Limits {
                max_connections,
                query_memory: query_memory_mb << 20,
            };
            let listen = Listen {
                host,
                port,
                socket_dir,
            };
            serve(&store, listen, access, limits).await
        }
        Command::Tables { store } => list_tables(&store).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tablegate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Who may connect, and over what.
struct Access {
    users: Option<PathBuf>,
    user: Vec<String>,
    tls: Option<(PathBuf, PathBuf)>,
}

impl Access {
    fn authentication(&self, host: IpAddr) -> Result<Authentication, String> {
        let mut users = match &self.users {
            Some(path) => Users::load(path)?,
            None => Users::default(),
        };
        for entry in &self.user {
            let (name, password) = entry
                .split_once(':')
                .filter(|(n, p)| !n.is_empty() && !p.is_empty())
                .ok_or_else(|| format!("--user {entry:?}: expected NAME:PASSWORD"))?;
            users.add(name, password);
        }
        if !users.is_empty() {
            return Ok(Authentication::Scram(Arc::new(users)));
        }
        if !host.is_loopback() {
            return Err(format!(
                "refusing to listen on {host} without authentication: give users with --users FILE \
                 or --user NAME:PASSWORD (clients then authenticate with SCRAM-SHA-256); \
                 connecting without a password is only allowed on a loopback address such as 127.0.0.1"
            ));
        }
        Ok(Authentication::Trust)
    }
}

/// Where the server listens.
struct Listen {
    host: IpAddr,
    port: u16,
    socket_dir: Option<PathBuf>,
}

/// What the server allows at once.
struct Limits {
    max_connections: usize,
    query_memory: usize,
}

async fn serve(
    store: &StoreArgs,
    listen: Listen,
    access: Access,
    limits: Limits,
) -> Result<(), Box<dyn std::error::Error>> {
    let Listen {
        host,
        port,
        socket_dir,
    } = listen;
    let authentication = access.authentication(host)?;
    let tls = match &access.tls {
        Some((cert, key)) => Some(tls_acceptor(cert, key)?),
        None => None,
    };
    let engine = Engine::open_with_memory(store.open()?, limits.query_memory).await?;
    let server = Server::bind_with(
        &format!("{host}:{port}"),
        engine,
        authentication.clone(),
        tls.clone(),
    )
    .await?
    .with_max_connections(limits.max_connections);
    let server = match &socket_dir {
        Some(dir) => server.with_unix_socket(dir)?,
        None => server,
    };
    tracing::info!(
        "listening on {} (PostgreSQL protocol) over {}",
        server.local_addr()?,
        store.describe()
    );
    if let Some(path) = server.unix_socket_path() {
        tracing::info!("listening on Unix-domain socket {}", path.display());
    }
    match authentication {
        Authentication::Trust => tracing::info!(
            "trust authentication: any user may connect without a password on this loopback address"
        ),
        Authentication::Scram(_) => tracing::info!("SCRAM-SHA-256 authentication"),
    }
    if tls.is_some() {
        tracing::info!("TLS on: clients may ask for an encrypted connection");
    }
    server.run(shutdown_signal()).await;
    tracing::info!("shut down");
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn list_tables(store: &StoreArgs) -> Result<(), Box<dyn std::error::Error>> {
    let store = store.open()?;
    println!(
        "{:<32} {:>12} {:>12} {:>14}",
        "table", "entities", "partitions", "bytes"
    );
    for name in store.list_tables().await? {
        let stats = store.table_stats(&name).await?;
        println!(
            "{:<32} {:>12} {:>12} {:>14}",
            name, stats.entities, stats.partitions, stats.bytes
        );
    }
    Ok(())
}
