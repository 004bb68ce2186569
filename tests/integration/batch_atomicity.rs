//! Entity group transactions: all or nothing, one partition, at most 100
//! operations, one operation per entity, and the failing index named.

use crate::common;

use common::{employee, temp_store};
use tablegate::model::{EntityKey, IfMatch};
use tablegate::store::{
    query_all, EntityRead, EntityWrite, Query, StoreError, TableAdmin, WriteOp,
};

#[tokio::test]
async fn failing_operation_leaves_nothing_of_the_batch() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    store
        .write("t", WriteOp::Insert(employee("Sales", "0005", "Eve", 50)))
        .await
        .unwrap();

    // Operation 5 inserts an entity that exists: the whole batch must fail.
    let ops: Vec<WriteOp> = (0..10)
        .map(|i| WriteOp::Insert(employee("Sales", &format!("{i:04}"), "n", i)))
        .collect();
    let err = store.write_batch("t", ops).await.unwrap_err();
    match &err {
        StoreError::BatchOperationFailed { index, source } => {
            assert_eq!(*index, 5);
            assert!(matches!(**source, StoreError::EntityAlreadyExists { .. }));
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("operation 5"), "{err}");
    let all = query_all(&store, "t", &Query::partition("Sales"))
        .await
        .unwrap();
    assert_eq!(all.len(), 1, "only the pre-existing entity may remain");
}

#[tokio::test]
async fn mixed_operations_commit_together() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    let a = store
        .write("t", WriteOp::Insert(employee("P", "a", "A", 1)))
        .await
        .unwrap();
    store
        .write("t", WriteOp::Insert(employee("P", "b", "B", 2)))
        .await
        .unwrap();
    let outcomes = store
        .write_batch(
            "t",
            vec![
                WriteOp::Replace {
                    entity: employee("P", "a", "A2", 10),
                    if_match: IfMatch::ETag(a.etag.unwrap()),
                },
                WriteOp::Delete {
                    key: EntityKey::new("P", "b"),
                    if_match: IfMatch::Any,
                },
                WriteOp::InsertOrMerge(employee("P", "c", "C", 3)),
            ],
        )
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 3);
    assert!(outcomes[1].etag.is_none());
    let all = query_all(&store, "t", &Query::partition("P"))
        .await
        .unwrap();
    let keys: Vec<&str> = all.iter().map(|e| e.row_key()).collect();
    assert_eq!(keys, ["a", "c"]);
    // All entities written by one batch share its version.
    assert_eq!(all[0].etag, all[1].etag);
}

#[tokio::test]
async fn batch_rules_are_checked_before_anything_is_written() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();

    let too_many: Vec<WriteOp> = (0..101)
        .map(|i| WriteOp::Insert(employee("P", &i.to_string(), "n", i)))
        .collect();
    let err = store.write_batch("t", too_many).await.unwrap_err();
    assert!(matches!(err, StoreError::BatchTooLarge { count: 101 }));
    assert!(err.to_string().contains("100"), "{err}");

    let exactly_100: Vec<WriteOp> = (0..100)
        .map(|i| WriteOp::Insert(employee("P", &format!("{i:03}"), "n", i)))
        .collect();
    store.write_batch("t", exactly_100).await.unwrap();

    let mixed = vec![
        WriteOp::Insert(employee("A", "1", "n", 1)),
        WriteOp::Insert(employee("B", "1", "n", 1)),
    ];
    let err = store.write_batch("t", mixed).await.unwrap_err();
    assert!(
        matches!(err, StoreError::BatchMixedPartitions { index: 1, .. }),
        "{err}"
    );

    let dup = vec![
        WriteOp::Insert(employee("A", "1", "n", 1)),
        WriteOp::Delete {
            key: EntityKey::new("A", "1"),
            if_match: IfMatch::Any,
        },
    ];
    let err = store.write_batch("t", dup).await.unwrap_err();
    assert!(
        matches!(err, StoreError::BatchDuplicateEntity { index: 1, .. }),
        "{err}"
    );

    let bad_key = vec![
        WriteOp::Insert(employee("A", "1", "n", 1)),
        WriteOp::Insert(employee("A", "x/y", "n", 1)),
    ];
    let err = store.write_batch("t", bad_key).await.unwrap_err();
    assert!(
        matches!(err, StoreError::BatchOperationFailed { index: 1, .. }),
        "{err}"
    );

    assert!(matches!(
        store.write_batch("t", vec![]).await,
        Err(StoreError::BatchEmpty)
    ));
    assert!(query_all(&store, "t", &Query::partition("A"))
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .get("t", &EntityKey::new("A", "1"), None)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn concurrent_batches_do_not_interleave() {
    // Writers race to insert overlapping batches; each batch lands whole or not at all.
    let (_dir, store) = temp_store();
    let store = std::sync::Arc::new(store);
    store.create_table("t").await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            // Batches of writer w cover rows w..w+20: neighbours overlap.
            let ops = (w..w + 20)
                .map(|i| WriteOp::Insert(employee("P", &format!("{i:03}"), &format!("w{w}"), w)))
                .collect();
            store.write_batch("t", ops).await.is_ok()
        }));
    }
    let mut winners = Vec::new();
    for (w, t) in tasks.into_iter().enumerate() {
        if t.await.unwrap() {
            winners.push(w);
        }
    }
    assert!(!winners.is_empty());
    let all = query_all(&*store, "t", &Query::partition("P"))
        .await
        .unwrap();
    assert_eq!(all.len(), winners.len() * 20);
    for e in &all {
        let owner = common::int(e, "Age") as usize;
        assert!(winners.contains(&owner));
        let row: usize = e.row_key().parse().unwrap();
        assert!(
            (owner..owner + 20).contains(&row),
            "row {row} of writer {owner}"
        );
    }
}
