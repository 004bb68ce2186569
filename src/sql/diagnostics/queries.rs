//! The recent-queries log: each statement's scans, with the access path,
//! the entities read and the rows returned (the query density), and the
//! warning a scan of low density earns.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::sql::AccessPath;

/// Statements the log keeps; older ones drop out.
const KEPT: usize = 500;
/// A scan that read fewer entities than this is cheap whatever its density.
pub const LOW_DENSITY_MIN_READ: u64 = 1000;
/// A scan returning fewer rows than one per this many entities read is of
/// low density.
pub const LOW_DENSITY_RATIO: u64 = 100;

/// One scan of a statement.
#[derive(Debug, Clone)]
pub struct ScanRecord {
    pub table: String,
    /// The access path (shown as EXPLAIN names it by [`Self::access_text`]:
    /// formatting it for every statement run cost a read by key more than
    /// the log's other work).
    pub access: AccessPath,
    /// Whether a join gave the keys the scan read.
    pub key_lookups: bool,
    pub entities_read: u64,
    pub rows_returned: u64,
    /// Columns the scan's filter reads that the key does not fix.
    pub filter_columns: Vec<String>,
    /// Whether the scan read in descending key order.
    pub reverse: bool,
    /// Whether a join or an aggregate consumed the scan's rows.
    pub joined: bool,
    pub aggregated: bool,
}

impl ScanRecord {
    /// The access path as EXPLAIN names it.
    pub fn access_text(&self) -> String {
        let mut text = self.access.to_string();
        if self.key_lookups {
            text.push_str(", key lookups from the join");
        }
        text
    }

    /// Whether the scan read a range of partitions or the whole table (not
    /// keys a join gave it).
    pub fn across_partitions(&self) -> bool {
        self.access.across_partitions() && !self.key_lookups
    }

    /// Whether the scan read inside partitions it named: a whole partition
    /// or a range of one's rows.
    pub fn in_named_partitions(&self) -> bool {
        matches!(self.access.kind(), "partition" | "range")
    }

    /// Rows returned per entity read; `None` when nothing was read.
    pub fn density(&self) -> Option<f64> {
        (self.entities_read > 0).then(|| self.rows_returned as f64 / self.entities_read as f64)
    }

    /// The warning for a scan that read many entities per row returned.
    pub fn low_density_warning(&self) -> Option<String> {
        if self.entities_read < LOW_DENSITY_MIN_READ
            || self.rows_returned * LOW_DENSITY_RATIO >= self.entities_read
        {
            return None;
        }
        let remedy = match self.filter_columns.as_slice() {
            [] => "a filter on the key columns would read only the rows asked for".to_owned(),
            columns if self.in_named_partitions() => format!(
                "an index with intra_partition = true on ({}) would read only the matching rows \
                 (intra-partition secondary index pattern)",
                columns.join(", ")
            ),
            columns => format!(
                "an index on ({}) would read only the matching rows (inter-partition secondary \
                 index pattern), or a key that holds the filtered column (compound key pattern)",
                columns.join(", ")
            ),
        };
        Some(format!(
            "low query density: the scan of \"{}\" ({}) read {} entities to return {} rows; {}",
            self.table,
            self.access_text(),
            self.entities_read,
            self.rows_returned,
            remedy
        ))
    }
}

/// One statement run.
#[derive(Debug, Clone)]
pub struct QueryRecord {
    pub id: u64,
    pub started: SystemTime,
    pub text: Arc<str>,
    pub elapsed: Duration,
    /// Rows sent to the client.
    pub rows: u64,
    pub scans: Vec<ScanRecord>,
}

#[derive(Default)]
pub struct QueryLog {
    next_id: AtomicU64,
    entries: Mutex<VecDeque<QueryRecord>>,
}

impl QueryLog {
    pub fn push(&self, mut record: QueryRecord) {
        record.id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let gone = (entries.len() == KEPT).then(|| entries.pop_front());
        entries.push_back(record);
        // The oldest record is dropped after the lock, which every
        // statement takes.
        drop(entries);
        drop(gone);
    }

    /// The kept statements, oldest first.
    pub fn recent(&self) -> Vec<QueryRecord> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan of one whole partition.
    fn partition(key: &str) -> AccessPath {
        AccessPath::Ranges(vec![crate::store::KeyRange::Rows {
            partition_key: key.into(),
            from: std::ops::Bound::Unbounded,
            to: std::ops::Bound::Unbounded,
        }])
    }

    fn scan(read: u64, returned: u64, access: AccessPath, filter: &[&str]) -> ScanRecord {
        ScanRecord {
            table: "t".into(),
            access,
            key_lookups: false,
            entities_read: read,
            rows_returned: returned,
            filter_columns: filter.iter().map(|c| (*c).to_owned()).collect(),
            reverse: false,
            joined: false,
            aggregated: false,
        }
    }

    #[test]
    fn low_density_needs_many_entities_per_row() {
        assert_eq!(
            scan(10_000, 1, AccessPath::Table, &["email"]).density(),
            Some(0.0001)
        );
        let warning = scan(10_000, 1, AccessPath::Table, &["email"])
            .low_density_warning()
            .unwrap();
        assert!(
            warning.contains("read 10000 entities to return 1 rows"),
            "{warning}"
        );
        assert!(
            warning.contains("inter-partition secondary index pattern"),
            "{warning}"
        );
        let warning = scan(5000, 2, partition("p"), &["kind"]).low_density_warning();
        assert!(warning
            .unwrap()
            .contains("intra-partition secondary index pattern"));
        // Small scans and dense scans are fine.
        assert_eq!(
            scan(999, 0, AccessPath::Table, &["x"]).low_density_warning(),
            None
        );
        assert_eq!(
            scan(10_000, 100, AccessPath::Table, &["x"]).low_density_warning(),
            None
        );
        assert_eq!(scan(0, 0, AccessPath::Points(vec![]), &[]).density(), None);
    }

    #[test]
    fn the_log_keeps_the_latest() {
        let log = QueryLog::default();
        for i in 0..KEPT + 3 {
            log.push(QueryRecord {
                id: 0,
                started: SystemTime::now(),
                text: Arc::from(format!("SELECT {i}")),
                elapsed: Duration::ZERO,
                rows: 1,
                scans: Vec::new(),
            });
        }
        let recent = log.recent();
        assert_eq!(recent.len(), KEPT);
        assert_eq!(&*recent[0].text, "SELECT 3");
        assert_eq!(recent.last().unwrap().id, (KEPT + 3) as u64);
    }
}
