//! The Azure backend against the Azurite emulator: every store operation,
//! its errors, paging, reversed reads, batches and statistics.

use crate::common;

use std::ops::Bound;

use common::azurite::Azurite;
use tablegate::model::{Date, DateTime, Decimal, ETag, Entity, EntityKey, Guid, IfMatch, Value};
use tablegate::store::azure::AzureStore;
use tablegate::store::{
    query_all, AtomicWrite, BulkDelete, EntityRead, EntityWrite, Query, Statistics, StoreError,
    TableAdmin, WriteOp,
};

fn store(azurite: &Azurite) -> AzureStore {
    AzureStore::connect(&azurite.connection_string()).expect("connect")
}

fn row(pk: &str, rk: &str, n: i32) -> Entity {
    Entity::new(pk, rk).with("n", Value::Int32(n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_entities_and_conditions() {
    let azurite = Azurite::start();
    let store = store(&azurite);
    store.create_table("orders").await.unwrap();
    store.create_table("Order_Items.index.x").await.unwrap();
    assert!(matches!(
        store.create_table("orders").await.unwrap_err(),
        StoreError::TableAlreadyExists(_)
    ));
    let mut tables = store.list_tables().await.unwrap();
    tables.sort();
    assert_eq!(tables, ["Order_Items.index.x", "orders"]);

    // Every type round-trips.
    let every = Entity::new("p 'one'", "r é+%")
        .with("s", Value::String("text".into()))
        .with("i", Value::Int32(-7))
        .with("l", Value::Int64(i64::MAX))
        .with("d", Value::Double(2.5))
        .with("b", Value::Boolean(false))
        .with("t", Value::DateTime(DateTime(1_700_000_000_123_456)))
        .with("g", Value::Guid(Guid([9; 16])))
        .with("bin", Value::Binary(vec![0, 1, 2, 255]))
        .with("dec", Value::Decimal(Decimal::new(12345, 2).unwrap()))
        .with("day", Value::Date(Date(20_000)))
        .with("doc", Value::Json("{\"k\": [1, 2]}".into()))
        .with("odd name", Value::Int32(5));
    let written = store
        .write("orders", WriteOp::Insert(every.clone()))
        .await
        .unwrap();
    let read = store
        .get("orders", &every.key, None)
        .await
        .unwrap()
        .expect("the entity");
    assert_eq!(read.properties, every.properties);
    assert_eq!(read.etag, written.etag);
    assert!(read.timestamp.is_some() && written.timestamp == read.timestamp);
    let projected = store
        .get(
            "orders",
            &every.key,
            Some(&["dec".to_owned(), "odd name".to_owned()]),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(projected.properties.len(), 2);
    assert_eq!(projected.properties["dec"], every.properties["dec"]);

    // Errors come back as the native store's.
    assert!(matches!(
        store
            .write("orders", WriteOp::Insert(every.clone()))
            .await
            .unwrap_err(),
        StoreError::EntityAlreadyExists { .. }
    ));
    let stale = IfMatch::ETag(ETag("W/\"datetime'2000-01-01T00%3A00%3A00Z'\"".into()));
    assert!(matches!(
        store
            .write(
                "orders",
                WriteOp::Replace {
                    entity: row("p 'one'", "r é+%", 1),
                    if_match: stale
                }
            )
            .await
            .unwrap_err(),
        StoreError::ConditionNotMet { .. }
    ));
    let current = IfMatch::ETag(read.etag.clone().unwrap());
    store
        .write(
            "orders",
            WriteOp::Merge {
                entity: row("p 'one'", "r é+%", 1),
                if_match: current,
            },
        )
        .await
        .unwrap();
    let merged = store
        .get("orders", &every.key, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(merged.properties["n"], Value::Int32(1));
    assert_eq!(merged.properties["s"], Value::String("text".into()));
    store
        .write(
            "orders",
            WriteOp::InsertOrReplace(row("p 'one'", "r é+%", 2)),
        )
        .await
        .unwrap();
    let replaced = store
        .get("orders", &every.key, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced.properties.len(), 1);
    store
        .write("orders", WriteOp::InsertOrMerge(row("q", "1", 3)))
        .await
        .unwrap();
    store
        .write(
            "orders",
            WriteOp::Delete {
                key: every.key.clone(),
                if_match: IfMatch::Any,
            },
        )
        .await
        .unwrap();
    assert!(store
        .get("orders", &every.key, None)
        .await
        .unwrap()
        .is_none());
    assert!(matches!(
        store
            .write(
                "orders",
                WriteOp::Delete {
                    key: every.key.clone(),
                    if_match: IfMatch::Any
                }
            )
            .await
            .unwrap_err(),
        StoreError::EntityNotFound { .. }
    ));

    store.drop_table("orders").await.unwrap();
    assert!(matches!(
        store
            .get("orders", &EntityKey::new("q", "1"), None)
            .await
            .unwrap_err(),
        StoreError::TableNotFound(_)
    ));
    assert!(matches!(
        store
            .query("orders", &Query::table(), None)
            .await
            .unwrap_err(),
        StoreError::TableNotFound(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_ranges_reversed_reads_batches_and_statistics() {
    let azurite = Azurite::start();
    let store = store(&azurite);
    store.create_table("log").await.unwrap();
    for chunk in (0..2500).collect::<Vec<i32>>().chunks(100) {
        let ops = chunk
            .iter()
            .map(|&i| WriteOp::Insert(row("p", &format!("{i:05}"), i)))
            .collect();
        store.write_batch("log", ops).await.unwrap();
    }
    store
        .write_batch(
            "log",
            (0..10)
                .map(|i| WriteOp::Insert(row("q", &format!("{i:05}"), i)))
                .collect(),
        )
        .await
        .unwrap();

    // Pages of 1000 with continuations, in key order.
    let query = Query::partition("p");
    let (mut seen, mut token, mut pages) = (Vec::new(), None, 0);
    loop {
        let page = store.query("log", &query, token.as_ref()).await.unwrap();
        pages += 1;
        seen.extend(page.entities.into_iter().map(|e| e.key.row_key));
        token = page.continuation;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        seen,
        (0..2500).map(|i| format!("{i:05}")).collect::<Vec<_>>()
    );

    // A RowKey range, and a projection.
    let range = Query::rows(
        "p",
        Bound::Included("00100".into()),
        Bound::Excluded("00110".into()),
    )
    .project(["n"]);
    let rows = query_all(&store, "log", &range).await.unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[0].properties["n"], Value::Int32(100));

    // The log tail: newest first, a page at a time.
    let tail = Query::partition("p").reversed().page_size(10);
    let first = store.query("log", &tail, None).await.unwrap();
    let keys = |p: &tablegate::store::Page| {
        p.entities
            .iter()
            .map(|e| e.key.row_key.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(&first),
        (2490..2500)
            .rev()
            .map(|i| format!("{i:05}"))
            .collect::<Vec<_>>()
    );
    let second = store
        .query("log", &tail, first.continuation.as_ref())
        .await
        .unwrap();
    assert_eq!(
        keys(&second),
        (2480..2490)
            .rev()
            .map(|i| format!("{i:05}"))
            .collect::<Vec<_>>()
    );

    // A batch with a failing operation applies nothing, and names it.
    let failing = vec![
        WriteOp::Insert(row("q", "new", 1)),
        WriteOp::Insert(row("q", "00003", 1)),
    ];
    match store.write_batch("log", failing).await.unwrap_err() {
        StoreError::BatchOperationFailed { index, source } => {
            assert_eq!(index, 1);
            assert!(matches!(*source, StoreError::EntityAlreadyExists { .. }));
        }
        other => panic!("{other}"),
    }
    assert!(store
        .get("log", &EntityKey::new("q", "new"), None)
        .await
        .unwrap()
        .is_none());

    // Atomic writes: one partition goes as a batch; several through the
    // outbox (see the next test).
    store
        .write_atomic(vec![
            ("log".into(), WriteOp::Insert(row("q", "a", 1))),
            ("log".into(), WriteOp::Insert(row("q", "b", 1))),
        ])
        .await
        .unwrap();
    store
        .write_atomic(vec![
            ("log".into(), WriteOp::Insert(row("q", "c", 1))),
            ("log".into(), WriteOp::Insert(row("r", "c", 1))),
        ])
        .await
        .unwrap();

    // Statistics, and a partition deleted.
    let stats = store.table_stats("log").await.unwrap();
    assert_eq!((stats.entities, stats.partitions), (2514, 3));
    let deleted = store.delete_partition("log", "q").await.unwrap();
    assert_eq!(deleted.entities, 13);
    assert_eq!(store.table_stats("log").await.unwrap().entities, 2501);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_over_several_partitions_go_whole_or_not_at_all() {
    let azurite = Azurite::start();
    let store = store(&azurite);
    store.create_table("a").await.unwrap();
    store.create_table("b").await.unwrap();
    store
        .write("b", WriteOp::Insert(row("taken", "1", 7)))
        .await
        .unwrap();

    // 250 rows over two tables and three partitions, one of them more
    // than a batch: all there, and no outbox record left.
    let ops: Vec<(String, WriteOp)> = (0..250)
        .map(|i| {
            let (table, pk) = match i % 3 {
                0 => ("a", "x"),
                1 => ("a", "y"),
                _ => ("b", "z"),
            };
            (
                table.to_owned(),
                WriteOp::Insert(row(pk, &format!("{i:04}"), i)),
            )
        })
        .collect();
    let outcomes = store.write_atomic(ops).await.unwrap();
    assert_eq!(outcomes.len(), 250);
    assert!(outcomes.iter().all(|o| o.etag.is_some()));
    assert_eq!(
        query_all(&store, "a", &Query::table()).await.unwrap().len(),
        167
    );
    assert_eq!(
        query_all(&store, "b", &Query::table()).await.unwrap().len(),
        84
    );
    assert_eq!(store.pending_for().await.unwrap(), None);

    // An insert that meets an existing row fails the whole write: the rows
    // other partitions got are gone again, the existing row is untouched,
    // and the replaced row has its old value back.
    let failing = vec![
        ("a".to_owned(), WriteOp::Insert(row("fresh", "1", 1))),
        (
            "a".to_owned(),
            WriteOp::InsertOrReplace(row("x", "0000", -1)),
        ),
        ("b".to_owned(), WriteOp::Insert(row("taken", "1", 1))),
        ("b".to_owned(), WriteOp::Insert(row("other", "1", 1))),
    ];
    match store.write_atomic(failing).await.unwrap_err() {
        StoreError::BatchOperationFailed { index, source } => {
            assert_eq!(index, 2);
            assert!(matches!(*source, StoreError::EntityAlreadyExists { .. }));
        }
        other => panic!("{other}"),
    }
    let get = |table: &'static str, pk: &'static str, rk: &'static str| {
        let store = store.clone();
        async move {
            store
                .get(table, &EntityKey::new(pk, rk), None)
                .await
                .unwrap()
                .map(|e| e.properties["n"].clone())
        }
    };
    assert_eq!(get("a", "fresh", "1").await, None);
    assert_eq!(get("b", "other", "1").await, None);
    assert_eq!(get("b", "taken", "1").await, Some(Value::Int32(7)));
    assert_eq!(get("a", "x", "0000").await, Some(Value::Int32(0)));
    assert_eq!(store.pending_for().await.unwrap(), None);
    assert_eq!(store.recover(std::time::Duration::ZERO).await.unwrap(), 0);
}
