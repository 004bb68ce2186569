//! Prepared reads of one partition by key (points, ranges, log tails) skip
//! planning; everything else does not; both answer the same.

use crate::common;

use datafusion::common::{ParamValues, ScalarValue};
use futures::TryStreamExt;
use tablegate::sql::{Output, Session};

/// Runs statements that must all succeed.
async fn run_all(session: &mut Session, sql: &str) {
    for output in session.execute(sql).await {
        output.unwrap();
    }
}

async fn rows(output: Output) -> usize {
    match output.decoded().unwrap() {
        Output::Rows { stream, .. } => stream
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .iter()
            .map(|b| b.num_rows())
            .sum(),
        _ => panic!("not rows"),
    }
}

#[tokio::test]
async fn point_queries_skip_planning() {
    let (_dir, engine) = common::temp_engine().await;
    let mut session = Session::new(engine);
    run_all(&mut session, "CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance bigint); INSERT INTO accounts VALUES (1, 'a', 10), (2, 'b', 20)").await;
    let cases = [
        ("SELECT owner, balance FROM accounts WHERE id = $1", true),
        ("SELECT * FROM accounts WHERE id = $1", true),
        ("SELECT owner FROM accounts WHERE $1 = id", true),
        ("SELECT owner FROM accounts WHERE id = 1", true),
        ("SELECT owner FROM accounts WHERE id > $1", false),
        ("SELECT upper(owner) FROM accounts WHERE id = $1", false),
        (
            "SELECT owner FROM accounts WHERE id = $1 AND balance > 5",
            false,
        ),
    ];
    for (sql, point) in cases {
        let prepared = session.prepare(sql, &[]).await.unwrap();
        assert_eq!(prepared.skips_planning(), point, "{sql}");
        let params = if sql.contains("$1") {
            vec![ScalarValue::Int32(Some(1))]
        } else {
            vec![]
        };
        let n = rows(
            session
                .execute_prepared(&prepared, ParamValues::from(params))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(n, 1, "{sql}");
    }
    // A key that is not there, and NULL.
    let prepared = session
        .prepare("SELECT owner FROM accounts WHERE id = $1", &[])
        .await
        .unwrap();
    for value in [ScalarValue::Int32(Some(99)), ScalarValue::Int32(None)] {
        let n = rows(
            session
                .execute_prepared(&prepared, ParamValues::from(vec![value]))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(n, 0);
    }
}

/// The rows of an output, one line each.
async fn lines(output: Output) -> Vec<String> {
    let Output::Rows { stream, .. } = output.decoded().unwrap() else {
        panic!("not rows")
    };
    let batches: Vec<_> = stream.try_collect().await.unwrap();
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    text.lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(str::to_owned)
        .collect()
}

async fn run(
    session: &mut Session,
    prepared: &tablegate::sql::Prepared,
    params: &[ScalarValue],
) -> Vec<String> {
    let params = ParamValues::from(params.to_vec());
    lines(session.execute_prepared(prepared, params).await.unwrap()).await
}

/// Two sessions on tables `readings` (devices 1 to 3, an int row key) and
/// `logs` (streams 's1' to 's3', a text row key): one reads by key, the
/// other has key pushdown off (it reads whole tables and filters them).
async fn fast_and_general() -> (tempfile::TempDir, Session, Session) {
    let (dir, engine) = common::temp_engine().await;
    let mut fast = Session::new(engine.clone());
    let mut general = Session::new(engine);
    let mut setup = String::from(
        "CREATE TABLE readings (device int, seq int, value bigint, PRIMARY KEY (device, seq));
         CREATE TABLE logs (stream text, at text, line text, PRIMARY KEY (stream, at));",
    );
    for device in 1..=3 {
        for seq in 1..=40 {
            setup.push_str(&format!(
                "INSERT INTO readings VALUES ({device}, {seq}, {});",
                device * 1000 + seq * 7 % 13
            ));
            setup.push_str(&format!(
                "INSERT INTO logs VALUES ('s{device}', 't{seq:03}', 'line {seq}');"
            ));
        }
    }
    run_all(&mut fast, &setup).await;
    run_all(&mut general, "SET tablegate.pushdown = off").await;
    (dir, fast, general)
}

/// Ranges of one partition, forwards and backwards, with and without a
/// limit, skip planning and answer as the general path does.
#[tokio::test]
async fn key_ranges_skip_planning_and_match_the_general_path() {
    use rand::{Rng, SeedableRng};
    let (_dir, mut fast, mut general) = fast_and_general().await;
    // (query, skips planning, ordered, parameters: device, then bounds)
    let cases = [
        (
            "SELECT seq, value FROM readings WHERE device = $1 AND seq >= $2 AND seq < $3",
            true,
            false,
            3,
        ),
        // A bound that is a parameter plus or minus a constant.
        (
            "SELECT seq, value FROM readings WHERE device = $1 AND seq >= $2 AND seq < $3 + 10",
            true,
            false,
            3,
        ),
        (
            "SELECT seq FROM readings WHERE device = $1 AND seq > $2 - 3 ORDER BY seq LIMIT 4",
            true,
            true,
            2,
        ),
        // One parameter in two places whose types differ (int, and the
        // bigint of `$2 + 10`): it keeps the first.
        (
            "SELECT seq, value FROM readings WHERE device = $1 AND seq >= $2 AND seq < $2 + 10",
            true,
            false,
            2,
        ),
        (
            "SELECT seq, value FROM readings WHERE device = $1 ORDER BY seq DESC LIMIT 10",
            true,
            true,
            1,
        ),
        (
            "SELECT value FROM readings WHERE device = $1 AND seq > $2 ORDER BY seq DESC LIMIT 4",
            true,
            true,
            2,
        ),
        (
            "SELECT seq AS s, value FROM readings WHERE device = $1 ORDER BY s DESC LIMIT 5",
            true,
            true,
            1,
        ),
        (
            "SELECT * FROM readings WHERE device = $1 AND $2 >= seq ORDER BY seq LIMIT 3",
            true,
            true,
            2,
        ),
        (
            "SELECT * FROM readings WHERE device = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq DESC",
            true,
            true,
            3,
        ),
        (
            "SELECT seq FROM readings WHERE device = $1 AND seq <= $2 AND seq >= $3 LIMIT 2",
            true,
            false,
            3,
        ),
        ("SELECT seq FROM readings WHERE device = $1", true, false, 1),
        (
            "SELECT seq FROM readings WHERE device = $1 ORDER BY value DESC LIMIT 3",
            false,
            true,
            1,
        ),
        (
            "SELECT seq FROM readings WHERE seq > $1 ORDER BY seq",
            false,
            true,
            1,
        ),
        (
            "SELECT seq FROM readings WHERE device = $1 ORDER BY seq LIMIT 3 OFFSET 2",
            false,
            true,
            1,
        ),
        (
            "SELECT seq FROM readings WHERE device = $1 AND seq > $2 AND seq >= $3 ORDER BY seq",
            true,
            true,
            3,
        ),
        (
            "SELECT value FROM readings WHERE device = $1 AND seq = $2 AND seq > $3",
            true,
            false,
            3,
        ),
        (
            "SELECT count(*) FROM readings WHERE device = $1",
            false,
            true,
            1,
        ),
    ];
    // The same over a text row key: (query, skips planning, ordered, parameters).
    let text_cases = [
        (
            "SELECT at, line FROM logs WHERE stream = $1 ORDER BY at DESC LIMIT 3",
            true,
            true,
            1,
        ),
        (
            "SELECT line FROM logs WHERE stream = $1 AND at > $2 AND at <= $3",
            true,
            false,
            3,
        ),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let cases = cases
        .into_iter()
        .map(|c| (c, false))
        .chain(text_cases.into_iter().map(|c| (c, true)));
    for ((sql, skips, ordered, count), text) in cases {
        let fast_prepared = fast.prepare(sql, &[]).await.unwrap();
        assert_eq!(fast_prepared.skips_planning(), skips, "{sql}");
        let general_prepared = general.prepare(sql, &[]).await.unwrap();
        for _ in 0..40 {
            // A partition (some missing), then bounds (some NULL).
            let device = rng.random_range(0..5);
            let mut params = vec![match text {
                true => ScalarValue::Utf8(Some(format!("s{device}"))),
                false => ScalarValue::Int32(Some(device)),
            }];
            for _ in 1..count {
                let bound = rng.random_range(-2..45);
                params.push(match (text, rng.random_range(0..20) == 0) {
                    (true, _) => ScalarValue::Utf8(Some(format!("t{:03}", bound.max(0)))),
                    (false, true) => ScalarValue::Int32(None),
                    (false, false) => ScalarValue::Int32(Some(bound)),
                });
            }
            let mut got = run(&mut fast, &fast_prepared, &params).await;
            let mut want = run(&mut general, &general_prepared, &params).await;
            if !ordered {
                got.sort();
                want.sort();
            }
            assert_eq!(got, want, "{sql} with {params:?}");
        }
    }
}

/// A query's rows, one line each, or its error (when planned or while
/// its rows are read).
async fn answer(output: tablegate::sql::Result<Output>) -> Result<Vec<String>, String> {
    let Output::Rows { stream, .. } = output
        .and_then(Output::decoded)
        .map_err(|e| e.to_string())?
    else {
        panic!("not rows")
    };
    let batches: Vec<_> = stream.try_collect().await.map_err(|e| e.to_string())?;
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    Ok(text
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(str::to_owned)
        .collect())
}

/// Queries that compare key columns with literals (the simple protocol's
/// reads by key) answer as the general path does, whatever the literals:
/// of the column's type or not, out of its range, NULL, quoted; and texts
/// that differ from one read before only in their literals (which skip
/// parsing) answer with their own literals.
#[tokio::test]
async fn key_reads_with_literals_match_the_general_path() {
    use rand::seq::IndexedRandom;
    use rand::SeedableRng;
    let (_dir, mut fast, mut general) = fast_and_general().await;
    let numbers = [
        "1",
        "2",
        "3",
        "2",
        "3",
        "-1",
        "0",
        "17",
        "40",
        "'2'",
        "'x'",
        "2.0",
        "NULL",
        "99999999999",
        "true",
    ];
    let texts = [
        "'s1'", "'s2'", "'s3'", "'s2'", "'t007'", "'t030'", "'t012'", "'it''s'", "''", "1", "NULL",
    ];
    let queries = [
        (
            "SELECT seq, value FROM readings WHERE device = {} AND seq >= {} AND seq < {}",
            &numbers[..],
        ),
        (
            "SELECT seq, value FROM readings WHERE device = {} ORDER BY seq DESC LIMIT 10",
            &numbers,
        ),
        ("SELECT * FROM readings WHERE device = {} AND seq = {}", &numbers),
        (
            "SELECT value AS v FROM readings WHERE {} = device AND seq BETWEEN {} AND {} ORDER BY seq",
            &numbers,
        ),
        (
            "SELECT line FROM logs WHERE stream = {} AND at > {} ORDER BY at LIMIT 3",
            &texts,
        ),
        ("SELECT * FROM logs WHERE stream = {} AND at = {}", &texts),
        // Literals that are not compared with key columns are part of the
        // query, not values of its key.
        (
            "SELECT seq FROM readings WHERE device = {} ORDER BY seq DESC LIMIT {}",
            &numbers,
        ),
        ("SELECT seq, {} FROM readings WHERE device = {} AND seq = {}", &numbers),
        ("SELECT line, {} AS t FROM logs WHERE stream = {} AND at = {}", &texts),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut answered = 0;
    for round in 0..600 {
        // Statements remembered before the change no longer apply.
        if round == 300 {
            run_all(&mut fast, "ALTER TABLE readings ADD COLUMN note text").await;
        }
        let (query, literals) = queries.choose(&mut rng).unwrap();
        let mut sql = String::new();
        for (i, part) in query.split("{}").enumerate() {
            if i > 0 {
                sql.push_str(literals.choose(&mut rng).unwrap());
            }
            sql.push_str(part);
        }
        let got = answer(fast.execute(&sql).await.pop().unwrap()).await;
        let want = answer(general.execute(&sql).await.pop().unwrap()).await;
        assert_eq!(got, want, "{sql}");
        answered += usize::from(got.is_ok_and(|rows| !rows.is_empty()));
    }
    assert!(answered > 100, "{answered} queries returned rows");
}

/// A read by key prepared again (as clients do with an unnamed statement
/// for each query) is not planned again while its table stays as it was;
/// once the table changes, it is, and sees the change.
#[tokio::test]
async fn key_reads_prepared_again_are_planned_once_per_definition() {
    use std::sync::Arc;
    let (_dir, engine) = common::temp_engine().await;
    let mut session = Session::new(engine);
    run_all(&mut session, "CREATE TABLE accounts (id int PRIMARY KEY, owner text); INSERT INTO accounts VALUES (1, 'a')").await;
    let sql = "SELECT * FROM accounts WHERE id = $1";
    let first = session.prepare(sql, &[]).await.unwrap();
    assert!(Arc::ptr_eq(
        &first,
        &session.prepare(sql, &[]).await.unwrap()
    ));
    // Statements that are not reads by key are planned each time.
    let count = "SELECT count(*) FROM accounts WHERE id = $1";
    let counted = session.prepare(count, &[]).await.unwrap();
    assert!(!Arc::ptr_eq(
        &counted,
        &session.prepare(count, &[]).await.unwrap()
    ));

    run_all(&mut session, "ALTER TABLE accounts ADD COLUMN note text").await;
    let after = session.prepare(sql, &[]).await.unwrap();
    assert!(!Arc::ptr_eq(&first, &after));
    assert!(after.skips_planning());
    let one = ParamValues::from(vec![ScalarValue::Int32(Some(1))]);
    let rows = lines(session.execute_prepared(&after, one).await.unwrap()).await;
    assert_eq!(rows, vec!["| 1  | a     |      |"]);
}

/// Prepared lookups that fix every column of a secondary index by equality
/// read its entries and the rows they name without planning, and answer as
/// a whole-table scan does: misses, NULLs, a limit, more rows than a read
/// without a limit keeps (the general path takes those), and in a
/// transaction block that wrote the table (whose rows the index holds only
/// from its commit: they are read from its writes).
#[tokio::test]
async fn index_lookups_skip_planning_and_match_the_general_path() {
    use rand::{Rng, SeedableRng};
    let (_dir, engine) = common::temp_engine().await;
    let mut fast = Session::new(engine.clone());
    let mut general = Session::new(engine);
    run_all(
        &mut fast,
        "CREATE TABLE people (id int PRIMARY KEY, email text, team int, role text);
         CREATE UNIQUE INDEX people_email ON people (email);
         CREATE INDEX people_team_role ON people (team, role);
         INSERT INTO people SELECT g, 'p' || g || '@x', g % 7, CASE WHEN g % 3 = 0 THEN 'lead' ELSE 'dev' END
           FROM generate_series(1, 300) g;
         INSERT INTO people SELECT g, NULL, 100, 'dev' FROM generate_series(1001, 2200) g",
    )
    .await;
    run_all(&mut general, "SET tablegate.pushdown = off").await;
    // (query, skips planning, parameters)
    let cases = [
        ("SELECT id, team FROM people WHERE email = $1", true, 1),
        (
            "SELECT id FROM people WHERE role = $2 AND team = $1",
            true,
            2,
        ),
        ("SELECT count(*) FROM people WHERE team = $1", false, 1),
        (
            "SELECT id FROM people WHERE team = $1 AND role = $2 ORDER BY id",
            false,
            2,
        ),
        (
            "SELECT id FROM people WHERE team = $1 AND role = $2 AND id > 5",
            false,
            2,
        ),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    for (sql, skips, count) in cases {
        let fast_prepared = fast.prepare(sql, &[]).await.unwrap();
        assert_eq!(fast_prepared.skips_planning(), skips, "{sql}");
        let general_prepared = general.prepare(sql, &[]).await.unwrap();
        for _ in 0..30 {
            let params: Vec<ScalarValue> = match count {
                1 if sql.contains("email") => vec![match rng.random_range(0..10) {
                    0 => ScalarValue::Utf8(None),
                    _ => ScalarValue::Utf8(Some(format!("p{}@x", rng.random_range(0..320)))),
                }],
                1 => vec![ScalarValue::Int32(Some(rng.random_range(0..8)))],
                _ => vec![
                    ScalarValue::Int32(Some(
                        *[0, 3, 6, 100, 9].get(rng.random_range(0..5)).unwrap(),
                    )),
                    ScalarValue::Utf8(Some(["dev", "lead", "ops"][rng.random_range(0..3)].into())),
                ],
            };
            let mut got = run(&mut fast, &fast_prepared, &params).await;
            let mut want = run(&mut general, &general_prepared, &params).await;
            got.sort();
            want.sort();
            assert_eq!(got, want, "{sql} with {params:?}");
        }
    }
    // 1,200 rows under one value: more than a read without a limit keeps.
    let by_team = fast
        .prepare("SELECT id FROM people WHERE team = $1 AND role = $2", &[])
        .await
        .unwrap();
    let many = [
        ScalarValue::Int32(Some(100)),
        ScalarValue::Utf8(Some("dev".into())),
    ];
    assert_eq!(run(&mut fast, &by_team, &many).await.len(), 1200);
    let limited = fast
        .prepare(
            "SELECT id FROM people WHERE team = $1 AND role = $2 LIMIT 5",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(run(&mut fast, &limited, &many).await.len(), 5);

    // A block that wrote the table sees its own rows and not the ones it
    // changed away or deleted.
    let by_email = fast
        .prepare("SELECT id FROM people WHERE email = $1", &[])
        .await
        .unwrap();
    run_all(
        &mut fast,
        "BEGIN; INSERT INTO people VALUES (5000, 'new@x', 1, 'dev');
         UPDATE people SET email = 'moved@x' WHERE id = 7; DELETE FROM people WHERE id = 8",
    )
    .await;
    let email = |e: &str| [ScalarValue::Utf8(Some(e.into()))];
    assert_eq!(run(&mut fast, &by_email, &email("new@x")).await.len(), 1);
    assert_eq!(run(&mut fast, &by_email, &email("moved@x")).await.len(), 1);
    assert!(run(&mut fast, &by_email, &email("p7@x")).await.is_empty());
    assert!(run(&mut fast, &by_email, &email("p8@x")).await.is_empty());
    // The same rows as the general path's in the block (an extra condition
    // takes it), after rows moved into and out of the index's values.
    run_all(
        &mut fast,
        "UPDATE people SET team = 1, role = 'dev' WHERE id IN (3, 9);
         UPDATE people SET role = 'ops' WHERE id IN (1, 15)",
    )
    .await;
    let general_team = fast
        .prepare(
            "SELECT id FROM people WHERE team = $1 AND role = $2 AND id > -1",
            &[],
        )
        .await
        .unwrap();
    assert!(!general_team.skips_planning());
    let team = [
        ScalarValue::Int32(Some(1)),
        ScalarValue::Utf8(Some("dev".into())),
    ];
    let mut got = run(&mut fast, &by_team, &team).await;
    let mut want = run(&mut fast, &general_team, &team).await;
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(got.iter().any(|l| l.contains(" 5000 ")) && got.iter().any(|l| l.contains(" 9 ")));
    assert!(!got.iter().any(|l| l.contains(" 1 ") || l.contains(" 8 ")));
    run_all(&mut fast, "ROLLBACK").await;
    assert_eq!(run(&mut fast, &by_email, &email("p7@x")).await.len(), 1);
    assert!(run(&mut fast, &by_email, &email("new@x")).await.is_empty());
}
