//! psql's meta-commands against tablegate, with their output checked: what a
//! user typing `\dt` or `\d NAME` sees.

use crate::common;

use common::TestServer;

/// Runs psql with one command; returns what it printed (unaligned, no
/// headers or footers beyond psql's own titles).
async fn psql(port: u16, command: &str) -> String {
    psql_with_messages(port, command).await.0
}

/// Runs psql with one command; returns what it printed and its messages
/// (notices) on stderr.
async fn psql_with_messages(port: u16, command: &str) -> (String, String) {
    common::psql(
        &format!("host=127.0.0.1 port={port} user=ann dbname=tablegate"),
        command,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn materialized_views() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE employees (dept int, id int, name text, PRIMARY KEY (dept, id));
             INSERT INTO employees VALUES (1, 1, 'ann'), (1, 2, 'bob'), (2, 1, 'cy')",
        )
        .await
        .unwrap();
    let port = server.port;
    // A shape writes keep current: no notice.
    let (out, messages) = psql_with_messages(
        port,
        "CREATE MATERIALIZED VIEW sizes AS SELECT dept, count(*) AS n FROM employees GROUP BY dept",
    )
    .await;
    assert_eq!(
        (out.as_str(), messages.as_str()),
        ("CREATE MATERIALIZED VIEW\n", "")
    );
    // Another shape: the notice says it is only refreshed.
    let (_, messages) = psql_with_messages(
        port,
        "CREATE MATERIALIZED VIEW upper_names AS SELECT dept, id, upper(name) AS name FROM employees",
    )
    .await;
    assert!(
        messages.starts_with(
            "NOTICE:  materialized view \"upper_names\" is not kept current by writes"
        ),
        "{messages}"
    );
    assert!(
        messages.contains("REFRESH MATERIALIZED VIEW recomputes it"),
        "{messages}"
    );
    assert_eq!(
        psql(port, "\\dm").await,
        "List of relations\nSchema|Name|Type|Owner\npublic|sizes|materialized view|tablegate\npublic|upper_names|materialized view|tablegate\n(2 rows)\n"
    );
}

/// psql lists a view and prints its columns and query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE employees (id int PRIMARY KEY, name text, active boolean);
             CREATE VIEW present AS SELECT id, name FROM employees WHERE active",
        )
        .await
        .unwrap();
    let port = server.port;
    assert_eq!(
        psql(port, "\\dv public.*").await,
        "List of relations\nSchema|Name|Type|Owner\npublic|present|view|tablegate\n(1 row)\n"
    );
    assert_eq!(
        psql(port, "\\d+ present").await,
        "View \"public.present\"\n\
         Column|Type|Collation|Nullable|Default|Storage|Description\n\
         id|integer||||plain|\n\
         name|text||||extended|\n\
         View definition:\n SELECT id, name FROM employees WHERE active;\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_commands() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE employees (dept text, id int, name varchar(40) NOT NULL, age int DEFAULT 30, \
             salary numeric(10,2), PRIMARY KEY (dept, id));
             CREATE TABLE notes (body text)",
        )
        .await
        .unwrap();
    let port = server.port;

    assert_eq!(
        psql(port, "\\dt").await,
        "List of relations\nSchema|Name|Type|Owner\npublic|employees|table|tablegate\npublic|notes|table|tablegate\n(2 rows)\n"
    );
    assert_eq!(
        psql(port, "\\di").await,
        "List of relations\nSchema|Name|Type|Owner|Table\npublic|employees_pkey|index|tablegate|employees\n(1 row)\n"
    );
    assert_eq!(
        psql(port, "\\dn").await,
        "List of schemas\nName|Owner\npublic|tablegate\ntablegate|tablegate\n(2 rows)\n"
    );
    assert_eq!(
        psql(port, "\\dv tablegate.*").await,
        "List of relations\nSchema|Name|Type|Owner\ntablegate|indexes|view|tablegate\ntablegate|materialized_views|view|tablegate\ntablegate|partitions|view|tablegate\ntablegate|queries|view|tablegate\ntablegate|tables|view|tablegate\n(5 rows)\n"
    );
    let described = psql(port, "\\d tablegate.partitions").await;
    assert!(
        described.starts_with("View \"tablegate.partitions\"\nColumn|Type|Collation|Nullable|Default\ntable_name|text|||\npartition_key|text|||\nentities|bigint|||\n"),
        "{described}"
    );
    assert!(
        described.contains("\nreads_per_second|double precision|||\n"),
        "{described}"
    );
    let databases = psql(port, "\\l").await;
    assert!(
        databases.contains("\ntablegate|tablegate|UTF8|"),
        "{databases}"
    );
    let roles = psql(port, "\\du").await;
    assert!(roles.contains("\ntablegate|Superuser"), "{roles}");
    let conninfo = psql(port, "\\conninfo").await;
    assert!(
        conninfo.contains(&format!(
            "as user \"ann\" on host \"127.0.0.1\" at port \"{port}\""
        )),
        "{conninfo}"
    );
    assert_eq!(
        psql(port, "SELECT count(*), 1 + 1, current_user").await,
        "count|?column?|current_user\n1|2|ann\n(1 row)\n"
    );
}

/// `\dt+`, `\di+` and `\l+` print sizes: the bytes of a table's rows and
/// of an index's entries in the store (its primary key has none of its
/// own), the whole database's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_in_the_verbose_lists() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE sized (id int PRIMARY KEY, body text);
             CREATE INDEX sized_body ON sized (body);
             INSERT INTO sized SELECT i, repeat('x', 100) FROM generate_series(1, 200) AS s(i)",
        )
        .await
        .unwrap();
    let port = server.port;
    let tables = psql(port, "\\dt+").await;
    let (_, row) = tables.split_once("\npublic|sized|table|").expect(&tables);
    let size = row.split('|').nth(3).expect(&tables);
    assert!(size.ends_with(" kB"), "{tables}");
    let indexes = psql(port, "\\di+").await;
    assert!(
        indexes.contains("|sized_pkey|index|tablegate|sized|permanent|btree|0 bytes|"),
        "{indexes}"
    );
    assert!(
        indexes.contains("|sized_body|index|tablegate|sized|permanent|btree|"),
        "{indexes}"
    );
    assert!(
        !indexes.contains("|sized_body|index|tablegate|sized|permanent|btree|0 bytes|"),
        "{indexes}"
    );
    let databases = psql(port, "\\l+").await;
    assert!(databases.contains(" kB|pg_default|"), "{databases}");
    let tablespaces = psql(port, "\\db+").await;
    assert!(
        tablespaces.contains("\npg_default|tablegate||||"),
        "{tablespaces}"
    );
    assert!(tablespaces.contains(" kB|\n"), "{tablespaces}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn character_columns_are_sent_padded() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE codes (c char(3) PRIMARY KEY); INSERT INTO codes VALUES ('x'), ('ab ')",
        )
        .await
        .unwrap();
    assert_eq!(
        psql(
            server.port,
            "SELECT c, c = 'x', length(c) FROM codes ORDER BY c"
        )
        .await,
        "c|?column?|length\nab |f|2\nx  |t|1\n(2 rows)\n"
    );
    // A column and a cast of it, both named by the column; a numeric sum.
    assert_eq!(
        psql(
            server.port,
            "SELECT c, c::text, 0.1 + 0.2 FROM codes WHERE c = 'x'"
        )
        .await,
        "c|c|?column?\nx  |x|0.3\n(1 row)\n"
    );
    // A query prepared with SQL's PREPARE names its columns as PostgreSQL does.
    let prepared = psql(
        server.port,
        "PREPARE p(text) AS SELECT c, $1 || 'y', length(c)::text FROM codes WHERE c = $1; EXECUTE p('x')",
    )
    .await;
    assert!(
        prepared.ends_with("c|?column?|length\nx  |xy|1\n(1 row)\n"),
        "{prepared}"
    );
}

/// PostgreSQL allows a result two columns of one name; DataFusion's
/// plans do not, so such a select list is planned under names of its own
/// and shown under PostgreSQL's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_of_one_name() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE codes (c text PRIMARY KEY, n int); INSERT INTO codes VALUES ('x', 1), ('y', 2)")
        .await
        .unwrap();
    for (sql, expected) in [
        (
            "SELECT c, c FROM codes WHERE c = 'x'",
            "c|c\nx|x\n(1 row)\n",
        ),
        (
            "SELECT c, codes.c, n AS c FROM codes WHERE c = 'y'",
            "c|c|c\ny|y|2\n(1 row)\n",
        ),
        ("SELECT 1 AS a, 2 AS a", "a|a\n1|2\n(1 row)\n"),
        (
            "SELECT count(*), count(*) FROM codes",
            "count|count\n2|2\n(1 row)\n",
        ),
        (
            "SELECT n AS a, n AS a FROM codes UNION ALL SELECT 3, 3 ORDER BY 1",
            "a|a\n1|1\n2|2\n3|3\n(3 rows)\n",
        ),
        (
            "SELECT now()::date = current_date, localtimestamp::date = current_date",
            "?column?|?column?\nt|t\n(1 row)\n",
        ),
    ] {
        assert_eq!(psql(server.port, sql).await, expected, "{sql}");
    }
    // Prepared (the extended protocol), read by key and not.
    for sql in [
        "SELECT c, c, n FROM codes WHERE c = $1",
        "SELECT c, c, n FROM codes WHERE n = $1::int",
    ] {
        let statement = client.prepare(sql).await.unwrap();
        let names: Vec<&str> = statement.columns().iter().map(|c| c.name()).collect();
        assert_eq!(names, ["c", "c", "n"], "{sql}");
    }
    let statement = client
        .prepare("SELECT c, c, n FROM codes WHERE c = $1")
        .await
        .unwrap();
    let row = client.query_one(&statement, &[&"y"]).await.unwrap();
    assert_eq!(
        (
            row.get::<_, &str>(0),
            row.get::<_, &str>(1),
            row.get::<_, i32>(2)
        ),
        ("y", "y", 2)
    );
    let statement = client
        .prepare("SELECT c, c FROM codes WHERE n = $1::int")
        .await
        .unwrap();
    let row = client.query_one(&statement, &[&1i32]).await.unwrap();
    assert_eq!((row.get::<_, &str>(0), row.get::<_, &str>(1)), ("x", "x"));
}

/// SHOW's column and `pg_settings` spell a parameter's name as PostgreSQL
/// does (`TimeZone`, however it was asked for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_are_named_as_postgresql_names_them() {
    let server = TestServer::start().await;
    for (sql, expected) in [
        ("SHOW timezone", "TimeZone\nUTC\n(1 row)\n"),
        ("SHOW TIME ZONE", "TimeZone\nUTC\n(1 row)\n"),
        ("SHOW datestyle", "DateStyle\nISO, MDY\n(1 row)\n"),
        ("SHOW Search_Path", "search_path\n\"$user\", public\n(1 row)\n"),
        (
            "SELECT name FROM pg_settings WHERE name IN ('TimeZone', 'DateStyle', 'search_path') ORDER BY name",
            "name\nDateStyle\nTimeZone\nsearch_path\n(3 rows)\n",
        ),
    ] {
        assert_eq!(psql(server.port, sql).await, expected, "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_one_table() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE depts (id int PRIMARY KEY, name text);
             CREATE TABLE employees (dept int REFERENCES depts, id int, name varchar(40) NOT NULL, \
             age int DEFAULT 30, salary numeric(10,2), PRIMARY KEY (dept, id));
             CREATE UNIQUE INDEX employees_name ON employees (name)",
        )
        .await
        .unwrap();
    let port = server.port;
    assert_eq!(
        psql(port, "\\d employees").await,
        "Table \"public.employees\"\n\
         Column|Type|Collation|Nullable|Default\n\
         dept|integer||not null|\n\
         id|integer||not null|\n\
         name|character varying(40)||not null|\n\
         age|integer|||30\n\
         salary|numeric(10,2)|||\n\
         Indexes:\n    \"employees_pkey\" PRIMARY KEY, btree (dept, id)\n    \"employees_name\" UNIQUE, btree (name)\n\
         Foreign-key constraints:\n    \"employees_dept_fkey\" FOREIGN KEY (dept) REFERENCES depts(id)\n"
    );
    assert_eq!(
        psql(port, "\\d depts").await,
        "Table \"public.depts\"\n\
         Column|Type|Collation|Nullable|Default\n\
         id|integer||not null|\n\
         name|text|||\n\
         Indexes:\n    \"depts_pkey\" PRIMARY KEY, btree (id)\n\
         Referenced by:\n    TABLE \"employees\" CONSTRAINT \"employees_dept_fkey\" FOREIGN KEY (dept) REFERENCES depts(id)\n"
    );
    // With storage and descriptions (psql reads the options of the table's
    // TOAST table with an ARRAY over `unnest` of an outer column).
    assert_eq!(
        psql(port, "\\d+ depts").await,
        "Table \"public.depts\"\n\
         Column|Type|Collation|Nullable|Default|Storage|Compression|Stats target|Description\n\
         id|integer||not null||plain|||\n\
         name|text||||extended|||\n\
         Indexes:\n    \"depts_pkey\" PRIMARY KEY, btree (id)\n\
         Referenced by:\n    TABLE \"employees\" CONSTRAINT \"employees_dept_fkey\" FOREIGN KEY (dept) REFERENCES depts(id)\n\
         Access method: heap\n"
    );
}

/// psql prints a query's warning with its rows: the notice comes after the
/// scan ends, ahead of the statement's completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_density_notice_with_the_rows() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE t (k int PRIMARY KEY, v int);
             INSERT INTO t SELECT x, x % 1000 FROM generate_series(1, 2000) AS s(x)",
        )
        .await
        .unwrap();
    let (out, messages) =
        psql_with_messages(server.port, "SELECT k FROM t WHERE v = 7 ORDER BY k").await;
    assert_eq!(out, "k\n7\n1007\n(2 rows)\n");
    assert!(
        messages.starts_with(
            "NOTICE:  low query density: the scan of \"t\" (table) read 2000 entities to return 2 rows; an index on (v)"
        ),
        "{messages}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_prepare_and_deallocate_answer_with_their_tags() {
    let server = TestServer::start().await;
    let out = psql(
        server.port,
        "PREPARE twice(int) AS SELECT $1 * 2 AS doubled; EXECUTE twice(21); DEALLOCATE twice",
    )
    .await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["PREPARE", "doubled", "42", "(1 row)", "DEALLOCATE"],
        "{out}"
    );
}
