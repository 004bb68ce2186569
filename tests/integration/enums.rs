//! Enum types through the extended protocol, as an ORM uses them: Prisma
//! casts each parameter (`CAST($1::text AS "public"."Role")`), lists of
//! them too; the types and the tables' checks outlive a restart; COPY
//! checks its rows' labels.

use crate::common;

use common::{copy_lines, count, TestServer};
use tokio_postgres::error::SqlState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_casts_copies_and_restarts_keep_the_labels() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            r#"CREATE TYPE "Role" AS ENUM ('USER', 'ADMIN');
               CREATE TABLE "User" (id int PRIMARY KEY, role "Role" NOT NULL DEFAULT 'USER')"#,
        )
        .await
        .unwrap();

    let insert = client
        .prepare(r#"INSERT INTO "User" (id, role) VALUES ($1, CAST($2::text AS "public"."Role"))"#)
        .await
        .unwrap();
    client.execute(&insert, &[&1i32, &"ADMIN"]).await.unwrap();
    client.execute(&insert, &[&2i32, &"USER"]).await.unwrap();
    let error = client
        .execute(&insert, &[&3i32, &"OWNER"])
        .await
        .unwrap_err();
    let db = error.as_db_error().unwrap();
    assert_eq!(db.code(), &SqlState::INVALID_TEXT_REPRESENTATION);
    assert_eq!(
        db.message(),
        r#"invalid input value for enum "Role": "OWNER""#
    );
    client
        .execute(r#"INSERT INTO "User" (id) VALUES (4)"#, &[])
        .await
        .unwrap();

    let by_role = client
        .prepare(
            r#"SELECT id FROM "User" WHERE role = CAST($1::text AS "public"."Role") ORDER BY id"#,
        )
        .await
        .unwrap();
    let ids: Vec<i32> = client
        .query(&by_role, &[&"USER"])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, [2, 4]);
    let any_role = client
        .prepare(r#"SELECT id, role FROM "User" WHERE role = ANY(CAST($1::text[] AS "public"."Role"[])) ORDER BY id"#)
        .await
        .unwrap();
    let rows: Vec<(i32, String)> = client
        .query(&any_role, &[&vec!["ADMIN", "USER"]])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        rows,
        [
            (1, "ADMIN".to_owned()),
            (2, "USER".to_owned()),
            (4, "USER".to_owned())
        ]
    );

    let copied = copy_lines(&client, r#""User""#, "5\tADMIN\n6\tGUEST\n".into()).await;
    let db_error = copied.unwrap_err();
    let db = db_error.as_db_error().unwrap();
    assert_eq!(
        db.message(),
        r#"invalid input value for enum "Role": "GUEST""#
    );
    assert_eq!(count(&client, "\"User\"").await, 3);

    let dir = server.stop().await;
    let server = TestServer::start_in(dir).await;
    let client = server.client().await;
    client
        .batch_execute(r#"ALTER TYPE "Role" ADD VALUE 'GUEST'"#)
        .await
        .unwrap();
    client
        .execute(r#"INSERT INTO "User" VALUES (6, 'GUEST')"#, &[])
        .await
        .unwrap();
    let error = client
        .execute(r#"INSERT INTO "User" VALUES (7, 'OWNER')"#, &[])
        .await
        .unwrap_err();
    assert_eq!(
        error.as_db_error().unwrap().code(),
        &SqlState::INVALID_TEXT_REPRESENTATION
    );
    let labels: Vec<String> = client
        .query(
            "SELECT e.enumlabel FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid \
             WHERE t.typname = 'Role' ORDER BY e.enumsortorder",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(labels, ["USER", "ADMIN", "GUEST"]);
}

/// A value bound to a parameter compared with an enum column is checked
/// as a label, as PostgreSQL checks it (22P02): by a read by the key
/// column, which takes the key's fast path, and, for any other column,
/// when the statement runs, for reads, updates and deletes. A label finds
/// its rows, and the refused statements change none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_compared_with_enum_columns_are_labels() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TYPE size AS ENUM ('S', 'M', 'L');
             CREATE TABLE sized (s size PRIMARY KEY, n int, m size);
             INSERT INTO sized VALUES ('M', 1, 'M'), ('S', 2, 'S'), ('L', 3, 'M')",
        )
        .await
        .unwrap();
    let refused = |error: tokio_postgres::Error, sql: &str| {
        let db = error.as_db_error().unwrap().clone();
        assert_eq!(db.code(), &SqlState::INVALID_TEXT_REPRESENTATION, "{sql}");
        assert_eq!(db.message(), r#"invalid input value for enum size: "XL""#);
    };
    // By the key.
    let by_size = client
        .prepare("SELECT n FROM sized WHERE s = $1")
        .await
        .unwrap();
    let row = client.query_one(&by_size, &[&"M"]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
    let error = client.query(&by_size, &[&"XL"]).await.unwrap_err();
    refused(error, "by the key");
    // The same value as a literal, over the simple protocol: its reads,
    // updates and deletes by key.
    for sql in [
        "SELECT n FROM sized WHERE s = 'XL'",
        "UPDATE sized SET n = 3 WHERE s = 'XL'",
        "DELETE FROM sized WHERE s = 'XL'",
    ] {
        let error = client.simple_query(sql).await.unwrap_err();
        let db = error.as_db_error().unwrap();
        assert_eq!(db.code(), &SqlState::INVALID_TEXT_REPRESENTATION, "{sql}");
    }
    // By a column that is not the key.
    let count = client
        .prepare("SELECT count(*) FROM sized WHERE m = $1")
        .await
        .unwrap();
    let row = client.query_one(&count, &[&"M"]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
    for sql in [
        "SELECT count(*) FROM sized WHERE m = $1",
        "SELECT n FROM sized WHERE m <> $1",
        "UPDATE sized SET n = n + 10 WHERE m = $1",
        "DELETE FROM sized WHERE m = $1",
    ] {
        let error = client.execute(sql, &[&"XL"]).await.unwrap_err();
        refused(error, sql);
    }
    let rows = client
        .query("SELECT n FROM sized ORDER BY s", &[])
        .await
        .unwrap();
    let ns: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ns, [2, 1, 3]);
}
