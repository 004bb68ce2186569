//! Helpers shared by the integration tests.
#![allow(dead_code)]

use tablegate::model::{Entity, Value};
use tablegate::store::native::NativeStore;

/// A store in a fresh temporary directory (removed when the guard drops).
pub fn temp_store() -> (tempfile::TempDir, NativeStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = NativeStore::open(dir.path()).expect("open store");
    (dir, store)
}

pub fn entity(pk: &str, rk: &str) -> Entity {
    Entity::new(pk, rk)
}

pub fn employee(dept: &str, id: &str, name: &str, age: i32) -> Entity {
    Entity::new(dept, id)
        .with("Name", Value::String(name.into()))
        .with("Age", Value::Int32(age))
}

pub fn int(e: &Entity, name: &str) -> i64 {
    match e.get(name) {
        Some(Value::Int32(v)) => i64::from(*v),
        Some(Value::Int64(v)) => *v,
        other => panic!("{name} is {other:?}"),
    }
}
