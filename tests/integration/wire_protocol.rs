//! The PostgreSQL protocol through a real client: prepared statements with
//! typed parameters and binary results, portals read in pieces, errors that
//! leave the connection usable, COPY in and out, and concurrent writers.

use crate::common;

use std::sync::Arc;

use common::TestServer;
use futures::{SinkExt, TryStreamExt};
use tokio_postgres::types::Type;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_with_typed_parameters() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE items (shop text, id bigint, name varchar(40), price numeric(10, 2), qty int, \
             w real, ok boolean, made date, at timestamp, tz timestamptz, tag uuid, raw bytea, doc jsonb, \
             PRIMARY KEY (shop, id))",
        )
        .await
        .unwrap();

    let insert = client
        .prepare("INSERT INTO items (shop, id, name, qty, w, ok, made, at, raw) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
        .await
        .unwrap();
    assert_eq!(
        insert.params(),
        &[
            Type::TEXT,
            Type::INT8,
            Type::TEXT,
            Type::INT4,
            Type::FLOAT4,
            Type::BOOL,
            Type::DATE,
            Type::TIMESTAMP,
            Type::BYTEA
        ]
    );
    let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 21).unwrap();
    let at = day.and_hms_micro_opt(10, 11, 12, 345678).unwrap();
    for i in 0..5i64 {
        let n = client
            .execute(
                &insert,
                &[
                    &"north",
                    &i,
                    &format!("item {i}"),
                    &(i as i32 * 10),
                    &1.5f32,
                    &(i % 2 == 0),
                    &day,
                    &at,
                    &vec![i as u8, 255],
                ],
            )
            .await
            .unwrap();
        assert_eq!(n, 1);
    }

    // Binary results, decoded by the client into Rust types.
    let select = client
        .prepare(
            "SELECT id, name, qty, w, ok, made, at, raw FROM items WHERE shop = $1 AND id = $2",
        )
        .await
        .unwrap();
    assert_eq!(select.params(), &[Type::TEXT, Type::INT8]);
    let row = client.query_one(&select, &[&"north", &3i64]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 3);
    assert_eq!(row.get::<_, String>(1), "item 3");
    assert_eq!(row.get::<_, i32>(2), 30);
    assert_eq!(row.get::<_, f32>(3), 1.5);
    assert!(!row.get::<_, bool>(4));
    assert_eq!(row.get::<_, chrono::NaiveDate>(5), day);
    assert_eq!(row.get::<_, chrono::NaiveDateTime>(6), at);
    assert_eq!(row.get::<_, Vec<u8>>(7), vec![3, 255]);

    // The same statement, many times: plans are reused.
    for i in 0..5i64 {
        let rows = client.query(&select, &[&"north", &i]).await.unwrap();
        assert_eq!(rows.len(), 1);
    }
    let none = client.query(&select, &[&"south", &1i64]).await.unwrap();
    assert!(none.is_empty());

    // Updates and deletes with parameters report true counts.
    let n = client
        .execute(
            "UPDATE items SET qty = qty + $1 WHERE shop = $2 AND id >= $3",
            &[&1i32, &"north", &3i64],
        )
        .await
        .unwrap();
    assert_eq!(n, 2);
    let n = client
        .execute(
            "DELETE FROM items WHERE shop = $1 AND id = $2",
            &[&"north", &0i64],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let n = client
        .execute(
            "DELETE FROM items WHERE shop = $1 AND id = $2",
            &[&"north", &0i64],
        )
        .await
        .unwrap();
    assert_eq!(n, 0);

    // uuid, numeric and jsonb through text parameters and results.
    client
        .batch_execute(
            "UPDATE items SET tag = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', price = 12.5, doc = '{\"k\": 1}' WHERE shop = 'north' AND id = 1",
        )
        .await
        .unwrap();
    let rows = client
        .simple_query("SELECT tag, price, doc FROM items WHERE shop = 'north' AND id = 1")
        .await
        .unwrap();
    let tokio_postgres::SimpleQueryMessage::Row(row) = &rows[1] else {
        panic!("{rows:?}")
    };
    assert_eq!(row.get(0), Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
    assert_eq!(row.get(1), Some("12.50"));
    assert_eq!(row.get(2), Some("{\"k\": 1}"));
}

/// A parameter takes the type of a cast written on it, of the function
/// argument it is, of the other arguments of `coalesce` and its kin, of
/// `LIMIT`, or of another place that types it, as in PostgreSQL:
/// `$1::float8` is a float8 parameter, not text cast to float8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_take_the_types_postgresql_infers() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE gauges (site text, id bigint, level real, read_at timestamptz, \
             PRIMARY KEY (site, id)); \
             INSERT INTO gauges VALUES ('north', 1, 0.5, '2026-11-28 10:00:00+00'), \
             ('north', 2, 1.5, '2026-11-28 11:00:00+00')",
        )
        .await
        .unwrap();

    let sum = client.prepare("SELECT $1::float8 + 1").await.unwrap();
    assert_eq!(sum.params(), &[Type::FLOAT8]);
    let row = client.query_one(&sum, &[&2.25f64]).await.unwrap();
    assert_eq!(row.get::<_, f64>(0), 3.25);

    let casts = client
        .prepare("SELECT $1::int, $2::text, $3::date, $4::timestamptz, $5::bool, $6::bigint")
        .await
        .unwrap();
    assert_eq!(
        casts.params(),
        &[
            Type::INT4,
            Type::TEXT,
            Type::DATE,
            Type::TIMESTAMPTZ,
            Type::BOOL,
            Type::INT8
        ]
    );
    let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-28T10:30:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let row = client
        .query_one(&casts, &[&7i32, &"seven", &day, &at, &true, &(1i64 << 40)])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 7);
    assert_eq!(row.get::<_, &str>(1), "seven");
    assert_eq!(row.get::<_, chrono::NaiveDate>(2), day);
    assert_eq!(row.get::<_, chrono::DateTime<chrono::Utc>>(3), at);
    assert!(row.get::<_, bool>(4));
    assert_eq!(row.get::<_, i64>(5), 1 << 40);

    // A cast in a filter: the key compared with an int4 parameter.
    let by_id = client
        .prepare("SELECT level FROM gauges WHERE site = $1 AND id = $2::int")
        .await
        .unwrap();
    assert_eq!(by_id.params(), &[Type::TEXT, Type::INT4]);
    let row = client.query_one(&by_id, &[&"north", &2i32]).await.unwrap();
    assert_eq!(row.get::<_, f32>(0), 1.5);
    // The key written as a row: each field's parameter takes its column's
    // type, and the read is the same point get.
    let by_row = client
        .prepare("SELECT level FROM gauges WHERE (site, id) = ($1, $2)")
        .await
        .unwrap();
    assert_eq!(by_row.params(), &[Type::TEXT, Type::INT8]);
    let row = client.query_one(&by_row, &[&"north", &2i64]).await.unwrap();
    assert_eq!(row.get::<_, f32>(0), 1.5);
    let read = client
        .query_one(
            "SELECT access FROM tablegate.queries WHERE query LIKE '%(site, id) = ($1, $2)'",
            &[],
        )
        .await
        .unwrap();
    assert!(
        read.get::<_, &str>(0).starts_with("point "),
        "{:?}",
        read.get::<_, &str>(0)
    );
    let since = client
        .prepare("SELECT count(*) FROM gauges WHERE read_at > $1::timestamptz")
        .await
        .unwrap();
    assert_eq!(since.params(), &[Type::TIMESTAMPTZ]);
    let row = client.query_one(&since, &[&at]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);

    // Writes: a cast in SET, and in the key of a DELETE.
    let update = client
        .prepare("UPDATE gauges SET level = $1::float8 * 2 WHERE site = 'north' AND id = $2")
        .await
        .unwrap();
    assert_eq!(update.params(), &[Type::FLOAT8, Type::INT8]);
    assert_eq!(
        client.execute(&update, &[&0.25f64, &1i64]).await.unwrap(),
        1
    );
    let row = client
        .query_one(
            "SELECT level FROM gauges WHERE site = 'north' AND id = 1",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, f32>(0), 0.5);
    let delete = client
        .prepare("DELETE FROM gauges WHERE site = $1::varchar AND id = $2::int")
        .await
        .unwrap();
    assert_eq!(delete.params(), &[Type::TEXT, Type::INT4]);
    assert_eq!(
        client.execute(&delete, &[&"north", &2i32]).await.unwrap(),
        1
    );

    // A function's argument, and a parameter typed in one place only.
    let sleep = client.prepare("SELECT pg_sleep($1)").await.unwrap();
    assert_eq!(sleep.params(), &[Type::FLOAT8]);
    client.query_one(&sleep, &[&0.01f64]).await.unwrap();
    let either = client
        .prepare("SELECT count(*) FROM gauges WHERE id = $1 OR $1 IS NULL")
        .await
        .unwrap();
    assert_eq!(either.params(), &[Type::INT8]);
    let row = client.query_one(&either, &[&None::<i64>]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    let row = client.query_one(&either, &[&7i64]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 0);

    // The other arguments' type, and LIMIT's.
    client
        .batch_execute(
            "INSERT INTO gauges (site, id) VALUES ('south', 1); \
             INSERT INTO gauges VALUES ('south', 2, 2.5, NULL), ('south', 3, 3.5, NULL)",
        )
        .await
        .unwrap();
    let common = client
        .prepare(
            "SELECT coalesce(level, $1), greatest(id, $2), least($3, id), nullif(site, $4) \
             FROM gauges WHERE site = 'south' ORDER BY id",
        )
        .await
        .unwrap();
    assert_eq!(
        common.params(),
        &[Type::FLOAT4, Type::INT8, Type::INT8, Type::TEXT]
    );
    let rows = client
        .query(&common, &[&-1f32, &2i64, &2i64, &"south"])
        .await
        .unwrap();
    let got: Vec<(f32, i64, i64, Option<String>)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        got,
        [(-1.0, 2, 1, None), (2.5, 2, 2, None), (3.5, 3, 2, None)]
    );
    let page = client
        .prepare("SELECT id FROM gauges WHERE site = 'south' ORDER BY id LIMIT $1 OFFSET $2")
        .await
        .unwrap();
    assert_eq!(page.params(), &[Type::INT8, Type::INT8]);
    let rows = client.query(&page, &[&1i64, &1i64]).await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>(),
        [2]
    );
}

/// A type the client declares for a parameter (in Parse, as psycopg and
/// JDBC do) is the parameter's where the statement gives it none, or one
/// that would read its values as other values: `$1 + 1` with a numeric
/// `$1` is a numeric, not a bigint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_keep_the_types_the_client_declares() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let typed = |sql: &'static str, types: &'static [Type]| {
        let client = &client;
        async move { client.prepare_typed(sql, types).await.unwrap() }
    };

    let sum = typed("SELECT $1 + 1", &[Type::NUMERIC]).await;
    assert_eq!(sum.params(), &[Type::NUMERIC]);
    assert_eq!(sum.columns()[0].type_(), &Type::NUMERIC);
    let quarter: rust_decimal::Decimal = "1.25".parse().unwrap();
    let row = client.query_one(&sum, &[&quarter]).await.unwrap();
    assert_eq!(row.get::<_, rust_decimal::Decimal>(0).to_string(), "2.25");

    let twice = typed("SELECT $1 * 2.0", &[Type::FLOAT8]).await;
    let row = client.query_one(&twice, &[&1.5f64]).await.unwrap();
    assert_eq!(row.get::<_, f64>(0), 3.0);

    let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
    let next = typed("SELECT $1 + 1", &[Type::DATE]).await;
    let row = client.query_one(&next, &[&day]).await.unwrap();
    assert_eq!(row.get::<_, chrono::NaiveDate>(0), day.succ_opt().unwrap());

    let at = chrono::DateTime::parse_from_rfc3339("2026-11-28T10:30:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let echo = typed("SELECT $1", &[Type::TIMESTAMPTZ]).await;
    assert_eq!(echo.columns()[0].type_(), &Type::TIMESTAMPTZ);
    let row = client.query_one(&echo, &[&at]).await.unwrap();
    assert_eq!(row.get::<_, chrono::DateTime<chrono::Utc>>(0), at);

    let second = typed("SELECT ($1)[2]", &[Type::INT8_ARRAY]).await;
    let row = client
        .query_one(&second, &[&vec![1i64, 20, 3]])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 20);

    // A declared type the statement's type holds as it is: an int2 for a
    // bigint key.
    client
        .batch_execute(
            "CREATE TABLE marks (site text, id bigint, PRIMARY KEY (site, id)); \
             INSERT INTO marks VALUES ('north', 7)",
        )
        .await
        .unwrap();
    let by_key = typed(
        "SELECT id FROM marks WHERE site = $1 AND id = $2",
        &[Type::TEXT, Type::INT2],
    )
    .await;
    let row = client.query_one(&by_key, &[&"north", &7i16]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_keep_the_connection_usable() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE t (k int PRIMARY KEY)")
        .await
        .unwrap();
    let cases = [
        ("SELEC 1", "42601"),
        ("SELECT * FROM missing", "42P01"),
        ("SELECT nope FROM t", "42703"),
        ("INSERT INTO t VALUES (1), (1)", "23505"),
        ("CREATE TABLE t (k int)", "42P07"),
    ];
    for (sql, code) in cases {
        let err = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(err.code().map(|c| c.code()), Some(code), "{sql}: {err}");
        // The extended protocol too.
        if let Err(err) = client.query(sql, &[]).await {
            assert_eq!(
                err.code().map(|c| c.code()),
                Some(code),
                "{sql} (extended): {err}"
            );
        }
        assert_eq!(
            client
                .query_one("SELECT 1 + 1", &[])
                .await
                .unwrap()
                .get::<_, i32>(0),
            2
        );
    }
    // Several statements in one simple query are one transaction: the
    // error stops the rest and drops what came before it.
    let err = client
        .batch_execute("INSERT INTO t VALUES (5); SELECT * FROM missing; INSERT INTO t VALUES (6)")
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("42P01"));
    let keys: Vec<i32> = common::first_column(&client, "SELECT k FROM t ORDER BY k").await;
    assert_eq!(keys, Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portals_return_rows_in_pieces() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    client
        .batch_execute("CREATE TABLE n (i int PRIMARY KEY)")
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "INSERT INTO n VALUES {}",
            (0..250)
                .map(|i| format!("({i})"))
                .collect::<Vec<_>>()
                .join(",")
        ))
        .await
        .unwrap();
    let txn = client.transaction().await.unwrap();
    let statement = txn.prepare("SELECT i FROM n ORDER BY i").await.unwrap();
    let portal = txn.bind(&statement, &[]).await.unwrap();
    let mut seen = Vec::new();
    loop {
        let rows = txn.query_portal(&portal, 100).await.unwrap();
        if rows.is_empty() {
            break;
        }
        assert!(rows.len() <= 100);
        seen.extend(rows.iter().map(|r| r.get::<_, i32>(0)));
    }
    assert_eq!(seen, (0..250).collect::<Vec<_>>());
    txn.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_and_out() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE people (id int PRIMARY KEY, name text, score double precision)",
        )
        .await
        .unwrap();
    let sink = client
        .copy_in("COPY people FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    let mut data = String::new();
    for i in 0..3000 {
        data.push_str(&format!("{i},\"name, {i}\",{}\n", i as f64 / 2.0));
    }
    data.push_str("3000,,\n");
    sink.send(bytes::Bytes::from(data)).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 3001);
    let row = client
        .query_one("SELECT count(*), count(name), sum(score) FROM people", &[])
        .await
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (3001, 3000));

    let out = client
        .copy_out("COPY (SELECT id, name, score FROM people WHERE id < 3 ORDER BY id) TO STDOUT")
        .await
        .unwrap();
    let chunks: Vec<bytes::Bytes> = out.try_collect().await.unwrap();
    let text: String = chunks
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    assert_eq!(text, "0\tname, 0\t0\n1\tname, 1\t0.5\n2\tname, 2\t1\n");

    // A bad row fails the whole COPY, names the problem, and loads nothing.
    let sink = client.copy_in("COPY people FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(
        b"9000\tok\t1\n9001\tbad\tnot-a-number\n",
    ))
    .await
    .unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("22P02"), "{err}");
    assert_eq!(
        client
            .query_one("SELECT count(*) FROM people WHERE id >= 9000", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        0
    );
    assert_eq!(
        client
            .query_one("SELECT 1", &[])
            .await
            .unwrap()
            .get::<_, i32>(0),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_increments_are_never_lost() {
    let server = TestServer::start().await;
    let setup = server.client().await;
    setup
        .batch_execute("CREATE TABLE c (k text PRIMARY KEY, n int)")
        .await
        .unwrap();
    setup
        .batch_execute("INSERT INTO c VALUES ('x', 0)")
        .await
        .unwrap();
    let server = Arc::new(server);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            let client = server.client().await;
            let mut ok = 0;
            for _ in 0..25 {
                client
                    .execute("UPDATE c SET n = n + 1 WHERE k = 'x'", &[])
                    .await
                    .unwrap();
                ok += 1;
            }
            ok
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    let n: i32 = setup
        .query_one("SELECT n FROM c WHERE k = 'x'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, total);

    // Explicit transactions: conflicts come back as 40001, commits all count.
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            let mut client = server.client().await;
            let (mut committed, mut conflicts) = (0, 0);
            for _ in 0..20 {
                let txn = client.transaction().await.unwrap();
                let n: i32 = txn
                    .query_one("SELECT n FROM c WHERE k = 'x'", &[])
                    .await
                    .unwrap()
                    .get(0);
                txn.execute("UPDATE c SET n = $1 WHERE k = 'x'", &[&(n + 1)])
                    .await
                    .unwrap();
                match txn.commit().await {
                    Ok(()) => committed += 1,
                    Err(e) => {
                        assert_eq!(e.code().map(|c| c.code()), Some("40001"), "{e}");
                        conflicts += 1;
                    }
                }
            }
            (committed, conflicts)
        }));
    }
    let mut committed = 0;
    for t in tasks {
        committed += t.await.unwrap().0;
    }
    let after: i32 = setup
        .query_one("SELECT n FROM c WHERE k = 'x'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(after, n + committed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_and_rows_survive_a_restart() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE kept (p text, r int, v text, PRIMARY KEY (p, r)) WITH (partition_key = 'p'); \
             INSERT INTO kept VALUES ('a', 1, 'one'), ('a', 2, 'two'); \
             ALTER TABLE kept ADD COLUMN extra int; \
             CREATE TABLE gone (k int PRIMARY KEY); DROP TABLE gone",
        )
        .await
        .unwrap();
    drop(client);
    let dir = server.stop().await;
    let server = TestServer::start_in(dir).await;
    let client = server.client().await;
    let rows = client
        .query("SELECT r, v, extra FROM kept WHERE p = 'a' ORDER BY r", &[])
        .await
        .unwrap();
    let values: Vec<(i32, String, Option<i32>)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        values,
        vec![(1, "one".into(), None), (2, "two".into(), None)]
    );
    let err = client
        .batch_execute("SELECT * FROM gone")
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("42P01"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serial_goes_on_from_its_last_value_after_a_clean_restart() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE numbered (id serial PRIMARY KEY, v text); \
             INSERT INTO numbered (v) VALUES ('a'), ('b'), ('c')",
        )
        .await
        .unwrap();
    drop(client);
    let dir = server.stop().await;
    let server = TestServer::start_in(dir).await;
    let client = server.client().await;
    let id: i32 = client
        .query_one("INSERT INTO numbered (v) VALUES ('d') RETURNING id", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(id, 4);
}

/// FETCH and MOVE in PostgreSQL's shorter forms through the extended
/// protocol: a FETCH is described with its cursor's columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_and_move_in_the_forms_postgresql_reads() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE s (k int PRIMARY KEY); \
             INSERT INTO s SELECT n FROM generate_series(1, 10) AS g(n); \
             BEGIN; DECLARE c CURSOR FOR SELECT k FROM s ORDER BY k",
        )
        .await
        .unwrap();
    let fetch = async |sql: &str| -> Vec<i32> {
        let rows = client.query(sql, &[]).await.unwrap();
        rows.iter().map(|r| r.get(0)).collect()
    };
    assert_eq!(fetch("FETCH c").await, [1]);
    assert_eq!(fetch("FETCH FROM c").await, [2]);
    assert_eq!(fetch("FETCH NEXT c").await, [3]);
    assert_eq!(fetch("FETCH 2 c").await, [4, 5]);
    assert_eq!(client.execute("MOVE c", &[]).await.unwrap(), 1);
    assert_eq!(fetch("FETCH FORWARD 1 IN c").await, [7]);
    assert_eq!(fetch("FETCH ALL c").await, [8, 9, 10]);
}

/// A frontend message: type byte, length, body.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Reads backend messages until one of type `until`, returning their types.
async fn read_until(stream: &mut tokio::net::TcpStream, until: u8) -> Vec<u8> {
    let replies = read_replies_until(stream, until).await;
    replies.iter().map(|(kind, _)| *kind).collect()
}

/// Reads backend messages until one of type `until`: their types and bodies.
async fn read_replies_until(stream: &mut tokio::net::TcpStream, until: u8) -> Vec<(u8, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut replies = Vec::new();
    loop {
        let mut header = [0u8; 5];
        stream.read_exact(&mut header).await.unwrap();
        let len = i32::from_be_bytes(header[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; len - 4];
        stream.read_exact(&mut body).await.unwrap();
        replies.push((header[0], body));
        if header[0] == until {
            return replies;
        }
    }
}

/// A connection logged in as `test`, speaking the protocol's messages.
async fn raw_connection(port: u16) -> tokio::net::TcpStream {
    raw_login(port, &[]).await.0
}

/// A connection logged in as `test` with more startup parameters, and the
/// server's replies up to its first ReadyForQuery.
async fn raw_login(
    port: u16,
    parameters: &[(&str, &str)],
) -> (tokio::net::TcpStream, Vec<(u8, Vec<u8>)>) {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut startup = Vec::new();
    startup.extend_from_slice(&196608i32.to_be_bytes());
    for (name, value) in [("user", "test")].iter().chain(parameters) {
        for text in [name, value] {
            startup.extend_from_slice(text.as_bytes());
            startup.push(0);
        }
    }
    startup.push(0);
    let mut packet = ((startup.len() + 4) as i32).to_be_bytes().to_vec();
    packet.extend_from_slice(&startup);
    stream.write_all(&packet).await.unwrap();
    let replies = read_replies_until(&mut stream, b'Z').await;
    (stream, replies)
}

/// A client's startup parameters (libpq's `PGTZ` and `PGOPTIONS`, pgJDBC's
/// `TimeZone`) are the session's starting values, as in PostgreSQL: the
/// ParameterStatus messages of the login say them, instants are shown in
/// the zone, and RESET goes back to them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_parameters_are_the_session_starting_values() {
    let server = TestServer::start().await;
    let parameters = [
        ("TimeZone", "asia/kolkata"),
        ("options", "-c application_name=report"),
    ];
    let (mut stream, replies) = raw_login(server.port, &parameters).await;
    // A client keeps the last value it is told of each.
    let status = |name: &str| {
        replies
            .iter()
            .rev()
            .filter(|(kind, _)| *kind == b'S')
            .find_map(|(_, body)| {
                let mut fields = body.split(|b| *b == 0);
                let (field, value) = (fields.next()?, fields.next()?);
                (field == name.as_bytes()).then(|| String::from_utf8_lossy(value).into_owned())
            })
    };
    assert_eq!(status("TimeZone").as_deref(), Some("Asia/Kolkata"));
    assert_eq!(status("application_name").as_deref(), Some("report"));
    let query = |sql: &str| message(b'Q', format!("{sql}\0").as_bytes());
    use tokio::io::AsyncWriteExt;
    // Each change of a reported parameter is told before the statements'
    // replies end; search_path is not reported, and TimeZone set and reset
    // in one text is told only where it differs from what was told last.
    let mut told = async |sql: &str| {
        stream.write_all(&query(sql)).await.unwrap();
        let replies = read_replies_until(&mut stream, b'Z').await;
        let told: Vec<String> = (replies.iter())
            .filter(|(kind, _)| matches!(kind, b'S' | b'C'))
            .map(|(kind, body)| {
                let text = String::from_utf8_lossy(&body[..body.len() - 1]).replace('\0', "=");
                format!("{} {text}", *kind as char)
            })
            .collect();
        (told, replies)
    };
    assert_eq!(
        told("SET TimeZone = 'UTC'").await.0,
        ["S TimeZone=UTC", "C SET"]
    );
    let (told, replies) = told(
        "SET TimeZone = 'Europe/Paris'; RESET TimeZone; SET search_path = x; \
         SET application_name = 'other'; \
         SELECT timestamptz '2024-03-15 10:00+00', current_setting('application_name')",
    )
    .await;
    assert_eq!(
        told,
        [
            "S application_name=other",
            "S TimeZone=Asia/Kolkata",
            "C SET",
            "C RESET",
            "C SET",
            "C SET",
            "C SELECT 1"
        ]
    );
    let (_, row) = replies
        .iter()
        .find(|(kind, _)| *kind == b'D')
        .expect("a row");
    // Two fields, each its length then its text.
    let mut fields = Vec::new();
    let mut rest = &row[2..];
    while rest.len() >= 4 {
        let len = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        fields.push(String::from_utf8_lossy(&rest[4..4 + len]).into_owned());
        rest = &rest[4 + len..];
    }
    assert_eq!(fields, ["2024-03-15 15:30:00+05:30", "other"]);
}

/// Sends messages; the replies up to ReadyForQuery, each as its type,
/// with a CommandComplete's tag and an error's SQLSTATE.
async fn exchange(stream: &mut tokio::net::TcpStream, messages: &[Vec<u8>]) -> Vec<String> {
    use tokio::io::AsyncWriteExt;
    stream.write_all(&messages.concat()).await.unwrap();
    let replies = read_replies_until(stream, b'Z').await;
    replies
        .into_iter()
        .map(|(kind, body)| {
            let kind = kind as char;
            match kind {
                'C' => format!("C {}", String::from_utf8_lossy(&body[..body.len() - 1])),
                'E' => {
                    let code = body.split(|b| *b == 0).find(|f| f.first() == Some(&b'C'));
                    format!("E {}", String::from_utf8_lossy(&code.unwrap()[1..]))
                }
                _ => kind.to_string(),
            }
        })
        .collect()
}

/// The SQLSTATE, message and context of the error of `sql` bound to the
/// text `value` (its one parameter) and executed.
async fn bind_fails(
    stream: &mut tokio::net::TcpStream,
    sql: &str,
    value: &str,
) -> (Option<String>, Option<String>, Option<String>) {
    use tokio::io::AsyncWriteExt;
    let mut bind = b"\0\0".to_vec();
    bind.extend(0i16.to_be_bytes());
    bind.extend(1i16.to_be_bytes());
    bind.extend((value.len() as i32).to_be_bytes());
    bind.extend(value.as_bytes());
    bind.extend(0i16.to_be_bytes());
    let messages = [
        message(b'P', format!("\0{sql}\0\0\0").as_bytes()),
        message(b'B', &bind),
        message(b'E', b"\0\0\0\0\0"),
        message(b'S', b""),
    ];
    stream.write_all(&messages.concat()).await.unwrap();
    let replies = read_replies_until(stream, b'Z').await;
    let (_, error) = replies.iter().find(|(kind, _)| *kind == b'E').unwrap();
    let field = |tag: u8| {
        error
            .split(|b| *b == 0)
            .find(|f| f.first() == Some(&tag))
            .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
    };
    (field(b'C'), field(b'M'), field(b'W'))
}

/// A parameter sent as text that does not read as its type fails the Bind
/// with PostgreSQL 15's SQLSTATE, message and context (each asserted here
/// is what PostgreSQL 15 sends for the same messages).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_that_do_not_read_as_their_types_fail_as_in_postgresql() {
    let server = TestServer::start().await;
    let mut stream = raw_connection(server.port).await;
    let context = Some("unnamed portal parameter $1 = '...'".to_owned());
    for (sql, value, code, words) in [
        (
            "SELECT $1::int + 1",
            "x",
            "22P02",
            "invalid input syntax for type integer: \"x\"",
        ),
        (
            "SELECT $1::int + 1",
            "99999999999",
            "22003",
            "value \"99999999999\" is out of range for type integer",
        ),
        (
            "SELECT $1::bool",
            "maybe",
            "22P02",
            "invalid input syntax for type boolean: \"maybe\"",
        ),
        (
            "SELECT $1::date",
            "2024-02-30",
            "22008",
            "date/time field value out of range: \"2024-02-30\"",
        ),
        (
            "SELECT $1::timestamptz",
            "soon",
            "22007",
            "invalid input syntax for type timestamp with time zone: \"soon\"",
        ),
    ] {
        let got = bind_fails(&mut stream, sql, value).await;
        let want = (
            Some(code.to_owned()),
            Some(words.to_owned()),
            context.clone(),
        );
        assert_eq!(got, want, "{sql} with {value}");
    }
}

/// Portals of a prepared read by key behave as PostgreSQL's: the replies
/// asserted are PostgreSQL 15's to the same messages. Two portals bound
/// at once, one described; a portal executed again sends no rows; rows in
/// pieces (a row limit at Execute); a bad parameter fails the Bind; a
/// closed portal, and every portal once its transaction ended, no longer
/// exist (34000); with key pushdown off the general path answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portals_of_reads_by_key_behave_as_postgresql_portals() {
    let server = TestServer::start().await;
    let mut stream = raw_connection(server.port).await;
    let query = |sql: &str| message(b'Q', format!("{sql}\0").as_bytes());
    let parse = message(b'P', b"st\0SELECT i, v FROM kp WHERE i = $1\0\0\0");
    let bind = |portal: &str, value: &str| {
        let mut body = format!("{portal}\0st\0").into_bytes();
        body.extend(0i16.to_be_bytes());
        body.extend(1i16.to_be_bytes());
        body.extend((value.len() as i32).to_be_bytes());
        body.extend(value.as_bytes());
        body.extend(0i16.to_be_bytes());
        message(b'B', &body)
    };
    let execute = |portal: &str, max_rows: i32| {
        let mut body = format!("{portal}\0").into_bytes();
        body.extend(max_rows.to_be_bytes());
        message(b'E', &body)
    };
    let describe = |portal: &str| message(b'D', format!("P{portal}\0").as_bytes());
    let close = |portal: &str| message(b'C', format!("P{portal}\0").as_bytes());
    let sync = || message(b'S', b"");
    let s = &mut stream;

    let create = "CREATE TABLE kp (i int PRIMARY KEY, v text); \
                  INSERT INTO kp VALUES (1, 'a'), (2, 'b'), (3, 'c')";
    let replies = exchange(s, &[query(create)]).await;
    assert_eq!(replies, ["C CREATE TABLE", "C INSERT 0 3", "Z"]);
    let replies = exchange(
        s,
        &[
            parse,
            bind("p1", "1"),
            bind("p2", "2"),
            describe("p1"),
            execute("p2", 0),
            execute("p1", 0),
            execute("p1", 0),
            execute("p2", 0),
            sync(),
        ],
    )
    .await;
    assert_eq!(
        replies,
        [
            "1",
            "2",
            "2",
            "T",
            "D",
            "C SELECT 1",
            "D",
            "C SELECT 1",
            "C SELECT 0",
            "C SELECT 0",
            "Z"
        ]
    );
    let replies = exchange(
        s,
        &[
            bind("", "3"),
            execute("", 1),
            execute("", 1),
            execute("", 0),
            sync(),
        ],
    )
    .await;
    assert_eq!(replies, ["2", "D", "s", "C SELECT 0", "C SELECT 0", "Z"]);
    assert_eq!(
        exchange(s, &[execute("", 0), sync()]).await,
        ["E 34000", "Z"]
    );
    let replies = exchange(s, &[bind("", "x"), execute("", 0), sync()]).await;
    assert_eq!(replies, ["E 22P02", "Z"]);
    let replies = exchange(s, &[bind("p3", "1"), close("p3"), execute("p3", 0), sync()]).await;
    assert_eq!(replies, ["2", "3", "E 34000", "Z"]);
    assert_eq!(exchange(s, &[query("BEGIN")]).await, ["C BEGIN", "Z"]);
    assert_eq!(exchange(s, &[bind("p4", "2"), sync()]).await, ["2", "Z"]);
    let replies = exchange(s, &[execute("p4", 0), sync()]).await;
    assert_eq!(replies, ["D", "C SELECT 1", "Z"]);
    assert_eq!(exchange(s, &[query("COMMIT")]).await, ["C COMMIT", "Z"]);
    assert_eq!(
        exchange(s, &[execute("p4", 0), sync()]).await,
        ["E 34000", "Z"]
    );
    let bind_to = |statement: &str| {
        let mut body = format!("\0{statement}\0").into_bytes();
        body.extend([0u8; 6]);
        message(b'B', &body)
    };
    assert_eq!(
        exchange(s, &[bind_to("nosuch"), sync()]).await,
        ["E 26000", "Z"]
    );
    let replies = exchange(s, &[query("SET tablegate.pushdown = off")]).await;
    assert_eq!(replies, ["C SET", "Z"]);
    let replies = exchange(s, &[bind("", "3"), execute("", 0), sync()]).await;
    assert_eq!(replies, ["2", "D", "C SELECT 1", "Z"]);
}

/// Stopping a server closes every connection it was serving (they are
/// spread over the connection threads); none goes on reading the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_closes_its_connections() {
    let server = TestServer::start().await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        let client = server.client().await;
        client.batch_execute("SELECT 1").await.unwrap();
        clients.push(client);
    }
    let _dir = server.stop().await;
    for client in &clients {
        let err = client.batch_execute("SELECT 1").await.unwrap_err();
        assert!(err.is_closed(), "{err}");
    }
}

/// Replies wait for Sync, as in PostgreSQL, but a Flush sends them at once:
/// a client that pipelines Parse/Bind/Execute and then Flush gets its rows
/// without ending the pipeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_sends_pending_replies() {
    use tokio::io::AsyncWriteExt;
    let server = TestServer::start().await;
    let mut stream = raw_connection(server.port).await;
    let mut pipeline = message(b'P', b"\0SELECT 1 + 1\0\0\0");
    pipeline.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
    pipeline.extend(message(b'E', b"\0\0\0\0\0"));
    pipeline.extend(message(b'H', b""));
    stream.write_all(&pipeline).await.unwrap();
    let replies = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        read_until(&mut stream, b'C'),
    )
    .await
    .expect("Flush must send the replies without a Sync");
    assert_eq!(replies, b"12DC");

    stream.write_all(&message(b'S', b"")).await.unwrap();
    assert_eq!(read_until(&mut stream, b'Z').await, b"Z");
}

/// A CancelRequest from another connection stops a running query with
/// 57014, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_requests_stop_a_running_query() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let token = client.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        token.cancel_query(tokio_postgres::NoTls).await
    });
    let started = std::time::Instant::now();
    let error = client
        .query(
            "SELECT a * 2 FROM generate_series(1, 1000000000) AS a WHERE a % 7 = 0",
            &[],
        )
        .await
        .expect_err("the query is cancelled");
    canceller.await.unwrap().unwrap();
    assert_eq!(
        error.as_db_error().map(|e| e.code().code()),
        Some("57014"),
        "{error}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "cancelled after {:?}",
        started.elapsed()
    );
    let row = client.query_one("SELECT 1 + 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 2);
}

/// A statement's notices reach a client of the extended protocol too
/// (tokio-postgres prepares every statement): here, that a materialized
/// view of a shape writes do not keep current is only refreshed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_reach_extended_protocol_clients() {
    let server = TestServer::start().await;
    let (client, mut received) = server.client_with_notices().await;
    client
        .batch_execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
        .await
        .unwrap();
    let prepared = client
        .prepare("CREATE MATERIALIZED VIEW shouted AS SELECT k, upper(v) AS v FROM t")
        .await
        .unwrap();
    client.execute(&prepared, &[]).await.unwrap();
    let notice = received.recv().await.expect("a notice");
    assert!(
        notice.starts_with("materialized view \"shouted\" is not kept current by writes"),
        "{notice}"
    );
}

/// IF EXISTS and IF NOT EXISTS that skip say so, as PostgreSQL's do; a
/// unique violation names its key in the error's DETAIL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_commands_notice_and_violations_detail() {
    let server = TestServer::start().await;
    let (client, mut received) = server.client_with_notices().await;
    client
        .batch_execute(
            "CREATE TABLE t (k int PRIMARY KEY); CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY)",
        )
        .await
        .unwrap();
    assert_eq!(
        received.recv().await.unwrap(),
        "relation \"t\" already exists, skipping"
    );
    client
        .batch_execute("DROP TABLE IF EXISTS nothing")
        .await
        .unwrap();
    assert_eq!(
        received.recv().await.unwrap(),
        "table \"nothing\" does not exist, skipping"
    );
    client
        .batch_execute("DROP INDEX IF EXISTS nothing")
        .await
        .unwrap();
    assert_eq!(
        received.recv().await.unwrap(),
        "index \"nothing\" does not exist, skipping"
    );
    let e = client
        .batch_execute("INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)")
        .await
        .unwrap_err();
    let db = e.as_db_error().expect("an error from the server");
    assert_eq!(
        db.message(),
        "duplicate key value violates unique constraint \"t_pkey\""
    );
    assert_eq!(db.detail(), Some("Key (k)=(1) already exists."));
}

/// A statement whose WITH writes, prepared: Describe gives its parameters'
/// types and its result columns without writing; each execution writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_whose_with_writes() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE queue (id int PRIMARY KEY, job text); \
             CREATE TABLE done (id int PRIMARY KEY, job text); \
             INSERT INTO queue VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        )
        .await
        .unwrap();
    let take = client
        .prepare(
            "WITH taken AS (DELETE FROM queue WHERE id <= $1 RETURNING id, job), \
             kept AS (INSERT INTO done SELECT id, job FROM taken RETURNING id) \
             SELECT count(*) AS moved, $2::text AS note FROM kept",
        )
        .await
        .unwrap();
    assert_eq!(take.params(), &[Type::INT4, Type::TEXT]);
    let columns: Vec<(&str, &Type)> = take
        .columns()
        .iter()
        .map(|c| (c.name(), c.type_()))
        .collect();
    assert_eq!(columns, [("moved", &Type::INT8), ("note", &Type::TEXT)]);
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(
        count("SELECT count(*) FROM queue").await,
        3,
        "Describe wrote nothing"
    );
    let row = client.query_one(&take, &[&2i32, &"first"]).await.unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, &str>(1)), (2, "first"));
    let row = client.query_one(&take, &[&3i32, &"second"]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(count("SELECT count(*) FROM queue").await, 0);
    assert_eq!(count("SELECT count(*) FROM done").await, 3);
}

/// A read by key answered in text (simple protocol) and in binary (the
/// extended protocol, as tokio-postgres asks), turn about on one
/// connection: both run the same prepared read, and each gets its rows in
/// the format it asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_read_in_text_and_in_binary_on_one_connection() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE t (id int PRIMARY KEY, value bigint, note text);
             INSERT INTO t VALUES (1, 10000000000, 'one'), (2, -5, NULL)",
        )
        .await
        .unwrap();
    // All columns, and a list of them (whose result names the session sets).
    for (round, sql) in (0..6).zip(
        [
            "SELECT * FROM t WHERE id = $1",
            "SELECT id, value, note FROM t WHERE id = $1",
        ]
        .iter()
        .cycle(),
    ) {
        for (id, value, note) in [(1, 10_000_000_000i64, Some("one")), (2, -5, None)] {
            let text = common::simple_rows(&client, &sql.replace("$1", &id.to_string())).await;
            assert_eq!(
                text,
                [vec![
                    id.to_string(),
                    value.to_string(),
                    note.unwrap_or("NULL").to_owned()
                ]],
                "round {round}"
            );
            let row = client.query_one(*sql, &[&id]).await.unwrap();
            assert_eq!(row.get::<_, i32>(0), id, "round {round}");
            assert_eq!(row.get::<_, i64>(1), value, "round {round}");
            assert_eq!(row.get::<_, Option<&str>>(2), note, "round {round}");
        }
    }
}

/// Array columns through a client that sends and reads arrays in binary:
/// parameters of array types, array results decoded by the client, and
/// arrays in COPY's text form both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_in_binary_and_through_copy() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE posts (id int PRIMARY KEY, tags text[], scores bigint[], weights float8[], \
             prices numeric(8,2)[], seen timestamptz[], codes varchar(4)[])",
        )
        .await
        .unwrap();
    let insert = client
        .prepare("INSERT INTO posts (id, tags, scores, weights) VALUES ($1, $2, $3, $4)")
        .await
        .unwrap();
    assert_eq!(
        insert.params(),
        &[
            Type::INT4,
            Type::TEXT_ARRAY,
            Type::INT8_ARRAY,
            Type::FLOAT8_ARRAY
        ]
    );
    let tags = vec![Some("a b".to_owned()), None, Some("{x}".to_owned())];
    let scores: Vec<i64> = vec![1, -2, i64::MAX];
    let weights: Vec<Option<f64>> = vec![Some(0.25), None];
    client
        .execute(&insert, &[&1i32, &tags, &scores, &weights])
        .await
        .unwrap();
    client
        .execute(
            &insert,
            &[&2i32, &Vec::<String>::new(), &None::<Vec<i64>>, &weights],
        )
        .await
        .unwrap();

    let row = client
        .query_one(
            "SELECT tags, scores, weights FROM posts WHERE id = $1",
            &[&1i32],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<Option<String>>>(0), tags);
    assert_eq!(row.get::<_, Vec<i64>>(1), scores);
    assert_eq!(row.get::<_, Vec<Option<f64>>>(2), weights);
    // Counts are integers, as PostgreSQL's.
    let row = client
        .query_one(
            "SELECT cardinality(tags), cardinality(scores) FROM posts WHERE id = 1",
            &[],
        )
        .await
        .unwrap();
    let counts: (i32, i32) = (row.get(0), row.get(1));
    assert_eq!(counts, (tags.len() as i32, scores.len() as i32));
    let row = client
        .query_one("SELECT tags, scores FROM posts WHERE id = 2", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<String>>(0), Vec::<String>::new());
    assert_eq!(row.get::<_, Option<Vec<i64>>>(1), None);

    // An array parameter compared with a column, and one element matched.
    let found = client
        .query(
            "SELECT id FROM posts WHERE scores = $1 OR $2 = ANY(tags) ORDER BY id",
            &[&scores, &"nothing"],
        )
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>(),
        [1]
    );
    // `= ANY($1)` and `@> $2` take arrays of the column's type.
    let any = client
        .prepare("SELECT id FROM posts WHERE id = ANY($1) AND tags @> $2")
        .await
        .unwrap();
    assert_eq!(any.params(), &[Type::INT4_ARRAY, Type::TEXT_ARRAY]);
    let found = client
        .query(&any, &[&vec![1i32, 2, 7], &vec!["a b"]])
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>(),
        [1]
    );

    // Numerics, timestamps and bounded texts, read back in binary.
    client
        .batch_execute(
            "INSERT INTO posts (id, prices, seen, codes) VALUES \
             (3, '{1.5,NULL,-2.25}', '{\"2026-11-27 10:00:00+00\"}', '{ab,cd}')",
        )
        .await
        .unwrap();
    let row = client
        .query_one("SELECT prices, seen, codes FROM posts WHERE id = 3", &[])
        .await
        .unwrap();
    let prices: Vec<Option<rust_decimal::Decimal>> = row.get(0);
    let prices: Vec<Option<String>> = prices.iter().map(|p| p.map(|d| d.to_string())).collect();
    assert_eq!(prices, [Some("1.50".into()), None, Some("-2.25".into())]);
    let seen: Vec<chrono::DateTime<chrono::Utc>> = row.get(1);
    assert_eq!(seen[0].to_rfc3339(), "2026-11-27T10:00:00+00:00");
    assert_eq!(row.get::<_, Vec<String>>(2), ["ab", "cd"]);

    // COPY writes arrays in their text form and reads it back.
    let out = client
        .copy_out("COPY (SELECT id, tags, weights FROM posts WHERE id <= 2 ORDER BY id) TO STDOUT")
        .await
        .unwrap();
    let out: Vec<u8> = out
        .try_fold(Vec::new(), |mut all, chunk| async move {
            all.extend_from_slice(&chunk);
            Ok(all)
        })
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "1\t{\"a b\",NULL,\"{x}\"}\t{0.25,NULL}\n2\t{}\t{0.25,NULL}\n"
    );
    let sink = client
        .copy_in("COPY posts (id, tags, weights) FROM STDIN")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    let copied = text.replace("1\t", "11\t").replace("2\t{}", "12\t{}");
    sink.send(bytes::Bytes::from(copied)).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);
    let row = client
        .query_one("SELECT tags, weights FROM posts WHERE id = 11", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<Option<String>>>(0), tags);
    assert_eq!(row.get::<_, Vec<Option<f64>>>(1), weights);
}

/// A column's bytes as the server sent them, in the format asked for.
#[derive(Debug, PartialEq)]
struct Raw(Option<Vec<u8>>);

impl<'a> tokio_postgres::types::FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw.to_vec())))
    }
    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Rows read by key go to the wire from their stored values, without a
/// record batch between (for the common column types); they must be the
/// bytes the general path sends, which decodes into Arrow and encodes from
/// there: each read is run on a connection that reads by key and on one
/// with key pushdown off, in binary (prepared, as tokio-postgres asks) and
/// in text (simple protocol), for values at the edges of each type, and
/// for reads of columns that take the record batch either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_by_key_send_the_bytes_the_general_path_sends() {
    let server = TestServer::start().await;
    let by_key = server.client().await;
    let general = server.client().await;
    general
        .batch_execute("SET tablegate.pushdown = off")
        .await
        .unwrap();
    by_key
        .batch_execute(
            "CREATE TABLE kinds (shop text, id bigint, small smallint, n int, big bigint, \
               r real, d double precision, t text, v varchar(20), ok boolean, raw bytea, \
               tag uuid, doc json, docb jsonb, c char(4), amount numeric(12, 3), day date, \
               at timestamp, tz timestamptz, tags int[], PRIMARY KEY (shop, id));
             INSERT INTO kinds VALUES
               ('a', 1, -32768, -2147483648, -9223372036854775808, 'NaN', '-0', '', '', false,
                '\\x', '00000000-0000-0000-0000-000000000000', '{}', '{\"b\": [1, 2.50, null]}',
                'é', -1.5, '2000-02-29', '1999-12-31 23:59:59.999999', '2026-11-27 12:00:00+00',
                '{}'),
               ('a', 2, 32767, 2147483647, 9223372036854775807, 'Infinity', 1e308,
                'é\"\\,( ) ''q''', 'tab	here', true, '\\xdeadbeef',
                'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', ' [1, \"two\"] ', 'null', 'abcd', 0,
                '1970-01-01', '2026-11-27 00:00:00', '1969-07-20 20:17:40+00',
                '{1,NULL,-3}'),
               ('a', 3, 0, 0, 0, '-Infinity', 0.1, 'plain', 'x', NULL, NULL, NULL, NULL, NULL,
                NULL, NULL, NULL, NULL, NULL, NULL),
               ('a', 4, 1, -1, -1, 3.4028235e38, -2.2250738585072014e-308, NULL, NULL, true,
                '\\x00', NULL, '\"s\"', '[]', '', 123456789.123, '0001-01-01', NULL, NULL,
                '{7}'),
               ('b', 1, NULL, NULL, NULL, 1.17549435e-38, 1.5, 'other shop', 'y', false,
                NULL, NULL, NULL, NULL, 'zz', -0.001, '9999-12-31', '1900-01-01 00:00:00',
                '2026-11-27 12:00:00+05:30', NULL)",
        )
        .await
        .unwrap();
    let direct = "shop, id, small, n, big, r, d, t, v, ok, raw, tag, doc, docb, c, amount, day, \
                  at, tz";
    let reads = [
        format!("SELECT {direct} FROM kinds WHERE shop = $1 AND id = $2"),
        format!("SELECT {direct} FROM kinds WHERE shop = $1 AND id >= $2 ORDER BY id"),
        format!("SELECT {direct} FROM kinds WHERE shop = $1 AND id <= $2 ORDER BY id DESC LIMIT 3"),
        // Columns of other types: decoded into a record batch.
        "SELECT * FROM kinds WHERE shop = $1 AND id = $2".to_owned(),
        "SELECT tags, id FROM kinds WHERE shop = $1 AND id >= $2 ORDER BY id".to_owned(),
    ];
    let mut compared = 0;
    for sql in &reads {
        for (shop, id) in [
            ("a", 1i64),
            ("a", 2),
            ("a", 3),
            ("a", 4),
            ("b", 1),
            ("c", 1),
        ] {
            let in_binary = binary(&by_key, sql, shop, id).await;
            assert_eq!(
                in_binary,
                binary(&general, sql, shop, id).await,
                "{sql} with ({shop}, {id}), binary"
            );
            let literal = sql
                .replace("$1", &format!("'{shop}'"))
                .replace("$2", &id.to_string());
            let in_text = text(&by_key, &literal).await;
            assert_eq!(in_text, text(&general, &literal).await, "{literal}");
            compared += in_binary.len() + in_text.len();
        }
    }
    // Rows were read (the reads of a key that holds none compare too).
    assert_eq!(compared, 2 * (5 + 11 + 10 + 5 + 11));
}

/// The rows of a read, each column as [`Raw`] bytes in binary.
async fn binary(client: &tokio_postgres::Client, sql: &str, shop: &str, id: i64) -> Vec<Vec<Raw>> {
    let rows = client.query(sql, &[&shop, &id]).await.unwrap();
    rows.iter()
        .map(|row| (0..row.len()).map(|i| row.get::<_, Raw>(i)).collect())
        .collect()
}

/// The rows of a simple query, each column as text (`None` for NULL).
async fn text(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let messages = client.simple_query(sql).await.unwrap();
    messages
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dates_before_year_one_and_after_9999_read_as_postgresql_prints_them() {
    use chrono::{NaiveDate, NaiveDateTime};
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE eras (id int PRIMARY KEY, day date, at timestamp, tz timestamptz)",
        )
        .await
        .unwrap();
    let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
    let moment = |y, m, d, micros: i64| -> NaiveDateTime {
        day(y, m, d).and_hms_opt(0, 0, 0).unwrap() + chrono::Duration::microseconds(micros)
    };
    // The year -43 is 44 BC (year 0 is 1 BC).
    let rows = [
        (1, day(-43, 3, 15), moment(-43, 3, 15, 36_672_500_000)),
        (2, day(0, 12, 31), moment(0, 12, 31, 86_399_999_999)),
        (3, day(12345, 1, 2), moment(12345, 1, 2, 11_045_000_000)),
    ];
    for (id, d, t) in rows {
        client
            .execute(
                "INSERT INTO eras VALUES ($1, $2, $3, $4)",
                &[&id, &d, &t, &t.and_utc()],
            )
            .await
            .unwrap();
    }
    // PostgreSQL 15's text for the same values.
    let expected = [
        [
            "0044-03-15 BC",
            "0044-03-15 10:11:12.5 BC",
            "0044-03-15 10:11:12.5+00 BC",
        ],
        [
            "0001-12-31 BC",
            "0001-12-31 23:59:59.999999 BC",
            "0001-12-31 23:59:59.999999+00 BC",
        ],
        [
            "12345-01-02",
            "12345-01-02 03:04:05",
            "12345-01-02 03:04:05+00",
        ],
    ];
    for pushdown in ["on", "off"] {
        client
            .batch_execute(&format!("SET tablegate.pushdown = {pushdown}"))
            .await
            .unwrap();
        for (i, (id, d, t)) in rows.into_iter().enumerate() {
            let sql = format!("SELECT day, at, tz FROM eras WHERE id = {id}");
            let texts = text(&client, &sql).await;
            let want: Vec<Option<String>> =
                expected[i].iter().map(|s| Some(s.to_string())).collect();
            assert_eq!(texts, vec![want], "{sql}, pushdown {pushdown}");
            let row = client
                .query_one("SELECT day, at, tz FROM eras WHERE id = $1", &[&id])
                .await
                .unwrap();
            assert_eq!(row.get::<_, NaiveDate>(0), d);
            assert_eq!(row.get::<_, NaiveDateTime>(1), t);
            assert_eq!(row.get::<_, chrono::DateTime<chrono::Utc>>(2), t.and_utc());
        }
    }
    // In JSON, as PostgreSQL 15 writes them: ISO 8601's `T`, the era last.
    assert_eq!(
        text(
            &client,
            "SELECT to_json(at), to_json(tz) FROM eras WHERE id = 1"
        )
        .await,
        vec![vec![
            Some("\"0044-03-15T10:11:12.5 BC\"".to_owned()),
            Some("\"0044-03-15T10:11:12.5+00:00 BC\"".to_owned())
        ]]
    );
}

/// An error names where in the statement's text it is (psql underlines
/// it), in the simple protocol and when a statement is prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_their_position_in_the_text() {
    use tokio_postgres::error::ErrorPosition;
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE t (id int PRIMARY KEY)")
        .await
        .unwrap();
    let position = |e: tokio_postgres::Error| e.as_db_error().unwrap().position().cloned();
    let error = client
        .simple_query("SELECT 'nope' FROM\n  nope")
        .await
        .unwrap_err();
    assert_eq!(position(error), Some(ErrorPosition::Original(22)));
    let error = client.prepare("SELECT id, nope FROM t").await.unwrap_err();
    assert_eq!(position(error), Some(ErrorPosition::Original(12)));
    let error = client.simple_query("SELECT 1; SELEC 2").await.unwrap_err();
    assert_eq!(position(error), Some(ErrorPosition::Original(11)));
    // Errors of values have none.
    let error = client.simple_query("SELECT 1/0").await.unwrap_err();
    assert_eq!(position(error), None);
}
