//! The commit log: where a group of writes becomes durable.
//!
//! fjall's journal is appended to, so every sync of it also writes the
//! file's new size, and ext4 commits its own journal for that. On the
//! benchmark machine, in a loop of 400 small writes, an `fdatasync` after an
//! append took 162 to 207 µs (median of a run) where an `O_DSYNC` write
//! over blocks written before took 105 to 146 µs; in the server, traced,
//! the writer's `fdatasync` of fjall's journal took 270 to 320 µs and this
//! log's write 172 to 243 µs. A durable single-row INSERT pays this once.
//! PostgreSQL fills its WAL segments with zeros ahead of use for the same
//! reason. So the writer
//! writes each group's changes here first, in one `O_DSYNC` write over
//! blocks already written, and only then commits them to fjall (whose
//! journal it leaves unsynced) and makes them visible.
//!
//! The write goes around the page cache (`O_DIRECT`) where the file system
//! allows it: a synchronous buffered write copies into the cache and then
//! runs the file system's writeback of the page, where a direct write hands
//! the block to the device. On the benchmark machine (ext4), a loop of
//! 2,000 writes of 300 bytes each took 45 to 64 µs of CPU and 117 to 142 µs
//! a write buffered, 34 to 44 µs of CPU and 93 to 125 µs direct (five runs
//! each). A direct write covers whole blocks, so each write starts at the
//! start of the block the record begins in: the bytes of that block written
//! before go again, as the page cache writes back a whole page anyway.
//!
//! Two files take turns, `0.log` and `1.log`; generation `g` is written in
//! file `g % 2`, from its start. A record is
//! `[checksum u64][length u32][generation u64][payload]`, the checksum
//! (xxh3) covering all after it; the payload is a list of changes, each
//! setting or removing one key of one keyspace. A file grows by zeroed
//! chunks, synced once, up to [`MAX_FILE_BYTES`].
//!
//! A checkpoint syncs fjall, so that every record written so far is in
//! fjall's synced journal or its tables, and starts the next generation
//! with an empty record at the start of the other file. Opening the store
//! replays the records of the newest generation in order, over what fjall
//! recovered: each sets keys to values, so a record fjall holds already
//! changes nothing, and a later one overwrites it. That holds only if fjall
//! makes nothing durable by itself after a record that is replayed: a load,
//! a table created or dropped, is preceded by a checkpoint.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::store::{Result, StoreError};

/// How far a log file grows before the log moves to the other file.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The zeroed chunk a file grows by.
const GROWTH_BYTES: u64 = 1 << 20;
/// `[checksum u64][length u32][generation u64]`.
const HEADER_BYTES: usize = 20;
/// What a write covers whole, and where its bytes start in memory: a direct
/// write needs both aligned to the device's block.
const BLOCK_BYTES: usize = 4096;

/// The keyspace of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Catalog,
    Entities(u64),
    Partitions(u64),
}

impl Space {
    fn encode(self) -> (u8, u64) {
        match self {
            Space::Catalog => (0, 0),
            Space::Entities(id) => (1, id),
            Space::Partitions(id) => (2, id),
        }
    }

    fn decode(tag: u8, id: u64) -> Option<Space> {
        match tag {
            0 => Some(Space::Catalog),
            1 => Some(Space::Entities(id)),
            2 => Some(Space::Partitions(id)),
            _ => None,
        }
    }
}

/// One change of a replayed record: `value` `None` removes the key.
#[derive(Debug, PartialEq, Eq)]
pub struct Change<'a> {
    pub space: Space,
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

fn failed(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Storage(format!("{what} {}: {e}", path.display()))
}

pub struct CommitLog {
    dir: PathBuf,
    /// Opened for writing, `O_DSYNC`, and `O_DIRECT` where the file system
    /// takes it.
    files: [File; 2],
    /// Bytes of each file, all written (zeros past the records).
    sizes: [u64; 2],
    generation: u64,
    /// Where the next record of the current generation goes.
    offset: u64,
    /// The record being made: its header, then its changes.
    record: Vec<u8>,
    /// The block `offset` is in, as written up to `offset` (the first
    /// `offset % BLOCK_BYTES` bytes hold).
    current_block: Vec<u8>,
    /// Where a write's whole blocks are put together.
    blocks: AlignedBuffer,
}

/// A buffer whose bytes start at a [`BLOCK_BYTES`] boundary.
#[derive(Default)]
struct AlignedBuffer(Vec<u8>);

impl AlignedBuffer {
    /// `len` bytes starting at a block boundary, their content unspecified.
    fn get(&mut self, len: usize) -> &mut [u8] {
        self.0.resize(len + BLOCK_BYTES, 0);
        let start = self.0.as_ptr().align_offset(BLOCK_BYTES);
        &mut self.0[start..start + len]
    }
}

impl CommitLog {
    /// Opens the log in `dir`, creating it if needed. Returns it with the
    /// payloads of its newest generation's records, oldest first, to be
    /// replayed (see [`changes`]) and then followed by [`CommitLog::checkpoint`]
    /// before anything is written.
    pub fn open(dir: &Path) -> Result<(CommitLog, Vec<Vec<u8>>)> {
        std::fs::create_dir_all(dir).map_err(|e| failed("making", dir, e))?;
        let open = |i: usize| -> Result<(File, u64)> {
            let path = file_path(dir, i);
            let options = |flags| {
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .custom_flags(flags)
                    .open(&path)
            };
            let file = match options(libc::O_DSYNC | libc::O_DIRECT) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => options(libc::O_DSYNC),
                opened => opened,
            }
            .map_err(|e| failed("opening", &path, e))?;
            let size = file
                .metadata()
                .map_err(|e| failed("reading the size of", &path, e))?
                .len();
            // Files grow by whole chunks; a size cut short by a crash while
            // growing counts only its whole blocks, so that growing again
            // starts where a direct write may.
            Ok((file, size - size % BLOCK_BYTES as u64))
        };
        let (first, first_size) = open(0)?;
        let (second, second_size) = open(1)?;
        sync_dir(dir)?;
        let mut log = CommitLog {
            dir: dir.to_owned(),
            files: [first, second],
            sizes: [first_size, second_size],
            generation: 0,
            offset: 0,
            record: Vec::new(),
            current_block: vec![0; BLOCK_BYTES],
            blocks: AlignedBuffer::default(),
        };
        // A generation starts with an empty record: the first header says
        // which file holds the newest.
        let mut newest: Option<(u64, usize)> = None;
        for i in 0..2 {
            let mut header = [0u8; HEADER_BYTES];
            let read = File::open(file_path(dir, i)).and_then(|f| f.read_exact_at(&mut header, 0));
            if read.is_err() {
                continue;
            }
            if let Some((generation, _, _)) = parse(&header, 0) {
                if generation % 2 == i as u64 && newest.is_none_or(|(g, _)| generation > g) {
                    newest = Some((generation, i));
                }
            }
        }
        let mut payloads = Vec::new();
        if let Some((generation, i)) = newest {
            log.generation = generation;
            let bytes = log.read_file(i)?;
            let mut at = 0;
            while let Some((g, payload, next)) = parse(&bytes, at) {
                if g != generation {
                    break;
                }
                if !payload.is_empty() {
                    payloads.push(payload.to_vec());
                }
                at = next;
            }
        }
        Ok((log, payloads))
    }

    fn read_file(&self, i: usize) -> Result<Vec<u8>> {
        let path = file_path(&self.dir, i);
        std::fs::read(&path).map_err(|e| failed("reading", &path, e))
    }

    /// Starts the next generation in the other file. Everything logged so
    /// far must be durable elsewhere first (fjall synced).
    pub fn checkpoint(&mut self) -> Result<()> {
        self.generation += 1;
        self.offset = 0;
        self.begin();
        let written = self.append()?;
        debug_assert!(written, "an empty record always fits");
        Ok(())
    }

    fn current(&self) -> usize {
        (self.generation % 2) as usize
    }

    /// Starts a record.
    pub fn begin(&mut self) {
        self.record.clear();
        self.record.resize(HEADER_BYTES, 0);
    }

    /// Adds a change to the record.
    pub fn put(&mut self, space: Space, key: &[u8], value: Option<&[u8]>) {
        let (tag, id) = space.encode();
        self.record.push(tag);
        self.record.extend_from_slice(&id.to_le_bytes());
        self.record
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.record.extend_from_slice(key);
        match value {
            None => self.record.push(0),
            Some(value) => {
                self.record.push(1);
                self.record
                    .extend_from_slice(&(value.len() as u32).to_le_bytes());
                self.record.extend_from_slice(value);
            }
        }
    }

    /// Writes the record durably. False, writing nothing, when it does not
    /// fit in what is left of the current file: its changes must then be
    /// made durable in fjall, followed by a checkpoint.
    pub fn append(&mut self) -> Result<bool> {
        let length = (self.record.len() - HEADER_BYTES) as u64;
        let end = self.offset + self.record.len() as u64;
        if length > u32::MAX as u64 || end > MAX_FILE_BYTES {
            return Ok(false);
        }
        let generation = self.generation;
        self.record[8..12].copy_from_slice(&(length as u32).to_le_bytes());
        self.record[12..20].copy_from_slice(&generation.to_le_bytes());
        let checksum = xxhash_rust::xxh3::xxh3_64(&self.record[8..]);
        self.record[0..8].copy_from_slice(&checksum.to_le_bytes());
        let i = self.current();
        if end > self.sizes[i] {
            self.grow(i, end)?;
        }
        // The block's earlier bytes, the record, then zeros to the block's
        // end (the file holds zeros or an older generation's bytes there).
        let head = (self.offset % BLOCK_BYTES as u64) as usize;
        let start = self.offset - head as u64;
        let used = head + self.record.len();
        let blocks = self.blocks.get(used.next_multiple_of(BLOCK_BYTES));
        blocks[..head].copy_from_slice(&self.current_block[..head]);
        blocks[head..used].copy_from_slice(&self.record);
        blocks[used..].fill(0);
        self.files[i]
            .write_all_at(blocks, start)
            .map_err(|e| failed("writing", &file_path(&self.dir, i), e))?;
        let tail = used % BLOCK_BYTES;
        self.current_block[..tail].copy_from_slice(&blocks[used - tail..used]);
        self.offset = end;
        Ok(true)
    }

    /// Extends file `i` with zeros to at least `end`: blocks written once,
    /// so that later writes over them change no file metadata.
    fn grow(&mut self, i: usize, end: u64) -> Result<()> {
        let target = end.div_ceil(GROWTH_BYTES) * GROWTH_BYTES;
        // A buffer of its own: the chunk's megabyte is not kept after.
        let mut zeros = AlignedBuffer::default();
        let zeros = zeros.get((target - self.sizes[i]) as usize);
        zeros.fill(0);
        let mut file = &self.files[i];
        file.write_all_at(zeros, self.sizes[i])
            .and_then(|()| file.flush())
            .and_then(|()| file.sync_all())
            .map_err(|e| failed("extending", &file_path(&self.dir, i), e))?;
        self.sizes[i] = target;
        Ok(())
    }
}

fn file_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("{i}.log"))
}

/// The record at `at` of a file's `bytes`: its generation, its payload and
/// where the next begins; `None` past the last whole record.
fn parse(bytes: &[u8], at: usize) -> Option<(u64, &[u8], usize)> {
    let header = bytes.get(at..at + HEADER_BYTES)?;
    let checksum = u64::from_le_bytes(header[0..8].try_into().ok()?);
    let length = u32::from_le_bytes(header[8..12].try_into().ok()?) as usize;
    let generation = u64::from_le_bytes(header[12..20].try_into().ok()?);
    let end = at + HEADER_BYTES + length;
    let covered = bytes.get(at + 8..end)?;
    if generation == 0 || xxhash_rust::xxh3::xxh3_64(covered) != checksum {
        return None;
    }
    Some((generation, &bytes[at + HEADER_BYTES..end], end))
}

/// The changes of a replayed payload, in order.
pub fn changes(payload: &[u8]) -> impl Iterator<Item = Result<Change<'_>>> {
    let mut rest = payload;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let change = next_change(&mut rest).ok_or_else(|| {
            rest = &[];
            StoreError::Storage("a commit log record's changes are malformed".into())
        });
        Some(change)
    })
}

fn next_change<'a>(rest: &mut &'a [u8]) -> Option<Change<'a>> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        *rest = tail;
        Some(head)
    }
    fn u32_of(rest: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(rest, 4)?.try_into().ok()?) as usize)
    }
    let tag = take(rest, 1)?[0];
    let id = u64::from_le_bytes(take(rest, 8)?.try_into().ok()?);
    let space = Space::decode(tag, id)?;
    let key_length = u32_of(rest)?;
    let key = take(rest, key_length)?;
    let value = match take(rest, 1)?[0] {
        0 => None,
        1 => {
            let length = u32_of(rest)?;
            Some(take(rest, length)?)
        }
        _ => return None,
    };
    Some(Change { space, key, value })
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| failed("syncing", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Put<'a> = (Space, &'a [u8], Option<&'a [u8]>);

    fn write(log: &mut CommitLog, changes: &[Put<'_>]) -> bool {
        log.begin();
        for (space, key, value) in changes {
            log.put(*space, key, *value);
        }
        log.append().unwrap()
    }

    fn replayed(payloads: &[Vec<u8>]) -> Vec<(Space, Vec<u8>, Option<Vec<u8>>)> {
        payloads
            .iter()
            .flat_map(|p| changes(p).map(|c| c.unwrap()))
            .map(|c| (c.space, c.key.to_vec(), c.value.map(<[u8]>::to_vec)))
            .collect()
    }

    /// A log in a new directory, as a store opens it: a checkpoint starts
    /// its first generation.
    fn started() -> (tempfile::TempDir, CommitLog) {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, payloads) = CommitLog::open(dir.path()).unwrap();
        assert!(payloads.is_empty());
        log.checkpoint().unwrap();
        (dir, log)
    }

    #[test]
    fn a_fresh_log_has_nothing_to_replay() {
        let dir = tempfile::tempdir().unwrap();
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        assert!(payloads.is_empty());
    }

    #[test]
    fn records_since_the_last_checkpoint_are_replayed_in_order() {
        let (dir, mut log) = started();
        assert!(write(&mut log, &[(Space::Entities(3), b"a", Some(b"1"))]));
        log.checkpoint().unwrap();
        assert!(write(
            &mut log,
            &[
                (Space::Entities(3), b"b", Some(b"2")),
                (Space::Catalog, b"stats", Some(b"")),
            ]
        ));
        assert!(write(&mut log, &[(Space::Partitions(4), b"b", None)]));
        drop(log);

        let (mut log, payloads) = CommitLog::open(dir.path()).unwrap();
        assert_eq!(
            replayed(&payloads),
            vec![
                (Space::Entities(3), b"b".to_vec(), Some(b"2".to_vec())),
                (Space::Catalog, b"stats".to_vec(), Some(Vec::new())),
                (Space::Partitions(4), b"b".to_vec(), None),
            ]
        );
        // After the checkpoint that follows a replay, nothing is replayed
        // again, though the older file still holds its records.
        log.checkpoint().unwrap();
        drop(log);
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        assert!(payloads.is_empty());
    }

    #[test]
    fn a_torn_last_record_ends_the_replay() {
        let (dir, mut log) = started();
        assert!(write(
            &mut log,
            &[(Space::Entities(1), b"k", Some(b"kept"))]
        ));
        let torn_at = log.offset;
        assert!(write(
            &mut log,
            &[(Space::Entities(1), b"k", Some(b"torn"))]
        ));
        let file = log.current();
        drop(log);
        // The last record's final byte never reached the disk.
        let path = file_path(dir.path(), file);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0xAA], torn_at + HEADER_BYTES as u64 + 5)
            .unwrap();
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        assert_eq!(
            replayed(&payloads),
            vec![(Space::Entities(1), b"k".to_vec(), Some(b"kept".to_vec()))]
        );
    }

    #[test]
    fn records_that_share_and_cross_blocks_are_all_replayed() {
        let (dir, mut log) = started();
        let values: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 100 + i as usize]).collect();
        for (i, value) in values.iter().enumerate() {
            let key = (i as u32).to_be_bytes();
            assert!(write(&mut log, &[(Space::Entities(1), &key, Some(value))]));
        }
        assert!(log.offset > 4 * BLOCK_BYTES as u64);
        drop(log);
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        let expected: Vec<_> = values
            .iter()
            .enumerate()
            .map(|(i, value)| {
                let key = (i as u32).to_be_bytes().to_vec();
                (Space::Entities(1), key, Some(value.clone()))
            })
            .collect();
        assert_eq!(replayed(&payloads), expected);
    }

    #[test]
    fn a_record_that_does_not_fit_is_not_written() {
        let (_dir, mut log) = started();
        let big = vec![7u8; MAX_FILE_BYTES as usize];
        assert!(!write(&mut log, &[(Space::Entities(1), b"k", Some(&big))]));
        assert!(write(
            &mut log,
            &[(Space::Entities(1), b"k", Some(b"small"))]
        ));
    }

    #[test]
    fn files_grow_by_zeroed_chunks() {
        let (dir, mut log) = started();
        let value = vec![1u8; 700_000];
        assert!(write(&mut log, &[(Space::Entities(1), b"a", Some(&value))]));
        assert!(write(&mut log, &[(Space::Entities(1), b"b", Some(&value))]));
        let file = file_path(dir.path(), log.current());
        assert_eq!(std::fs::metadata(file).unwrap().len(), 2 * GROWTH_BYTES);
        drop(log);
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        assert_eq!(payloads.len(), 2);
    }
}
