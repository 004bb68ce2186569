//! Point, range, partition and table reads, forward and reverse, and paging
//! with continuation tokens (including while writes happen).

use crate::common;

use std::collections::HashMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::Arc;

use common::{employee, temp_store};
use tablegate::model::{EntityKey, IfMatch};
use tablegate::store::native::NativeStore;
use tablegate::store::{
    for_each_page, query_all, BulkDelete, Continuation, EntityRead, EntityWrite, Query, StoreError,
    TableAdmin, WriteOp,
};

async fn seeded() -> (tempfile::TempDir, NativeStore) {
    let (dir, store) = temp_store();
    store.create_table("Employees").await.unwrap();
    for dept in ["Marketing", "Sales", "Support"] {
        let ops = (0..50)
            .map(|i| WriteOp::Insert(employee(dept, &format!("{i:04}"), "n", i)))
            .collect();
        store.write_batch("Employees", ops).await.unwrap();
    }
    (dir, store)
}

fn rows(entities: &[tablegate::model::Entity]) -> Vec<String> {
    entities
        .iter()
        .map(|e| format!("{}/{}", e.partition_key(), e.row_key()))
        .collect()
}

async fn check_rows(store: &NativeStore, from: Bound<&str>, to: Bound<&str>, want: &[String]) {
    let own = |b: Bound<&str>| b.map(str::to_string);
    let q = Query::rows("Sales", own(from), own(to));
    let got = query_all(store, "Employees", &q).await.unwrap();
    let got: Vec<String> = got.iter().map(|e| e.row_key().to_string()).collect();
    assert_eq!(got, want, "{from:?}..{to:?}");
    let rev = query_all(store, "Employees", &q.reversed()).await.unwrap();
    let mut rev: Vec<String> = rev.iter().map(|e| e.row_key().to_string()).collect();
    rev.reverse();
    assert_eq!(rev, want, "reversed {from:?}..{to:?}");
}

fn numbered(range: std::ops::Range<i32>) -> Vec<String> {
    range.map(|i| format!("{i:04}")).collect()
}

#[tokio::test]
async fn row_key_ranges_with_every_kind_of_bound() {
    let (_d, store) = seeded().await;
    check_rows(
        &store,
        Included("0010"),
        Included("0012"),
        &numbered(10..13),
    )
    .await;
    check_rows(
        &store,
        Excluded("0010"),
        Excluded("0012"),
        &numbered(11..12),
    )
    .await;
    check_rows(&store, Included("0048"), Unbounded, &numbered(48..50)).await;
    check_rows(&store, Unbounded, Excluded("0002"), &numbered(0..2)).await;
    // A prefix range, as for LIKE '001%'.
    check_rows(&store, Included("001"), Excluded("002"), &numbered(10..20)).await;
    check_rows(&store, Included("0020"), Included("0010"), &[]).await;
}

#[tokio::test]
async fn partition_and_table_scans_in_key_order() {
    let (_d, store) = seeded().await;
    let sales = query_all(&store, "Employees", &Query::partition("Sales"))
        .await
        .unwrap();
    assert_eq!(sales.len(), 50);
    assert!(sales.iter().all(|e| e.partition_key() == "Sales"));
    let all = query_all(&store, "Employees", &Query::table())
        .await
        .unwrap();
    let keys = rows(&all);
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(all.len(), 150);
    let rev = query_all(&store, "Employees", &Query::table().reversed())
        .await
        .unwrap();
    assert_eq!(
        rev.first().map(|e| e.key.clone()),
        Some(EntityKey::new("Support", "0049"))
    );
    // Partition key ranges: Sales..=Support.
    let q = Query::new(tablegate::store::KeyRange::Partitions {
        from: Excluded("Marketing".into()),
        to: Included("Support".into()),
    });
    assert_eq!(query_all(&store, "Employees", &q).await.unwrap().len(), 100);
}

#[tokio::test]
async fn log_tail_reads_only_the_newest() {
    let (_d, store) = seeded().await;
    let page = store
        .query(
            "Employees",
            &Query::partition("Sales").reversed().page_size(3),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        rows(&page.entities),
        ["Sales/0049", "Sales/0048", "Sales/0047"]
    );
    assert!(page.continuation.is_some());
}

#[tokio::test]
async fn pages_follow_default_size_and_tokens() {
    let (_d, store) = temp_store();
    store.create_table("t").await.unwrap();
    for chunk in 0..25 {
        let ops = (0..100)
            .map(|i| WriteOp::Insert(employee("p", &format!("{:05}", chunk * 100 + i), "n", i)))
            .collect();
        store.write_batch("t", ops).await.unwrap();
    }
    let mut sizes = Vec::new();
    for_each_page(&store, "t", &Query::partition("p"), |page| {
        sizes.push(page.entities.len());
        true
    })
    .await
    .unwrap();
    assert_eq!(sizes, [1000, 1000, 500]);
    let err = store
        .query("t", &Query::partition("p").page_size(0), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidQuery(_)));
    let err = store
        .query(
            "t",
            &Query::partition("p"),
            Some(&Continuation::from_token("!!")),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidContinuation(_)));
}

/// Every entity present for the whole scan is returned exactly once, even as
/// other entities are inserted and deleted around it between pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_visits_every_entity_exactly_once_during_writes() {
    let (_d, store) = temp_store();
    let store = Arc::new(store);
    store.create_table("t").await.unwrap();
    // Stable entities: even row numbers in 20 partitions.
    for p in 0..20 {
        let ops = (0..50)
            .map(|i| {
                WriteOp::Insert(employee(
                    &format!("p{p:02}"),
                    &format!("{:04}", i * 2),
                    "stable",
                    0,
                ))
            })
            .collect();
        store.write_batch("t", ops).await.unwrap();
    }
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            // Churn: odd rows inserted and deleted all over the key space.
            for round in 0..40 {
                for p in 0..20 {
                    let rk = format!("{:04}", (round * 7 + p) % 50 * 2 + 1);
                    let pk = format!("p{p:02}");
                    store
                        .write(
                            "t",
                            WriteOp::InsertOrReplace(employee(&pk, &rk, "churn", 1)),
                        )
                        .await
                        .unwrap();
                    if round % 2 == 1 {
                        let _ = store
                            .write(
                                "t",
                                WriteOp::Delete {
                                    key: EntityKey::new(&pk, &rk),
                                    if_match: IfMatch::Any,
                                },
                            )
                            .await;
                    }
                }
                tokio::task::yield_now().await;
            }
        })
    };
    for reverse in [false, true] {
        let mut query = Query::table().page_size(37);
        query.reverse = reverse;
        let mut seen: HashMap<EntityKey, usize> = HashMap::new();
        let mut last: Option<EntityKey> = None;
        for_each_page(&*store, "t", &query, |page| {
            for e in page.entities {
                if let Some(prev) = &last {
                    assert!(
                        if reverse {
                            e.key < *prev
                        } else {
                            e.key > *prev
                        },
                        "out of order"
                    );
                }
                last = Some(e.key.clone());
                *seen.entry(e.key).or_default() += 1;
            }
            true
        })
        .await
        .unwrap();
        assert!(
            seen.values().all(|&n| n == 1),
            "an entity was returned twice"
        );
        let stable = seen
            .keys()
            .filter(|k| k.row_key.parse::<u32>().unwrap() % 2 == 0)
            .count();
        assert_eq!(stable, 1000, "a stable entity was missed");
    }
    writer.await.unwrap();
}

#[tokio::test]
async fn snapshot_reads_do_not_see_later_writes() {
    let (_d, store) = seeded().await;
    let snapshot = store.snapshot();
    store
        .write(
            "Employees",
            WriteOp::Insert(employee("Sales", "9999", "late", 1)),
        )
        .await
        .unwrap();
    store.delete_partition("Employees", "Sales").await.unwrap();
    let in_snapshot = query_all(&snapshot, "Employees", &Query::partition("Sales"))
        .await
        .unwrap();
    assert_eq!(in_snapshot.len(), 50);
    let now = query_all(&store, "Employees", &Query::partition("Sales"))
        .await
        .unwrap();
    assert_eq!(now.len(), 0);
}
