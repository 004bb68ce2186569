//! Column copies of tables, for scans that read a whole table.
//!
//! The store keeps each entity as one record: right for point reads and
//! writes, costly for an analytic query that reads a few columns of every
//! row, since every record is decoded. A column copy holds a table's rows
//! as Arrow record batches, one Arrow IPC file per column and piece, in key
//! order, made from one read view. A scan of the whole table reads only the
//! files of the columns it needs, when the copy was made at the version its
//! own read view sees (`EntityRead::table_version`): same version, same
//! entities, so the same answer. Scans read the files mapped into memory,
//! in place: the pages are the system's file cache, shared by every scan.
//!
//! When a copy is made, for tables of at least [`MIN_ROWS`] entities:
//! - after a bulk load (COPY), once the table has had no other load for
//!   [`QUIET`]: loaded tables are read next. A load that starts meanwhile
//!   abandons the copy, unless a scan waits for it;
//! - by the first whole-table scan after a bulk load, or by a second scan
//!   that finds the table unchanged since the first (a table written
//!   between its scans would not keep a copy long).
//!
//! A whole-table scan that finds a copy of its version being made waits for
//! it rather than read the store beside it: the copy reads the store once,
//! on every core, and the scan then reads only its columns.
//!
//! The copies live in a directory of the engine's own under the store's
//! derived files; a copy's files go when a newer copy replaces it or the
//! table changes (once no scan reads them), and the directory goes with the
//! engine.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::buffer::Buffer;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::reader::{read_footer_length, FileDecoder};
use datafusion::arrow::ipc::writer::FileWriter;
use datafusion::arrow::ipc::{root_as_footer, Block};
use tokio::sync::watch;

use super::convert::RowDecoder;
use crate::catalog::TableDef;
use crate::store::{EncodedRows, EntityRead, KeyRange, Query, TableStore};

/// Tables with fewer entities are scanned from the store: their scans are
/// short either way.
pub const MIN_ROWS: usize = 10_000;
/// Rows per record batch of a copy.
const BATCH_ROWS: usize = 8192;
/// How long a bulk-loaded table must go without another load before it is
/// copied (loads of many COPYs come one right after another).
const QUIET: Duration = Duration::from_secs(1);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The column copies of one engine's tables.
pub struct ColumnCopies {
    dir: PathBuf,
    store: Arc<dyn TableStore>,
    next_copy: AtomicU64,
    tables: Mutex<HashMap<String, TableCopies>>,
    /// The runtime copies are made on (the engine's).
    runtime: tokio::runtime::Handle,
}

#[derive(Default)]
struct TableCopies {
    ready: Option<Arc<ColumnCopy>>,
    /// The version the last whole-table scan saw.
    scanned: Option<u64>,
    building: Option<Build>,
    /// Bulk loads committed so far; a load waits [`QUIET`] for the next.
    loads: u64,
    /// Bulk loads under way.
    loading: usize,
    /// Bulk-loaded since the last copy was started.
    loaded: bool,
}

/// A copy being made.
struct Build {
    version: u64,
    /// Word of its end.
    made: watch::Receiver<bool>,
    /// Set to stop it early (a load started, and no scan waits for it).
    abandon: Arc<AtomicBool>,
    /// Whether a scan waits for it.
    waited: bool,
}

/// A bulk load of a table under way (dropped when it ends, committed or not).
pub struct Loading {
    copies: Arc<ColumnCopies>,
    table: String,
}

impl Drop for Loading {
    fn drop(&mut self) {
        if let Some(table) = lock(&self.copies.tables).get_mut(&self.table) {
            table.loading -= 1;
        }
    }
}

/// A table's rows at one version, column by column.
pub struct ColumnCopy {
    dir: PathBuf,
    version: u64,
    /// The table's columns when the copy was made.
    schema: SchemaRef,
    /// In key order, each with files of its own.
    pieces: Vec<Piece>,
}

/// The rows of one key range of a copy.
struct Piece {
    /// The rows of each batch.
    batches: Vec<usize>,
    /// Each of the table's columns, in the order of the copy's schema.
    columns: Vec<MappedColumn>,
}

/// One column of a piece: its file mapped into memory, whose record batches
/// are read in place (the pages are the system's file cache, not the
/// server's memory).
struct MappedColumn {
    data: Buffer,
    /// Where each batch is in the file.
    blocks: Vec<Block>,
    decoder: FileDecoder,
}

impl Drop for ColumnCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for ColumnCopies {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Engines of this process opened so far (each has a directory of its own).
static ENGINES: AtomicU64 = AtomicU64::new(0);

impl ColumnCopies {
    /// Copies of `store`'s tables kept under `derived` (the store's derived
    /// files directory), made on `runtime`. The directories left there by
    /// processes that stopped are removed.
    pub fn open(
        derived: &Path,
        store: Arc<dyn TableStore>,
        runtime: tokio::runtime::Handle,
    ) -> std::io::Result<ColumnCopies> {
        let pid = std::process::id();
        let own = format!("column-copies-{pid}-");
        if let Ok(entries) = std::fs::read_dir(derived) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                // Only one process opens a store at a time: directories of
                // other processes are left over.
                if name.starts_with("column-copies-") && !name.starts_with(&own) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = derived.join(format!("{own}{}", ENGINES.fetch_add(1, Ordering::Relaxed)));
        // Left by an earlier process that had the same id.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(ColumnCopies {
            dir,
            store,
            next_copy: AtomicU64::new(0),
            tables: Mutex::default(),
            runtime,
        })
    }

    /// Notes that a bulk load of `table` starts: no copy is started until it
    /// ends, and one made in the background is abandoned.
    pub fn loading(self: &Arc<Self>, table: &str) -> Loading {
        let mut tables = lock(&self.tables);
        let copies = tables.entry(table.to_owned()).or_default();
        copies.loading += 1;
        if let Some(build) = copies.building.as_ref().filter(|b| !b.waited) {
            build.abandon.store(true, Ordering::Relaxed);
        }
        Loading {
            copies: self.clone(),
            table: table.to_owned(),
        }
    }

    /// Notes a committed bulk load of `def`'s table: it is copied once no
    /// other load follows for [`QUIET`], and its next whole-table scan
    /// makes the copy if that comes first.
    pub fn loaded(self: &Arc<Self>, def: &Arc<TableDef>) {
        let load = {
            let mut tables = lock(&self.tables);
            let copies = tables.entry(def.name.clone()).or_default();
            copies.loaded = true;
            copies.loads += 1;
            copies.loads
        };
        let copies = self.clone();
        let def = def.clone();
        self.runtime.spawn(async move {
            tokio::time::sleep(QUIET).await;
            let reader = copies.store.read_view();
            let Ok(Some(version)) = reader.table_version(&def.name).await else {
                return;
            };
            let Ok(stats) = copies.store.table_stats(&def.name).await else {
                return;
            };
            let schema = super::provider::table_schema(&def, false);
            let mut tables = lock(&copies.tables);
            let table = tables.entry(def.name.clone()).or_default();
            let current = table.ready.as_ref().is_some_and(|r| r.version >= version);
            if table.loads == load
                && table.loading == 0
                && table.loaded
                && table.building.is_none()
                && !current
                && stats.entities >= MIN_ROWS as u64
            {
                copies.start_copy(table, def, schema, reader, version, false);
            }
        });
    }

    /// Whether `table` at `version` has a copy (`ready`) or one is being
    /// made (`making`).
    pub fn state(&self, table: &str, version: u64) -> Option<&'static str> {
        let tables = lock(&self.tables);
        let copies = tables.get(table)?;
        if copies.ready.as_ref().is_some_and(|r| r.version == version) {
            Some("ready")
        } else if copies
            .building
            .as_ref()
            .is_some_and(|b| b.version == version)
        {
            Some("making")
        } else {
            None
        }
    }

    /// The copy a whole-table scan through `reader` may read instead of the
    /// table, if there is one or if this scan makes one (it then waits for
    /// it); `entities`: about how many the table holds.
    pub async fn for_scan(
        self: &Arc<Self>,
        def: &Arc<TableDef>,
        reader: &Arc<dyn EntityRead>,
        entities: Option<usize>,
    ) -> Option<Arc<ColumnCopy>> {
        let version = reader.table_version(&def.name).await.ok()??;
        let schema = super::provider::table_schema(def, false);
        let mut made = {
            let mut tables = lock(&self.tables);
            let copies = tables.entry(def.name.clone()).or_default();
            if let Some(ready) = &copies.ready {
                if ready.version == version && ready.schema == schema {
                    return Some(ready.clone());
                }
                if ready.version < version {
                    // The table changed: scans of older views that still
                    // read the copy keep its files until they end.
                    copies.ready = None;
                }
            }
            match &mut copies.building {
                Some(build) if build.version == version => {
                    build.waited = true;
                    build.abandon.store(false, Ordering::Relaxed);
                    build.made.clone()
                }
                // A copy of another version is being made.
                Some(_) => return None,
                None => {
                    let again = copies.scanned == Some(version) || copies.loaded;
                    copies.scanned = Some(version);
                    if !again || entities.is_none_or(|n| n < MIN_ROWS) {
                        return None;
                    }
                    let (def, reader) = (def.clone(), reader.clone());
                    self.start_copy(copies, def, schema.clone(), reader, version, true)
                }
            }
        };
        // Made or failed: either way the scan goes on.
        let _ = made.wait_for(|done| *done).await;
        let tables = lock(&self.tables);
        let ready = tables.get(&def.name)?.ready.as_ref()?;
        (ready.version == version && ready.schema == schema).then(|| ready.clone())
    }

    /// Makes a copy of the table as `reader` sees it, on threads of its
    /// own (`waited`: a scan waits for it); the receiver learns when it is
    /// made, has failed or was abandoned.
    fn start_copy(
        self: &Arc<Self>,
        table: &mut TableCopies,
        def: Arc<TableDef>,
        schema: SchemaRef,
        reader: Arc<dyn EntityRead>,
        version: u64,
        waited: bool,
    ) -> watch::Receiver<bool> {
        let (done, made) = watch::channel(false);
        let abandon = Arc::new(AtomicBool::new(false));
        table.building = Some(Build {
            version,
            made: made.clone(),
            abandon: abandon.clone(),
            waited,
        });
        table.loaded = false;
        let copies = self.clone();
        let runtime = self.runtime.clone();
        self.runtime.spawn(async move {
            let parts = std::thread::available_parallelism().map_or(1, |n| n.get());
            // Only a hint: pieces of about the same size.
            let points = copies
                .store
                .split_points(&def.name, parts)
                .await
                .unwrap_or_default();
            let dir = copies.dir.join(format!(
                "{}",
                copies.next_copy.fetch_add(1, Ordering::Relaxed)
            ));
            let start = Instant::now();
            let made = tokio::task::spawn_blocking({
                let def = def.clone();
                let abandon = abandon.clone();
                move || {
                    ColumnCopy::empty(dir, version, schema)?
                        .fill(&runtime, &def, &*reader, &points, &abandon, !waited)
                }
            })
            .await
            .map_err(BoxError::from)
            .and_then(|made| made);
            let mut tables = lock(&copies.tables);
            let entry = tables.entry(def.name.clone()).or_default();
            entry.building = None;
            match made {
                Ok(copy) if entry.ready.as_ref().is_none_or(|r| r.version <= version) => {
                    tracing::debug!(
                        "column copy of {:?} at version {version}: {} pieces in {:.1?}",
                        def.name,
                        copy.pieces.len(),
                        start.elapsed()
                    );
                    entry.ready = Some(Arc::new(copy));
                }
                Ok(_) => {}
                Err(_) if abandon.load(Ordering::Relaxed) => {
                    tracing::debug!("column copy of {:?} abandoned for a load", def.name)
                }
                Err(e) => tracing::warn!("no column copy of {:?}: {e}", def.name),
            }
            drop(tables);
            let _ = done.send(true);
        });
        made
    }
}

impl ColumnCopy {
    /// A copy without rows yet, in the new directory `dir`, which goes with
    /// it.
    fn empty(dir: PathBuf, version: u64, schema: SchemaRef) -> std::io::Result<ColumnCopy> {
        std::fs::create_dir_all(&dir)?;
        Ok(ColumnCopy {
            dir,
            version,
            schema,
            pieces: Vec::new(),
        })
    }

    /// Reads every row of the table through `reader` into the copy, one
    /// piece per range between `points` (partition keys in order), each on
    /// a thread of its own; `abandon` stops it with an error. In the
    /// `background` (no scan waits for it), the threads give way to others.
    fn fill(
        mut self,
        runtime: &tokio::runtime::Handle,
        def: &TableDef,
        reader: &dyn EntityRead,
        points: &[String],
        abandon: &AtomicBool,
        background: bool,
    ) -> Result<ColumnCopy, BoxError> {
        let ranges: Vec<KeyRange> = (0..=points.len())
            .map(|i| KeyRange::Partitions {
                from: match i {
                    0 => Bound::Unbounded,
                    _ => Bound::Included(points[i - 1].clone()),
                },
                to: match points.get(i) {
                    Some(point) => Bound::Excluded(point.clone()),
                    None => Bound::Unbounded,
                },
            })
            .collect();
        let copy = &self;
        let pieces = std::thread::scope(|scope| {
            let pieces: Vec<_> = ranges
                .into_iter()
                .enumerate()
                .map(|(piece, range)| {
                    scope.spawn(move || {
                        if background {
                            give_way();
                        }
                        copy.write_piece(runtime, def, reader, piece, range, abandon)
                    })
                })
                .collect();
            pieces
                .into_iter()
                .map(|piece| {
                    piece
                        .join()
                        .unwrap_or_else(|_| Err("a column copy thread panicked".into()))
                })
                .collect::<Result<Vec<_>, BoxError>>()
        })?;
        self.pieces = pieces;
        Ok(self)
    }

    fn column_file(&self, piece: usize, column: usize) -> PathBuf {
        self.dir.join(format!("{piece}-{column}.arrow"))
    }

    /// Writes the rows of `range` as piece `piece`.
    fn write_piece(
        &self,
        runtime: &tokio::runtime::Handle,
        def: &TableDef,
        reader: &dyn EntityRead,
        piece: usize,
        range: KeyRange,
        abandon: &AtomicBool,
    ) -> Result<Piece, BoxError> {
        let mut writers = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, field)| {
                let file = BufWriter::new(File::create(self.column_file(piece, i))?);
                Ok(FileWriter::try_new(
                    file,
                    &Schema::new(vec![field.as_ref().clone()]),
                )?)
            })
            .collect::<Result<Vec<_>, BoxError>>()?;
        let columns: Vec<usize> = (0..def.columns.len()).collect();
        let decoder = RowDecoder::new(def, &columns);
        let mut query = Query::new(range).page_size(BATCH_ROWS);
        query.projection = def.store_projection(columns.iter().copied());
        let mut rows = EncodedRows::new();
        let mut continuation = None;
        let mut batch_rows = Vec::new();
        loop {
            if abandon.load(Ordering::Relaxed) {
                return Err("abandoned".into());
            }
            rows.clear();
            continuation = runtime.block_on(reader.query_rows(
                &def.name,
                &query,
                continuation.as_ref(),
                &mut rows,
            ))?;
            if !rows.is_empty() {
                let batch = decoder.decode(def, self.schema.clone(), &rows)?;
                for (writer, column) in writers.iter_mut().zip(batch.columns()) {
                    let schema = writer.schema().clone();
                    writer.write(&RecordBatch::try_new(schema, vec![column.clone()])?)?;
                }
                batch_rows.push(batch.num_rows());
            }
            if continuation.is_none() {
                break;
            }
        }
        for mut writer in writers {
            writer.finish()?;
        }
        let columns = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, field)| MappedColumn::open(&self.column_file(piece, i), field))
            .collect::<Result<Vec<_>, BoxError>>()?;
        Ok(Piece {
            batches: batch_rows,
            columns,
        })
    }

    /// Piece `piece` of `pieces` (contiguous runs of batches, so each piece
    /// is in key order) of the table columns `columns`.
    pub fn read(self: &Arc<Self>, columns: &[usize], piece: usize, pieces: usize) -> CopyReader {
        let batches: usize = self.pieces.iter().map(|p| p.batches.len()).sum();
        let pieces = pieces.max(1);
        CopyReader {
            columns: columns.to_vec(),
            next: batches * piece / pieces,
            end: batches * (piece + 1) / pieces,
            copy: self.clone(),
        }
    }

    /// The piece holding batch `batch` (counted over all pieces), and the
    /// batch's place in it.
    fn locate(&self, mut batch: usize) -> (usize, usize) {
        for (index, piece) in self.pieces.iter().enumerate() {
            if batch < piece.batches.len() {
                return (index, batch);
            }
            batch -= piece.batches.len();
        }
        (self.pieces.len(), 0)
    }
}

/// Reads some columns of a copy, batch by batch.
pub struct CopyReader {
    columns: Vec<usize>,
    /// The next batch and the one after the last, counted over all pieces.
    next: usize,
    end: usize,
    copy: Arc<ColumnCopy>,
}

/// A batch's row count and columns.
pub type CopyBatch = (usize, Vec<ArrayRef>);

impl CopyReader {
    /// The next batch's rows and columns, in the order asked; `None` at the end.
    pub fn next_batch(&mut self) -> Option<Result<CopyBatch, ArrowError>> {
        if self.next == self.end {
            return None;
        }
        let (piece, index) = self.copy.locate(self.next);
        self.next += 1;
        Some(self.batch(piece, index))
    }

    fn batch(&self, piece: usize, index: usize) -> Result<CopyBatch, ArrowError> {
        let piece = &self.copy.pieces[piece];
        let columns = self
            .columns
            .iter()
            .map(|&column| piece.columns[column].batch(index))
            .collect::<Result<Vec<_>, ArrowError>>()?;
        Ok((piece.batches[index], columns))
    }
}

impl MappedColumn {
    /// Maps the Arrow IPC file at `path`, of the one column `field`.
    fn open(path: &Path, field: &Field) -> Result<MappedColumn, BoxError> {
        let file = File::open(path)?;
        // SAFETY: a copy's files are written whole before they are mapped
        // and never written again; they are removed only with the copy
        // (a mapping outlives the removal of its file).
        let map = unsafe { memmap2::Mmap::map(&file)? };
        let data = Buffer::from(bytes::Bytes::from_owner(map));
        let trailer = data
            .len()
            .checked_sub(10)
            .ok_or("a column copy file is too short")?;
        let footer_len = read_footer_length(data[trailer..].try_into()?)?;
        let footer_start = trailer
            .checked_sub(footer_len)
            .ok_or("a column copy file's footer is too long")?;
        let footer = root_as_footer(&data[footer_start..trailer])
            .map_err(|e| format!("a column copy file's footer: {e}"))?;
        let schema = Arc::new(Schema::new(vec![field.clone()]));
        // SAFETY: this process wrote the file from arrays it had made
        // (see `fill`), in a directory of its own that a restart removes:
        // its batches are valid Arrow, and checking them again at every
        // scan (UTF-8 of every string, every offset) would cost a scan as
        // much as reading them.
        let mut decoder =
            unsafe { FileDecoder::new(schema, footer.version()).with_skip_validation(true) };
        for block in footer.dictionaries().iter().flatten() {
            decoder.read_dictionary(block, &block_data(&data, block)?)?;
        }
        let blocks = footer
            .recordBatches()
            .map(|blocks| blocks.iter().copied().collect())
            .unwrap_or_default();
        Ok(MappedColumn {
            data,
            blocks,
            decoder,
        })
    }

    /// The column of record batch `index`.
    fn batch(&self, index: usize) -> Result<ArrayRef, ArrowError> {
        let block = self
            .blocks
            .get(index)
            .ok_or_else(|| ArrowError::IpcError("a column copy ended early".into()))?;
        match self
            .decoder
            .read_record_batch(block, &block_data(&self.data, block)?)?
        {
            Some(batch) => Ok(batch.column(0).clone()),
            None => Err(ArrowError::IpcError("a column copy ended early".into())),
        }
    }
}

/// Lowers the calling thread's priority (nice 10): a copy made in the
/// background takes the cores only while the statements of clients leave
/// them idle. A scan that comes to wait for such a copy does not raise it
/// back (a thread may lower its priority, not raise it, without
/// privileges).
fn give_way() {
    #[cfg(target_os = "linux")]
    // SAFETY: changes the priority of the calling thread only.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
}

/// The bytes of `block` in a mapped file (shared, not copied).
fn block_data(data: &Buffer, block: &Block) -> Result<Buffer, ArrowError> {
    let start = usize::try_from(block.offset()).ok();
    let len = block.metaDataLength() as usize + block.bodyLength() as usize;
    match start.filter(|start| start.saturating_add(len) <= data.len()) {
        Some(start) => Ok(data.slice_with_length(start, len)),
        None => Err(ArrowError::IpcError(
            "a column copy's batch lies outside its file".into(),
        )),
    }
}
