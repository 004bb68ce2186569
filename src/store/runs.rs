//! The rows of a load too large to hold in memory, in sorted runs on disk.
//!
//! A COPY that outgrows its share of memory sorts the rows it holds by key,
//! writes them to a file of their own (a run) and goes on with empty
//! buffers. At commit the store reads the runs merged in key order (a k-way
//! merge), so that such a load is written as one sorted stream, as a load
//! held in memory is. The files have no name: they go when the runs are
//! dropped, or when the process stops.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{EncodedRow, EncodedRows, Result, RowETag, StoreError};

/// The rows of one table's load: held in memory, or spilled to sorted runs.
#[derive(Debug)]
pub enum LoadRows {
    Held(EncodedRows),
    Spilled(SortedRuns),
}

impl LoadRows {
    pub fn len(&self) -> usize {
        match self {
            LoadRows::Held(rows) => rows.len(),
            LoadRows::Spilled(runs) => runs.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every row, in parts of up to `rows_per_part` rows (for the held
    /// rows, one part), in no particular order across parts.
    pub fn parts(
        &self,
        rows_per_part: usize,
    ) -> Box<dyn Iterator<Item = Result<Cow<'_, EncodedRows>>> + Send + '_> {
        match self {
            LoadRows::Held(rows) => Box::new(std::iter::once(Ok(Cow::Borrowed(rows)))),
            LoadRows::Spilled(runs) => {
                Box::new(runs.parts(rows_per_part).map(|part| part.map(Cow::Owned)))
            }
        }
    }

    /// Calls `f` on each of [`LoadRows::parts`].
    pub fn for_each_part<E: From<StoreError>>(
        &self,
        rows_per_part: usize,
        mut f: impl FnMut(&EncodedRows) -> Result<(), E>,
    ) -> Result<(), E> {
        for part in self.parts(rows_per_part) {
            f(part?.as_ref())?;
        }
        Ok(())
    }
}

impl From<EncodedRows> for LoadRows {
    fn from(rows: EncodedRows) -> Self {
        LoadRows::Held(rows)
    }
}

/// A row's (PartitionKey, RowKey) as byte strings: what orders it as its
/// encoded key does (see `codec::key`).
pub type KeyOrder<'a> = (&'a [u8], &'a [u8]);

pub fn key_order(row: EncodedRow<'_>) -> KeyOrder<'_> {
    (row.partition_key.as_bytes(), row.row_key.as_bytes())
}

/// Rows read back at a time from spilled runs, for work done part by part
/// (index entries, checks).
pub const ROWS_PER_SPILLED_PART: usize = 200_000;

/// A row's (PartitionKey, RowKey).
pub type RowKey<'a> = (&'a str, &'a str);

/// Bytes each run's writer and reader buffer.
const RUN_BUFFER: usize = 256 << 10;

/// Rows in sorted runs, in files of a directory. A clone shares the files.
#[derive(Debug, Clone)]
pub struct SortedRuns {
    dir: PathBuf,
    runs: Vec<Run>,
    rows: usize,
}

#[derive(Debug, Clone)]
struct Run {
    file: Arc<File>,
    rows: usize,
    /// The keys of its first and last rows.
    first: (String, String),
    last: (String, String),
}

fn spill_error(e: std::io::Error) -> StoreError {
    StoreError::Storage(format!("a load's spill file: {e}"))
}

impl SortedRuns {
    /// No runs yet; their files are made in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SortedRuns {
            dir: dir.into(),
            runs: Vec::new(),
            rows: 0,
        }
    }

    /// No runs, with files in the same directory as these.
    pub fn beside(&self) -> SortedRuns {
        SortedRuns::new(self.dir.clone())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rows in all runs.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Sorts `rows` by key and writes them as a new run.
    pub fn add(&mut self, rows: &EncodedRows) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut order: Vec<(KeyOrder, usize)> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| (key_order(row), i))
            .collect();
        order.sort_unstable();
        let file = tempfile::tempfile_in(&self.dir).map_err(spill_error)?;
        let mut out = BufWriter::with_capacity(RUN_BUFFER, file);
        for &(_, i) in &order {
            write_row(&mut out, rows.get(i)).map_err(spill_error)?;
        }
        let file = out.into_inner().map_err(|e| spill_error(e.into_error()))?;
        let key = |i: usize| {
            let row = rows.get(i);
            (row.partition_key.to_owned(), row.row_key.to_owned())
        };
        self.runs.push(Run {
            file: Arc::new(file),
            rows: rows.len(),
            first: key(order[0].1),
            last: key(order[order.len() - 1].1),
        });
        self.rows += rows.len();
        Ok(())
    }

    /// The lowest key of all rows, and the highest.
    pub fn key_span(&self) -> Option<(RowKey<'_>, RowKey<'_>)> {
        fn as_refs((p, r): &(String, String)) -> RowKey<'_> {
            (p, r)
        }
        let first = self.runs.iter().map(|run| as_refs(&run.first)).min()?;
        let last = self.runs.iter().map(|run| as_refs(&run.last)).max()?;
        Some((first, last))
    }

    /// Every row, run after run, in parts of up to `rows_per_part` rows
    /// (in key order within each run only).
    pub fn parts(&self, rows_per_part: usize) -> Parts<'_> {
        Parts {
            runs: self.runs.iter(),
            reader: None,
            rows_per_part: rows_per_part.max(1),
        }
    }

    /// Every row, in key order: two rows of one key come one after the other.
    pub fn merged(&self) -> Result<Merged> {
        let mut readers = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            let mut reader = RunReader::open(run)?;
            if reader.advance()? {
                readers.push(reader);
            }
        }
        let mut merged = Merged {
            heap: (0..readers.len()).collect(),
            readers,
            started: false,
        };
        for i in (0..merged.heap.len() / 2).rev() {
            merged.sift_down(i);
        }
        Ok(merged)
    }
}

/// A row as a run holds it: the lengths of its PartitionKey, RowKey and
/// record, then their bytes.
fn write_row(out: &mut impl Write, row: EncodedRow<'_>) -> std::io::Result<()> {
    for part in [
        row.partition_key.as_bytes(),
        row.row_key.as_bytes(),
        row.record,
    ] {
        let len = u32::try_from(part.len()).map_err(std::io::Error::other)?;
        out.write_all(&len.to_le_bytes())?;
    }
    out.write_all(row.partition_key.as_bytes())?;
    out.write_all(row.row_key.as_bytes())?;
    out.write_all(row.record)
}

/// Reads one run from its start, a row at a time.
struct RunReader {
    input: BufReader<File>,
    left: usize,
    partition_key: String,
    row_key: String,
    record: Vec<u8>,
    bytes: Vec<u8>,
}

impl RunReader {
    fn open(run: &Run) -> Result<Self> {
        let mut file = run.file.try_clone().map_err(spill_error)?;
        file.seek(SeekFrom::Start(0)).map_err(spill_error)?;
        Ok(RunReader {
            input: BufReader::with_capacity(RUN_BUFFER, file),
            left: run.rows,
            partition_key: String::new(),
            row_key: String::new(),
            record: Vec::new(),
            bytes: Vec::new(),
        })
    }

    /// Reads the next row into place; false after the last.
    fn advance(&mut self) -> Result<bool> {
        if self.left == 0 {
            return Ok(false);
        }
        self.left -= 1;
        let mut lengths = [0u8; 12];
        self.input.read_exact(&mut lengths).map_err(spill_error)?;
        let len = |i: usize| {
            u32::from_le_bytes([lengths[i], lengths[i + 1], lengths[i + 2], lengths[i + 3]])
                as usize
        };
        let (partition, row, record) = (len(0), len(4), len(8));
        self.bytes.resize(partition + row, 0);
        self.input
            .read_exact(&mut self.bytes)
            .map_err(spill_error)?;
        let text = std::str::from_utf8(&self.bytes).map_err(|_| {
            StoreError::Storage("a load's spill file holds a key that is not UTF-8".into())
        })?;
        let (Some(partition_key), Some(row_key)) = (text.get(..partition), text.get(partition..))
        else {
            return Err(StoreError::Storage(
                "a load's spill file cuts a key inside a character".into(),
            ));
        };
        self.partition_key.clear();
        self.partition_key.push_str(partition_key);
        self.row_key.clear();
        self.row_key.push_str(row_key);
        self.record.resize(record, 0);
        self.input
            .read_exact(&mut self.record)
            .map_err(spill_error)?;
        Ok(true)
    }

    fn row(&self) -> EncodedRow<'_> {
        EncodedRow {
            partition_key: &self.partition_key,
            row_key: &self.row_key,
            etag: RowETag::None,
            timestamp: None,
            record: &self.record,
        }
    }
}

/// The rows of runs in parts (see [`SortedRuns::parts`]).
pub struct Parts<'a> {
    runs: std::slice::Iter<'a, Run>,
    reader: Option<RunReader>,
    rows_per_part: usize,
}

impl Iterator for Parts<'_> {
    type Item = Result<EncodedRows>;

    fn next(&mut self) -> Option<Result<EncodedRows>> {
        let mut part = EncodedRows::new();
        while part.len() < self.rows_per_part {
            let reader = match &mut self.reader {
                Some(reader) => reader,
                None => match self.runs.next().map(RunReader::open) {
                    Some(Ok(reader)) => self.reader.insert(reader),
                    Some(Err(e)) => return Some(Err(e)),
                    None => break,
                },
            };
            match reader.advance() {
                Ok(true) => {
                    let row = reader.row();
                    part.push((row.partition_key, row.row_key), row.etag, None, row.record);
                }
                Ok(false) => self.reader = None,
                Err(e) => return Some(Err(e)),
            }
        }
        if part.is_empty() {
            return None;
        }
        Some(Ok(part))
    }
}

/// The rows of runs merged in key order (see [`SortedRuns::merged`]).
pub struct Merged {
    readers: Vec<RunReader>,
    /// Indexes of the readers that hold a row, a heap whose top holds the
    /// lowest key.
    heap: Vec<usize>,
    /// Whether the top's row was returned (and is to be moved past).
    started: bool,
}

impl Merged {
    /// The next row in key order; `None` after the last.
    pub fn next_row(&mut self) -> Result<Option<EncodedRow<'_>>> {
        if std::mem::replace(&mut self.started, true) {
            let Some(&top) = self.heap.first() else {
                return Ok(None);
            };
            if !self.readers[top].advance()? {
                let last = self.heap.len() - 1;
                self.heap.swap(0, last);
                self.heap.pop();
            }
            self.sift_down(0);
        }
        Ok(self.heap.first().map(|&top| self.readers[top].row()))
    }

    fn lower(&self, a: usize, b: usize) -> bool {
        key_order(self.readers[self.heap[a]].row()) < key_order(self.readers[self.heap[b]].row())
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (left, right) = (2 * i + 1, 2 * i + 2);
            let mut lowest = i;
            if left < self.heap.len() && self.lower(left, lowest) {
                lowest = left;
            }
            if right < self.heap.len() && self.lower(right, lowest) {
                lowest = right;
            }
            if lowest == i {
                return;
            }
            self.heap.swap(i, lowest);
            i = lowest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Entity, Value};

    fn rows(keys: &[(&str, &str, i64)]) -> EncodedRows {
        let mut rows = EncodedRows::new();
        for &(p, r, v) in keys {
            let mut entity = Entity::new(p, r);
            entity.properties.insert("v".into(), Value::Int64(v));
            rows.push_entity(&entity);
        }
        rows
    }

    fn merged_keys(runs: &SortedRuns) -> Vec<(String, String, Vec<u8>)> {
        let mut merged = runs.merged().unwrap();
        let mut keys = Vec::new();
        while let Some(row) = merged.next_row().unwrap() {
            keys.push((
                row.partition_key.into(),
                row.row_key.into(),
                row.record.to_vec(),
            ));
        }
        keys
    }

    #[test]
    fn runs_merge_in_key_order_with_their_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = SortedRuns::new(dir.path());
        let parts = [
            rows(&[("b", "2", 1), ("a", "9", 2), ("c", "1", 3)]),
            rows(&[("a", "10", 4), ("b", "1", 5)]),
            EncodedRows::new(),
            rows(&[("b", "3", 6), ("a", "1", 7), ("d", "", 8), ("a", "a", 9)]),
        ];
        let mut all: Vec<(String, String, Vec<u8>)> = Vec::new();
        for part in &parts {
            runs.add(part).unwrap();
            all.extend(
                part.iter()
                    .map(|r| (r.partition_key.into(), r.row_key.into(), r.record.to_vec())),
            );
        }
        all.sort();
        assert_eq!(runs.len(), 9);
        assert_eq!(runs.runs(), 3);
        assert_eq!(merged_keys(&runs), all);
        assert_eq!(runs.key_span(), Some((("a", "1"), ("d", ""))));
        // Merging again reads the runs from their starts.
        assert_eq!(merged_keys(&runs).len(), 9);
        // Parts hold every row, cut where asked.
        let sizes: Vec<usize> = runs.parts(2).map(|p| p.unwrap().len()).collect();
        assert_eq!(sizes, [2, 2, 2, 2, 1]);
        let mut read: Vec<(String, String, Vec<u8>)> = runs
            .parts(4)
            .flat_map(|p| {
                let p = p.unwrap();
                p.iter()
                    .map(|r| (r.partition_key.into(), r.row_key.into(), r.record.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        read.sort();
        assert_eq!(read, all);
    }

    #[test]
    fn a_key_in_two_runs_comes_twice_in_a_row() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = SortedRuns::new(dir.path());
        runs.add(&rows(&[("p", "1", 1), ("p", "3", 1)])).unwrap();
        runs.add(&rows(&[("p", "2", 2), ("p", "3", 2)])).unwrap();
        let keys: Vec<String> = merged_keys(&runs).into_iter().map(|(_, r, _)| r).collect();
        assert_eq!(keys, ["1", "2", "3", "3"]);
    }

    #[test]
    fn no_runs_merge_into_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let runs = SortedRuns::new(dir.path());
        assert!(merged_keys(&runs).is_empty());
        assert_eq!(runs.parts(10).count(), 0);
        assert_eq!(runs.key_span(), None);
    }
}
