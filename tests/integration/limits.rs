//! The data model's limits, enforced with errors that name them.

use crate::common;

use common::temp_store;
use tablegate::model::{Entity, EntityKey, ModelError, Value, MAX_ENTITY_BYTES};
use tablegate::store::{EntityRead, EntityWrite, StoreError, TableAdmin, WriteOp};

async fn rejected(op: WriteOp) -> StoreError {
    let (_d, store) = temp_store();
    store.create_table("t").await.unwrap();
    let key = op.key().clone();
    let err = store.write("t", op).await.unwrap_err();
    // Nothing was written.
    if let Ok(found) = store.get("t", &key, None).await {
        assert!(found.is_none());
    }
    err
}

#[tokio::test]
async fn oversized_keys() {
    let err = rejected(WriteOp::Insert(Entity::new("x".repeat(1025), "r"))).await;
    assert!(matches!(
        err,
        StoreError::Model(ModelError::KeyTooLong { .. })
    ));
    assert!(
        err.to_string()
            .contains("PartitionKey is 1025 bytes; the limit is 1024 bytes"),
        "{err}"
    );
    let err = rejected(WriteOp::Insert(Entity::new("p", "é".repeat(513)))).await;
    assert!(err.to_string().starts_with("RowKey is 1026 bytes"), "{err}");
}

#[tokio::test]
async fn forbidden_key_characters() {
    for bad in ["a/b", "a\\b", "a#b", "a?b", "tab\t", "nul\u{0}"] {
        let err = rejected(WriteOp::Insert(Entity::new(bad, "r"))).await;
        assert!(
            matches!(
                err,
                StoreError::Model(ModelError::KeyForbiddenCharacter { .. })
            ),
            "{bad:?}: {err}"
        );
    }
}

#[tokio::test]
async fn too_many_properties() {
    let mut e = Entity::new("p", "r");
    for i in 0..253 {
        e.properties.insert(format!("c{i}"), Value::Boolean(true));
    }
    let err = rejected(WriteOp::Insert(e)).await;
    assert!(
        err.to_string().contains("253 properties; the limit is 252"),
        "{err}"
    );
}

#[tokio::test]
async fn oversized_entity() {
    let e = Entity::new("p", "r").with("blob", Value::Binary(vec![7; MAX_ENTITY_BYTES]));
    let err = rejected(WriteOp::Insert(e)).await;
    assert!(
        err.to_string()
            .contains("the limit is 1048576 bytes (1 MiB)"),
        "{err}"
    );
}

#[tokio::test]
async fn merge_that_would_exceed_the_limits() {
    let (_d, store) = temp_store();
    store.create_table("t").await.unwrap();
    let half = Value::Binary(vec![1; MAX_ENTITY_BYTES / 2]);
    store
        .write(
            "t",
            WriteOp::Insert(Entity::new("p", "r").with("a", half.clone())),
        )
        .await
        .unwrap();
    let err = store
        .write(
            "t",
            WriteOp::InsertOrMerge(Entity::new("p", "r").with("b", half)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Model(ModelError::EntityTooLarge { .. })),
        "{err}"
    );
    let kept = store
        .get("t", &EntityKey::new("p", "r"), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.properties.len(), 1);
}

#[tokio::test]
async fn reserved_and_bad_names() {
    let err = rejected(WriteOp::Insert(
        Entity::new("p", "r").with("RowKey", Value::Int32(1)),
    ))
    .await;
    assert!(matches!(
        err,
        StoreError::Model(ModelError::ReservedPropertyName(_))
    ));
    let (_d, store) = temp_store();
    assert!(matches!(
        store.create_table("").await,
        Err(StoreError::Model(ModelError::InvalidTableName(_)))
    ));
}

#[tokio::test]
async fn largest_allowed_entity_round_trips() {
    let (_d, store) = temp_store();
    store.create_table("t").await.unwrap();
    let overhead = Entity::new("p", "r")
        .with("b", Value::Binary(vec![]))
        .billed_size();
    let e = Entity::new("p", "r").with("b", Value::Binary(vec![9; MAX_ENTITY_BYTES - overhead]));
    assert_eq!(e.billed_size(), MAX_ENTITY_BYTES);
    store.write("t", WriteOp::Insert(e.clone())).await.unwrap();
    let got = store
        .get("t", &EntityKey::new("p", "r"), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.properties, e.properties);
}
