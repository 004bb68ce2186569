//! An INSERT whose values read no table (parameters, literals, and
//! expressions such as `now()` or `'2024-01-01'::date`) builds its rows
//! without planning a query. Its rows and errors must be those of the
//! planned path, which the same literals take when one value is a
//! subquery (the rows then become SELECTs, since DataFusion runs no
//! subquery inside VALUES).

use crate::common;

use std::sync::Arc;

use datafusion::common::{ParamValues, ScalarValue};
use futures::TryStreamExt;
use rand::{Rng, SeedableRng};
use tablegate::sql::{Output, Session};

/// A session of a new engine, after `sql` has run in it.
async fn session_after(sql: &str) -> (tempfile::TempDir, Session) {
    let (dir, engine) = common::temp_engine().await;
    let mut session = Session::new(engine);
    run(&mut session, sql).await;
    (dir, session)
}

async fn run(session: &mut Session, sql: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for output in session.execute(sql).await {
        lines.extend(table(output.unwrap()).await);
    }
    lines
}

/// A statement's rows as a printed table, a line each; none for a command.
async fn table(output: Output) -> Vec<String> {
    let Output::Rows { stream, .. } = output.decoded().unwrap() else {
        return Vec::new();
    };
    let batches: Vec<_> = stream.try_collect().await.unwrap();
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    text.lines().map(str::to_owned).collect()
}

/// The result of the last statement of `sql`.
async fn last(session: &mut Session, sql: &str) -> tablegate::sql::Result<Output> {
    session.execute(sql).await.pop().unwrap()
}

/// One column's value: the parameter and the same value as a literal.
fn value(rng: &mut rand::rngs::StdRng, column: usize, id: i64) -> (ScalarValue, String) {
    let null = column > 1 && rng.random_range(0..8) == 0;
    let text = |s: String| {
        (
            ScalarValue::Utf8(Some(s.clone())),
            format!("'{}'", s.replace('\'', "''")),
        )
    };
    match column {
        0 => (ScalarValue::Int64(Some(id)), id.to_string()),
        1 => text(format!("o'{}", rng.random_range(0..5))),
        _ if null => (ScalarValue::Null, "NULL".into()),
        2 => {
            let v = rng.random_range(-40_000..40_000);
            (ScalarValue::Int32(Some(v)), v.to_string())
        }
        3 => {
            let cents: i128 = rng.random_range(-99_999_999..99_999_999);
            let literal = format!(
                "'{}{}.{:02}'",
                if cents < 0 { "-" } else { "" },
                cents.abs() / 100,
                cents.abs() % 100
            );
            (ScalarValue::Decimal128(Some(cents), 10, 2), literal)
        }
        4 => {
            let v = f64::from(rng.random_range(-1000..1000)) / 8.0;
            (ScalarValue::Float64(Some(v)), format!("{v:?}"))
        }
        5 => {
            let v = rng.random_bool(0.5);
            (ScalarValue::Boolean(Some(v)), v.to_string())
        }
        6 => {
            let days = rng.random_range(0..20_000);
            let date = chrono::NaiveDate::from_num_days_from_ce_opt(719_163 + days).unwrap();
            (ScalarValue::Date32(Some(days)), format!("'{date}'"))
        }
        7 => {
            let micros: i64 = rng.random_range(0..2_000_000_000_000_000);
            let at = chrono::DateTime::from_timestamp_micros(micros).unwrap();
            (
                ScalarValue::TimestampMicrosecond(Some(micros), Some(Arc::from("+00:00"))),
                format!("'{}'", at.format("%Y-%m-%d %H:%M:%S%.6f+00:00")),
            )
        }
        8 => {
            // Sometimes longer than varchar(6) allows.
            let len = rng.random_range(0..8);
            text("abcdefgh"[..len].to_owned())
        }
        9 => text(format!("{{\"k\": {}}}", rng.random_range(0..9))),
        10 => {
            let bytes: Vec<u8> = (0..rng.random_range(0..4)).map(|_| rng.random()).collect();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            (ScalarValue::Binary(Some(bytes)), format!("'\\x{hex}'"))
        }
        _ => text(format!(
            "00000000-0000-0000-0000-{:012x}",
            rng.random_range(0..1000u64)
        )),
    }
}

#[tokio::test]
async fn parameter_and_literal_inserts_match_planned_inserts() {
    let columns = "id bigint, owner text, n int, amount numeric(10, 2), w float8, ok boolean, \
                   day date, at timestamptz, code varchar(6), doc jsonb, raw bytea, tag uuid";
    let (_dir, mut session) = session_after(&format!(
        "CREATE TABLE direct ({columns}, PRIMARY KEY (owner, id));
         CREATE TABLE literal ({columns}, PRIMARY KEY (owner, id));
         CREATE TABLE expression ({columns}, PRIMARY KEY (owner, id));
         CREATE TABLE planned ({columns}, PRIMARY KEY (owner, id));"
    ))
    .await;
    let placeholders: Vec<String> = (1..=12).map(|i| format!("${i}")).collect();
    let insert = session
        .prepare(
            &format!("INSERT INTO direct VALUES ({})", placeholders.join(", ")),
            &[],
        )
        .await
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let (mut written, mut refused) = (0, 0);
    for i in 0..300 {
        // Every tenth row repeats an earlier key.
        let id = if i % 10 == 9 {
            i64::from(i - 5)
        } else {
            i64::from(i)
        };
        let (params, literals): (Vec<ScalarValue>, Vec<String>) =
            (0..12).map(|c| value(&mut rng, c, id)).unzip();
        let direct = session
            .execute_prepared(&insert, ParamValues::from(params))
            .await;
        let literal = last(
            &mut session,
            &format!("INSERT INTO literal VALUES ({})", literals.join(", ")),
        )
        .await;
        // `id + 0` is evaluated alone; a subquery only by a planned query.
        let expression = last(
            &mut session,
            &format!(
                "INSERT INTO expression VALUES ({} + 0, {})",
                literals[0],
                literals[1..].join(", ")
            ),
        )
        .await;
        let planned = last(
            &mut session,
            &format!(
                "INSERT INTO planned VALUES ((SELECT {}), {})",
                literals[0],
                literals[1..].join(", ")
            ),
        )
        .await;
        for (path, result) in [
            ("parameters", &direct),
            ("literals", &literal),
            ("expressions", &expression),
        ] {
            match (result, &planned) {
                (Ok(_), Ok(_)) => {}
                (Err(a), Err(b)) => assert_eq!(
                    std::mem::discriminant(a),
                    std::mem::discriminant(b),
                    "{path}: {a} / {b}"
                ),
                _ => panic!(
                    "row {i}: {path} {:?}, planned {:?}",
                    result.as_ref().err(),
                    planned.as_ref().err()
                ),
            }
        }
        match planned {
            Ok(_) => written += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(
        written > 150 && refused > 30,
        "{written} written, {refused} refused"
    );
    let direct = run(&mut session, "SELECT * FROM direct ORDER BY owner, id").await;
    let literal = run(&mut session, "SELECT * FROM literal ORDER BY owner, id").await;
    let expression = run(&mut session, "SELECT * FROM expression ORDER BY owner, id").await;
    let planned = run(&mut session, "SELECT * FROM planned ORDER BY owner, id").await;
    assert_eq!(direct, planned);
    assert_eq!(literal, planned);
    assert_eq!(expression, planned);
}

/// Casts, functions, `now()`, parameters inside expressions and column
/// defaults: evaluated alone, they give what the planned path gives, and
/// their errors are its errors.
#[tokio::test]
async fn expressions_and_defaults_match_planned_inserts() {
    let columns = "id bigint, day date, at timestamptz, n int DEFAULT 7, \
                   label text DEFAULT 'none', r float8";
    let (_dir, mut session) = session_after(&format!(
        "CREATE TABLE alone ({columns}, PRIMARY KEY (id));
         CREATE TABLE planned ({columns}, PRIMARY KEY (id));"
    ))
    .await;
    let rows = [
        "1, '2024-02-29'::date, '2024-01-01 10:00:00+00'::timestamptz, -5, upper('abc'), 1.5",
        "2, CAST('2023-12-31' AS date) + 1, NULL, 2 * 21, 'a' || 'b', NULL",
        "3, NULL, NULL, DEFAULT, DEFAULT, abs(-2.5)",
    ];
    for row in rows {
        run(&mut session, &format!("INSERT INTO alone VALUES ({row})")).await;
        // The same values, after a subquery that makes it a planned query.
        let (id, rest) = row.split_once(", ").unwrap();
        run(
            &mut session,
            &format!("INSERT INTO planned VALUES ((SELECT {id}), {rest})"),
        )
        .await;
    }
    let prepared = session
        .prepare(
            "INSERT INTO alone (id, n, label) VALUES ($1 + 100, $2 * 2, lower($3))",
            &[],
        )
        .await
        .unwrap();
    session
        .execute_prepared(
            &prepared,
            ParamValues::from(vec![
                ScalarValue::Int64(Some(4)),
                ScalarValue::Int32(Some(21)),
                ScalarValue::Utf8(Some("XY".into())),
            ]),
        )
        .await
        .unwrap();
    run(
        &mut session,
        "INSERT INTO planned (id, n, label) VALUES ((SELECT 104), 42, 'xy')",
    )
    .await;
    let alone = run(&mut session, "SELECT * FROM alone ORDER BY id").await;
    assert_eq!(alone.len(), 8, "{alone:?}");
    assert_eq!(
        alone,
        run(&mut session, "SELECT * FROM planned ORDER BY id").await
    );

    // now() is the statement's time, not a time kept from preparing.
    let before = chrono::Utc::now();
    run(&mut session, "INSERT INTO alone (id, at) VALUES (5, now())").await;
    let after = chrono::Utc::now();
    let at = run(
        &mut session,
        "SELECT CAST(extract(epoch FROM at) * 1000000 AS bigint) FROM alone WHERE id = 5",
    )
    .await[3]
        .trim_matches(|c| c == '|' || c == ' ')
        .parse::<i64>()
        .unwrap();
    assert!(
        before.timestamp_micros() <= at && at <= after.timestamp_micros(),
        "{before} <= {at} <= {after}"
    );

    for (alone, planned) in [
        ("(6, 'x'::date)", "((SELECT 6), 'x'::date)"),
        ("(7, NULL, NULL, 1 / 0)", "((SELECT 7), NULL, NULL, 1 / 0)"),
    ] {
        let alone = last(&mut session, &format!("INSERT INTO alone VALUES {alone}"))
            .await
            .err()
            .expect("a bad value fails");
        let planned = last(
            &mut session,
            &format!("INSERT INTO planned VALUES {planned}"),
        )
        .await
        .err()
        .expect("a bad value fails");
        // The same code, and the same cause (the planned path names the
        // optimizer rule that met it).
        assert_eq!(
            tablegate::pg::sqlstate(&alone),
            tablegate::pg::sqlstate(&planned)
        );
        assert!(
            planned.to_string().ends_with(&alone.to_string()),
            "{alone} / {planned}"
        );
    }
}

/// A prepared INSERT or UPDATE keeps its rewrite only while its table's
/// definition stands: after ALTER TABLE, or DROP and CREATE under the same
/// name, it writes what the new definition says.
#[tokio::test]
async fn prepared_writes_follow_a_changed_definition() {
    let (_dir, mut session) = session_after("CREATE TABLE t (id bigint PRIMARY KEY, a text)").await;
    let insert = session
        .prepare("INSERT INTO t VALUES ($1, $2)", &[])
        .await
        .unwrap();
    let update = session
        .prepare("UPDATE t SET a = $2 WHERE id = $1", &[])
        .await
        .unwrap();
    let params = |id: i64, a: &str| {
        ParamValues::from(vec![
            ScalarValue::Int64(Some(id)),
            ScalarValue::Utf8(Some(a.into())),
        ])
    };
    session
        .execute_prepared(&insert, params(1, "one"))
        .await
        .unwrap();

    run(&mut session, "ALTER TABLE t ADD COLUMN b text").await;
    session
        .execute_prepared(&insert, params(2, "two"))
        .await
        .unwrap();
    session
        .execute_prepared(&update, params(1, "uno"))
        .await
        .unwrap();
    assert_eq!(
        run(
            &mut session,
            "SELECT id, a, b IS NULL AS no_b FROM t ORDER BY id"
        )
        .await[3..5],
        [
            "| 1  | uno | true |".to_owned(),
            "| 2  | two | true |".to_owned()
        ]
    );

    // The same name, another table: the key is text now, and `a` an integer.
    run(
        &mut session,
        "DROP TABLE t; CREATE TABLE t (id text PRIMARY KEY, a int)",
    )
    .await;
    let refused = session.execute_prepared(&insert, params(3, "three")).await;
    assert!(refused.is_err(), "'three' went into an int column");
    session
        .execute_prepared(&insert, params(3, "33"))
        .await
        .unwrap();
    assert_eq!(
        run(&mut session, "SELECT id, a + 1 AS next FROM t").await[3],
        "| 3  | 34   |"
    );
}

/// Without a column list, VALUES or a SELECT may fill only the first
/// columns; the rest take their defaults, by literals or parameters alike
/// (PostgreSQL's rule).
#[tokio::test]
async fn inserts_without_a_column_list_fill_the_first_columns() {
    let (_dir, mut session) = session_after(
        "CREATE TABLE v (id bigint PRIMARY KEY, a text, n int DEFAULT 7);
         INSERT INTO v VALUES (1, 'x');
         INSERT INTO v VALUES (2);",
    )
    .await;
    let insert = session
        .prepare("INSERT INTO v VALUES ($1)", &[])
        .await
        .unwrap();
    session
        .execute_prepared(
            &insert,
            ParamValues::from(vec![ScalarValue::Int64(Some(3))]),
        )
        .await
        .unwrap();
    assert_eq!(
        run(&mut session, "SELECT id, a, n FROM v ORDER BY id").await[3..6],
        [
            "| 1  | x | 7 |".to_owned(),
            "| 2  |   | 7 |".to_owned(),
            "| 3  |   | 7 |".to_owned(),
        ]
    );
    // A SELECT too (but not through a wildcard, whose width the text
    // does not tell).
    let filled = "INSERT INTO v SELECT 4, 'y';
                  INSERT INTO v SELECT 5 UNION ALL SELECT 6;
                  CREATE TABLE w (id bigint PRIMARY KEY, a text);
                  INSERT INTO w VALUES (8, 'z');
                  INSERT INTO v SELECT id, a FROM w;
                  INSERT INTO v SELECT id + 1 FROM w;";
    for result in session.execute(filled).await {
        result.unwrap();
    }
    assert_eq!(
        run(
            &mut session,
            "SELECT id, a, n FROM v WHERE id > 3 ORDER BY id"
        )
        .await[3..9],
        [
            "| 4  | y | 7 |".to_owned(),
            "| 5  |   | 7 |".to_owned(),
            "| 6  |   | 7 |".to_owned(),
            "| 8  | z | 7 |".to_owned(),
            "| 9  |   | 7 |".to_owned(),
            "+----+---+---+".to_owned(),
        ]
    );
    let too_many = last(&mut session, "INSERT INTO v VALUES (4, 'y', 1, 2)").await;
    match too_many {
        Err(tablegate::sql::SqlError::Syntax(m)) => {
            assert!(m.contains("3 target columns but 4 expressions"), "{m}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("four values went into three columns"),
    }
}

/// A prepared INSERT compiles its volatile values (a `serial` column's
/// default, `nextval`, `random()`) once and draws them at each execution;
/// a value that cannot be computed fails each execution, not the prepare.
#[tokio::test]
async fn volatile_values_are_drawn_at_each_execution() {
    let (_dir, mut session) = session_after(
        "CREATE TABLE v (id serial PRIMARY KEY, n bigint, r float8);
         CREATE SEQUENCE s START 10;",
    )
    .await;
    let insert = session
        .prepare("INSERT INTO v (n, r) VALUES (nextval('s'), random())", &[])
        .await
        .unwrap();
    for _ in 0..3 {
        session
            .execute_prepared(&insert, ParamValues::from(Vec::<ScalarValue>::new()))
            .await
            .unwrap();
    }
    assert_eq!(
        run(&mut session, "SELECT id, n FROM v ORDER BY id").await[3..6],
        [
            "| 1  | 10 |".to_owned(),
            "| 2  | 11 |".to_owned(),
            "| 3  | 12 |".to_owned(),
        ]
    );
    assert_eq!(
        run(&mut session, "SELECT count(DISTINCT r) AS draws FROM v").await[3],
        "| 3     |"
    );

    let bad = session
        .prepare("INSERT INTO v (n) VALUES ('x'::bigint)", &[])
        .await
        .unwrap();
    for _ in 0..2 {
        let error = session
            .execute_prepared(&bad, ParamValues::from(Vec::<ScalarValue>::new()))
            .await
            .err()
            .expect("a bad value fails");
        assert_eq!(tablegate::pg::sqlstate(&error), "22P02", "{error}");
    }
    assert_eq!(
        run(&mut session, "SELECT count(*) AS n FROM v").await[3],
        "| 3 |"
    );
}

/// A parameter used in two places whose inferred types differ (an int
/// column's, and the bigint of `$1 + 1`) takes the first, as in
/// PostgreSQL, in writes and reads alike.
#[tokio::test]
async fn a_parameter_used_with_two_types_takes_the_first() {
    let (_dir, mut session) = session_after(
        "CREATE TABLE p (id int PRIMARY KEY, n bigint);
         INSERT INTO p VALUES (1, 0), (2, 0);",
    )
    .await;
    let update = session
        .prepare("UPDATE p SET n = $1 + 1 WHERE id = $1", &[])
        .await
        .unwrap();
    session
        .execute_prepared(
            &update,
            ParamValues::from(vec![ScalarValue::Int32(Some(2))]),
        )
        .await
        .unwrap();
    let read = session
        .prepare("SELECT id, n FROM p WHERE id >= $1 AND n < $1 + 10", &[])
        .await
        .unwrap();
    let rows = table(
        session
            .execute_prepared(&read, ParamValues::from(vec![ScalarValue::Int32(Some(2))]))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        rows.get(3).map(String::as_str),
        Some("| 2  | 3 |"),
        "{rows:?}"
    );
}
