//! Rows in their stored form, many in two buffers: each row's keys, ETag and
//! Timestamp, and its properties as an encoded record (see
//! `model::codec::record`). Scans read pages into [`EncodedRows`] and copy
//! the values they need straight into their output, with no [`Entity`]
//! (and its map of owned names and values) per row.

use std::borrow::Cow;

use crate::model::codec::record::{decode_record, encode_record_into, RecordHeader};
use crate::model::codec::CodecError;
use crate::model::{DateTime, ETag, Entity, EntityKey, Value};

/// A row's ETag as a read gives it: its text, or the version number it
/// names, made into text only when asked (most reads never ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowETag<'a> {
    None,
    Text(&'a str),
    Version(u64),
}

impl<'a> RowETag<'a> {
    pub fn text(self) -> Option<Cow<'a, str>> {
        match self {
            RowETag::None => None,
            RowETag::Text(text) => Some(Cow::Borrowed(text)),
            RowETag::Version(version) => Some(Cow::Owned(ETag::of_version(version).0)),
        }
    }
}

/// Where one row's parts lie in its chunk's buffers. Its parts start where
/// the previous row's end (at 0 for the chunk's first row).
#[derive(Debug, Clone, Copy)]
struct Span {
    /// In `text`: PartitionKey, RowKey, then an ETag's text, each ending
    /// where the next starts.
    partition_end: usize,
    row_end: usize,
    etag_end: usize,
    /// In `records`.
    record_end: usize,
    /// The version an ETag names, when the row has no ETag text, or
    /// [`Span::NO_VERSION`].
    version: u64,
    /// The Timestamp's microseconds, or [`Span::NO_TIMESTAMP`].
    timestamp: i64,
}

impl Span {
    /// No version, no Timestamp: values neither ever takes.
    const NO_VERSION: u64 = u64::MAX;
    const NO_TIMESTAMP: i64 = i64::MIN;
}

/// One row of [`EncodedRows`].
#[derive(Debug, Clone, Copy)]
pub struct EncodedRow<'a> {
    pub partition_key: &'a str,
    pub row_key: &'a str,
    pub etag: RowETag<'a>,
    pub timestamp: Option<DateTime>,
    /// The properties, encoded (the header's version is not meaningful
    /// here: `etag` and `timestamp` are the row's own).
    pub record: &'a [u8],
}

/// Rows in one chunk of [`EncodedRows`] (all but the last are full).
const ROWS_PER_CHUNK: usize = 8192;

/// Threads a bulk step over many rows runs on: one a core, up to 4.
pub fn bulk_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Positions `0..len` cut into ranges to work on at once: one per
/// [`bulk_threads`], each of at least `min_rows` positions (one range for
/// fewer). All but the last are whole chunks, so that rows made from each
/// range join those of the range before without a copy
/// ([`EncodedRows::append`]).
pub fn bulk_ranges(len: usize, min_rows: usize) -> Vec<std::ops::Range<usize>> {
    let threads = bulk_threads().min(len / min_rows.max(1)).max(1);
    let per_range = len
        .div_ceil(threads)
        .max(1)
        .next_multiple_of(ROWS_PER_CHUNK);
    (0..len)
        .step_by(per_range)
        .map(|start| start..len.min(start + per_range))
        .collect()
}

/// Runs `work` on each item, each on a thread of its own (one item on the
/// caller's: no thread to start for small work), and returns the results
/// in the items' order; a thread's panic goes on in the caller.
pub fn on_threads<I: Send, T: Send>(
    items: impl IntoIterator<Item = I>,
    work: impl Fn(I) -> T + Sync,
) -> Vec<T> {
    let mut items = items.into_iter().peekable();
    let first = items.next();
    if items.peek().is_none() {
        return first.map(&work).into_iter().collect();
    }
    let work = &work;
    std::thread::scope(|scope| {
        let threads: Vec<_> = first
            .into_iter()
            .chain(items)
            .map(|item| scope.spawn(move || work(item)))
            .collect();
        threads
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Rows read from a store, in read order. They are held in chunks of a
/// fixed number of rows, so that many rows (a COPY holds all of its rows
/// until it commits) grow by new chunks rather than by copying all
/// buffers into larger ones.
#[derive(Debug, Clone)]
pub struct EncodedRows {
    chunks: Vec<Chunk>,
}

#[derive(Debug, Clone, Default)]
struct Chunk {
    text: String,
    records: Vec<u8>,
    spans: Vec<Span>,
}

impl Default for EncodedRows {
    fn default() -> Self {
        EncodedRows {
            chunks: vec![Chunk::default()],
        }
    }
}

impl EncodedRows {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        (self.chunks.len() - 1) * ROWS_PER_CHUNK + self.last().spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the rows' buffers take.
    pub fn allocated_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| {
                c.text.capacity()
                    + c.records.capacity()
                    + c.spans.capacity() * std::mem::size_of::<Span>()
            })
            .sum()
    }

    /// Empties the rows, keeping the first chunk's buffers.
    pub fn clear(&mut self) {
        self.chunks.truncate(1);
        let chunk = &mut self.chunks[0];
        chunk.text.clear();
        chunk.records.clear();
        chunk.spans.clear();
    }

    fn last(&self) -> &Chunk {
        self.chunks.last().expect("rows have a chunk")
    }

    /// The chunk the next row goes to.
    fn open_chunk(&mut self) -> &mut Chunk {
        if self.last().spans.len() == ROWS_PER_CHUNK {
            self.chunks.push(Chunk::default());
        }
        self.chunks.last_mut().expect("rows have a chunk")
    }

    /// Moves `other`'s rows after these.
    pub fn append(&mut self, mut other: EncodedRows) {
        if self.is_empty() {
            *self = other;
        } else if self.last().spans.len() == ROWS_PER_CHUNK {
            self.chunks.append(&mut other.chunks);
        } else {
            for row in other.iter() {
                self.push(
                    (row.partition_key, row.row_key),
                    row.etag,
                    row.timestamp,
                    row.record,
                );
            }
        }
    }

    /// Makes room in the open chunk for up to `rows` more rows the size of
    /// the last one, so that its buffers do not grow by copying as they
    /// fill.
    pub fn reserve_like_last(&mut self, rows: usize) {
        let chunk = self.chunks.last_mut().expect("rows have a chunk");
        let Some(last) = chunk.spans.len().checked_sub(1) else {
            return;
        };
        let last = chunk.get(last);
        let (text, record) = (
            last.partition_key.len() + last.row_key.len(),
            last.record.len(),
        );
        self.reserve(rows, rows * text, rows * record);
    }

    /// Makes room in the open chunk for `rows` more rows (as many of them
    /// as the chunk has room for) whose keys and records are about `text`
    /// and `records` bytes in all, so that its buffers do not grow by
    /// copying as they fill.
    pub fn reserve(&mut self, rows: usize, text: usize, records: usize) {
        let chunk = self.chunks.last_mut().expect("rows have a chunk");
        let room = ROWS_PER_CHUNK - chunk.spans.len();
        let share = |bytes: usize| {
            if rows <= room {
                bytes
            } else {
                bytes / rows * room
            }
        };
        chunk.text.reserve(share(text));
        chunk.records.reserve(share(records));
        chunk.spans.reserve(rows.min(room));
    }

    /// Appends a row whose record is already encoded.
    pub fn push(
        &mut self,
        key: (&str, &str),
        etag: RowETag,
        timestamp: Option<DateTime>,
        record: &[u8],
    ) {
        let chunk = self.open_chunk();
        chunk.records.extend_from_slice(record);
        chunk.push_span(key, etag, timestamp);
    }

    /// Appends an entity, encoding its properties (with its billed size).
    pub fn push_entity(&mut self, entity: &Entity) {
        self.push_entity_of_size(entity, entity.billed_size());
    }

    /// [`EncodedRows::push_entity`] when the billed size is known.
    pub fn push_entity_of_size(&mut self, entity: &Entity, billed_size: usize) {
        let etag = entity
            .etag
            .as_ref()
            .map_or(RowETag::None, |e| RowETag::Text(&e.0));
        self.push_parts(
            &entity.key,
            etag,
            entity.timestamp,
            billed_size,
            entity.property_refs(),
        );
    }

    /// Appends a new row given by its key and its properties (in name
    /// order), of the given billed size.
    pub fn push_new<'a>(
        &mut self,
        key: &EntityKey,
        billed_size: usize,
        properties: impl Iterator<Item = (&'a str, &'a Value)>,
    ) {
        self.push_parts(key, RowETag::None, None, billed_size, properties);
    }

    fn push_parts<'a>(
        &mut self,
        key: &EntityKey,
        etag: RowETag,
        timestamp: Option<DateTime>,
        billed_size: usize,
        properties: impl Iterator<Item = (&'a str, &'a Value)>,
    ) {
        let chunk = self.open_chunk();
        let header = RecordHeader {
            version: 0,
            billed_size: u32::try_from(billed_size).unwrap_or(u32::MAX),
        };
        encode_record_into(&mut chunk.records, header, properties);
        chunk.push_span((&key.partition_key, &key.row_key), etag, timestamp);
    }

    /// Appends entities; returns how many.
    pub fn push_entities(&mut self, entities: &[Entity]) -> usize {
        for entity in entities {
            self.push_entity(entity);
        }
        entities.len()
    }

    pub fn get(&self, i: usize) -> EncodedRow<'_> {
        self.chunks[i / ROWS_PER_CHUNK].get(i % ROWS_PER_CHUNK)
    }

    pub fn iter(&self) -> impl Iterator<Item = EncodedRow<'_>> + '_ {
        self.chunks
            .iter()
            .flat_map(|chunk| (0..chunk.spans.len()).map(|i| chunk.get(i)))
    }

    /// Row `i` as an entity, with only the projected properties.
    pub fn entity(&self, i: usize, projection: Option<&[String]>) -> Result<Entity, CodecError> {
        let row = self.get(i);
        let (_, properties) = decode_record(row.record, projection)?;
        Ok(Entity {
            key: EntityKey::new(row.partition_key, row.row_key),
            properties,
            timestamp: row.timestamp,
            etag: row.etag.text().map(|e| ETag(e.into_owned())),
        })
    }
}

impl Chunk {
    /// Records the row whose record was just appended.
    fn push_span(
        &mut self,
        (partition_key, row_key): (&str, &str),
        etag: RowETag,
        timestamp: Option<DateTime>,
    ) {
        self.text.push_str(partition_key);
        let partition_end = self.text.len();
        self.text.push_str(row_key);
        let row_end = self.text.len();
        let version = match etag {
            RowETag::None => Span::NO_VERSION,
            RowETag::Text(text) => {
                self.text.push_str(text);
                Span::NO_VERSION
            }
            RowETag::Version(version) => version,
        };
        self.spans.push(Span {
            partition_end,
            row_end,
            etag_end: self.text.len(),
            record_end: self.records.len(),
            version,
            timestamp: timestamp.map_or(Span::NO_TIMESTAMP, |t| t.0),
        });
    }

    fn get(&self, i: usize) -> EncodedRow<'_> {
        let s = self.spans[i];
        let (text_start, record_start) = match i.checked_sub(1) {
            Some(previous) => (
                self.spans[previous].etag_end,
                self.spans[previous].record_end,
            ),
            None => (0, 0),
        };
        let etag = match s.version {
            Span::NO_VERSION if s.row_end == s.etag_end => RowETag::None,
            Span::NO_VERSION => RowETag::Text(&self.text[s.row_end..s.etag_end]),
            version => RowETag::Version(version),
        };
        EncodedRow {
            partition_key: &self.text[text_start..s.partition_end],
            row_key: &self.text[s.partition_end..s.row_end],
            etag,
            timestamp: (s.timestamp != Span::NO_TIMESTAMP).then_some(DateTime(s.timestamp)),
            record: &self.records[record_start..s.record_end],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_ranges_cover_every_position_in_whole_chunks() {
        assert!(bulk_ranges(0, 10).is_empty());
        for (len, min_rows) in [(1, 10), (5_000, 10), (100_000, 1), (250_000, 100_000)] {
            let ranges = bulk_ranges(len, min_rows);
            assert!(ranges.len() <= bulk_threads().min(len / min_rows).max(1));
            assert_eq!(ranges.first().map(|r| r.start), Some(0));
            assert_eq!(ranges.last().map(|r| r.end), Some(len));
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
                assert_eq!(pair[0].len() % ROWS_PER_CHUNK, 0);
            }
        }
    }
    use crate::model::Value;

    #[test]
    fn entities_round_trip_with_their_keys_tags_and_projection() {
        let mut a = Entity::new("p1", "r1");
        a.properties.insert("x".into(), Value::Int32(7));
        a.properties.insert("y".into(), Value::String("hé".into()));
        a.etag = Some(ETag("W/\"3\"".into()));
        a.timestamp = Some(DateTime(3));
        let b = Entity::new("", "r2");
        let mut rows = EncodedRows::new();
        rows.push_entity(&a);
        rows.push_entity(&b);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows.entity(0, None).unwrap(), a);
        assert_eq!(rows.entity(1, None).unwrap(), b);
        assert_eq!(rows.get(1).etag, RowETag::None);
        rows.push(("p", "r"), RowETag::Version(9), None, &[]);
        assert_eq!(rows.get(2).etag.text().as_deref(), Some("W/\"9\""));
        let projected = rows.entity(0, Some(&["y".to_owned()])).unwrap();
        assert_eq!(projected.properties.len(), 1);
        assert_eq!(projected.properties["y"], Value::String("hé".into()));
        rows.clear();
        assert!(rows.is_empty());
    }

    fn numbered(from: usize, to: usize) -> EncodedRows {
        let mut rows = EncodedRows::new();
        for i in from..to {
            rows.push(
                ("p", &format!("{i:06}")),
                RowETag::Version(i as u64),
                None,
                &[i as u8],
            );
        }
        rows
    }

    fn check_numbered(rows: &EncodedRows, to: usize) {
        assert_eq!(rows.len(), to);
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row.row_key, format!("{i:06}"));
            assert_eq!(row.record, &[i as u8]);
            assert_eq!(rows.get(i).etag, RowETag::Version(i as u64));
        }
    }

    #[test]
    fn many_rows_span_chunks_and_append_in_order() {
        let mut rows = numbered(0, 2 * ROWS_PER_CHUNK + 5);
        check_numbered(&rows, 2 * ROWS_PER_CHUNK + 5);
        // After a partly filled chunk, rows are copied in.
        rows.append(numbered(2 * ROWS_PER_CHUNK + 5, 3 * ROWS_PER_CHUNK));
        check_numbered(&rows, 3 * ROWS_PER_CHUNK);
        // After a full chunk, the chunks are moved in.
        rows.append(numbered(3 * ROWS_PER_CHUNK, 4 * ROWS_PER_CHUNK + 1));
        check_numbered(&rows, 4 * ROWS_PER_CHUNK + 1);
        rows.append(EncodedRows::new());
        check_numbered(&rows, 4 * ROWS_PER_CHUNK + 1);
        let mut empty = EncodedRows::new();
        empty.append(numbered(0, 3));
        check_numbered(&empty, 3);
        rows.clear();
        assert!(rows.is_empty());
        rows.push(("p", "000000"), RowETag::Version(0), None, &[0]);
        check_numbered(&rows, 1);
    }
}
