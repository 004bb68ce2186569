//! Random and mutated SQL through a session: every statement must end in a
//! result or an error, never a panic in tablegate's code or a hang, and the
//! session must go on answering.
//!
//! The seeds are the statements of `sql/*.slt`; each case cuts, repeats,
//! swaps or replaces pieces of one, or splices two together. Cases:
//! `HOSTILE_SQL_CASES` (default 1500), seed `HOSTILE_SQL_SEED`.

use crate::common;

use std::time::Duration;

use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tablegate::sql::{Engine, Output, Session};

/// One-line statements of the sqllogictest files.
fn corpus() -> Vec<String> {
    let mut statements = Vec::new();
    for entry in std::fs::read_dir("sql").expect("sql/") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "slt") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.starts_with("statement") || line.starts_with("query") {
                if let Some(sql) = lines.next() {
                    statements.push(sql.to_owned());
                }
            }
        }
    }
    statements
}

const PIECES: &[&str] = &[
    "(",
    ")",
    "'",
    "\"",
    ";",
    ",",
    "*",
    "NULL",
    "SELECT",
    "FROM",
    "WHERE",
    "JOIN",
    "ON",
    "GROUP BY",
    "ORDER BY",
    "LIMIT",
    "-1",
    "99999999999999999999",
    "1e309",
    "$1",
    "::int",
    "CAST(",
    "AS",
    "IN (",
    "BETWEEN",
    "LIKE '%",
    "\u{0}",
    "é",
    "😀",
    "/*",
    "--",
    "\\",
    "E'\\x",
    "generate_series(1, 1000000000)",
    "count(*)",
    "ARRAY[",
    "]",
    "interval '1 day'",
];

fn mutate(rng: &mut StdRng, corpus: &[String]) -> String {
    let mut sql: Vec<char> = corpus[rng.random_range(0..corpus.len())].chars().collect();
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..=sql.len());
        match rng.random_range(0..5) {
            0 => sql.truncate(at),
            1 => {
                let piece = PIECES[rng.random_range(0..PIECES.len())];
                sql.splice(at..at, piece.chars());
            }
            2 if at < sql.len() => {
                let end = rng.random_range(at..=sql.len());
                sql.drain(at..end);
            }
            3 => {
                let other = &corpus[rng.random_range(0..corpus.len())];
                let cut = rng.random_range(0..=other.chars().count());
                sql.splice(at..at, other.chars().skip(cut));
            }
            _ if at < sql.len() => sql[at] = char::from(rng.random_range(32..127u8)),
            _ => {}
        }
    }
    sql.into_iter().collect()
}

/// Runs a query string; returns whether every statement succeeded.
async fn run(session: &mut Session, sql: &str) -> bool {
    let mut succeeded = true;
    for output in session.execute(sql).await {
        match output.and_then(Output::decoded) {
            Ok(Output::Rows { mut stream, .. }) | Ok(Output::CopyOut { mut stream, .. }) => {
                while let Some(batch) = stream.next().await {
                    if batch.is_err() {
                        succeeded = false;
                        break;
                    }
                }
            }
            Ok(Output::CopyIn { .. }) => {
                session.copy_failed("no data");
            }
            Ok(_) => {}
            Err(_) => succeeded = false,
        }
    }
    succeeded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_statements_end_in_results_or_errors() {
    let panics = common::PanicCounter::install();
    let cases: usize = common::env_number("HOSTILE_SQL_CASES", 1500);
    let seed: u64 = common::env_number("HOSTILE_SQL_SEED", 11);
    let corpus = corpus();
    assert!(corpus.len() > 100, "{} seed statements", corpus.len());
    let (_dir, store) = common::temp_store();
    let engine = Engine::open(std::sync::Arc::new(store)).await.unwrap();
    let mut session = Session::new(engine.clone());
    let mut rng = StdRng::seed_from_u64(seed);
    // The seeds as they are first: their tables and rows give the
    // mutations something to read.
    for sql in &corpus {
        run(&mut session, "ROLLBACK; SET statement_timeout = '2s'").await;
        run(&mut session, sql).await;
    }
    let mut slowest = Duration::ZERO;
    let mut succeeded = 0;
    for case in 0..cases {
        // Mutations may make huge queries: a timeout bounds them.
        run(&mut session, "ROLLBACK; SET statement_timeout = '2s'").await;
        let sql = mutate(&mut rng, &corpus);
        let started = std::time::Instant::now();
        if tokio::time::timeout(Duration::from_secs(30), run(&mut session, &sql))
            .await
            .unwrap_or_else(|_| panic!("case {case} hung: {sql}"))
        {
            succeeded += 1;
        }
        slowest = slowest.max(started.elapsed());
        assert_eq!(panics.own(), 0, "case {case} panicked: {sql}");
    }
    run(&mut session, "ROLLBACK").await;
    let mut answers = session.execute("SELECT 40 + 2").await;
    let Some(Ok(Output::Rows { mut stream, .. })) = answers.pop() else {
        panic!("the session stopped answering");
    };
    let batch = stream.next().await.unwrap().unwrap();
    assert_eq!(batch.num_rows(), 1);
    // Most mutations break the syntax; some must stay valid enough to
    // reach planning and execution (about 3% do).
    assert!(succeeded * 100 > cases, "only {succeeded} of {cases} ran");
    eprintln!(
        "{cases} mutated statements (seed {seed}, {} seeds; {succeeded} ran, the others \
         failed with an error): no panic in tablegate's code, {} in dependencies; slowest \
         {slowest:?}",
        corpus.len(),
        panics.dependencies()
    );
}
