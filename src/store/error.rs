use crate::model::codec::CodecError;
use crate::model::{EntityKey, ModelError};

/// An error of the store layer. Messages name the table and key involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("table {0:?} does not exist")]
    TableNotFound(String),
    #[error("table {0:?} already exists")]
    TableAlreadyExists(String),
    #[error("entity {key} does not exist in table {table:?}")]
    EntityNotFound { table: String, key: EntityKey },
    #[error("entity {key} already exists in table {table:?}")]
    EntityAlreadyExists { table: String, key: EntityKey },
    /// The ETag precondition of a conditional write did not hold: the entity
    /// changed since the caller read it.
    #[error("entity {key} in table {table:?} does not match the given ETag (it was changed by another writer)")]
    ConditionNotMet { table: String, key: EntityKey },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("a batch needs at least one operation")]
    BatchEmpty,
    #[error("a batch has {count} operations; the limit is {limit} operations", limit = crate::model::MAX_BATCH_OPERATIONS)]
    BatchTooLarge { count: usize },
    #[error("operation {index} of the batch is for partition {found:?}, but a batch may only touch one partition ({expected:?})")]
    BatchMixedPartitions {
        index: usize,
        expected: String,
        found: String,
    },
    #[error("operation {index} of the batch touches entity {key} again; a batch may have one operation per entity")]
    BatchDuplicateEntity { index: usize, key: EntityKey },
    /// A batch failed as a whole because one of its operations failed.
    #[error("operation {index} of the batch failed, so none was applied: {source}")]
    BatchOperationFailed {
        index: usize,
        source: Box<StoreError>,
    },
    #[error("invalid continuation token: {0}")]
    InvalidContinuation(String),
    #[error("invalid query: {0}")]
    InvalidQuery(String),
    /// Stored bytes that do not decode: corruption, never bad input.
    #[error("stored data is corrupt: {0}")]
    Corrupt(#[from] CodecError),
    /// The storage engine failed (I/O). The store refuses writes afterwards.
    #[error("storage engine error: {0}")]
    Storage(String),
    #[error("the store is shut down")]
    Closed,
    /// A remote service refused or failed a request (after retries, where
    /// it may be retried).
    #[error("the table service failed: {0}")]
    Service(String),
}

impl StoreError {
    /// The error of one operation, unwrapped from a failed batch.
    pub fn root(&self) -> &StoreError {
        match self {
            StoreError::BatchOperationFailed { source, .. } => source.root(),
            other => other,
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
