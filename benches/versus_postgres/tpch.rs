//! TPC-H: the data made by `tpchgen-cli` (PyPI) at a scale factor, loaded
//! into both servers with the schema of `clients/tpch/schema.sql` (primary
//! keys, foreign keys, the same indexes), then the 22 queries of
//! `clients/tpch/queries` on tablegate, on PostgreSQL and on DataFusion
//! alone over the same rows held in memory. tablegate's answers are checked
//! against PostgreSQL's, DataFusion's row counts too.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use tokio_postgres::SimpleQueryMessage;

use crate::key_access::copy_lines;
use crate::servers::Server;

/// Rows per COPY statement: a table is loaded by as many COPYs as it needs,
/// the same on both servers (a COPY is one atomic write in tablegate and is
/// held in memory until it commits).
const ROWS_PER_COPY: usize = 500_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The CSV files of scale factor `scale`, made once into `target/tpch-sf<scale>`.
pub fn generate(scale: &str) -> PathBuf {
    let dir = root().join(format!("target/tpch-sf{scale}"));
    if dir.join("lineitem.csv").exists() {
        return dir;
    }
    let venv = root().join("target/bench-venv");
    if !venv.join("bin/python").exists() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "python3 -m venv failed");
    }
    let generator = venv.join("bin/tpchgen-cli");
    if !generator.exists() {
        let ok = Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "-q",
                "--disable-pip-version-check",
                "tpchgen-cli==4.0.0",
            ])
            .status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "pip install tpchgen-cli failed"
        );
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    let ok = Command::new(generator)
        .args(["csv", "-s", scale])
        .arg(format!("--output-dir={}", partial.display()))
        .status();
    assert!(ok.is_ok_and(|s| s.success()), "tpchgen-cli failed");
    std::fs::rename(&partial, &dir).expect("rename");
    dir
}

/// The tables of `clients/tpch/schema.sql`, in load order, with the Arrow
/// type of each column.
pub fn tables() -> Vec<(String, SchemaRef)> {
    let schema = std::fs::read_to_string(root().join("clients/tpch/schema.sql")).expect("schema");
    let mut tables = Vec::new();
    for statement in schema.split(';') {
        let statement = statement
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        let Some(rest) = statement.trim().strip_prefix("CREATE TABLE ") else {
            continue;
        };
        let (name, body) = rest.split_once(" (").expect("table body");
        let body = &body[..body.rfind(')').expect("closing parenthesis")];
        let mut fields = Vec::new();
        for item in split_top_level(body) {
            let mut words = item.split_whitespace();
            let column = words.next().expect("column");
            if column == "PRIMARY" || column == "FOREIGN" {
                continue;
            }
            let sql_type = words.next().expect("type").to_ascii_lowercase();
            let data_type = if sql_type == "integer" {
                DataType::Int32
            } else if sql_type == "date" {
                DataType::Date32
            } else if sql_type.starts_with("numeric(15,2)") {
                DataType::Decimal128(15, 2)
            } else if sql_type.starts_with("char") || sql_type.starts_with("varchar") {
                DataType::Utf8
            } else {
                panic!("type {sql_type} of {name}.{column} has no Arrow type here");
            };
            fields.push(Field::new(column, data_type, false));
        }
        tables.push((name.to_owned(), Arc::new(Schema::new(fields))));
    }
    tables
}

fn split_top_level(body: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0, 0, Vec::new());
    for (i, c) in body.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(body[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(body[start..].trim());
    items
}

/// Creates the schema and loads every table; returns the seconds per table.
pub async fn load(server: &Server, data: &Path) -> Vec<(String, f64)> {
    let client = server.connect().await;
    let schema = std::fs::read_to_string(root().join("clients/tpch/schema.sql")).expect("schema");
    client
        .batch_execute(&schema)
        .await
        .expect("create the TPC-H schema");
    let mut seconds = Vec::new();
    for (table, _) in tables() {
        let started = Instant::now();
        let file = std::fs::File::open(data.join(format!("{table}.csv"))).expect("csv");
        let mut lines = std::io::BufReader::with_capacity(1 << 20, file)
            .lines()
            .skip(1);
        let copy = format!("COPY {table} FROM STDIN WITH (FORMAT csv)");
        loop {
            let mut chunk = lines
                .by_ref()
                .take(ROWS_PER_COPY)
                .map(|l| l.expect("read csv") + "\n")
                .peekable();
            if chunk.peek().is_none() {
                break;
            }
            copy_lines(&client, &copy, chunk).await;
        }
        seconds.push((table, started.elapsed().as_secs_f64()));
    }
    seconds
}

/// The same rows in DataFusion's memory, two partitions a table (one per core).
pub fn in_memory(data: &Path) -> SessionContext {
    let ctx = SessionContext::new();
    for (table, schema) in tables() {
        let file = std::fs::File::open(data.join(format!("{table}.csv"))).expect("csv");
        let format = datafusion::arrow::csv::reader::Format::default().with_header(true);
        let reader = datafusion::arrow::csv::ReaderBuilder::new(schema.clone())
            .with_format(format)
            .with_batch_size(8192)
            .build(file)
            .expect("csv reader");
        let mut partitions: Vec<Vec<RecordBatch>> = vec![Vec::new(), Vec::new()];
        for (i, batch) in reader.enumerate() {
            partitions[i % 2].push(batch.expect("csv batch"));
        }
        let table_provider = MemTable::try_new(schema, partitions).expect("memtable");
        ctx.register_table(table.as_str(), Arc::new(table_provider))
            .expect("register");
    }
    ctx
}

pub fn queries() -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("clients/tpch/queries"))
        .expect("queries")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("query"))
        })
        .collect()
}

/// A query's rows as text, over the simple protocol, and how long it took;
/// `None` if it ran past the session's `statement_timeout`.
pub async fn run_query(
    client: &tokio_postgres::Client,
    sql: &str,
) -> Option<(Vec<Vec<Option<String>>>, Duration)> {
    let started = Instant::now();
    let messages = match client.simple_query(sql).await {
        Ok(messages) => messages,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) => {
            return None
        }
        Err(e) => panic!("query failed: {e}"),
    };
    let elapsed = started.elapsed();
    let rows = messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_owned))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    Some((rows, elapsed))
}

pub async fn run_in_memory(ctx: &SessionContext, sql: &str) -> (usize, Duration) {
    let started = Instant::now();
    let batches = ctx
        .sql(sql)
        .await
        .expect("plan in DataFusion")
        .collect()
        .await
        .expect("run in DataFusion");
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    (rows, started.elapsed())
}

/// Whether tablegate's rows are PostgreSQL's. Numbers may differ in the last
/// digit tablegate gives: DataFusion computes averages and quotients of
/// numerics to fewer decimals than PostgreSQL (see README).
pub fn same_rows(got: &[Vec<Option<String>>], expected: &[Vec<Option<String>>]) -> bool {
    got.len() == expected.len()
        && got.iter().zip(expected).all(|(g, e)| {
            g.len() == e.len()
                && g.iter()
                    .zip(e)
                    .all(|(a, b)| same_value(a.as_deref(), b.as_deref()))
        })
}

fn same_value(got: Option<&str>, expected: Option<&str>) -> bool {
    let (Some(a), Some(b)) = (got, expected) else {
        return got.is_none() && expected.is_none();
    };
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => {
            let decimals = a.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
            let last_digit = 10f64.powi(-decimals);
            (x - y).abs() <= last_digit.max(x.abs().max(y.abs()) * 1e-12)
        }
        _ => false,
    }
}
