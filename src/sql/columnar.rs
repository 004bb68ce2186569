//! Column copies of tables, for scans that read a whole table.
//!
//! The store keeps each entity as one record: right for point reads and
//! writes, costly for an analytic query that reads a few columns of every
//! row, since every record is decoded. A column copy holds a table's rows
//! as Arrow record batches, one Arrow IPC file per column, in key order,
//! made from one read view. A scan of the whole table reads only the files
//! of the columns it needs, when the copy was made at the version its own
//! read view sees (`EntityRead::table_version`): same version, same
//! entities, so the same answer.
//!
//! A copy is made in the background once a second whole-table scan finds
//! the table unchanged since the first (a table written between its scans
//! would not keep a copy long), for tables of at least [`MIN_ROWS`]
//! entities. The copies live in a directory of the engine's own under the
//! store's derived files; a copy's files go when a newer copy replaces it
//! or the table changes (once no scan reads them), and the directory goes
//! with the engine.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::FileWriter;

use super::convert::RowDecoder;
use crate::catalog::TableDef;
use crate::store::{EncodedRows, EntityRead, Query};

/// Tables with fewer entities are scanned from the store: their scans are
/// short either way.
pub const MIN_ROWS: usize = 10_000;
/// Rows per record batch of a copy.
const BATCH_ROWS: usize = 8192;

/// The column copies of one engine's tables.
pub struct ColumnCopies {
    dir: PathBuf,
    next_copy: AtomicU64,
    tables: Mutex<HashMap<String, TableCopies>>,
}

#[derive(Default)]
struct TableCopies {
    ready: Option<Arc<ColumnCopy>>,
    /// The version the last whole-table scan saw.
    scanned: Option<u64>,
    /// Whether a copy is being made.
    building: bool,
}

/// A table's rows at one version, column by column.
pub struct ColumnCopy {
    dir: PathBuf,
    version: u64,
    /// The table's columns when the copy was made.
    schema: SchemaRef,
    /// The rows of each batch.
    batch_rows: Vec<usize>,
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
    /// Copies kept under `derived` (the store's derived files directory).
    /// The directories left there by processes that stopped are removed.
    pub fn open(derived: &Path) -> std::io::Result<ColumnCopies> {
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
            next_copy: AtomicU64::new(0),
            tables: Mutex::default(),
        })
    }

    /// The copy a whole-table scan through `reader` may read instead of the
    /// table, if there is one; the scan counts towards making a copy
    /// (`entities`: about how many the table holds).
    pub async fn for_scan(
        self: &Arc<Self>,
        def: &Arc<TableDef>,
        reader: &Arc<dyn EntityRead>,
        entities: Option<usize>,
    ) -> Option<Arc<ColumnCopy>> {
        let version = reader.table_version(&def.name).await.ok()??;
        let schema = super::provider::table_schema(def, false);
        let mut tables = lock(&self.tables);
        let copies = tables.entry(def.name.clone()).or_default();
        if let Some(ready) = &copies.ready {
            if ready.version == version && ready.schema == schema {
                return Some(ready.clone());
            }
            if ready.version < version {
                // The table changed: scans of older views that still read
                // the copy keep its files until they end.
                copies.ready = None;
            }
        }
        let again = copies.scanned == Some(version);
        copies.scanned = Some(version);
        if again && !copies.building && entities.is_some_and(|n| n >= MIN_ROWS) {
            copies.building = true;
            self.start_copy(def.clone(), schema, reader.clone(), version);
        }
        None
    }

    /// Makes a copy of the table as `reader` sees it, on a thread of its own.
    fn start_copy(
        self: &Arc<Self>,
        def: Arc<TableDef>,
        schema: SchemaRef,
        reader: Arc<dyn EntityRead>,
        version: u64,
    ) {
        let copies = self.clone();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let dir = copies.dir.join(format!(
                "{}",
                copies.next_copy.fetch_add(1, Ordering::Relaxed)
            ));
            let made = make_copy(&runtime, &def, &*reader, dir, schema, version);
            let mut tables = lock(&copies.tables);
            let entry = tables.entry(def.name.clone()).or_default();
            entry.building = false;
            match made {
                Ok(copy) if entry.ready.as_ref().is_none_or(|r| r.version <= version) => {
                    tracing::debug!(
                        "column copy of {:?} at version {version}: {} batches",
                        def.name,
                        copy.batch_rows.len()
                    );
                    entry.ready = Some(Arc::new(copy));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("no column copy of {:?}: {e}", def.name),
            }
        });
    }
}

/// Reads every row of the table through `reader` into a copy in `dir`.
fn make_copy(
    runtime: &tokio::runtime::Handle,
    def: &TableDef,
    reader: &dyn EntityRead,
    dir: PathBuf,
    schema: SchemaRef,
    version: u64,
) -> Result<ColumnCopy, Box<dyn std::error::Error + Send + Sync>> {
    std::fs::create_dir_all(&dir)?;
    // From here the copy removes its files if it is not finished.
    let mut copy = ColumnCopy {
        dir,
        version,
        schema,
        batch_rows: Vec::new(),
    };
    let mut writers = copy
        .schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let file = BufWriter::new(File::create(copy.column_file(i))?);
            Ok(FileWriter::try_new(
                file,
                &Schema::new(vec![field.as_ref().clone()]),
            )?)
        })
        .collect::<Result<Vec<_>, Box<dyn std::error::Error + Send + Sync>>>()?;
    let columns: Vec<usize> = (0..def.columns.len()).collect();
    let mut decoder = RowDecoder::new(def, &columns);
    let mut query = Query::table().page_size(BATCH_ROWS);
    query.projection = def.store_projection(columns.iter().copied());
    let mut rows = EncodedRows::new();
    let mut continuation = None;
    loop {
        rows.clear();
        continuation = runtime.block_on(reader.query_rows(
            &def.name,
            &query,
            continuation.as_ref(),
            &mut rows,
        ))?;
        if !rows.is_empty() {
            let batch = decoder.decode(def, copy.schema.clone(), &rows)?;
            for (writer, column) in writers.iter_mut().zip(batch.columns()) {
                let schema = writer.schema().clone();
                writer.write(&RecordBatch::try_new(schema, vec![column.clone()])?)?;
            }
            copy.batch_rows.push(batch.num_rows());
        }
        if continuation.is_none() {
            break;
        }
    }
    for mut writer in writers {
        writer.finish()?;
    }
    Ok(copy)
}

impl ColumnCopy {
    fn column_file(&self, column: usize) -> PathBuf {
        self.dir.join(format!("{column}.arrow"))
    }

    /// Piece `piece` of `pieces` (contiguous runs of batches, so each piece
    /// is in key order) of the table columns `columns`.
    pub fn read(
        self: &Arc<Self>,
        columns: &[usize],
        piece: usize,
        pieces: usize,
    ) -> Result<CopyReader, ArrowError> {
        let (batches, pieces) = (self.batch_rows.len(), pieces.max(1));
        let (start, end) = (batches * piece / pieces, batches * (piece + 1) / pieces);
        let readers = columns
            .iter()
            .map(|&column| {
                let file = File::open(self.column_file(column))?;
                let mut reader = FileReader::try_new_buffered(file, None)?;
                if start < end {
                    reader.set_index(start)?;
                }
                Ok(reader)
            })
            .collect::<Result<Vec<_>, ArrowError>>()?;
        Ok(CopyReader {
            readers,
            next: start,
            end,
            copy: self.clone(),
        })
    }
}

/// Reads some columns of a copy, batch by batch.
pub struct CopyReader {
    readers: Vec<FileReader<std::io::BufReader<File>>>,
    next: usize,
    end: usize,
    /// The copy's files stay while they are read.
    copy: Arc<ColumnCopy>,
}

/// A batch's row count and columns.
pub type CopyBatch = (usize, Vec<datafusion::arrow::array::ArrayRef>);

impl CopyReader {
    /// The next batch's rows and columns, in the order asked; `None` at the end.
    pub fn next_batch(&mut self) -> Option<Result<CopyBatch, ArrowError>> {
        if self.next == self.end {
            return None;
        }
        let rows = self.copy.batch_rows[self.next];
        self.next += 1;
        let columns = self
            .readers
            .iter_mut()
            .map(|reader| match reader.next() {
                Some(batch) => Ok(batch?.column(0).clone()),
                None => Err(ArrowError::IpcError("a column copy ended early".into())),
            })
            .collect::<Result<Vec<_>, ArrowError>>();
        Some(columns.map(|columns| (rows, columns)))
    }
}
