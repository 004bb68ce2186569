//! Property: on random tables and random predicates over key and non-key
//! columns, a query returns the same rows with key pushdown as with every scan
//! reading the whole table (`SET tablegate.pushdown = off`).
//!
//! Predicates are drawn from a seeded generator (`PUSHDOWN_SEED`, default 1;
//! `PUSHDOWN_CASES`, default 300); a failure prints the query and its seed.

use crate::common;

use common::TestServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TEXTS: [&str; 7] = ["", "a", "a b", "ab", "b", "ba", "é"];

fn text(rng: &mut StdRng) -> String {
    format!("'{}'", TEXTS[rng.random_range(0..TEXTS.len())])
}

fn int(rng: &mut StdRng) -> i64 {
    rng.random_range(-4..5)
}

/// One predicate on a column: comparisons, IN, BETWEEN, LIKE, OR of values.
fn predicate(rng: &mut StdRng, column: &str, is_text: bool) -> String {
    let value = |rng: &mut StdRng| {
        if is_text {
            text(rng)
        } else {
            int(rng).to_string()
        }
    };
    match rng.random_range(0..8) {
        0 | 1 => format!("{column} = {}", value(rng)),
        2 => format!(
            "{column} {} {}",
            ["<", "<=", ">", ">="][rng.random_range(0..4)],
            value(rng)
        ),
        3 => format!(
            "{column} IN ({}, {}, {})",
            value(rng),
            value(rng),
            value(rng)
        ),
        4 => {
            let (a, b) = (value(rng), value(rng));
            format!("{column} BETWEEN {a} AND {b}")
        }
        5 if is_text => format!(
            "{column} LIKE '{}%'",
            ["a", "b", "a ", "é"][rng.random_range(0..4)]
        ),
        6 => format!("({column} = {} OR {column} = {})", value(rng), value(rng)),
        _ => format!("{column} <> {}", value(rng)),
    }
}

/// A WHERE clause: a few predicates joined by AND, sometimes an OR of whole keys.
fn where_clause(rng: &mut StdRng) -> String {
    if rng.random_range(0..6) == 0 {
        let point = |rng: &mut StdRng| {
            format!(
                "(a = {} AND b = {} AND c = {})",
                int(rng),
                text(rng),
                int(rng)
            )
        };
        return format!("{} OR {}", point(rng), point(rng));
    }
    let columns = [
        ("a", false),
        ("b", true),
        ("c", false),
        ("d", false),
        ("e", true),
    ];
    let count = rng.random_range(1..4);
    (0..count)
        .map(|_| {
            let (name, is_text) = columns[rng.random_range(0..columns.len())];
            predicate(rng, name, is_text)
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

async fn rows(client: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    common::simple_rows(client, sql)
        .await
        .into_iter()
        .map(|row| row.join("|"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushdown_returns_what_a_full_scan_returns() {
    let seed: u64 = common::env_number("PUSHDOWN_SEED", 1);
    let cases: usize = common::env_number("PUSHDOWN_CASES", 300);
    let mut rng = StdRng::seed_from_u64(seed);
    let server = TestServer::start().await;
    let with = server.client().await;
    let without = server.client().await;
    without
        .batch_execute("SET tablegate.pushdown = off")
        .await
        .unwrap();

    for (table, keys) in [
        ("t1", "PRIMARY KEY (a, b, c)"),
        ("t2", "PRIMARY KEY (a, b, c)) WITH (partition_key = 'a, b'"),
        ("t3", "PRIMARY KEY (b, a, c)"),
    ] {
        with.batch_execute(&format!(
            "CREATE TABLE {table} (a int, b text, c bigint, d int, e text, {keys})"
        ))
        .await
        .unwrap();
        let mut values = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..150 {
            let (a, b, c) = (int(&mut rng), text(&mut rng), int(&mut rng));
            if seen.insert((a, b.clone(), c)) {
                values.push(format!(
                    "({a}, {b}, {c}, {}, {})",
                    int(&mut rng),
                    text(&mut rng)
                ));
            }
        }
        with.batch_execute(&format!("INSERT INTO {table} VALUES {}", values.join(", ")))
            .await
            .unwrap();

        for case in 0..cases / 3 {
            let clause = where_clause(&mut rng);
            let order = ["a, b, c", "b DESC, a, c", "c, a, b"][case % 3];
            let limit = if case % 4 == 0 { " LIMIT 5" } else { "" };
            let sql =
                format!("SELECT a, b, c, d, e FROM {table} WHERE {clause} ORDER BY {order}{limit}");
            let expected = rows(&without, &sql).await;
            let got = rows(&with, &sql).await;
            assert_eq!(got, expected, "seed {seed}, query: {sql}");
        }
    }
}
