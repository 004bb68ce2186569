//! Byte encodings of keys and entities, and their one error type.
//!
//! - [`key`]: an order-preserving encoding of key tuples, so that byte order
//!   of encoded keys equals the order of `(PartitionKey, RowKey)`.
//! - [`record`]: the stored form of an entity's version and properties,
//!   decodable with a projection (unasked properties are skipped, not decoded).

pub mod key;
pub mod record;

/// Bytes that do not decode. Seen only with corrupted storage or forged
/// continuation tokens; never for data the store itself wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    #[error("encoded key is truncated or has a bad escape at byte {0}")]
    BadKey(usize),
    #[error("encoded entity is truncated at byte {0}")]
    Truncated(usize),
    #[error("encoded entity has unknown format version {0}")]
    UnknownFormat(u8),
    #[error("encoded entity has unknown property type tag {0}")]
    UnknownTypeTag(u8),
    #[error("encoded text is not UTF-8")]
    NotUtf8,
    #[error("encoded decimal is out of range")]
    BadDecimal,
}
