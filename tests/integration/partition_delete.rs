//! Bulk removal (drop a table, delete a partition) and the statistics kept for
//! tables and partitions.

use crate::common;

use common::{employee, temp_store};
use tablegate::model::{EntityKey, IfMatch};
use tablegate::store::{
    query_all, BulkDelete, EntityRead, EntityWrite, Query, Statistics, TableAdmin, WriteOp,
};

#[tokio::test]
async fn statistics_follow_every_write() {
    let (_d, store) = temp_store();
    store.create_table("t").await.unwrap();
    let a = employee("A", "1", "Ann", 30);
    let size = a.billed_size() as u64;
    store.write("t", WriteOp::Insert(a.clone())).await.unwrap();
    store
        .write("t", WriteOp::Insert(employee("A", "2", "Ann", 30)))
        .await
        .unwrap();
    store
        .write("t", WriteOp::Insert(employee("B", "1", "Ann", 30)))
        .await
        .unwrap();
    let stats = store.table_stats("t").await.unwrap();
    assert_eq!(
        (stats.entities, stats.partitions, stats.bytes),
        (3, 2, 3 * size)
    );
    let a_stats = store.partition_stats("t", "A").await.unwrap();
    assert_eq!((a_stats.entities, a_stats.bytes), (2, 2 * size));

    // A replace with a bigger entity changes bytes, not counts.
    let bigger = employee("A", "1", "Annabelle", 30);
    store
        .write("t", WriteOp::InsertOrReplace(bigger.clone()))
        .await
        .unwrap();
    let a_stats = store.partition_stats("t", "A").await.unwrap();
    assert_eq!(a_stats.bytes, size + bigger.billed_size() as u64);

    // Deleting the last entity of B removes the partition from the count.
    store
        .write(
            "t",
            WriteOp::Delete {
                key: EntityKey::new("B", "1"),
                if_match: IfMatch::Any,
            },
        )
        .await
        .unwrap();
    let stats = store.table_stats("t").await.unwrap();
    assert_eq!((stats.entities, stats.partitions), (2, 1));
    let listed = store.list_partition_stats("t", 10, None).await.unwrap();
    assert_eq!(listed.partitions.len(), 1);
    assert_eq!(listed.partitions[0].partition_key, "A");

    // Failed writes change nothing.
    let _ = store
        .write("t", WriteOp::Insert(employee("A", "1", "dup", 1)))
        .await
        .unwrap_err();
    assert_eq!(store.table_stats("t").await.unwrap().entities, 2);
}

#[tokio::test]
async fn partition_stats_are_paged() {
    let (_d, store) = temp_store();
    store.create_table("t").await.unwrap();
    for p in 0..25 {
        store
            .write(
                "t",
                WriteOp::Insert(employee(&format!("p{p:02}"), "1", "n", 1)),
            )
            .await
            .unwrap();
    }
    let first = store.list_partition_stats("t", 10, None).await.unwrap();
    assert_eq!(first.partitions.len(), 10);
    let second = store
        .list_partition_stats("t", 10, first.continuation.as_ref())
        .await
        .unwrap();
    assert_eq!(second.partitions[0].partition_key, "p10");
    let third = store
        .list_partition_stats("t", 10, second.continuation.as_ref())
        .await
        .unwrap();
    assert_eq!(third.partitions.len(), 5);
    assert!(third.continuation.is_none());
}

#[tokio::test]
async fn delete_partition_removes_exactly_that_partition() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = tablegate::store::native::NativeStore::open(dir.path()).unwrap();
        store.create_table("logs").await.unwrap();
        for p in ["2026-01", "2026-02", "2026-03"] {
            for chunk in 0..5 {
                let ops = (0..100)
                    .map(|i| {
                        WriteOp::Insert(employee(p, &format!("{:04}", chunk * 100 + i), "n", i))
                    })
                    .collect();
                store.write_batch("logs", ops).await.unwrap();
            }
        }
        let removed = store.delete_partition("logs", "2026-02").await.unwrap();
        assert_eq!(removed.entities, 500);
        assert!(query_all(&store, "logs", &Query::partition("2026-02"))
            .await
            .unwrap()
            .is_empty());
        assert!(store
            .get("logs", &EntityKey::new("2026-02", "0001"), None)
            .await
            .unwrap()
            .is_none());
        assert_eq!(
            query_all(&store, "logs", &Query::table())
                .await
                .unwrap()
                .len(),
            1000
        );
        let stats = store.table_stats("logs").await.unwrap();
        assert_eq!((stats.entities, stats.partitions), (1000, 2));

        // The partition can be written again; old entities stay gone.
        store
            .write(
                "logs",
                WriteOp::Insert(employee("2026-02", "0001", "new", 1)),
            )
            .await
            .unwrap();
        let back = query_all(&store, "logs", &Query::partition("2026-02"))
            .await
            .unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(
            store
                .partition_stats("logs", "2026-02")
                .await
                .unwrap()
                .entities,
            1
        );
        // Replace/Delete of a bulk-deleted entity: it no longer exists.
        let err = store
            .write(
                "logs",
                WriteOp::Delete {
                    key: EntityKey::new("2026-02", "0002"),
                    if_match: IfMatch::Any,
                },
            )
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            tablegate::store::StoreError::EntityNotFound { .. }
        ));
    }
    // All of it holds after a restart.
    let store = tablegate::store::native::NativeStore::open(dir.path()).unwrap();
    assert_eq!(
        query_all(&store, "logs", &Query::partition("2026-02"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        query_all(&store, "logs", &Query::table().reversed())
            .await
            .unwrap()
            .len(),
        1001
    );
    assert_eq!(store.table_stats("logs").await.unwrap().entities, 1001);
}

#[tokio::test]
async fn delete_and_rewrite_in_one_group() {
    // Writes queued behind a partition delete in the same commit group must
    // see the partition as empty.
    let (_d, store) = temp_store();
    let store = std::sync::Arc::new(store);
    store.create_table("t").await.unwrap();
    store
        .write("t", WriteOp::Insert(employee("p", "1", "old", 1)))
        .await
        .unwrap();
    let (s1, s2) = (store.clone(), store.clone());
    let del = tokio::spawn(async move { s1.delete_partition("t", "p").await.unwrap() });
    let ins = tokio::spawn(async move {
        s2.write("t", WriteOp::Insert(employee("p", "1", "new", 2)))
            .await
    });
    del.await.unwrap();
    let inserted = ins.await.unwrap();
    let now = store
        .get("t", &EntityKey::new("p", "1"), None)
        .await
        .unwrap();
    match inserted {
        // The insert ran after the delete: it is the only entity.
        Ok(_) => assert_eq!(common::int(&now.unwrap(), "Age"), 2),
        // The insert ran before the delete and conflicted with "old": nothing is left.
        Err(_) => assert!(now.is_none()),
    }
}
