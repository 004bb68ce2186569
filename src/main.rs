//! The `tablegate` command.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tablegate::store::native::NativeStore;
use tablegate::store::{Statistics, TableAdmin};

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
    /// List the tables of a data dir with their entity counts and sizes.
    Tables {
        /// The data directory.
        #[arg(long, env = "TABLEGATE_DATA_DIR", default_value = "tablegate-data")]
        data_dir: PathBuf,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Tables { data_dir } => list_tables(&data_dir).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tablegate: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn list_tables(data_dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let store = NativeStore::open(data_dir)?;
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
