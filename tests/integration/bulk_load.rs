//! New rows written as one load (`AtomicWrite::insert_rows`, what COPY
//! uses): into an empty table, or many of them into any table, they go
//! straight into the engine's files; the result must be the same as the
//! same entities written by `write_atomic`, counts and sizes included, and
//! all or nothing.

use tablegate::model::{Entity, Value};
use tablegate::store::native::NativeStore;
use tablegate::store::{
    AtomicWrite, BulkDelete, EncodedRows, EntityRead, LoadRows, Query, SortedRuns, Statistics,
    TableAdmin, WriteOp,
};

use crate::common::temp_store;

fn entities(n: usize, seed: u64) -> Vec<Entity> {
    (0..n)
        .map(|i| {
            let mut e = Entity::new(
                format!("p{:03}", (i as u64 * 7 + seed) % 37),
                format!("r{i:05}"),
            );
            e.properties.insert("n".into(), Value::Int64(i as i64));
            if i % 3 == 0 {
                e.properties
                    .insert("s".into(), Value::String("x".repeat(i % 17)));
            }
            e
        })
        .collect()
}

fn encoded(entities: &[Entity]) -> LoadRows {
    held(entities).into()
}

fn held(entities: &[Entity]) -> EncodedRows {
    let mut rows = EncodedRows::new();
    for e in entities {
        rows.push_entity(e);
    }
    rows
}

/// How a load hands its rows to the store.
#[derive(Debug, Clone, Copy)]
enum Form {
    Held,
    /// In three sorted runs (of the first third of the rows, the second,
    /// the rest), as a COPY too large for memory spills them.
    Spilled,
}

fn load_rows(store: &NativeStore, entities: &[Entity], form: Form) -> LoadRows {
    match form {
        Form::Held => encoded(entities),
        Form::Spilled => {
            let mut runs = SortedRuns::new(store.spill_dir().unwrap());
            for run in entities.chunks(entities.len().div_ceil(3).max(1)) {
                runs.add(&held(run)).unwrap();
            }
            LoadRows::Spilled(runs)
        }
    }
}

async fn all(store: &impl EntityRead, table: &str) -> Vec<Entity> {
    let mut out = Vec::new();
    let query = Query::table().page_size(10_000);
    let mut continuation = None;
    loop {
        let page = store
            .query(table, &query, continuation.as_ref())
            .await
            .unwrap();
        out.extend(page.entities.into_iter().map(|mut e| {
            e.etag = None;
            e.timestamp = None;
            e
        }));
        continuation = page.continuation;
        if continuation.is_none() {
            return out;
        }
    }
}

/// Loads `n` entities into one table and writes them atomically into
/// another; both must read and count alike.
async fn load_and_write(n: usize, form: Form) -> (tempfile::TempDir, NativeStore) {
    let (dir, store) = temp_store();
    store.create_table("loaded").await.unwrap();
    store.create_table("written").await.unwrap();
    let partitions = (0..37).map(|p| format!("p{p:03}"));
    let loaded = load_and_write_into(&store, &entities(n, 1), partitions, form).await;
    assert_eq!(loaded.len(), n);
    (dir, store)
}

/// Loads `rows` into `loaded` and writes them atomically into `written`;
/// both tables must then read alike, with the same totals, and the same
/// count and bytes in each of `partitions`. Returns `loaded`'s rows.
async fn load_and_write_into(
    store: &NativeStore,
    rows: &[Entity],
    partitions: impl Iterator<Item = String>,
    form: Form,
) -> Vec<Entity> {
    assert_eq!(
        store
            .insert_rows(vec![("loaded".to_owned(), load_rows(store, rows, form))])
            .await
            .unwrap(),
        rows.len() as u64
    );
    let ops = rows
        .iter()
        .map(|e| ("written".to_owned(), WriteOp::Insert(e.clone())))
        .collect();
    store.write_atomic(ops).await.unwrap();
    let loaded = all(store, "loaded").await;
    assert!(loaded == all(store, "written").await);
    assert_eq!(
        store.table_stats("loaded").await.unwrap(),
        store.table_stats("written").await.unwrap()
    );
    for p in partitions {
        let loaded = store.partition_stats("loaded", &p).await.unwrap();
        let written = store.partition_stats("written", &p).await.unwrap();
        assert_eq!(
            (loaded.entities, loaded.bytes),
            (written.entities, written.bytes),
            "{p}"
        );
    }
    loaded
}

/// A load large enough to be written in several pieces at once (one per
/// core), cut inside partitions.
#[tokio::test]
async fn a_load_in_pieces_equals_the_same_atomic_write() {
    load_and_write(250_000, Form::Held).await;
}

/// A load spilled to sorted runs whose keys interleave: their merge must
/// write what the rows held in memory would.
#[tokio::test]
async fn a_spilled_load_equals_the_same_atomic_write() {
    load_and_write(20_000, Form::Spilled).await;
}

#[tokio::test]
async fn a_load_equals_the_same_atomic_write() {
    let (_dir, store) = load_and_write(3000, Form::Held).await;
    // A second load, too small for files of its own, goes into the table
    // that holds rows through the journal.
    let more = entities(500, 2)
        .into_iter()
        .map(|mut e| {
            e.key.row_key = format!("s{}", e.key.row_key);
            e
        })
        .collect::<Vec<_>>();
    assert_eq!(
        store
            .insert_rows(vec![("loaded".to_owned(), encoded(&more))])
            .await
            .unwrap(),
        500
    );
    assert_eq!(all(&store, "loaded").await.len(), 3500);
    assert_eq!(store.table_stats("loaded").await.unwrap().entities, 3500);
}

/// A load large enough for files of its own into tables that hold rows:
/// into partitions that hold rows, new partitions, and a bulk-deleted
/// partition whose old keys come again. It must read and count as the
/// same entities written atomically; a key the table holds fails it whole.
#[tokio::test]
async fn a_large_load_into_a_table_with_rows_equals_the_same_atomic_write() {
    for form in [Form::Held, Form::Spilled] {
        load_into_a_table_with_rows(form).await;
    }
}

async fn load_into_a_table_with_rows(form: Form) {
    let (_dir, store) = load_and_write(3000, form).await;
    let deleted = "p005";
    for table in ["loaded", "written"] {
        store.delete_partition(table, deleted).await.unwrap();
    }
    let mut more: Vec<Entity> = entities(5000, 2)
        .into_iter()
        .map(|mut e| {
            e.key.row_key = format!("s{}", e.key.row_key);
            e
        })
        .collect();
    // Keys the bulk delete took, and partitions the table never had.
    more.extend(
        entities(3000, 1)
            .into_iter()
            .filter(|e| e.key.partition_key == deleted)
            .map(|mut e| {
                e.properties.insert("n".into(), Value::Int64(-1));
                e
            }),
    );
    more.extend((0..50).map(|i| {
        let mut e = Entity::new(format!("q{i:02}"), "r");
        e.properties.insert("n".into(), Value::Int64(i));
        e
    }));
    let partitions = (0..37)
        .map(|p| format!("p{p:03}"))
        .chain((0..50).map(|i| format!("q{i:02}")));
    let loaded = load_and_write_into(&store, &more, partitions, form).await;
    // The deleted partition's keys are all back.
    assert_eq!(loaded.len(), 3000 + 5000 + 50);
    let stats = store.table_stats("loaded").await.unwrap();
    assert_eq!(stats.partitions, 37 + 50);

    // One key the table holds, among 2,000 new ones: nothing is written.
    let mut taken: Vec<Entity> = (0..2000)
        .map(|i| Entity::new(format!("p{:03}", i % 37), format!("t{i:05}")))
        .collect();
    taken.insert(1500, more[4321].clone());
    let e = store
        .insert_rows(vec![("loaded".to_owned(), load_rows(&store, &taken, form))])
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.root(),
            tablegate::store::StoreError::EntityAlreadyExists { key, .. } if *key == more[4321].key
        ),
        "{e}"
    );
    assert!(loaded == all(&store, "loaded").await);
    assert_eq!(store.table_stats("loaded").await.unwrap(), stats);
}

/// Rows of a table keyed by one column: each a partition of its own.
fn one_row_partitions(keys: std::ops::Range<usize>) -> Vec<Entity> {
    keys.map(|i| {
        let mut e = Entity::new(format!("k{i:06}"), "");
        e.properties.insert("n".into(), Value::Int64(i as i64));
        e
    })
    .collect()
}

/// Loads of more partitions than a load holds headers for in memory, as
/// into a table keyed by one column: the headers go into files of their
/// own, and must count as the same entities written atomically, into an
/// empty table and then into one that holds rows (new partitions, one
/// the table holds rows in, one it bulk-deleted).
#[tokio::test]
async fn a_load_of_many_partitions_equals_the_same_atomic_write() {
    for form in [Form::Held, Form::Spilled] {
        let (_dir, store) = temp_store();
        store.create_table("loaded").await.unwrap();
        store.create_table("written").await.unwrap();
        let partitions = |keys: std::ops::Range<usize>| keys.map(|i| format!("k{i:06}"));
        let first = one_row_partitions(0..25_000);
        load_and_write_into(&store, &first, partitions(0..25_000), form).await;
        let deleted = "k000007";
        for table in ["loaded", "written"] {
            store.delete_partition(table, deleted).await.unwrap();
        }
        let mut second = one_row_partitions(25_000..40_000);
        second.extend(one_row_partitions(7..8));
        let mut beside = Entity::new("k000010", "more");
        beside.properties.insert("n".into(), Value::Int64(-1));
        second.push(beside);
        let loaded = load_and_write_into(&store, &second, partitions(0..40_000), form).await;
        assert_eq!(loaded.len(), 40_001, "{form:?}");
        let stats = store.table_stats("loaded").await.unwrap();
        assert_eq!((stats.entities, stats.partitions), (40_001, 40_000));
        let beside = store.partition_stats("loaded", "k000010").await.unwrap();
        assert_eq!(beside.entities, 2);
    }
}

#[tokio::test]
async fn a_load_with_a_taken_key_writes_nothing() {
    for form in [Form::Held, Form::Spilled] {
        a_taken_key_writes_nothing(form).await;
    }
}

async fn a_taken_key_writes_nothing(form: Form) {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    // Twice the same key within one load into the empty table.
    let mut rows = entities(100, 3);
    rows.push(rows[40].clone());
    let taken_key = |rows: &[Entity]| {
        let load = store.insert_rows(vec![("t".to_owned(), load_rows(&store, rows, form))]);
        async move {
            let e = load.await.unwrap_err();
            assert!(
                matches!(
                    e.root(),
                    tablegate::store::StoreError::EntityAlreadyExists { .. }
                ),
                "{e}"
            );
        }
    };
    taken_key(&rows).await;
    assert!(all(&store, "t").await.is_empty());
    assert_eq!(store.table_stats("t").await.unwrap().entities, 0);
    // A key the table holds already, in a load into the table.
    store
        .insert_rows(vec![("t".to_owned(), encoded(&rows[..10]))])
        .await
        .unwrap();
    taken_key(&rows[5..60]).await;
    assert_eq!(all(&store, "t").await.len(), 10);
    assert_eq!(store.table_stats("t").await.unwrap().entities, 10);
}

/// COPY into an empty table, read back through SQL; a repeated key
/// fails the whole COPY with 23505.
#[tokio::test]
async fn copy_into_an_empty_table() {
    let server = crate::common::TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE m (g int, id int, v text, PRIMARY KEY (g, id))")
        .await
        .unwrap();
    let copy = |lines: String| crate::common::copy_lines(&client, "m", lines);
    let mut lines: String = (0..2000)
        .map(|i| format!("{}\t{i}\tv{i}\n", i % 9))
        .collect();
    lines.push_str("3\t30\tagain\n");
    let e = copy(lines).await.unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("23505"), "{e}");
    let lines: String = (0..2000)
        .map(|i| format!("{}\t{i}\tv{i}\n", i % 9))
        .collect();
    assert_eq!(copy(lines).await.unwrap(), 2000);
    let row = client
        .query_one("SELECT count(*), sum(id), max(v) FROM m WHERE g = 4", &[])
        .await
        .unwrap();
    let expected: i64 = (0..2000).filter(|i| i % 9 == 4).sum();
    assert_eq!(row.get::<_, i64>(0), 222);
    assert_eq!(row.get::<_, i64>(1), expected);
    assert_eq!(row.get::<_, String>(2), "v994");
    let v: String = client
        .query_one("SELECT v FROM m WHERE g = 1 AND id = 1000", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, "v1000");
}

/// A COPY whose lines come in key order (the writer then does not sort
/// them) still fails with 23505 when one key comes twice in a row, and
/// loads every row when none does.
#[tokio::test]
async fn a_copy_in_key_order_is_checked_for_repeated_keys() {
    let server = crate::common::TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE s (g int, id int, v text, PRIMARY KEY (g, id))")
        .await
        .unwrap();
    let copy = |lines: String| crate::common::copy_lines(&client, "s", lines);
    let line = |i: i64| format!("{}\t{i}\tv{i}\n", i / 1000);
    let mut repeated: Vec<String> = (0..3000).map(line).collect();
    repeated.insert(1501, line(1500));
    let e = copy(repeated.concat()).await.unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("23505"), "{e}");
    let count: i64 = client
        .query_one("SELECT count(*) FROM s", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 0);

    let lines: Vec<String> = (0..3000).map(line).collect();
    assert_eq!(copy(lines.concat()).await.unwrap(), 3000);
    let row = client
        .query_one("SELECT count(*), sum(id), max(v) FROM s WHERE g = 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1000);
    assert_eq!(row.get::<_, i64>(1), (1000..2000).sum::<i64>());
    assert_eq!(row.get::<_, String>(2), "v1999");
}

/// A COPY long enough to be made into rows in several parts, on several
/// threads, is still one write: a bad value, a short line (named by its
/// number) or a repeated key in a late part fails it whole, and the rows
/// of all parts arrive when it succeeds.
#[tokio::test]
async fn a_copy_of_many_parts_is_all_or_nothing() {
    let server = crate::common::TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE m (g int, id int, v bigint, PRIMARY KEY (g, id))")
        .await
        .unwrap();
    let copy = |lines: String| crate::common::copy_lines(&client, "m", lines);
    let line = |i: i64| format!("{}\t{i}\t{}\n", i % 7, i * 3);
    let rows = 50_000;
    let count = || async {
        client
            .query_one("SELECT count(*) FROM m", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
    };

    // All the lines, with line `index` (from 0) replaced by `text`.
    let with_line = |index: usize, text: String| {
        let mut lines: Vec<String> = (0..rows).map(line).collect();
        lines[index] = text;
        lines.concat()
    };
    // The COPY of `lines` fails with `code` and writes nothing; its
    // message and its context.
    let fails = |lines: String, code: &'static str| {
        let (copy, count) = (&copy, &count);
        async move {
            let e = copy(lines).await.unwrap_err();
            assert_eq!(e.code().map(|c| c.code()), Some(code), "{e}");
            assert_eq!(count().await, 0);
            let db = e.as_db_error().expect("an error of the server");
            (db.message().to_owned(), db.where_().map(str::to_owned))
        }
    };

    // PostgreSQL 15's message and context for the same line.
    let (message, context) = fails(
        with_line(45_000, "1\t45000\tnot a number\n".into()),
        "22P02",
    )
    .await;
    assert_eq!(
        message,
        "invalid input syntax for type bigint: \"not a number\""
    );
    assert_eq!(
        context.as_deref(),
        Some("COPY m, line 45001, column v: \"not a number\"")
    );
    let (message, _) = fails(with_line(45_000, "1\t45000\n".into()), "22P04").await;
    assert!(message.contains("COPY line 45001:"), "{message}");
    fails(with_line(40_000, line(3)), "23505").await;

    let all: Vec<String> = (0..rows).map(line).collect();
    assert_eq!(copy(all.concat()).await.unwrap(), rows as u64);
    let row = client
        .query_one("SELECT count(*), sum(id), sum(v)::bigint FROM m", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), rows);
    assert_eq!(row.get::<_, i64>(1), (0..rows).sum::<i64>());
    assert_eq!(row.get::<_, i64>(2), (0..rows).map(|i| i * 3).sum::<i64>());
    let v: i64 = client
        .query_one("SELECT v FROM m WHERE g = 5 AND id = 49999", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, 49_999 * 3);
}

/// `VERIFY INDEX` finds no difference in either index of `people`.
async fn verify_people_indexes(client: &tokio_postgres::Client) {
    for index in ["people_by_email", "people_by_city"] {
        let differences = client
            .simple_query(&format!("VERIFY INDEX {index}"))
            .await
            .unwrap()
            .into_iter()
            .filter(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_)))
            .count();
        assert_eq!(differences, 0, "{index}");
    }
}

/// COPY into a table with indexes loads their entries with the rows: each
/// index verifies clean and answers lookups, after a COPY into the empty
/// table and after one into the table that holds rows; a value a unique
/// index would hold twice fails the whole COPY with 23505 naming the index.
#[tokio::test]
async fn copy_into_an_indexed_table() {
    let server = crate::common::TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE people (id int PRIMARY KEY, email text, city text, age int);
             CREATE UNIQUE INDEX people_by_email ON people (email);
             CREATE INDEX people_by_city ON people (city, age);",
        )
        .await
        .unwrap();
    let copy = |lines: String| crate::common::copy_lines(&client, "people", lines);
    let people = |ids: std::ops::Range<i32>| -> String {
        ids.map(|i| format!("{i}\te{i}@x\tcity{}\t{}\n", i % 7, i % 90))
            .collect()
    };
    let count = || async {
        let row = client
            .query_one("SELECT count(*) FROM people", &[])
            .await
            .unwrap();
        row.get::<_, i64>(0)
    };
    let lookup = |sql: &'static str, index: &'static str| {
        let client = &client;
        async move {
            let plan = client.query(&format!("EXPLAIN {sql}"), &[]).await.unwrap();
            let plan: String = plan.iter().map(|r| r.get::<_, String>(1)).collect();
            assert!(plan.contains(&format!("access=index {index}")), "{plan}");
            let row = client.query_one(sql, &[]).await.unwrap();
            row.get::<_, i64>(0)
        }
    };

    // Two rows with one email: nothing is written.
    let e = copy(people(0..1000) + "1000\te5@x\tcityX\t1\n")
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("23505"), "{e}");
    let message = e.as_db_error().map(|d| d.message().to_owned());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("people_by_email")),
        "{message:?}"
    );
    assert_eq!(count().await, 0);
    verify_people_indexes(&client).await;

    // Into the empty table.
    assert_eq!(copy(people(0..1000)).await.unwrap(), 1000);
    verify_people_indexes(&client).await;
    let by_email = "SELECT count(*) + sum(id) FROM people WHERE email = 'e42@x'";
    assert_eq!(lookup(by_email, "people_by_email").await, 43);
    let by_city = "SELECT count(*) FROM people WHERE city = 'city3' AND age = 10";
    let expected = (0..1000).filter(|i| i % 7 == 3 && i % 90 == 10).count() as i64;
    assert_eq!(lookup(by_city, "people_by_city").await, expected);

    // Into the table that holds rows: an email taken by a row there fails.
    let e = copy(people(1000..1500) + "1500\te7@x\tcityX\t1\n")
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("23505"), "{e}");
    assert_eq!(count().await, 1000);
    assert_eq!(copy(people(1000..1500)).await.unwrap(), 500);
    verify_people_indexes(&client).await;
    let later = "SELECT count(*) + sum(id) FROM people WHERE email = 'e1234@x'";
    assert_eq!(lookup(later, "people_by_email").await, 1235);
    let expected = (0..1500).filter(|i| i % 7 == 3 && i % 90 == 10).count() as i64;
    assert_eq!(lookup(by_city, "people_by_city").await, expected);
}

/// A COPY large enough that its index entries are made on several
/// threads: the entries of every range of rows are there once (the
/// indexes verify clean and count every row), and a value the unique
/// index holds, in the last range, fails the whole COPY.
#[tokio::test]
async fn a_large_copy_into_an_indexed_table() {
    let server = crate::common::TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE people (id int PRIMARY KEY, email text, city text);
             CREATE UNIQUE INDEX people_by_email ON people (email);
             CREATE INDEX people_by_city ON people (city);",
        )
        .await
        .unwrap();
    let copy = |lines: String| crate::common::copy_lines(&client, "people", lines);
    let people = |ids: std::ops::Range<i32>| -> String {
        ids.map(|i| format!("{i}\te{i}@x\tcity{}\n", i % 7))
            .collect()
    };
    assert_eq!(copy(people(0..120_000)).await.unwrap(), 120_000);
    let e = copy(people(120_000..240_000) + "240000\te5@x\tcityX\n")
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("23505"), "{e}");
    assert_eq!(copy(people(120_000..240_000)).await.unwrap(), 120_000);
    verify_people_indexes(&client).await;
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM people").await, 240_000);
    let city = "SELECT count(*) FROM people WHERE city = 'city3'";
    assert_eq!(
        count(city).await,
        (0..240_000).filter(|i| i % 7 == 3).count() as i64
    );
    let email = "SELECT count(*) + sum(id) FROM people WHERE email = 'e239999@x'";
    assert_eq!(count(email).await, 240_000);
}

/// Rows loaded by COPY are stored as the same rows inserted by INSERT:
/// same values (NULLs, escapes, every type), same billed bytes, per
/// partition and in all.
#[tokio::test]
async fn copied_rows_are_stored_as_inserted_rows() {
    let server = crate::common::TestServer::start().await;
    let client = server.client().await;
    let columns = "g int, id bigint, zeta text, alpha double precision, flag boolean, \
                   amount numeric(12, 2), at timestamp, note varchar(40), PRIMARY KEY (g, id)";
    for table in ["copied", "inserted"] {
        client
            .batch_execute(&format!("CREATE TABLE {table} ({columns})"))
            .await
            .unwrap();
    }
    let null = |i: i64, every: i64| i % every == 0;
    let lines: String = (0..1500i64)
        .map(|i| {
            let field = |present: bool, text: String| if present { text } else { "\\N".into() };
            [
                (i % 7).to_string(),
                i.to_string(),
                field(!null(i, 5), format!("z\\t{i}\\\\é")),
                field(!null(i, 3), format!("{}.25", i - 1500)),
                field(!null(i, 4), (i % 2 == 0).to_string()),
                field(!null(i, 6), format!("{}.{:02}", i * 3, i % 100)),
                field(
                    !null(i, 7),
                    format!("2026-11-{:02} 10:{:02}:00", i % 28 + 1, i % 60),
                ),
                field(!null(i, 2), format!("note {i}")),
            ]
            .join("\t")
                + "\n"
        })
        .collect();
    assert_eq!(
        crate::common::copy_lines(&client, "copied", lines.clone())
            .await
            .unwrap(),
        1500
    );
    let insert = client
        .prepare(
            "INSERT INTO inserted VALUES ($1, $2, $3, $4, $5, $6::text::numeric, \
             $7::text::timestamp, $8)",
        )
        .await
        .unwrap();
    for line in lines.lines() {
        let f: Vec<Option<String>> = line
            .split('\t')
            .map(|f| (f != "\\N").then(|| f.replace("\\t", "\t").replace("\\\\", "\\")))
            .collect();
        let g: i32 = f[0].as_deref().unwrap().parse().unwrap();
        let id: i64 = f[1].as_deref().unwrap().parse().unwrap();
        let alpha: Option<f64> = f[3].as_deref().map(|v| v.parse().unwrap());
        let flag: Option<bool> = f[4].as_deref().map(|v| v.parse().unwrap());
        client
            .execute(
                &insert,
                &[&g, &id, &f[2], &alpha, &flag, &f[5], &f[6], &f[7]],
            )
            .await
            .unwrap();
    }
    let rows = |table: &str| {
        let client = &client;
        let sql = format!("SELECT * FROM {table} ORDER BY g, id");
        async move {
            client
                .simple_query(&sql)
                .await
                .unwrap()
                .into_iter()
                .filter_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                        (0..r.len())
                            .map(|i| r.get(i).map(str::to_owned))
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                })
                .collect::<Vec<_>>()
        }
    };
    let copied = rows("copied").await;
    assert_eq!(copied.len(), 1500);
    let one = copied
        .iter()
        .find(|r| r[1].as_deref() == Some("1"))
        .unwrap();
    assert_eq!(one[2].as_deref(), Some("z\t1\\é"));
    assert_eq!(copied, rows("inserted").await);
    let stats = |what: &'static str| {
        let client = &client;
        async move {
            client
                .query(what, &[])
                .await
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r.get::<_, String>(0),
                        r.get::<_, i64>(1),
                        r.get::<_, i64>(2),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    let partitions = stats(
        "SELECT partition_key, entities, bytes FROM tablegate.partitions \
         WHERE table_name = 'copied' ORDER BY partition_key",
    )
    .await;
    assert_eq!(partitions.len(), 7);
    assert_eq!(
        partitions,
        stats(
            "SELECT partition_key, entities, bytes FROM tablegate.partitions \
             WHERE table_name = 'inserted' ORDER BY partition_key",
        )
        .await
    );
    let tables = stats(
        "SELECT table_name, entities, bytes FROM tablegate.tables \
         WHERE table_name IN ('copied', 'inserted') ORDER BY table_name",
    )
    .await;
    assert_eq!(tables[0].1, 1500);
    assert_eq!((tables[0].1, tables[0].2), (tables[1].1, tables[1].2));
}
