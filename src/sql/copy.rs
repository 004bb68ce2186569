//! COPY ... FROM STDIN (text and CSV): parsing the stream into rows and
//! changes; and the options of COPY ... TO STDOUT, whose rows the wire layer
//! encodes.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::arrow::array::{ArrayRef, AsArray, BinaryArray, RecordBatch, StringArray};
use datafusion::arrow::compute::CastOptions;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::sql::sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption};

use super::checks::{naming_failing_row, Checks};
use super::convert::batch_to_rows;
use super::diagnostics::monitor::NearLimits;
use super::dml::bytea_input;
use super::error::{Result, SqlError};
use super::floats::check_real_range;
use super::time_zone::SessionZone;
use super::types::{arrow_type, cast_input};
use crate::catalog::{SqlType, TableDef};
use crate::model::check_entity_parts;
use crate::store::{EncodedRows, LoadRows, SortedRuns, StoreError};

/// Lines a thread parses and makes into rows at a time: a part fills a
/// chunk of rows, and joins the others without a copy (see
/// [`EncodedRows::append`]).
const PART_ROWS: usize = 8192;

/// A COPY that may spill holds rows of up to this share of the engine's
/// query memory before it spills them to disk (1 GiB of the default
/// 4 GiB), and at least [`MIN_HELD_BYTES`]. Spilled rows are read back
/// for the foreign key checks and again for the write, and sorted in runs
/// where held rows are sorted once.
const HELD_SHARE_OF_QUERY_MEMORY: usize = 4;

/// The least a COPY that may spill holds before it spills (the room left
/// in the query memory still bounds it).
const MIN_HELD_BYTES: usize = 256 << 20;

/// Bytes of rows a COPY that may spill holds before it spills them, in
/// `pool`.
fn held_bytes(pool: &dyn MemoryPool) -> usize {
    match pool.memory_limit() {
        MemoryLimit::Finite(limit) => (limit / HELD_SHARE_OF_QUERY_MEMORY).max(MIN_HELD_BYTES),
        MemoryLimit::Infinite | MemoryLimit::Unknown => MIN_HELD_BYTES,
    }
}

/// The rows made of a part's lines, and those of them near the entity
/// limits.
type Made = (EncodedRows, NearLimits);

/// The format options of a COPY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFormat {
    pub csv: bool,
    pub delimiter: char,
    pub null: String,
    pub header: bool,
    pub quote: char,
    pub escape: char,
}

impl CopyFormat {
    pub fn parse(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<Self> {
        let mut csv = false;
        let mut delimiter = None;
        let mut null = None;
        let mut header = false;
        let mut quote = '"';
        let mut escape = None;
        for option in options {
            match option {
                CopyOption::Format(f) => match f.value.to_lowercase().as_str() {
                    "csv" => csv = true,
                    "text" => csv = false,
                    other => {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "COPY format {other} is not supported (text and csv are)"
                        )))
                    }
                },
                CopyOption::Delimiter(c) => delimiter = Some(*c),
                CopyOption::Null(n) => null = Some(n.clone()),
                CopyOption::Header(h) => header = *h,
                CopyOption::Quote(c) => quote = *c,
                CopyOption::Escape(c) => escape = Some(*c),
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "COPY option {other} is not supported"
                    )))
                }
            }
        }
        for option in legacy {
            match option {
                CopyLegacyOption::Csv(csv_options) => {
                    csv = true;
                    for o in csv_options {
                        match o {
                            CopyLegacyCsvOption::Header => header = true,
                            CopyLegacyCsvOption::Quote(c) => quote = *c,
                            CopyLegacyCsvOption::Escape(c) => escape = Some(*c),
                            other => {
                                return Err(SqlError::FeatureNotSupported(format!(
                                    "COPY option {other} is not supported"
                                )))
                            }
                        }
                    }
                }
                CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
                CopyLegacyOption::Null(n) => null = Some(n.clone()),
                CopyLegacyOption::Header => header = true,
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "COPY option {other} is not supported"
                    )))
                }
            }
        }
        Ok(CopyFormat {
            csv,
            delimiter: delimiter.unwrap_or(if csv { ',' } else { '\t' }),
            null: null.unwrap_or_else(|| if csv { String::new() } else { "\\N".into() }),
            header,
            quote,
            escape: escape.unwrap_or(quote),
        })
    }
}

/// A COPY FROM STDIN in progress.
pub struct CopyIn {
    parser: Arc<LineParser>,
    /// Bytes of a line not yet complete.
    pending: Vec<u8>,
    /// Whole lines not yet handed to the parsing threads (less than a
    /// part), as they came (each without its newline), and where each ends
    /// in `held`.
    held: Vec<u8>,
    held_ends: Vec<usize>,
    /// The number of the first line held (lines after it are held in
    /// order, none skipped).
    first_held: usize,
    /// Where each part handed to the parsing threads sends its rows, in
    /// line order (in a mutex only because a session is shared between
    /// threads; it is never contended).
    parsing: Mutex<VecDeque<Receiver<Result<Made>>>>,
    /// The entities made, in stored form (what a COPY holds until it
    /// commits).
    rows: EncodedRows,
    /// The rows' share of the engine's query memory: a COPY that would
    /// hold more spills them, or fails (53200) where it may not spill.
    memory: MemoryReservation,
    /// Rows spilled to disk, when the COPY may spill, once it holds
    /// `max_held` bytes of them.
    spilled: Option<SortedRuns>,
    /// Bytes of rows held before they spill ([`held_bytes`] of the pool).
    max_held: usize,
    /// Those of the rows near the entity limits.
    near_limits: NearLimits,
    lines: usize,
    header_skipped: bool,
    ended: bool,
}

impl CopyIn {
    /// A COPY of `columns` of `def`, holding its rows in `memory`; with a
    /// `spill_dir`, rows past [`held_bytes`] or the room left in
    /// `memory` are spilled there in sorted runs. Instants without a zone
    /// are read in `zone`, the session's; each row must pass `checks`.
    pub(super) fn new(
        def: Arc<TableDef>,
        columns: Vec<usize>,
        format: CopyFormat,
        zone: SessionZone,
        checks: Option<Checks>,
        memory: &Arc<dyn MemoryPool>,
        spill_dir: Option<PathBuf>,
    ) -> Self {
        let max_held = held_bytes(memory.as_ref());
        let memory = MemoryConsumer::new(format!("COPY into {}", def.name)).register(memory);
        CopyIn {
            parser: Arc::new(LineParser {
                properties: stored_by_name(&def),
                def,
                columns,
                format,
                zone,
                checks,
            }),
            pending: Vec::new(),
            held: Vec::new(),
            held_ends: Vec::new(),
            first_held: 1,
            parsing: Mutex::default(),
            rows: EncodedRows::new(),
            memory,
            spilled: spill_dir.map(SortedRuns::new),
            max_held,
            near_limits: NearLimits::default(),
            lines: 0,
            header_skipped: false,
            ended: false,
        }
    }

    pub fn columns(&self) -> usize {
        self.parser.columns.len()
    }

    /// Takes a chunk of the input.
    pub fn feed(&mut self, data: &[u8]) -> Result<()> {
        let mut pending = std::mem::take(&mut self.pending);
        pending.extend_from_slice(data);
        let mut start = 0;
        let mut in_quotes = false;
        let (csv, quote) = (self.parser.format.csv, self.parser.format.quote as u8);
        for (i, &b) in pending.iter().enumerate() {
            if csv && b == quote {
                in_quotes = !in_quotes;
            } else if b == b'\n' && !in_quotes {
                self.line(&pending[start..i])?;
                start = i + 1;
            }
        }
        pending.drain(..start);
        self.pending = pending;
        self.take_made(false)
    }

    /// The definition of the table the rows go to.
    pub fn definition(&self) -> &Arc<TableDef> {
        &self.parser.def
    }

    /// Ends the input; returns the rows, and which of them are near the
    /// entity limits.
    pub fn finish(mut self) -> Result<(LoadRows, NearLimits)> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line)?;
        }
        // Less than a part is left: it is parsed here, beside the threads
        // (its error comes after theirs).
        let rest = match self.held_ends.is_empty() {
            true => None,
            false => Some(
                self.parser
                    .make(&self.held, &self.held_ends, self.first_held),
            ),
        };
        self.take_made(true)?;
        if let Some(made) = rest {
            self.add(made?)?;
        }
        let rows = match self.spilled.take() {
            Some(mut runs) if !runs.is_empty() => {
                runs.add(&self.rows)?;
                LoadRows::Spilled(runs)
            }
            _ => LoadRows::Held(std::mem::take(&mut self.rows)),
        };
        Ok((rows, std::mem::take(&mut self.near_limits)))
    }

    /// Takes one whole line: holds it, unless it is the header or comes
    /// after the end marker.
    fn line(&mut self, raw: &[u8]) -> Result<()> {
        self.lines += 1;
        if self.ended {
            return Ok(());
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw == b"\\." {
            self.ended = true;
            return Ok(());
        }
        if self.parser.format.header && !self.header_skipped {
            self.header_skipped = true;
            return Ok(());
        }
        if self.held_ends.is_empty() {
            self.first_held = self.lines;
        }
        self.held.extend_from_slice(raw);
        self.held_ends.push(self.held.len());
        match self.held_ends.len() == PART_ROWS {
            true => self.hand_over(),
            false => Ok(()),
        }
    }

    /// Hands the held lines, a whole part, to the parsing threads.
    fn hand_over(&mut self) -> Result<()> {
        let capacity = self.held.capacity();
        let part = Part {
            text: std::mem::replace(&mut self.held, Vec::with_capacity(capacity)),
            ends: std::mem::replace(&mut self.held_ends, Vec::with_capacity(PART_ROWS)),
            first: self.first_held,
        };
        let (made, receiver) = mpsc::sync_channel(1);
        let job = Job {
            parser: self.parser.clone(),
            part,
            made,
        };
        parsing_threads()?.send(job).map_err(|_| parser_lost())?;
        self.parsing().push_back(receiver);
        Ok(())
    }

    /// Adds the rows of the parts parsed so far, in line order; with
    /// `all`, waits for every part handed over. The first bad line's
    /// error is returned.
    fn take_made(&mut self, all: bool) -> Result<()> {
        loop {
            let parsing = self.parsing();
            let Some(first) = parsing.front() else {
                return Ok(());
            };
            let next = match all {
                true => first.recv().map_err(|_| parser_lost())?,
                false => match first.try_recv() {
                    Ok(next) => next,
                    Err(TryRecvError::Empty) => return Ok(()),
                    Err(TryRecvError::Disconnected) => return Err(parser_lost()),
                },
            };
            parsing.pop_front();
            self.add(next?)?;
        }
    }

    fn parsing(&mut self) -> &mut VecDeque<Receiver<Result<Made>>> {
        self.parsing.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&mut self, (rows, near_limits): Made) -> Result<()> {
        if !self.make_room(rows.allocated_bytes())? {
            return Err(SqlError::value(
                "53200",
                format!(
                    "out of memory: {} holds {} rows ({} MiB) until it commits, \
                     and the query memory has no room for more; \
                     split the data into smaller COPYs",
                    self.memory.consumer().name(),
                    self.rows.len(),
                    self.memory.size() >> 20,
                ),
            ));
        }
        self.rows.append(rows);
        self.near_limits.add(near_limits);
        Ok(())
    }

    /// Reserves `bytes` more for the rows held; false when the query
    /// memory has no room. A COPY that may spill first spills the rows it
    /// holds when they would pass `max_held` or the room left.
    fn make_room(&mut self, bytes: usize) -> Result<bool> {
        let Some(runs) = &mut self.spilled else {
            return Ok(self.memory.try_grow(bytes).is_ok());
        };
        if self.memory.size() + bytes <= self.max_held && self.memory.try_grow(bytes).is_ok() {
            return Ok(true);
        }
        runs.add(&self.rows)?;
        self.rows = EncodedRows::new();
        self.memory.free();
        Ok(self.memory.try_grow(bytes).is_ok())
    }
}

/// Lines handed to a parsing thread.
struct Part {
    /// The lines, each without its newline.
    text: Vec<u8>,
    /// Where each line ends in `text`.
    ends: Vec<usize>,
    /// The number of the first line.
    first: usize,
}

/// A part, what parses it, and where its rows go.
struct Job {
    parser: Arc<LineParser>,
    part: Part,
    made: SyncSender<Result<Made>>,
}

/// The threads that parse the parts of every COPY and make them into rows,
/// one a core (up to 4), while the connections read on; started with the
/// first COPY of more than a part. They stay, so that the memory of one
/// COPY's rows is theirs to use again for the next: new threads took fresh
/// pages from the system, and the kernel's clearing of those was a third
/// of their time.
fn parsing_threads() -> Result<&'static SyncSender<Job>> {
    static THREADS: OnceLock<std::result::Result<SyncSender<Job>, String>> = OnceLock::new();
    let threads = THREADS.get_or_init(|| {
        let count = crate::store::bulk_threads();
        // A thread's next part waits, ready; the connection waits past that.
        let (jobs, waiting) = mpsc::sync_channel::<Job>(count);
        let waiting = Arc::new(Mutex::new(waiting));
        for _ in 0..count {
            let waiting = waiting.clone();
            std::thread::Builder::new()
                .name("copy-parser".into())
                .spawn(move || loop {
                    let next = waiting.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok(Job { parser, part, made }) = next else {
                        return;
                    };
                    let parsed = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        parser.make(&part.text, &part.ends, part.first)
                    }));
                    let _ = made.send(parsed.unwrap_or_else(|_| Err(parser_lost())));
                })
                .map_err(|e| format!("no thread to parse COPY lines: {e}"))?;
        }
        Ok(jobs)
    });
    threads.as_ref().map_err(|e| SqlError::Internal(e.clone()))
}

/// A part's parsing ended without its rows (it panicked).
fn parser_lost() -> SqlError {
    SqlError::Internal("parsing COPY lines failed".into())
}

/// The columns of a table stored as properties, in name order.
fn stored_by_name(def: &TableDef) -> Vec<usize> {
    let mut columns: Vec<usize> = def.property_columns().collect();
    columns.sort_by(|&a, &b| def.columns[a].name.cmp(&def.columns[b].name));
    columns
}

/// How the lines of a COPY become rows.
struct LineParser {
    def: Arc<TableDef>,
    columns: Vec<usize>,
    format: CopyFormat,
    /// The columns stored as properties (neither key nor system columns),
    /// in name order: the order of a record's properties.
    properties: Vec<usize>,
    /// The session's, in which an instant's text without a zone is read.
    zone: SessionZone,
    /// The table's CHECK constraints.
    checks: Option<Checks>,
}

impl LineParser {
    /// Parses lines (ending at `ends` in `text`, the first numbered
    /// `first`) and makes them into rows.
    fn make(&self, text: &[u8], ends: &[usize], first: usize) -> Result<Made> {
        let mut start = 0;
        let lines = ends.iter().map(|&end| {
            let line = &text[start..end];
            start = end;
            line
        });
        let fields = self.parse_lines(lines, first)?;
        self.make_rows(&fields, first)
    }

    /// Splits held lines into their fields, all in one list (a line's
    /// fields after the previous line's); `first` is the number of the first
    /// line.
    fn parse_lines<'a>(
        &self,
        lines: impl Iterator<Item = &'a [u8]>,
        first: usize,
    ) -> Result<Vec<Option<Cow<'a, str>>>> {
        let mut fields = Vec::with_capacity(PART_ROWS * self.columns.len());
        for (n, raw) in lines.enumerate() {
            let number = first + n;
            let text = std::str::from_utf8(raw).map_err(|_| {
                SqlError::value(
                    "22021",
                    format!("invalid byte sequence for encoding \"UTF8\" in COPY line {number}"),
                )
            })?;
            let before = fields.len();
            if self.format.csv {
                self.csv_fields(text, &mut fields);
            } else {
                self.text_fields(text, &mut fields);
            }
            let found = fields.len() - before;
            if found != self.columns.len() {
                return Err(SqlError::value(
                    "22P04",
                    format!(
                        "COPY line {number}: expected {} columns, found {found}",
                        self.columns.len(),
                    ),
                ));
            }
        }
        Ok(fields)
    }

    /// Splits a line of the text format, undoing its backslash escapes.
    fn text_fields<'a>(&self, line: &'a str, out: &mut Vec<Option<Cow<'a, str>>>) {
        for raw in line.split(self.format.delimiter) {
            if raw == self.format.null {
                out.push(None);
                continue;
            }
            if !raw.contains('\\') {
                out.push(Some(Cow::Borrowed(raw)));
                continue;
            }
            let mut value = String::with_capacity(raw.len());
            let mut chars = raw.chars().peekable();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    value.push(c);
                    continue;
                }
                match chars.next() {
                    Some('n') => value.push('\n'),
                    Some('t') => value.push('\t'),
                    Some('r') => value.push('\r'),
                    Some('b') => value.push('\u{8}'),
                    Some('f') => value.push('\u{c}'),
                    Some('v') => value.push('\u{b}'),
                    Some(d @ '0'..='7') => {
                        let mut code = d.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            match chars.peek().and_then(|c| c.to_digit(8)) {
                                Some(n) => {
                                    code = code * 8 + n;
                                    chars.next();
                                }
                                None => break,
                            }
                        }
                        value.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    Some(other) => value.push(other),
                    None => value.push('\\'),
                }
            }
            out.push(Some(Cow::Owned(value)));
        }
    }

    /// Splits a CSV line: quoted fields may hold delimiters, quotes (doubled or
    /// escaped) and newlines; an unquoted empty field is the NULL string.
    fn csv_fields<'a>(&self, line: &str, out: &mut Vec<Option<Cow<'a, str>>>) {
        let (delimiter, quote, escape) =
            (self.format.delimiter, self.format.quote, self.format.escape);
        let mut value = String::new();
        let mut quoted = false;
        let mut was_quoted = false;
        let mut chars = line.chars().peekable();
        loop {
            match chars.next() {
                None => break,
                Some(c) if quoted && c == escape && chars.peek() == Some(&quote) => {
                    value.push(quote);
                    chars.next();
                }
                Some(c) if c == quote => {
                    quoted = !quoted;
                    was_quoted = true;
                }
                Some(c) if c == delimiter && !quoted => {
                    out.push(self.csv_value(std::mem::take(&mut value), was_quoted));
                    was_quoted = false;
                }
                Some(c) => value.push(c),
            }
        }
        out.push(self.csv_value(value, was_quoted));
    }

    /// The error of the first of a column's texts (of lines numbered from
    /// `first`) that does not read as `target`, with its line and column
    /// as PostgreSQL's CONTEXT names them; `error` (the whole column's)
    /// when no text alone fails.
    fn unread(
        &self,
        error: SqlError,
        texts: &ArrayRef,
        target: &DataType,
        first: usize,
        column: &str,
    ) -> SqlError {
        let strict = CastOptions {
            safe: false,
            ..Default::default()
        };
        for row in 0..texts.len() {
            if let Err(error) = cast_input(&texts.slice(row, 1), target, &strict, &self.zone) {
                let text = texts.as_string_opt::<i32>().map_or("", |t| t.value(row));
                let context = format!(
                    "COPY {}, line {}, column {column}: \"{text}\"",
                    self.def.name,
                    first + row
                );
                return SqlError::InContext {
                    error: Box::new(error),
                    context,
                };
            }
        }
        error
    }

    fn csv_value<'a>(&self, value: String, was_quoted: bool) -> Option<Cow<'a, str>> {
        (was_quoted || value != self.format.null).then_some(Cow::Owned(value))
    }

    /// Makes parsed lines (their fields in one list) into rows, casting each
    /// column's text to its type.
    fn make_rows(
        &self,
        fields: &[Option<Cow<str>>],
        first: usize,
    ) -> Result<(EncodedRows, NearLimits)> {
        let width = self.columns.len();
        let strict = CastOptions {
            safe: false,
            ..Default::default()
        };
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        let mut schema = Vec::with_capacity(self.columns.len());
        for (j, &i) in self.columns.iter().enumerate() {
            let column = &self.def.columns[i];
            let texts = fields.iter().skip(j).step_by(width).map(|f| f.as_deref());
            let array: ArrayRef = if column.ty == SqlType::Bytea {
                Arc::new(texts.map(|t| t.map(bytea_input)).collect::<BinaryArray>())
            } else {
                let strings: ArrayRef = Arc::new(texts.collect::<StringArray>());
                let target = arrow_type(column.ty);
                let array = cast_input(&strings, &target, &strict, &self.zone)
                    .map_err(|e| self.unread(e, &strings, &target, first, &column.name))?;
                if column.ty == SqlType::Float4 {
                    check_real_range(&strings, &array)?;
                }
                array
            };
            schema.push(Field::new(&column.name, array.data_type().clone(), true));
            arrays.push(array);
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(schema)), arrays)?;
        let mut rows = EncodedRows::new();
        let mut near_limits = NearLimits::default();
        // Each row is encoded as its entity would be (see
        // `TableDef::row_to_entity`), without making the entity: its
        // properties are its non-NULL values of the stored columns.
        let verdicts = (self.checks.as_ref())
            .map(|checks| checks.judge(&self.columns, &batch))
            .transpose()?;
        let made = batch_to_rows(&self.def, &self.columns, &batch)?;
        let made_rows = made.len();
        for (index, row) in made.into_iter().enumerate() {
            self.def.check_row(&row).map_err(|e| {
                naming_failing_row(e, &self.def, &self.columns, &batch, index, &self.zone)
            })?;
            verdicts.as_ref().map_or(Ok(()), |v| v.pass(index))?;
            let key = self.def.entity_key(&row)?;
            let properties = self.properties.iter().filter_map(|&i| {
                let value = row[i].as_ref()?;
                Some((self.def.columns[i].name.as_str(), value))
            });
            let billed_size =
                check_entity_parts(&key, properties.clone()).map_err(StoreError::from)?;
            let count = properties.clone().count();
            near_limits.note(&key, count, billed_size, Some(&self.def));
            rows.push_new(&key, billed_size, properties);
            if index == 0 {
                rows.reserve_like_last(made_rows - 1);
            }
        }
        Ok((rows, near_limits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(columns: Vec<crate::catalog::Column>, keys: crate::catalog::Keys) -> Arc<TableDef> {
        Arc::new(TableDef::new("t", columns, keys))
    }

    fn format(csv: bool) -> CopyFormat {
        CopyFormat::parse(
            &[],
            &if csv {
                vec![CopyLegacyOption::Csv(vec![])]
            } else {
                vec![]
            },
        )
        .unwrap()
    }

    fn copy(csv: bool) -> CopyIn {
        let def = table(vec![], crate::catalog::Keys::Generated);
        CopyIn::new(
            def,
            vec![],
            format(csv),
            SessionZone::utc(),
            None,
            &unlimited(),
            None,
        )
    }

    /// The rows of a COPY that held them all.
    fn held((rows, near_limits): (LoadRows, NearLimits)) -> (EncodedRows, NearLimits) {
        match rows {
            LoadRows::Held(rows) => (rows, near_limits),
            LoadRows::Spilled(runs) => panic!("{} rows spilled", runs.len()),
        }
    }

    fn unlimited() -> Arc<dyn MemoryPool> {
        Arc::new(datafusion::execution::memory_pool::UnboundedMemoryPool::default())
    }

    /// A COPY's record of a row is the record of the entity the row makes
    /// (properties in name order, whatever the column order).
    #[test]
    fn rows_are_encoded_as_their_entities() {
        let column = crate::catalog::Column::new;
        let def = table(
            vec![
                column("k", SqlType::Int4),
                column("zeta", SqlType::Text),
                column("alpha", SqlType::Int8),
                column("mid", SqlType::Bool),
            ],
            crate::catalog::Keys::Columns {
                partition: vec![0],
                row: vec![],
            },
        );
        let mut copy = CopyIn::new(
            def,
            vec![0, 1, 2, 3],
            format(false),
            SessionZone::utc(),
            None,
            &unlimited(),
            None,
        );
        copy.feed(b"1\tz\t7\tt\n2\t\\N\t-3\t\\N\n").unwrap();
        let (rows, _) = held(copy.finish().unwrap());
        assert_eq!(rows.len(), 2);
        for (i, row) in rows.iter().enumerate() {
            let entity = rows.entity(i, None).unwrap();
            let mut expected = EncodedRows::new();
            expected.push_entity(&entity);
            assert_eq!(row.record, expected.get(0).record);
        }
        let first = rows.entity(0, None).unwrap();
        assert_eq!(first.properties.len(), 3);
        assert_eq!(
            first.get("zeta"),
            Some(&crate::model::Value::String("z".into()))
        );
        assert_eq!(rows.entity(1, None).unwrap().properties.len(), 1);
    }

    /// A COPY of `lines` lines (`k\tv`, those numbered in `bad` missing
    /// their `v`)
    /// into a table keyed by `k`, fed in pieces of 1000 bytes.
    fn copy_numbered(lines: usize, bad: &[usize]) -> Result<(EncodedRows, NearLimits)> {
        copy_numbered_within(lines, bad, &unlimited(), None).map(held)
    }

    /// [`copy_numbered`], the rows held within `memory`, or spilled into
    /// `spill_dir` past it.
    fn copy_numbered_within(
        lines: usize,
        bad: &[usize],
        memory: &Arc<dyn MemoryPool>,
        spill_dir: Option<PathBuf>,
    ) -> Result<(LoadRows, NearLimits)> {
        let column = crate::catalog::Column::new;
        let def = table(
            vec![column("k", SqlType::Int4), column("v", SqlType::Int8)],
            crate::catalog::Keys::Columns {
                partition: vec![0],
                row: vec![],
            },
        );
        let mut copy = CopyIn::new(
            def,
            vec![0, 1],
            format(false),
            SessionZone::utc(),
            None,
            memory,
            spill_dir,
        );
        let text: String = (1..=lines)
            .map(|n| match bad.contains(&n) {
                true => format!("{n}\n"),
                false => format!("{n}\t{}\n", n * 10),
            })
            .collect();
        for piece in text.as_bytes().chunks(1000) {
            copy.feed(piece)?;
        }
        copy.finish()
    }

    /// Lines are parsed in parts on threads of their own; the rows keep
    /// the lines' order.
    #[test]
    fn rows_of_many_parts_keep_the_order_of_their_lines() {
        let lines = 3 * PART_ROWS + 5;
        let (rows, _) = copy_numbered(lines, &[]).unwrap();
        assert_eq!(rows.len(), lines);
        for i in 0..lines {
            let v = rows.entity(i, None).unwrap().get("v").cloned();
            assert_eq!(v, Some(crate::model::Value::Int64((i as i64 + 1) * 10)));
        }
    }

    /// The rows a COPY holds count against the query memory: past it, the
    /// COPY fails with 53200, and what it held is given back.
    #[test]
    fn rows_past_the_query_memory_fail_the_copy() {
        use datafusion::execution::memory_pool::GreedyMemoryPool;
        let memory: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 20));
        let (rows, _) = held(copy_numbered_within(5_000, &[], &memory, None).unwrap());
        assert_eq!(rows.len(), 5_000);
        assert!(rows.allocated_bytes() < 1 << 20);
        let e = copy_numbered_within(PART_ROWS * 20, &[], &memory, None)
            .err()
            .expect("out of memory");
        match &e {
            SqlError::InvalidValue { sqlstate, message } => {
                assert_eq!(*sqlstate, "53200");
                assert!(
                    message.contains("split the data into smaller COPYs"),
                    "{message}"
                );
            }
            other => panic!("{other}"),
        }
        assert_eq!(memory.reserved(), 0);
    }

    /// A COPY that may spill holds a quarter of the query memory, and at
    /// least 256 MiB, before it spills.
    #[test]
    fn a_copy_holds_a_share_of_the_query_memory_before_it_spills() {
        use datafusion::execution::memory_pool::GreedyMemoryPool;
        let pool = |bytes: usize| GreedyMemoryPool::new(bytes);
        assert_eq!(held_bytes(&pool(4 << 30)), 1 << 30);
        assert_eq!(held_bytes(&pool(16 << 30)), 4 << 30);
        // A small query memory still lets a COPY hold what it has room for.
        assert_eq!(held_bytes(&pool(512 << 20)), MIN_HELD_BYTES);
        assert_eq!(held_bytes(unlimited().as_ref()), MIN_HELD_BYTES);
    }

    /// A COPY that may spill takes rows past the query memory: it spills
    /// those it holds into sorted runs, which hold every row.
    #[test]
    fn rows_past_the_query_memory_spill_when_they_may() {
        use datafusion::execution::memory_pool::GreedyMemoryPool;
        let memory: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 20));
        let dir = tempfile::tempdir().unwrap();
        let lines = PART_ROWS * 20;
        let (rows, _) =
            copy_numbered_within(lines, &[], &memory, Some(dir.path().to_owned())).unwrap();
        let LoadRows::Spilled(runs) = &rows else {
            panic!("the rows were held");
        };
        assert!(runs.runs() > 1, "{} runs", runs.runs());
        assert_eq!(runs.len(), lines);
        // Merged, the runs give each line's row once, in key order.
        let mut merged = runs.merged().unwrap();
        let mut keys: Vec<String> = Vec::new();
        let mut values = Vec::new();
        while let Some(row) = merged.next_row().unwrap() {
            let (_, properties) =
                crate::model::codec::record::decode_record(row.record, None).unwrap();
            keys.push(row.partition_key.to_owned());
            values.push(properties.get("v").cloned());
        }
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]));
        values.sort_by_key(|v| match v {
            Some(crate::model::Value::Int64(n)) => *n,
            _ => i64::MIN,
        });
        let expected: Vec<_> = (1..=lines)
            .map(|n| Some(crate::model::Value::Int64(n as i64 * 10)))
            .collect();
        assert_eq!(values, expected);
        drop(rows);
        assert_eq!(memory.reserved(), 0);
    }

    /// Whichever part is parsed first, the error is that of the first bad
    /// line, in a part or in the lines left after the last part.
    #[test]
    fn the_first_bad_line_is_the_one_reported() {
        let lines = 3 * PART_ROWS + 5;
        for (bad, first) in [
            (
                vec![PART_ROWS + 10, 2 * PART_ROWS + 1, lines],
                PART_ROWS + 10,
            ),
            (vec![2 * PART_ROWS + 1, 2, lines], 2),
            (vec![lines - 1], lines - 1),
        ] {
            let error = copy_numbered(lines, &bad).err().expect("a bad line");
            let expected = format!("COPY line {first}: expected 2 columns, found 1");
            assert!(error.to_string().contains(&expected), "{error}");
        }
    }

    #[test]
    fn text_format_escapes_and_nulls() {
        let c = copy(false);
        let mut fields = Vec::new();
        c.parser
            .text_fields("a\\tb\t\\N\tx\\\\y\t\\101", &mut fields);
        assert_eq!(
            fields,
            vec![
                Some("a\tb".into()),
                None,
                Some("x\\y".into()),
                Some("A".into())
            ]
        );
    }

    #[test]
    fn csv_quotes() {
        let c = copy(true);
        let mut fields = Vec::new();
        c.parser
            .csv_fields(r#"1,"a,b","say ""hi""",,"""#, &mut fields);
        assert_eq!(
            fields,
            vec![
                Some("1".into()),
                Some("a,b".into()),
                Some("say \"hi\"".into()),
                None,
                Some("".into())
            ]
        );
    }
}
