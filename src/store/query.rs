//! What a read asks for (a key range, a direction, a projection, a page size)
//! and what it gets back (a page and a continuation token).

use std::ops::Bound;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::error::{Result, StoreError};
use crate::model::codec::key::{
    decode_entity_key, encode_entity_key, encode_partition_prefix, prefix_end,
};
use crate::model::{Entity, EntityKey};

/// Entities a page holds unless asked otherwise (the Azure service's page size).
pub const DEFAULT_PAGE_SIZE: usize = 1000;
/// Largest page a caller may ask for.
pub const MAX_PAGE_SIZE: usize = 100_000;

/// Bounds of a range of encoded keys.
pub type EncodedBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The keys a query visits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRange {
    /// Whole partitions whose PartitionKey lies in the bounds; both unbounded is a table scan.
    Partitions {
        from: Bound<String>,
        to: Bound<String>,
    },
    /// The entities of one partition whose RowKey lies in the bounds;
    /// both unbounded is a partition scan.
    Rows {
        partition_key: String,
        from: Bound<String>,
        to: Bound<String>,
    },
}

/// A read of a key range, in key order or reversed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub range: KeyRange,
    pub reverse: bool,
    /// Properties to decode; `None` decodes all of them.
    pub projection: Option<Vec<String>>,
    /// Most entities in one page.
    pub page_size: usize,
}

impl Query {
    pub fn new(range: KeyRange) -> Self {
        Query {
            range,
            reverse: false,
            projection: None,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// Every entity of the table.
    pub fn table() -> Self {
        Query::new(KeyRange::Partitions {
            from: Bound::Unbounded,
            to: Bound::Unbounded,
        })
    }

    /// Every entity of one partition.
    pub fn partition(partition_key: impl Into<String>) -> Self {
        Query::rows(partition_key, Bound::Unbounded, Bound::Unbounded)
    }

    /// The entities of one partition with a RowKey in `from..to`.
    pub fn rows(partition_key: impl Into<String>, from: Bound<String>, to: Bound<String>) -> Self {
        Query::new(KeyRange::Rows {
            partition_key: partition_key.into(),
            from,
            to,
        })
    }

    pub fn reversed(mut self) -> Self {
        self.reverse = true;
        self
    }

    pub fn project(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.projection = Some(names.into_iter().map(Into::into).collect());
        self
    }

    pub fn page_size(mut self, n: usize) -> Self {
        self.page_size = n;
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.page_size == 0 || self.page_size > MAX_PAGE_SIZE {
            return Err(StoreError::InvalidQuery(format!(
                "page size {} is outside 1..={MAX_PAGE_SIZE}",
                self.page_size
            )));
        }
        Ok(())
    }

    /// The bounds of the encoded keys this query visits, narrowed to resume at
    /// a continuation token.
    pub fn encoded_bounds(&self, continuation: Option<&Continuation>) -> Result<EncodedBounds> {
        let (lower, upper) = self.range.encoded_bounds();
        let Some(token) = continuation else {
            return Ok((lower, upper));
        };
        let next = token.decode()?;
        let next = encode_entity_key(&next.partition_key, &next.row_key);
        if !bounds_contain(&lower, &upper, &next) {
            return Err(StoreError::InvalidContinuation(
                "the token does not belong to this query's key range".into(),
            ));
        }
        Ok(if self.reverse {
            (lower, Bound::Included(next))
        } else {
            (Bound::Included(next), upper)
        })
    }
}

impl KeyRange {
    /// The range of encoded entity keys (see [`crate::model::codec::key`]).
    pub fn encoded_bounds(&self) -> EncodedBounds {
        match self {
            KeyRange::Partitions { from, to } => {
                let lower = match from {
                    Bound::Included(pk) => Bound::Included(encode_partition_prefix(pk)),
                    Bound::Excluded(pk) => {
                        Bound::Included(prefix_end(&encode_partition_prefix(pk)))
                    }
                    Bound::Unbounded => Bound::Unbounded,
                };
                let upper = match to {
                    Bound::Included(pk) => {
                        Bound::Excluded(prefix_end(&encode_partition_prefix(pk)))
                    }
                    Bound::Excluded(pk) => Bound::Excluded(encode_partition_prefix(pk)),
                    Bound::Unbounded => Bound::Unbounded,
                };
                (lower, upper)
            }
            KeyRange::Rows {
                partition_key,
                from,
                to,
            } => {
                let prefix = encode_partition_prefix(partition_key);
                let lower = match from {
                    Bound::Included(rk) => Bound::Included(encode_entity_key(partition_key, rk)),
                    Bound::Excluded(rk) => Bound::Excluded(encode_entity_key(partition_key, rk)),
                    Bound::Unbounded => Bound::Included(prefix.clone()),
                };
                let upper = match to {
                    Bound::Included(rk) => Bound::Included(encode_entity_key(partition_key, rk)),
                    Bound::Excluded(rk) => Bound::Excluded(encode_entity_key(partition_key, rk)),
                    Bound::Unbounded => Bound::Excluded(prefix_end(&prefix)),
                };
                (lower, upper)
            }
        }
    }
}

/// Whether an encoded key lies within bounds.
pub fn bounds_contain(lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    let above = match lower {
        Bound::Included(l) => key >= l.as_slice(),
        Bound::Excluded(l) => key > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match upper {
        Bound::Included(u) => key <= u.as_slice(),
        Bound::Excluded(u) => key < u.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// An opaque token that resumes a query where the previous page stopped.
/// It holds the key of the next entity to return, like the Azure service's
/// `NextPartitionKey` / `NextRowKey`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Continuation(String);

const TOKEN_VERSION: u8 = 1;
const REMOTE_TOKEN_VERSION: u8 = 2;

impl Continuation {
    pub fn to_next(key: &EntityKey) -> Self {
        let mut bytes = vec![TOKEN_VERSION];
        bytes.extend(encode_entity_key(&key.partition_key, &key.row_key));
        Continuation(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// A token of a remote service's own continuation: the
    /// `NextPartitionKey` and `NextRowKey` it answered, opaque to us.
    pub fn remote(next_partition_key: &str, next_row_key: &str) -> Self {
        let mut bytes = vec![REMOTE_TOKEN_VERSION];
        bytes.extend(encode_entity_key(next_partition_key, next_row_key));
        Continuation(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// The service's `NextPartitionKey` and `NextRowKey` of a [`Continuation::remote`] token.
    pub fn decode_remote(&self) -> Result<(String, String)> {
        let invalid = |why: &str| StoreError::InvalidContinuation(why.into());
        let bytes = URL_SAFE_NO_PAD
            .decode(&self.0)
            .map_err(|_| invalid("not base64url"))?;
        match bytes.split_first() {
            Some((&REMOTE_TOKEN_VERSION, key)) => {
                decode_entity_key(key).map_err(|_| invalid("malformed service token"))
            }
            _ => Err(invalid("not a token of this service")),
        }
    }

    /// Accepts a token a client sent back; it is checked when used.
    pub fn from_token(token: impl Into<String>) -> Self {
        Continuation(token.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of the next entity to return.
    pub fn decode(&self) -> Result<EntityKey> {
        let invalid = |why: &str| StoreError::InvalidContinuation(why.into());
        let bytes = URL_SAFE_NO_PAD
            .decode(&self.0)
            .map_err(|_| invalid("not base64url"))?;
        match bytes.split_first() {
            Some((&TOKEN_VERSION, key)) => {
                let (pk, rk) = decode_entity_key(key).map_err(|_| invalid("malformed key"))?;
                Ok(EntityKey::new(pk, rk))
            }
            _ => Err(invalid("unknown token version")),
        }
    }
}

/// One page of a query's results.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub entities: Vec<Entity>,
    /// Present when more entities may follow.
    pub continuation: Option<Continuation>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn token_round_trip() {
        let key = EntityKey::new("Sales", "0001\u{0}x");
        assert_eq!(Continuation::to_next(&key).decode().unwrap(), key);
    }

    #[test]
    fn token_outside_the_range_is_refused() {
        let q = Query::partition("a");
        let foreign = Continuation::to_next(&EntityKey::new("b", "1"));
        assert!(matches!(
            q.encoded_bounds(Some(&foreign)),
            Err(StoreError::InvalidContinuation(_))
        ));
        let own = Continuation::to_next(&EntityKey::new("a", "1"));
        assert!(q.encoded_bounds(Some(&own)).is_ok());
    }

    proptest! {
        #[test]
        fn forged_tokens_are_errors_not_panics(s in ".{0,64}") {
            let _ = Continuation::from_token(s).decode();
        }

        #[test]
        fn forged_token_bytes_are_errors_not_panics(b in proptest::collection::vec(any::<u8>(), 0..48)) {
            let _ = Continuation::from_token(URL_SAFE_NO_PAD.encode(b)).decode();
        }
    }
}
