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
use std::time::Duration;

use super::aio::{AlignedBuffer, Writes};
use crate::store::{Result, StoreError};

/// How far a log file grows before the log moves to the other file.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The zeroed chunk a file grows by.
const GROWTH_BYTES: u64 = 1 << 20;
/// `[checksum u64][length u32][generation u64][sequence u64]`.
const HEADER_BYTES: usize = 28;
/// The header of records written before records had a sequence number:
/// `[checksum u64][length u32][generation u64]`, the generation's top bit
/// clear. Such records are still replayed.
const UNSEQUENCED_HEADER_BYTES: usize = 20;
/// Set in the generation field of a record with a sequence number.
const SEQUENCED: u64 = 1 << 63;
/// Writes the writer may have in flight at once (see [`CommitLog::submit`]).
pub const MAX_WRITES_IN_FLIGHT: usize = 2;
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
    /// The sequence number of the next record of the generation.
    sequence: u64,
    /// The block `offset` is in, as written up to `offset` (the first
    /// `offset % BLOCK_BYTES` bytes hold).
    current_block: Vec<u8>,
    /// Writes submitted and not yet reported complete.
    writes: Writes,
    /// The token of the next write.
    next_token: u64,
    /// Buffers of completed writes, for the next ones.
    spare: Vec<AlignedBuffer>,
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
            sequence: 0,
            current_block: vec![0; BLOCK_BYTES],
            writes: Writes::new(MAX_WRITES_IN_FLIGHT),
            next_token: 0,
            spare: Vec::new(),
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
            if let Some(Record { generation, .. }) = parse(&header, 0) {
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
            let mut last = None;
            while let Some(record) = next_record(&bytes, at, generation, last) {
                if !record.payload.is_empty() {
                    payloads.push(record.payload.to_vec());
                }
                last = record.sequence;
                at = record.next;
            }
        }
        Ok((log, payloads))
    }

    fn read_file(&self, i: usize) -> Result<Vec<u8>> {
        let path = file_path(&self.dir, i);
        std::fs::read(&path).map_err(|e| failed("reading", &path, e))
    }

    /// Starts the next generation in the other file. Everything logged so
    /// far must be durable elsewhere first (fjall synced), and no write in
    /// flight.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.generation += 1;
        self.offset = 0;
        self.sequence = 0;
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

    /// Writes the record durably, with nothing else in flight. False,
    /// writing nothing, when it does not fit in what is left of the
    /// current file: its changes must then be made durable in fjall,
    /// followed by a checkpoint.
    pub fn append(&mut self) -> Result<bool> {
        debug_assert_eq!(self.unreported(), 0);
        let Some(token) = self.submit()? else {
            return Ok(false);
        };
        loop {
            for (done, result) in self.completions(Some(Duration::from_secs(1))) {
                if done == token {
                    return result.map(|()| true);
                }
            }
        }
    }

    /// Submits the record's write and returns its token, which
    /// [`CommitLog::completions`] reports once the record is durable.
    /// `None`, writing nothing, when it does not fit (see
    /// [`CommitLog::append`]).
    ///
    /// A write covers whole blocks, its last one padded with zeros. A
    /// record submitted while another is in flight starts at the next
    /// block, so that two writes never cover one block (a write that
    /// ended last could take back the other's bytes); replay finds it
    /// there by its sequence number (see [`next_record`]). A write that
    /// fails leaves a hole the replay stops at: the records after it must
    /// not be acknowledged before a checkpoint.
    pub fn submit(&mut self) -> Result<Option<u64>> {
        let offset = if self.writes.in_flight() > 0 {
            self.offset.next_multiple_of(BLOCK_BYTES as u64)
        } else {
            self.offset
        };
        let length = (self.record.len() - HEADER_BYTES) as u64;
        let end = offset + self.record.len() as u64;
        if length > u32::MAX as u64 || end > MAX_FILE_BYTES {
            return Ok(None);
        }
        self.record[8..12].copy_from_slice(&(length as u32).to_le_bytes());
        self.record[12..20].copy_from_slice(&(self.generation | SEQUENCED).to_le_bytes());
        self.record[20..28].copy_from_slice(&self.sequence.to_le_bytes());
        let checksum = xxhash_rust::xxh3::xxh3_64(&self.record[8..]);
        self.record[0..8].copy_from_slice(&checksum.to_le_bytes());
        let i = self.current();
        if end > self.sizes[i] {
            self.grow(i, end)?;
        }
        // The block's earlier bytes, the record, then zeros to the block's
        // end (the file holds zeros or an older generation's bytes there).
        let head = (offset % BLOCK_BYTES as u64) as usize;
        let start = offset - head as u64;
        let used = head + self.record.len();
        let mut buffer = self.spare.pop().unwrap_or_default();
        let blocks = buffer.get(used.next_multiple_of(BLOCK_BYTES), BLOCK_BYTES);
        blocks[..head].copy_from_slice(&self.current_block[..head]);
        blocks[head..used].copy_from_slice(&self.record);
        blocks[used..].fill(0);
        let tail = used % BLOCK_BYTES;
        self.current_block[..tail].copy_from_slice(&blocks[used - tail..used]);
        self.offset = end;
        self.sequence += 1;
        let token = self.next_token;
        self.next_token += 1;
        self.writes.submit(&self.files[i], start, buffer, token);
        Ok(Some(token))
    }

    /// Writes submitted and not yet reported by [`CommitLog::completions`].
    pub fn unreported(&self) -> usize {
        self.writes.unreported()
    }

    /// The tokens of the writes completed since the last call, each with
    /// its outcome; with `wait`, waiting up to that long for one when any
    /// is in flight.
    pub fn completions(&mut self, wait: Option<Duration>) -> Vec<(u64, Result<()>)> {
        let path = file_path(&self.dir, self.current());
        self.writes
            .completions(wait)
            .into_iter()
            .map(|done| {
                if self.spare.len() < MAX_WRITES_IN_FLIGHT {
                    self.spare.push(done.buffer);
                }
                (
                    done.token,
                    done.result.map_err(|e| failed("writing", &path, e)),
                )
            })
            .collect()
    }

    /// Extends file `i` with zeros to at least `end`: blocks written once,
    /// so that later writes over them change no file metadata.
    fn grow(&mut self, i: usize, end: u64) -> Result<()> {
        let target = end.div_ceil(GROWTH_BYTES) * GROWTH_BYTES;
        // A buffer of its own: the chunk's megabyte is not kept after.
        let mut zeros = AlignedBuffer::default();
        let zeros = zeros.get((target - self.sizes[i]) as usize, BLOCK_BYTES);
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

/// A record read back from a log file.
struct Record<'a> {
    generation: u64,
    /// `None` for a record written before records had one.
    sequence: Option<u64>,
    payload: &'a [u8],
    /// Where the record ends.
    next: usize,
}

/// The record at `at` of a file's `bytes`; `None` where no whole record is.
fn parse(bytes: &[u8], at: usize) -> Option<Record<'_>> {
    let field = |from: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            bytes.get(at + from..at + from + 8)?.try_into().ok()?,
        ))
    };
    let checksum = field(0)?;
    let length = u32::from_le_bytes(bytes.get(at + 8..at + 12)?.try_into().ok()?) as usize;
    let generation = field(12)?;
    let (header, sequence) = if generation & SEQUENCED != 0 {
        (HEADER_BYTES, Some(field(20)?))
    } else {
        (UNSEQUENCED_HEADER_BYTES, None)
    };
    let generation = generation & !SEQUENCED;
    let end = at + header + length;
    let covered = bytes.get(at + 8..end)?;
    if generation == 0 || xxhash_rust::xxh3::xxh3_64(covered) != checksum {
        return None;
    }
    Some(Record {
        generation,
        sequence,
        payload: &bytes[at + header..end],
        next: end,
    })
}

/// The record of `generation` that follows the one numbered `last` (none
/// before the first), the one before having ended at `at`: there, or at
/// the next block, where a record submitted while the one before was in
/// flight starts. One at the next block must carry the next number: a
/// record whose write never completed leaves a hole the replay stops at,
/// though records submitted after it may have reached the disk.
fn next_record(bytes: &[u8], at: usize, generation: u64, last: Option<u64>) -> Option<Record<'_>> {
    let follows = |record: &Record| match (last, record.sequence) {
        (Some(last), Some(sequence)) => sequence == last + 1,
        (None, Some(sequence)) => sequence == 0,
        (None, None) => true,
        (Some(_), None) => false,
    };
    if let Some(record) = parse(bytes, at).filter(|r| r.generation == generation && follows(r)) {
        return Some(record);
    }
    let block = at.next_multiple_of(BLOCK_BYTES);
    (block != at && last.is_some())
        .then(|| parse(bytes, block))
        .flatten()
        .filter(|r| r.generation == generation && r.sequence.is_some() && follows(r))
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

    /// Submits a record of `changes` without waiting for it; returns
    /// whether it starts at the next block, past where the one before
    /// ended (as one submitted while another is in flight does).
    fn submit(log: &mut CommitLog, changes: &[Put<'_>]) -> bool {
        let before = log.offset;
        log.begin();
        for (space, key, value) in changes {
            log.put(*space, key, *value);
        }
        log.submit().unwrap().unwrap();
        log.offset - log.record.len() as u64 != before
    }

    fn wait_for_all(log: &mut CommitLog) {
        while log.unreported() > 0 {
            for (_, result) in log.completions(Some(Duration::from_secs(1))) {
                result.unwrap();
            }
        }
    }

    #[test]
    fn records_written_while_others_are_in_flight_are_replayed_in_order() {
        let (dir, mut log) = started();
        let values: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 50 + 7 * i as usize]).collect();
        let mut moved_on = 0;
        for chunk in values.chunks(MAX_WRITES_IN_FLIGHT) {
            for value in chunk {
                moved_on +=
                    usize::from(submit(&mut log, &[(Space::Entities(1), b"k", Some(value))]));
            }
            wait_for_all(&mut log);
        }
        assert!(
            moved_on > 0,
            "no record was submitted while another was in flight"
        );
        drop(log);
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        let expected: Vec<_> = values
            .iter()
            .map(|value| (Space::Entities(1), b"k".to_vec(), Some(value.clone())))
            .collect();
        assert_eq!(replayed(&payloads), expected);
    }

    #[test]
    fn a_record_after_a_write_that_never_landed_is_not_replayed() {
        let (dir, mut log) = started();
        assert!(write(
            &mut log,
            &[(Space::Entities(1), b"a", Some(b"kept"))]
        ));
        let lost_at = log.offset;
        submit(&mut log, &[(Space::Entities(1), b"b", Some(b"lost"))]);
        assert!(
            submit(&mut log, &[(Space::Entities(1), b"c", Some(b"after"))]),
            "the last record was submitted while the one before was in flight"
        );
        wait_for_all(&mut log);
        let file = log.current();
        drop(log);
        // The middle write never reached the disk; the one after did.
        let path = file_path(dir.path(), file);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0; HEADER_BYTES], lost_at).unwrap();
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        assert_eq!(
            replayed(&payloads),
            vec![(Space::Entities(1), b"a".to_vec(), Some(b"kept".to_vec()))]
        );
    }

    #[test]
    fn records_without_a_sequence_number_are_replayed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path()).unwrap();
        // Generation 3 in file 1, as a log of before sequence numbers
        // wrote it: its empty first record, then one change.
        let record = |generation: u64, payload: &[u8]| {
            let mut bytes = vec![0u8; UNSEQUENCED_HEADER_BYTES];
            bytes[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
            bytes[12..20].copy_from_slice(&generation.to_le_bytes());
            bytes.extend_from_slice(payload);
            let checksum = xxhash_rust::xxh3::xxh3_64(&bytes[8..]);
            bytes[0..8].copy_from_slice(&checksum.to_le_bytes());
            bytes
        };
        let mut payload = Vec::new();
        payload.push(1u8);
        payload.extend_from_slice(&9u64.to_le_bytes());
        payload.extend_from_slice(&1u32.to_le_bytes());
        payload.push(b'k');
        payload.push(1);
        payload.extend_from_slice(&2u32.to_le_bytes());
        payload.extend_from_slice(b"ok");
        let mut file = record(3, &[]);
        file.extend(record(3, &payload));
        file.resize(GROWTH_BYTES as usize, 0);
        std::fs::write(file_path(dir.path(), 1), &file).unwrap();
        let (_, payloads) = CommitLog::open(dir.path()).unwrap();
        assert_eq!(
            replayed(&payloads),
            vec![(Space::Entities(9), b"k".to_vec(), Some(b"ok".to_vec()))]
        );
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
