//! Sequences: named counters that hand out unique values (`nextval`), kept
//! in the catalog's system table.
//!
//! Values are handed out from memory. The stored state runs ahead of them by
//! [`LOGGED_AHEAD`] steps, as PostgreSQL logs its sequences ahead: a value is
//! never handed out twice, even after a crash, and a crash skips at most
//! that many values. [`Sequences::persist`] writes the state ahead when the
//! values handed out reach it; the SQL layer calls it before committing any
//! write that may hold one of them. At a clean stop, [`Sequences::close`]
//! stores the last values exactly: as PostgreSQL's, a sequence skips values
//! only after a crash.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

use super::{CatalogError, SqlType, SYSTEM_TABLE};
use crate::model::{Entity, EntityKey, IfMatch, Value};
use crate::store::{query_all, Query, TableStore, WriteOp};

const SEQUENCES_PARTITION: &str = "sequences";
const DEFINITION: &str = "definition";
/// The last value handed out (or that the next one starts after).
const LOGGED: &str = "logged";

/// Values the stored state runs ahead of the last one handed out.
pub const LOGGED_AHEAD: i64 = 32;

/// What CREATE SEQUENCE declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceDef {
    pub name: String,
    /// smallint, integer or bigint.
    pub ty: SqlType,
    pub start: i64,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub cycle: bool,
    /// The column whose default uses it (`serial`, `OWNED BY`), dropped with
    /// its table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<(String, String)>,
}

impl SequenceDef {
    /// The defaults of `CREATE SEQUENCE name [AS ty]`.
    pub fn new(name: &str, ty: SqlType) -> Self {
        SequenceDef {
            name: name.to_owned(),
            ty,
            start: 1,
            increment: 1,
            min: 1,
            max: Self::type_max(ty),
            cycle: false,
            owned_by: None,
        }
    }

    pub fn type_max(ty: SqlType) -> i64 {
        match ty {
            SqlType::Int2 => i64::from(i16::MAX),
            SqlType::Int4 => i64::from(i32::MAX),
            _ => i64::MAX,
        }
    }

    pub fn type_min(ty: SqlType) -> i64 {
        match ty {
            SqlType::Int2 => i64::from(i16::MIN),
            SqlType::Int4 => i64::from(i32::MIN),
            _ => i64::MIN,
        }
    }

    /// Checks the bounds, as CREATE SEQUENCE does.
    pub fn check(&self) -> Result<(), CatalogError> {
        let invalid = |m: String| Err(CatalogError::InvalidSequence(m));
        if self.increment == 0 {
            return invalid("INCREMENT must not be zero".into());
        }
        if self.min >= self.max {
            return invalid(format!(
                "MINVALUE ({}) must be less than MAXVALUE ({})",
                self.min, self.max
            ));
        }
        if self.min < Self::type_min(self.ty) || self.max > Self::type_max(self.ty) {
            return invalid(format!(
                "MINVALUE and MAXVALUE must fit type {}",
                self.ty.pg_name()
            ));
        }
        if self.start < self.min || self.start > self.max {
            return invalid(format!(
                "START value ({}) cannot be outside MINVALUE ({}) and MAXVALUE ({})",
                self.start, self.min, self.max
            ));
        }
        Ok(())
    }
}

/// A sequence without a value to give: `nextval` past its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nextval: reached {bound} value of sequence {name:?} ({value})")]
pub struct SequenceExhausted {
    pub name: String,
    pub bound: &'static str,
    pub value: i64,
}

/// Why `nextval` gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NextvalError {
    #[error(transparent)]
    Exhausted(#[from] SequenceExhausted),
    #[error("nextval: the server is shutting down")]
    ShuttingDown,
}

impl NextvalError {
    pub fn sqlstate(&self) -> &'static str {
        match self {
            NextvalError::Exhausted(_) => "2200H",
            NextvalError::ShuttingDown => "57P01",
        }
    }
}

#[derive(Debug)]
struct State {
    /// The last value handed out; `None` before the first `nextval`.
    last: Option<i64>,
    /// The last value the stored state covers.
    logged: Option<i64>,
}

/// A sequence and its state.
#[derive(Debug)]
pub struct Sequence {
    pub def: SequenceDef,
    state: Mutex<State>,
}

impl Sequence {
    /// The last value handed out or set, and whether there was one (a
    /// sequence read as a relation, `SELECT last_value, is_called FROM s`
    /// as pg_dump does, shows its start and false before its first value).
    pub fn last_value(&self) -> (i64, bool) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.last {
            Some(last) => (last, true),
            None => (self.def.start, false),
        }
    }

    /// The value after `value`, or the start; `None` past the bounds without CYCLE.
    fn step(&self, value: Option<i64>) -> Result<i64, SequenceExhausted> {
        let d = &self.def;
        let Some(value) = value else {
            return Ok(d.start);
        };
        match value.checked_add(d.increment) {
            Some(next) if next >= d.min && next <= d.max => Ok(next),
            _ if d.cycle => Ok(if d.increment > 0 { d.min } else { d.max }),
            _ => Err(SequenceExhausted {
                name: d.name.clone(),
                bound: if d.increment > 0 {
                    "maximum"
                } else {
                    "minimum"
                },
                value: if d.increment > 0 { d.max } else { d.min },
            }),
        }
    }

    /// Whether `value` comes after `than` in the sequence's direction.
    fn beyond(&self, value: i64, than: Option<i64>) -> bool {
        match than {
            None => true,
            Some(than) if self.def.increment > 0 => value > than,
            Some(than) => value < than,
        }
    }
}

/// Every sequence, by name.
pub struct Sequences {
    store: Arc<dyn TableStore>,
    all: RwLock<HashMap<String, Arc<Sequence>>>,
    /// Set when some sequence handed out a value its stored state does not cover.
    behind: AtomicBool,
    /// Set by [`Sequences::close`]: no value is handed out after it.
    closed: AtomicBool,
}

fn entity(def: &SequenceDef, logged: Option<i64>) -> Result<Entity, CatalogError> {
    let text =
        serde_json::to_string(def).map_err(|e| CatalogError::InvalidDefinition(e.to_string()))?;
    let mut entity =
        Entity::new(SEQUENCES_PARTITION, def.name.clone()).with(DEFINITION, Value::Json(text));
    if let Some(logged) = logged {
        entity = entity.with(LOGGED, Value::Int64(logged));
    }
    Ok(entity)
}

impl Sequences {
    pub(super) async fn open(store: Arc<dyn TableStore>) -> Result<Self, CatalogError> {
        let mut all = HashMap::new();
        let query = Query::partition(SEQUENCES_PARTITION);
        for e in query_all(&*store, SYSTEM_TABLE, &query).await? {
            let Some(Value::Json(text)) = e.get(DEFINITION) else {
                return Err(CatalogError::InvalidDefinition(format!(
                    "sequence entry {} has no definition",
                    e.key
                )));
            };
            let def: SequenceDef = serde_json::from_str(text).map_err(|err| {
                CatalogError::InvalidDefinition(format!("sequence entry {}: {err}", e.key))
            })?;
            // After a restart the values up to the logged one may have been
            // handed out: the next one comes after it.
            let logged = match e.get(LOGGED) {
                Some(Value::Int64(v)) => Some(*v),
                _ => None,
            };
            let sequence = Sequence {
                def,
                state: Mutex::new(State {
                    last: logged,
                    logged,
                }),
            };
            all.insert(sequence.def.name.clone(), Arc::new(sequence));
        }
        Ok(Sequences {
            store,
            all: RwLock::new(all),
            behind: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        })
    }

    pub fn get(&self, name: &str) -> Option<Arc<Sequence>> {
        self.all
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// All sequences, by name.
    pub fn list(&self) -> Vec<Arc<Sequence>> {
        let mut all: Vec<_> = self
            .all
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.def.name.cmp(&b.def.name));
        all
    }

    pub async fn create(&self, def: SequenceDef) -> Result<(), CatalogError> {
        def.check()?;
        if self.get(&def.name).is_some() {
            return Err(CatalogError::TableExists(def.name));
        }
        self.store
            .write_atomic(vec![(
                SYSTEM_TABLE.to_owned(),
                WriteOp::Insert(entity(&def, None)?),
            )])
            .await
            .map_err(|e| match e.root() {
                crate::store::StoreError::EntityAlreadyExists { .. } => {
                    CatalogError::TableExists(def.name.clone())
                }
                _ => CatalogError::Store(e),
            })?;
        let sequence = Sequence {
            def,
            state: Mutex::new(State {
                last: None,
                logged: None,
            }),
        };
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sequence.def.name.clone(), Arc::new(sequence));
        Ok(())
    }

    /// Replaces a sequence's definition (ALTER SEQUENCE), keeping its state.
    pub async fn alter(&self, def: SequenceDef) -> Result<(), CatalogError> {
        def.check()?;
        let old = self
            .get(&def.name)
            .ok_or_else(|| CatalogError::TableNotFound(def.name.clone()))?;
        let (last, logged) = {
            let state = old.state.lock().unwrap_or_else(|e| e.into_inner());
            (state.last, state.logged)
        };
        self.write(&def, logged).await?;
        let sequence = Sequence {
            def,
            state: Mutex::new(State { last, logged }),
        };
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sequence.def.name.clone(), Arc::new(sequence));
        Ok(())
    }

    pub async fn drop(&self, name: &str) -> Result<(), CatalogError> {
        if self.get(name).is_none() {
            return Err(CatalogError::TableNotFound(name.to_owned()));
        }
        self.store
            .write_atomic(vec![(
                SYSTEM_TABLE.to_owned(),
                WriteOp::Delete {
                    key: EntityKey::new(SEQUENCES_PARTITION, name),
                    if_match: IfMatch::Any,
                },
            )])
            .await?;
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        Ok(())
    }

    /// The sequences a table's columns own.
    pub fn owned_by(&self, table: &str) -> Vec<String> {
        self.list()
            .into_iter()
            .filter(|s| s.def.owned_by.as_ref().is_some_and(|(t, _)| t == table))
            .map(|s| s.def.name.clone())
            .collect()
    }

    /// `nextval`: the next value, handed out once.
    pub fn next(&self, sequence: &Sequence) -> Result<i64, NextvalError> {
        let mut state = sequence.state.lock().unwrap_or_else(|e| e.into_inner());
        // Read under the state's lock, which `close` takes after setting it.
        if self.closed.load(Ordering::Acquire) {
            return Err(NextvalError::ShuttingDown);
        }
        let value = sequence.step(state.last)?;
        state.last = Some(value);
        if sequence.beyond(value, state.logged) {
            self.behind.store(true, Ordering::Release);
        }
        Ok(value)
    }

    /// `setval`: `value` becomes the last value handed out (`called`), or
    /// the next one.
    pub fn set(&self, sequence: &Sequence, value: i64, called: bool) -> Result<(), CatalogError> {
        let d = &sequence.def;
        if value < d.min || value > d.max {
            return Err(CatalogError::InvalidSequence(format!(
                "setval: value {value} is out of bounds for sequence {:?} ({}..{})",
                d.name, d.min, d.max
            )));
        }
        let mut state = sequence.state.lock().unwrap_or_else(|e| e.into_inner());
        state.last = if called {
            Some(value)
        } else {
            value.checked_sub(d.increment)
        };
        // The stored state is rewritten from the new position.
        state.logged = None;
        self.behind.store(true, Ordering::Release);
        Ok(())
    }

    async fn write(&self, def: &SequenceDef, logged: Option<i64>) -> Result<(), CatalogError> {
        self.store
            .write_atomic(vec![(
                SYSTEM_TABLE.to_owned(),
                WriteOp::InsertOrReplace(entity(def, logged)?),
            )])
            .await?;
        Ok(())
    }

    /// Stores the state of every sequence whose values handed out run past
    /// it, [`LOGGED_AHEAD`] steps ahead. Cheap when none does.
    pub async fn persist(&self) -> Result<(), CatalogError> {
        if !self.behind.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        for sequence in self.list() {
            let ahead = {
                let state = sequence.state.lock().unwrap_or_else(|e| e.into_inner());
                let Some(last) = state.last else { continue };
                if !sequence.beyond(last, state.logged) && state.logged.is_some() {
                    continue;
                }
                let d = &sequence.def;
                let step = d.increment.saturating_mul(LOGGED_AHEAD);
                last.saturating_add(step).clamp(d.min, d.max)
            };
            if let Err(e) = self.write(&sequence.def, Some(ahead)).await {
                self.behind.store(true, Ordering::Release);
                return Err(e);
            }
            let mut state = sequence.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.logged.is_none_or(|l| sequence.beyond(ahead, Some(l))) {
                state.logged = Some(ahead);
            }
        }
        Ok(())
    }

    /// At a clean stop: stores each sequence's last value handed out, so
    /// that a restart goes on right after it, and hands out no value after
    /// this. A value handed out before is in the state `close` reads: it
    /// takes each state's lock after setting `closed`.
    pub async fn close(&self) -> Result<(), CatalogError> {
        self.closed.store(true, Ordering::Release);
        for sequence in self.list() {
            let (last, logged) = {
                let state = sequence.state.lock().unwrap_or_else(|e| e.into_inner());
                (state.last, state.logged)
            };
            // Without a last value, what is stored stays.
            if last.is_some() && last != logged {
                self.write(&sequence.def, last).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::native::NativeStore;

    async fn open(dir: &std::path::Path) -> (Arc<dyn TableStore>, Sequences) {
        let store: Arc<dyn TableStore> = Arc::new(NativeStore::open(dir).unwrap());
        let _ = store.create_table(SYSTEM_TABLE).await;
        let sequences = Sequences::open(store.clone()).await.unwrap();
        (store, sequences)
    }

    #[tokio::test]
    async fn values_are_not_handed_out_twice_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (_store, sequences) = open(dir.path()).await;
            sequences
                .create(SequenceDef::new("s", SqlType::Int8))
                .await
                .unwrap();
            let s = sequences.get("s").unwrap();
            let values: Vec<i64> = (0..5).map(|_| sequences.next(&s).unwrap()).collect();
            assert_eq!(values, [1, 2, 3, 4, 5]);
            sequences.persist().await.unwrap();
            // Values past the logged ones need another write; these are
            // within them.
            assert!(!sequences.behind.load(Ordering::Acquire));
            assert_eq!(sequences.next(&s).unwrap(), 6);
        }
        let (_store, sequences) = open(dir.path()).await;
        let s = sequences.get("s").unwrap();
        // The restart skips the values logged ahead, never goes back.
        assert_eq!(sequences.next(&s).unwrap(), 5 + LOGGED_AHEAD + 1);
    }

    #[tokio::test]
    async fn a_clean_stop_goes_on_from_the_last_value() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (_store, sequences) = open(dir.path()).await;
            for name in ["s", "unused"] {
                sequences
                    .create(SequenceDef::new(name, SqlType::Int8))
                    .await
                    .unwrap();
            }
            let s = sequences.get("s").unwrap();
            for _ in 0..3 {
                sequences.next(&s).unwrap();
            }
            sequences.persist().await.unwrap();
            sequences.close().await.unwrap();
            assert_eq!(sequences.next(&s), Err(NextvalError::ShuttingDown));
        }
        let (_store, sequences) = open(dir.path()).await;
        let s = sequences.get("s").unwrap();
        assert_eq!(sequences.next(&s).unwrap(), 4);
        let unused = sequences.get("unused").unwrap();
        assert_eq!(sequences.next(&unused).unwrap(), 1);
    }

    #[tokio::test]
    async fn bounds_cycles_and_setval() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, sequences) = open(dir.path()).await;
        let mut def = SequenceDef::new("down", SqlType::Int2);
        (def.increment, def.min, def.max, def.start, def.cycle) = (-5, -7, 3, 3, true);
        sequences.create(def).await.unwrap();
        let s = sequences.get("down").unwrap();
        let values: Vec<i64> = (0..4).map(|_| sequences.next(&s).unwrap()).collect();
        assert_eq!(values, [3, -2, -7, 3]);

        let mut def = SequenceDef::new("two", SqlType::Int4);
        def.max = 2;
        sequences.create(def).await.unwrap();
        let s = sequences.get("two").unwrap();
        sequences.set(&s, 1, false).unwrap();
        assert_eq!(sequences.next(&s).unwrap(), 1);
        assert_eq!(sequences.next(&s).unwrap(), 2);
        let Err(NextvalError::Exhausted(exhausted)) = sequences.next(&s) else {
            panic!("a value past the maximum");
        };
        assert_eq!(exhausted.bound, "maximum");
        assert!(sequences.set(&s, 3, true).is_err());

        let mut def = SequenceDef::new("bad", SqlType::Int2);
        def.max = 100_000;
        assert!(matches!(
            sequences.create(def).await,
            Err(CatalogError::InvalidSequence(_))
        ));
    }
}
