//! Optimistic concurrency: N tasks increment one counter with conditional
//! writes; the counter ends at exactly the number of successful writes.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{int, temp_store};
use tablegate::model::{Entity, EntityKey, IfMatch, Value};
use tablegate::store::{EntityRead, EntityWrite, StoreError, TableAdmin, WriteOp};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conditional_increments_are_never_lost() {
    let (_dir, store) = temp_store();
    let store = Arc::new(store);
    store.create_table("counters").await.unwrap();
    let key = EntityKey::new("c", "1");
    store
        .write(
            "counters",
            WriteOp::Insert(Entity::new("c", "1").with("n", Value::Int64(0))),
        )
        .await
        .unwrap();

    let successes = Arc::new(AtomicU64::new(0));
    let conflicts = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (store, key, successes, conflicts) = (
            store.clone(),
            key.clone(),
            successes.clone(),
            conflicts.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let current = store.get("counters", &key, None).await.unwrap().unwrap();
                let next = Entity::new("c", "1").with("n", Value::Int64(int(&current, "n") + 1));
                match store
                    .write(
                        "counters",
                        WriteOp::Replace {
                            entity: next,
                            if_match: IfMatch::ETag(current.etag.unwrap()),
                        },
                    )
                    .await
                {
                    Ok(_) => successes.fetch_add(1, Ordering::Relaxed),
                    Err(StoreError::ConditionNotMet { .. }) => {
                        conflicts.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(e) => panic!("{e}"),
                };
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let final_value = int(
        &store.get("counters", &key, None).await.unwrap().unwrap(),
        "n",
    );
    let successes = successes.load(Ordering::Relaxed);
    assert_eq!(final_value as u64, successes);
    assert_eq!(successes + conflicts.load(Ordering::Relaxed), 16 * 25);
    assert!(successes > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_of_racing_writers_wins() {
    let (_dir, store) = temp_store();
    let store = Arc::new(store);
    store.create_table("t").await.unwrap();
    for round in 0..20 {
        let rk = round.to_string();
        let v0 = store
            .write("t", WriteOp::Insert(Entity::new("p", &rk)))
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for w in 0..8 {
            let (store, etag, rk) = (store.clone(), v0.etag.clone().unwrap(), rk.clone());
            tasks.push(tokio::spawn(async move {
                let e = Entity::new("p", &rk).with("winner", Value::Int32(w));
                store
                    .write(
                        "t",
                        WriteOp::Merge {
                            entity: e,
                            if_match: IfMatch::ETag(etag),
                        },
                    )
                    .await
                    .map(|_| w)
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(w) => winners.push(w),
                Err(e) => assert!(matches!(e, StoreError::ConditionNotMet { .. }), "{e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let stored = store
            .get("t", &EntityKey::new("p", &rk), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.get("winner"), Some(&Value::Int32(winners[0])));
    }
}
