//! Order-preserving encoding of key tuples.
//!
//! Each element is written with `0x00` escaped as `0x00 0xFF` and ended by the
//! terminator `0x00 0x01`. No element can contain an unescaped terminator, so
//! the encoding is unambiguous whatever bytes a key holds, and comparing two
//! encodings byte by byte compares the tuples element by element:
//! a terminator (`0x00 0x01`) sorts below an escaped zero (`0x00 0xFF`) and
//! below every other byte, so a shorter element sorts first, as in plain
//! string order.
//!
//! An entity key is the tuple `(PartitionKey, RowKey)`; a partition's entities
//! all start with the encoding of the 1-tuple `(PartitionKey)`.

use super::CodecError;

const ESCAPE: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xFF;
const TERMINATOR: u8 = 0x01;

/// Appends one element of a tuple.
pub fn push_element(out: &mut Vec<u8>, element: &str) {
    for &b in element.as_bytes() {
        out.push(b);
        if b == ESCAPE {
            out.push(ESCAPED_ZERO);
        }
    }
    out.extend_from_slice(&[ESCAPE, TERMINATOR]);
}

/// The encoding of `(partition_key, row_key)`.
pub fn encode_entity_key(partition_key: &str, row_key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(partition_key.len() + row_key.len() + 4);
    push_element(&mut out, partition_key);
    push_element(&mut out, row_key);
    out
}

/// The encoding of `(partition_key)`: the prefix of every entity key of the partition.
pub fn encode_partition_prefix(partition_key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(partition_key.len() + 2);
    push_element(&mut out, partition_key);
    out
}

/// The smallest encoding above every key with the given prefix (the prefix
/// ends with a terminator, whose last byte becomes the next value).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// Reads one element starting at `*pos`, advancing past its terminator.
fn read_element(bytes: &[u8], pos: &mut usize) -> Result<String, CodecError> {
    let mut out = Vec::new();
    read_element_into(bytes, pos, &mut out)?;
    String::from_utf8(out).map_err(|_| CodecError::NotUtf8)
}

/// Moves `*pos` past the element starting there.
pub fn skip_element(bytes: &[u8], pos: &mut usize) -> Result<(), CodecError> {
    read_element_bytes(bytes, pos, None)
}

fn read_element_into(bytes: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
    read_element_bytes(bytes, pos, Some(out))
}

/// Reads the element starting at `*pos`, appending its bytes to `out` if
/// given, and advances past its terminator.
fn read_element_bytes(
    bytes: &[u8],
    pos: &mut usize,
    mut out: Option<&mut Vec<u8>>,
) -> Result<(), CodecError> {
    let mut i = *pos;
    loop {
        let rest = bytes.get(i..).ok_or(CodecError::BadKey(i))?;
        let Some(run) = rest.iter().position(|&b| b == ESCAPE) else {
            return Err(CodecError::BadKey(bytes.len()));
        };
        if let Some(out) = out.as_deref_mut() {
            out.extend_from_slice(&rest[..run]);
        }
        i += run;
        match bytes.get(i + 1) {
            Some(&TERMINATOR) => {
                *pos = i + 2;
                return Ok(());
            }
            Some(&ESCAPED_ZERO) => {
                if let Some(out) = out.as_deref_mut() {
                    out.push(0);
                }
                i += 2;
            }
            _ => return Err(CodecError::BadKey(i)),
        }
    }
}

/// Decodes `(partition_key, row_key)`; the input must hold exactly that tuple.
pub fn decode_entity_key(bytes: &[u8]) -> Result<(String, String), CodecError> {
    let (mut pk, mut rk) = (String::new(), String::new());
    decode_entity_key_into(bytes, &mut pk, &mut rk)?;
    Ok((pk, rk))
}

/// Decodes `(partition_key, row_key)` into two buffers, replacing what they
/// held (so that a reader of many keys reuses them).
pub fn decode_entity_key_into(
    bytes: &[u8],
    partition_key: &mut String,
    row_key: &mut String,
) -> Result<(), CodecError> {
    let mut pos = 0;
    read_element_replacing(bytes, &mut pos, partition_key)?;
    decode_row_key_into(bytes, pos, row_key)
}

/// Decodes the row key of an encoded `(partition_key, row_key)` whose
/// partition key's element ends at `row_key_start` (a reader of many keys
/// of one partition decodes its key once), replacing what `row_key` held.
pub fn decode_row_key_into(
    bytes: &[u8],
    row_key_start: usize,
    row_key: &mut String,
) -> Result<(), CodecError> {
    let mut pos = row_key_start;
    read_element_replacing(bytes, &mut pos, row_key)?;
    if pos != bytes.len() {
        return Err(CodecError::BadKey(pos));
    }
    Ok(())
}

/// Reads one element starting at `*pos` into `out`, replacing what it held.
fn read_element_replacing(
    bytes: &[u8],
    pos: &mut usize,
    out: &mut String,
) -> Result<(), CodecError> {
    let mut buffer = std::mem::take(out).into_bytes();
    buffer.clear();
    read_element_into(bytes, pos, &mut buffer)?;
    *out = String::from_utf8(buffer).map_err(|_| CodecError::NotUtf8)?;
    Ok(())
}

/// Decodes a 1-tuple (a partition prefix).
pub fn decode_partition_prefix(bytes: &[u8]) -> Result<String, CodecError> {
    let mut pos = 0;
    let pk = read_element(bytes, &mut pos)?;
    if pos != bytes.len() {
        return Err(CodecError::BadKey(pos));
    }
    Ok(pk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_key() -> impl Strategy<Value = String> {
        // Bias towards the bytes that matter to the escape: 0x00, 0x01, 0xFF-ish
        // code points, and shared prefixes.
        prop_oneof![
            "[a-c\u{0}\u{1}\u{ff}]{0,6}",
            any::<String>(),
            "(ab){0,3}[\u{0}-\u{2}]?",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn byte_order_is_tuple_order(a in (any_key(), any_key()), b in (any_key(), any_key())) {
            let ea = encode_entity_key(&a.0, &a.1);
            let eb = encode_entity_key(&b.0, &b.1);
            prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
        }

        #[test]
        fn decode_inverts_encode(pk in any_key(), rk in any_key()) {
            let e = encode_entity_key(&pk, &rk);
            prop_assert_eq!(decode_entity_key(&e).unwrap(), (pk.clone(), rk));
            prop_assert_eq!(decode_partition_prefix(&encode_partition_prefix(&pk)).unwrap(), pk);
        }

        #[test]
        fn partition_range_holds_exactly_its_entities(pk in any_key(), other in (any_key(), any_key())) {
            let start = encode_partition_prefix(&pk);
            let end = prefix_end(&start);
            let k = encode_entity_key(&other.0, &other.1);
            let inside = start.as_slice() <= k.as_slice() && k.as_slice() < end.as_slice();
            prop_assert_eq!(inside, other.0 == pk);
        }

        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode_entity_key(&bytes);
        }

        #[test]
        fn mutated_keys_are_errors_not_panics(pk in any_key(), rk in any_key(), at in any::<usize>(), byte in any::<u8>()) {
            let mut bytes = encode_entity_key(&pk, &rk);
            let at = at % (bytes.len() + 1);
            if at < bytes.len() && byte % 2 == 0 {
                bytes[at] = byte;
            } else {
                bytes.insert(at, byte);
            }
            let _ = decode_entity_key(&bytes);
            let _ = decode_partition_prefix(&bytes);
        }
    }

    #[test]
    fn terminator_inside_key_is_escaped() {
        let k = encode_entity_key("a\u{0}\u{1}", "");
        assert_eq!(k, vec![b'a', 0, 0xFF, 1, 0, 1, 0, 1]);
        assert_eq!(
            decode_entity_key(&k).unwrap(),
            ("a\u{0}\u{1}".into(), "".into())
        );
    }
}
