//! The six write operations, their preconditions, and the system fields.

use crate::common;

use common::{employee, int, temp_store};
use tablegate::model::{ETag, EntityKey, IfMatch, Value};
use tablegate::store::{EntityRead, EntityWrite, StoreError, TableAdmin, WriteOp};

#[tokio::test]
async fn insert_get_and_conflict() {
    let (_dir, store) = temp_store();
    store.create_table("Employees").await.unwrap();
    let out = store
        .write(
            "Employees",
            WriteOp::Insert(employee("Sales", "0001", "Ann", 30)),
        )
        .await
        .unwrap();
    let got = store
        .get("Employees", &EntityKey::new("Sales", "0001"), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.get("Name"), Some(&Value::String("Ann".into())));
    assert_eq!(got.etag, out.etag);
    assert_eq!(got.timestamp, out.timestamp);

    let err = store
        .write(
            "Employees",
            WriteOp::Insert(employee("Sales", "0001", "Bob", 40)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::EntityAlreadyExists { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("Employees") && err.to_string().contains("0001"),
        "{err}"
    );
    assert!(store
        .get("Employees", &EntityKey::new("Sales", "0002"), None)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn etag_changes_on_every_write() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut last_ts = None;
    for i in 0..20 {
        let out = store
            .write("t", WriteOp::InsertOrReplace(employee("p", "r", "x", i)))
            .await
            .unwrap();
        assert!(seen.insert(out.etag.clone().unwrap()), "ETag repeated");
        assert!(out.timestamp > last_ts, "Timestamp did not advance");
        last_ts = out.timestamp;
    }
}

#[tokio::test]
async fn replace_merge_and_their_conditions() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    let key = EntityKey::new("Sales", "0001");
    let v1 = store
        .write("t", WriteOp::Insert(employee("Sales", "0001", "Ann", 30)))
        .await
        .unwrap();

    // Merge keeps unnamed properties and adds new ones.
    let patch =
        tablegate::model::Entity::new("Sales", "0001").with("Email", Value::String("ann@x".into()));
    let v2 = store
        .write(
            "t",
            WriteOp::Merge {
                entity: patch,
                if_match: IfMatch::ETag(v1.etag.clone().unwrap()),
            },
        )
        .await
        .unwrap();
    let got = store.get("t", &key, None).await.unwrap().unwrap();
    assert_eq!(got.properties.len(), 3);

    // A stale ETag is refused and changes nothing.
    let stale = store
        .write(
            "t",
            WriteOp::Replace {
                entity: employee("Sales", "0001", "Zed", 1),
                if_match: IfMatch::ETag(v1.etag.unwrap()),
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(stale, StoreError::ConditionNotMet { .. }),
        "{stale}"
    );
    assert_eq!(store.get("t", &key, None).await.unwrap().unwrap(), got);

    // An ETag that is not ours at all is a mismatch too, not a crash.
    let foreign = store
        .write(
            "t",
            WriteOp::Replace {
                entity: employee("Sales", "0001", "Zed", 1),
                if_match: IfMatch::ETag(ETag("garbage".into())),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(foreign, StoreError::ConditionNotMet { .. }));

    // Replace drops properties not given.
    store
        .write(
            "t",
            WriteOp::Replace {
                entity: employee("Sales", "0001", "Zed", 1),
                if_match: IfMatch::ETag(v2.etag.unwrap()),
            },
        )
        .await
        .unwrap();
    let got = store.get("t", &key, None).await.unwrap().unwrap();
    assert_eq!(got.properties.len(), 2);
    assert_eq!(int(&got, "Age"), 1);

    // Replace, Merge and Delete of a missing entity fail with not found.
    let missing = EntityKey::new("Sales", "9999");
    for op in [
        WriteOp::Replace {
            entity: employee("Sales", "9999", "a", 1),
            if_match: IfMatch::Any,
        },
        WriteOp::Merge {
            entity: employee("Sales", "9999", "a", 1),
            if_match: IfMatch::Any,
        },
        WriteOp::Delete {
            key: missing.clone(),
            if_match: IfMatch::Any,
        },
    ] {
        let err = store.write("t", op).await.unwrap_err();
        assert!(matches!(err, StoreError::EntityNotFound { .. }), "{err}");
    }
    assert!(store.get("t", &missing, None).await.unwrap().is_none());
}

#[tokio::test]
async fn upserts() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    let key = EntityKey::new("p", "r");
    store
        .write("t", WriteOp::InsertOrMerge(employee("p", "r", "Ann", 30)))
        .await
        .unwrap();
    let extra = tablegate::model::Entity::new("p", "r").with("Dept", Value::String("Sales".into()));
    store
        .write("t", WriteOp::InsertOrMerge(extra.clone()))
        .await
        .unwrap();
    assert_eq!(
        store
            .get("t", &key, None)
            .await
            .unwrap()
            .unwrap()
            .properties
            .len(),
        3
    );
    store
        .write("t", WriteOp::InsertOrReplace(extra))
        .await
        .unwrap();
    assert_eq!(
        store
            .get("t", &key, None)
            .await
            .unwrap()
            .unwrap()
            .properties
            .len(),
        1
    );
}

#[tokio::test]
async fn conditional_delete() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    let key = EntityKey::new("p", "r");
    let v1 = store
        .write("t", WriteOp::Insert(employee("p", "r", "Ann", 30)))
        .await
        .unwrap();
    let v2 = store
        .write("t", WriteOp::InsertOrMerge(employee("p", "r", "Ann", 31)))
        .await
        .unwrap();
    let err = store
        .write(
            "t",
            WriteOp::Delete {
                key: key.clone(),
                if_match: IfMatch::ETag(v1.etag.unwrap()),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ConditionNotMet { .. }));
    assert!(store.get("t", &key, None).await.unwrap().is_some());
    store
        .write(
            "t",
            WriteOp::Delete {
                key: key.clone(),
                if_match: IfMatch::ETag(v2.etag.unwrap()),
            },
        )
        .await
        .unwrap();
    assert!(store.get("t", &key, None).await.unwrap().is_none());
}

#[tokio::test]
async fn tables_are_created_listed_and_dropped() {
    let (_dir, store) = temp_store();
    store.create_table("b").await.unwrap();
    store.create_table("a").await.unwrap();
    assert!(matches!(
        store.create_table("a").await,
        Err(StoreError::TableAlreadyExists(_))
    ));
    assert_eq!(store.list_tables().await.unwrap(), vec!["a", "b"]);
    store
        .write("a", WriteOp::Insert(employee("p", "r", "x", 1)))
        .await
        .unwrap();
    store.drop_table("a").await.unwrap();
    assert_eq!(store.list_tables().await.unwrap(), vec!["b"]);
    assert!(matches!(
        store.get("a", &EntityKey::new("p", "r"), None).await,
        Err(StoreError::TableNotFound(_))
    ));
    assert!(matches!(
        store.drop_table("a").await,
        Err(StoreError::TableNotFound(_))
    ));
    // A new table of the same name starts empty.
    store.create_table("a").await.unwrap();
    assert!(store
        .get("a", &EntityKey::new("p", "r"), None)
        .await
        .unwrap()
        .is_none());
    let err = store
        .write("nope", WriteOp::Insert(employee("p", "r", "x", 1)))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "table \"nope\" does not exist");
}

#[tokio::test]
async fn projection_decodes_only_asked_properties() {
    let (_dir, store) = temp_store();
    store.create_table("t").await.unwrap();
    store
        .write("t", WriteOp::Insert(employee("p", "r", "Ann", 30)))
        .await
        .unwrap();
    let got = store
        .get("t", &EntityKey::new("p", "r"), Some(&["Age".to_string()]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.properties.len(), 1);
    assert_eq!(int(&got, "Age"), 30);
}

#[tokio::test]
async fn data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = tablegate::store::native::NativeStore::open(dir.path()).unwrap();
        store.create_table("t").await.unwrap();
        store
            .write("t", WriteOp::Insert(employee("p", "r", "Ann", 30)))
            .await
            .unwrap();
        store.create_table("gone").await.unwrap();
        store.drop_table("gone").await.unwrap();
    }
    let store = tablegate::store::native::NativeStore::open(dir.path()).unwrap();
    assert_eq!(store.list_tables().await.unwrap(), vec!["t"]);
    let got = store
        .get("t", &EntityKey::new("p", "r"), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(int(&got, "Age"), 30);
    // Versions keep increasing across a restart.
    let before = got.timestamp;
    let out = store
        .write("t", WriteOp::InsertOrMerge(employee("p", "r", "Ann", 31)))
        .await
        .unwrap();
    assert!(out.timestamp > before);
}
