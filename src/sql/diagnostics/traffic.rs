//! Reads and writes per partition, since start and over the last minute, and
//! the shape of each table's recent writes (one hot partition, or always the
//! newest or oldest PartitionKey).
//!
//! Reads are counted where a statement names its partitions (point gets,
//! partition and row ranges, an index's point gets); a scan across
//! partitions reads each about evenly, so it is counted once per table
//! instead. Counters live in memory and start again with the server.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

/// Maps keyed by PartitionKeys: a COPY counts its millions of partitions
/// through them, under the lock every statement's counting takes.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Seconds a slot of the last-minute window spans; six make the minute.
const SLOT_SECONDS: u64 = 10;
const SLOTS: usize = 6;
/// Partitions whose counters a table keeps: past twice this, the quietest
/// are forgotten, so a table of millions of partitions costs a bounded
/// amount of memory and still shows its busiest ones.
const TRACKED_PARTITIONS: usize = 1000;
/// How many recent writing statements the write shape is read from.
const RECENT_WRITES: usize = 100;
/// Fewer recent writing statements than this tell nothing about their shape.
const MIN_RECENT_WRITES: usize = 20;
/// A statement writing more partitions than this spreads its load; its
/// partitions are not kept.
const CONCENTRATED: usize = 8;
/// Slots of a table's note of partitions met once lately (see
/// [`TableTraffic::take_in`]).
const MET_ONCE_SLOTS: usize = 2048;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub reads: u64,
    pub writes: u64,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.reads += other.reads;
        self.writes += other.writes;
    }
}

#[derive(Default)]
struct PartitionTraffic {
    total: Counts,
    /// (slot number, counts in that slot): a ring over the last minute.
    slots: [(u64, Counts); SLOTS],
}

impl PartitionTraffic {
    fn add(&mut self, slot: u64, counts: Counts) {
        self.total.add(counts);
        let entry = &mut self.slots[(slot % SLOTS as u64) as usize];
        if entry.0 != slot {
            *entry = (slot, Counts::default());
        }
        entry.1.add(counts);
    }

    fn last_minute(&self, slot: u64) -> Counts {
        let mut sum = Counts::default();
        for (s, counts) in &self.slots {
            if *s + (SLOTS as u64) > slot {
                sum.add(*counts);
            }
        }
        sum
    }

    fn busyness(&self, slot: u64) -> (u64, u64) {
        let recent = self.last_minute(slot);
        (
            recent.reads + recent.writes,
            self.total.reads + self.total.writes,
        )
    }
}

/// One statement's writes to a table: the partitions (when few, by the
/// hash of their keys), and where their keys stood among the keys written
/// before.
struct RecentWrite {
    partitions: Vec<u64>,
    at_newest: bool,
    at_oldest: bool,
}

#[derive(Default)]
struct TableTraffic {
    /// Entities read from named partitions and written, since start (the
    /// partitions' counters may have forgotten quiet partitions).
    total: Counts,
    partitions: HashMap<String, PartitionTraffic>,
    /// Partitions not tracked, met once lately: (hash of the key, counts),
    /// in the slot the hash picks; empty until the table tracks
    /// `TRACKED_PARTITIONS`.
    met_once: Vec<(u64, Counts)>,
    /// Scans across partitions, and the entities they read.
    scans: u64,
    entities_scanned: u64,
    recent: VecDeque<RecentWrite>,
    /// How many of the recent writes wrote each partition (by the hash of
    /// its key), and how many were at the newest and at the oldest key
    /// (kept as writes come and go, since the shape is read on every
    /// write).
    recent_partitions: HashMap<u64, usize>,
    recent_at_newest: usize,
    recent_at_oldest: usize,
    /// The partition most of the recent writes wrote, among those of the
    /// last write and the one before it: a partition written by most of
    /// them either was the last one written, or was already the one
    /// written by most (its count did not grow, the writes did not shrink).
    /// Its hash and key.
    leader: Option<(u64, String)>,
    newest: Option<String>,
    oldest: Option<String>,
}

/// What a table's recent writes look like, when it is one of the seeds'
/// anti-patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteShape {
    /// `count` of the last `of` writing statements wrote to one partition.
    HotPartition {
        partition: String,
        count: usize,
        of: usize,
    },
    /// `count` of the last `of` writing statements wrote at or above the
    /// newest PartitionKey so far.
    AppendOnly { count: usize, of: usize },
    /// `count` of the last `of` writing statements wrote at or below the
    /// oldest PartitionKey so far.
    PrependOnly { count: usize, of: usize },
}

impl TableTraffic {
    fn add(&mut self, partition: &str, slot: u64, counts: Counts) {
        self.total.add(counts);
        if let Some(p) = self.partitions.get_mut(partition) {
            p.add(slot, counts);
        } else if let Some(counts) = self.take_in(partition, counts) {
            self.partitions
                .entry(partition.to_owned())
                .or_default()
                .add(slot, counts);
        }
    }

    /// Whether a partition the table does not track is taken in now, and
    /// with what counts. While the table tracks fewer than
    /// `TRACKED_PARTITIONS`, or for more than one entity, at once; past
    /// that, a single entity's read or write is noted in a slot its key's
    /// hash picks, and the partition is taken in, with the counts noted,
    /// when it is met again before another partition takes the slot.
    ///
    /// A table of many partitions read or written one entity at a time at
    /// random would otherwise take in (and soon prune) a partition on
    /// almost every statement, a key copied and a map entry made and
    /// dropped each time; a partition met again while its slot still
    /// holds it is taken in then. Counts noted but pushed out of their
    /// slot count in the table's total only, as the counts of pruned
    /// partitions do.
    fn take_in(&mut self, partition: &str, counts: Counts) -> Option<Counts> {
        if self.partitions.len() < TRACKED_PARTITIONS || counts.reads + counts.writes > 1 {
            return Some(counts);
        }
        if self.met_once.is_empty() {
            self.met_once = vec![(0, Counts::default()); MET_ONCE_SLOTS];
        }
        let hash = self.hash(partition);
        let slot = &mut self.met_once[(hash % MET_ONCE_SLOTS as u64) as usize];
        if slot.0 == hash {
            let (_, mut before) = std::mem::take(slot);
            before.add(counts);
            return Some(before);
        }
        *slot = (hash, counts);
        None
    }

    fn hash(&self, partition: &str) -> u64 {
        use std::hash::BuildHasher;
        self.partitions.hasher().hash_one(partition)
    }

    fn write_shape(&self) -> Option<WriteShape> {
        let of = self.recent.len();
        if of < MIN_RECENT_WRITES {
            return None;
        }
        if let Some((hash, partition)) = &self.leader {
            let count = self.written(*hash);
            if count * 10 >= of * 8 {
                return Some(WriteShape::HotPartition {
                    partition: partition.to_owned(),
                    count,
                    of,
                });
            }
        }
        // Writes that move along the key space, each at its newest (or
        // oldest) end: the append (or prepend) pattern.
        let (newest, oldest) = (self.recent_at_newest, self.recent_at_oldest);
        if newest * 10 >= of * 9 {
            return Some(WriteShape::AppendOnly { count: newest, of });
        }
        if oldest * 10 >= of * 9 {
            return Some(WriteShape::PrependOnly { count: oldest, of });
        }
        None
    }

    /// How many of the recent writes wrote a partition, by its hash.
    fn written(&self, hash: u64) -> usize {
        self.recent_partitions.get(&hash).copied().unwrap_or(0)
    }

    /// Notes a statement's writes among the recent ones: the keys of its
    /// partitions (none when it spread its load), and where they stood.
    fn push_recent(&mut self, keys: &[&str], at_newest: bool, at_oldest: bool) {
        let write = RecentWrite {
            partitions: keys.iter().map(|k| self.hash(k)).collect(),
            at_newest,
            at_oldest,
        };
        if self.recent.len() == RECENT_WRITES {
            if let Some(gone) = self.recent.pop_front() {
                self.recent_at_newest -= usize::from(gone.at_newest);
                self.recent_at_oldest -= usize::from(gone.at_oldest);
                for p in gone.partitions {
                    if let Some(n) = self.recent_partitions.get_mut(&p) {
                        *n -= 1;
                        if *n == 0 {
                            self.recent_partitions.remove(&p);
                        }
                    }
                }
            }
        }
        self.recent_at_newest += usize::from(write.at_newest);
        self.recent_at_oldest += usize::from(write.at_oldest);
        for p in &write.partitions {
            *self.recent_partitions.entry(*p).or_default() += 1;
        }
        // Of equals, the leader stays (the last of the maximums wins).
        let leader = write
            .partitions
            .iter()
            .zip(keys)
            .map(|(hash, key)| (*hash, Some(*key)))
            .chain(self.leader.as_ref().map(|(hash, _)| (*hash, None)))
            .filter(|(hash, _)| self.written(*hash) > 0)
            .max_by_key(|(hash, _)| self.written(*hash));
        match leader {
            None => self.leader = None,
            Some((_, None)) => {}
            Some((hash, Some(key))) => self.leader = Some((hash, key.to_owned())),
        }
        self.recent.push_back(write);
    }

    /// Of a statement's writes, those whose partitions could stay among
    /// the busiest the table keeps: all of those it keeps already, and of
    /// the others the `TRACKED_PARTITIONS` written most (the rest, each
    /// outdone by all of those, would be forgotten at once, but for ties).
    /// The rest count in the table's total only.
    fn worth_counting<'a, 'w>(
        &mut self,
        writes: &'a [(&'w str, u64)],
    ) -> Cow<'a, [(&'w str, u64)]> {
        if writes.len() <= TRACKED_PARTITIONS {
            return Cow::Borrowed(writes);
        }
        let mut counted = Vec::new();
        let mut fresh: Vec<(&str, u64)> = Vec::with_capacity(2 * TRACKED_PARTITIONS);
        for &(partition, n) in writes {
            if self.partitions.contains_key(partition) {
                counted.push((partition, n));
            } else {
                fresh.push((partition, n));
                if fresh.len() == 2 * TRACKED_PARTITIONS {
                    keep_busiest(&mut fresh, &mut self.total);
                }
            }
        }
        keep_busiest(&mut fresh, &mut self.total);
        counted.extend(fresh);
        Cow::Owned(counted)
    }

    /// Drops the quietest partitions once there are too many.
    fn prune(&mut self, slot: u64) {
        if self.partitions.len() <= 2 * TRACKED_PARTITIONS {
            return;
        }
        // The busiest partitions stay: those busier than the last one kept,
        // and as many as fit of those as busy as it.
        let mut busyness: Vec<(u64, u64)> =
            self.partitions.values().map(|p| p.busyness(slot)).collect();
        let (busier, &mut last, _) =
            busyness.select_nth_unstable_by(TRACKED_PARTITIONS - 1, |a, b| b.cmp(a));
        let mut as_busy_kept = TRACKED_PARTITIONS - busier.iter().filter(|&&b| b > last).count();
        self.partitions.retain(|_, p| {
            let busyness = p.busyness(slot);
            if busyness == last && as_busy_kept > 0 {
                as_busy_kept -= 1;
                return true;
            }
            busyness > last
        });
    }
}

/// Sets `key` to `to`, in the buffer it holds if any (the newest key of an
/// appending table changes on every write).
fn replace_key(key: &mut Option<String>, to: &str) {
    match key {
        Some(held) => {
            held.clear();
            held.push_str(to);
        }
        None => *key = Some(to.to_owned()),
    }
}

/// Keeps the `TRACKED_PARTITIONS` of `fresh` written most; the others'
/// writes go to `total`.
fn keep_busiest(fresh: &mut Vec<(&str, u64)>, total: &mut Counts) {
    if fresh.len() > TRACKED_PARTITIONS {
        fresh.select_nth_unstable_by(TRACKED_PARTITIONS - 1, |a, b| b.1.cmp(&a.1));
        for (_, n) in fresh.drain(TRACKED_PARTITIONS..) {
            total.writes += n;
        }
    }
}

/// One partition's traffic, as the `partitions` view shows it.
#[derive(Debug, Clone)]
pub struct PartitionTrafficRow {
    pub partition: String,
    pub total: Counts,
    pub last_minute: Counts,
}

/// A table's traffic.
#[derive(Debug, Clone, Default)]
pub struct TableTrafficSummary {
    pub total: Counts,
    pub partitions: Vec<PartitionTrafficRow>,
    pub scans: u64,
    pub entities_scanned: u64,
    pub write_shape: Option<WriteShape>,
}

pub struct Traffic {
    started: Instant,
    tables: Mutex<HashMap<String, TableTraffic>>,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            started: Instant::now(),
            tables: Mutex::new(HashMap::default()),
        }
    }
}

impl Traffic {
    /// Seconds since the counters started (at least 1, to divide by).
    pub fn seconds_counted(&self) -> f64 {
        self.started.elapsed().as_secs_f64().max(1.0)
    }

    fn slot(&self) -> u64 {
        self.started.elapsed().as_secs() / SLOT_SECONDS
    }

    fn with_table<T>(&self, table: &str, f: impl FnOnce(&mut TableTraffic, u64) -> T) -> T {
        let slot = self.slot();
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let traffic = match tables.get_mut(table) {
            Some(t) => t,
            None => tables.entry(table.to_owned()).or_default(),
        };
        f(traffic, slot)
    }

    /// Entities read from named partitions: (partition, entities) pairs.
    pub fn record_reads<'a>(&self, table: &str, reads: impl IntoIterator<Item = (&'a str, u64)>) {
        self.with_table(table, |t, slot| {
            for (partition, n) in reads {
                t.add(
                    partition,
                    slot,
                    Counts {
                        reads: n,
                        writes: 0,
                    },
                );
                t.prune(slot);
            }
        })
    }

    /// A scan across partitions that read `entities`.
    pub fn record_scan(&self, table: &str, entities: u64) {
        self.with_table(table, |t, _| {
            t.scans += 1;
            t.entities_scanned += entities;
        })
    }

    /// One statement's writes: the entities it wrote per partition, in the
    /// order it wrote them. Returns the shape of the table's recent writes.
    /// A statement is one event however many rows it writes, so a bulk
    /// load is not mistaken for a stream of appends.
    pub fn record_writes(&self, table: &str, writes: &[(&str, u64)]) -> Option<WriteShape> {
        let (Some(lowest), Some(highest)) = (
            writes.iter().map(|w| w.0).min(),
            writes.iter().map(|w| w.0).max(),
        ) else {
            return None;
        };
        self.with_table(table, |t, slot| {
            let mut keys: Vec<&str> = Vec::new();
            for &(partition, _) in writes {
                if keys.len() > CONCENTRATED {
                    break;
                }
                if !keys.contains(&partition) {
                    keys.push(partition);
                }
            }
            for &(partition, n) in t.worth_counting(writes).iter() {
                t.add(
                    partition,
                    slot,
                    Counts {
                        reads: 0,
                        writes: n,
                    },
                );
                // A bulk load writes millions of partitions in one statement.
                t.prune(slot);
            }
            if keys.len() > CONCENTRATED {
                keys.clear();
            }
            let at_newest = t.newest.as_deref().is_none_or(|k| lowest >= k);
            let at_oldest = t.oldest.as_deref().is_none_or(|k| highest <= k);
            if t.newest.as_deref().is_none_or(|k| highest > k) {
                replace_key(&mut t.newest, highest);
            }
            if t.oldest.as_deref().is_none_or(|k| lowest < k) {
                replace_key(&mut t.oldest, lowest);
            }
            t.push_recent(&keys, at_newest, at_oldest);
            t.write_shape()
        })
    }

    /// A table's counters, busiest partitions (last minute, then since
    /// start) first.
    pub fn table(&self, table: &str) -> TableTrafficSummary {
        let slot = self.slot();
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = tables.get(table) else {
            return TableTrafficSummary::default();
        };
        let mut partitions: Vec<_> = t
            .partitions
            .iter()
            .map(|(k, p)| PartitionTrafficRow {
                partition: k.clone(),
                total: p.total,
                last_minute: p.last_minute(slot),
            })
            .collect();
        partitions.sort_by(|a, b| {
            let key = |r: &PartitionTrafficRow| {
                (
                    r.last_minute.reads + r.last_minute.writes,
                    r.total.reads + r.total.writes,
                )
            };
            key(b)
                .cmp(&key(a))
                .then_with(|| a.partition.cmp(&b.partition))
        });
        TableTrafficSummary {
            total: t.total,
            partitions,
            scans: t.scans,
            entities_scanned: t.entities_scanned,
            write_shape: t.write_shape(),
        }
    }

    /// Forgets a table's counters (it was dropped or emptied).
    pub fn forget(&self, table: &str) {
        self.tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_keys(traffic: &Traffic, keys: impl IntoIterator<Item = String>) -> Option<WriteShape> {
        let mut shape = None;
        for k in keys {
            shape = traffic.record_writes("t", &[(k.as_str(), 1)]);
        }
        shape
    }

    #[test]
    fn increasing_keys_are_append_only() {
        let traffic = Traffic::default();
        let shape = write_keys(&traffic, (0..50).map(|i| format!("2026-11-22T01:{i:02}")));
        assert_eq!(shape, Some(WriteShape::AppendOnly { count: 50, of: 50 }));
    }

    #[test]
    fn decreasing_keys_are_prepend_only() {
        let traffic = Traffic::default();
        let shape = write_keys(&traffic, (0..50).map(|i| format!("{:04}", 9999 - i)));
        assert_eq!(shape, Some(WriteShape::PrependOnly { count: 50, of: 50 }));
    }

    #[test]
    fn one_key_is_a_hot_partition() {
        let traffic = Traffic::default();
        let keys = (0..40).map(|i| {
            if i % 10 == 0 {
                format!("k{i}")
            } else {
                "hot".into()
            }
        });
        let shape = write_keys(&traffic, keys);
        assert_eq!(
            shape,
            Some(WriteShape::HotPartition {
                partition: "hot".into(),
                count: 36,
                of: 40
            })
        );
    }

    #[test]
    fn the_hot_partition_is_found_after_other_writes_and_forgotten_as_it_cools() {
        let traffic = Traffic::default();
        // Spread keys, then nine writes in ten to one key; the last write
        // is to another key.
        let keys = (0..150).map(|i| {
            if i < 50 || i % 10 == 9 {
                format!("k{}", (i * 919) % 1000)
            } else {
                "hot".into()
            }
        });
        assert_eq!(
            write_keys(&traffic, keys),
            Some(WriteShape::HotPartition {
                partition: "hot".into(),
                count: 90,
                of: 100
            })
        );
        let cooler = (0..30).map(|i| format!("m{i}"));
        assert_eq!(write_keys(&traffic, cooler), None);
    }

    #[test]
    fn spread_keys_have_no_shape() {
        let traffic = Traffic::default();
        // A fixed permutation of 0..97: neither increasing nor concentrated.
        let shape = write_keys(
            &traffic,
            (0..100u32).map(|i| format!("{:03}", (i * 37) % 97)),
        );
        assert_eq!(shape, None);
        // Too few writes tell nothing.
        let few = Traffic::default();
        assert_eq!(write_keys(&few, (0..10).map(|i| format!("{i}"))), None);
    }

    #[test]
    fn a_bulk_load_is_one_event() {
        let traffic = Traffic::default();
        let keys: Vec<String> = (0..5000).map(|i| format!("{i:05}")).collect();
        let writes: Vec<(&str, u64)> = keys.iter().map(|k| (k.as_str(), 1)).collect();
        assert_eq!(traffic.record_writes("t", &writes), None);
        let summary = traffic.table("t");
        assert_eq!(summary.total.writes, 5000);
        assert!(summary.partitions.len() <= 2 * TRACKED_PARTITIONS);
    }

    /// A statement of many partitions counts every write in the table's
    /// total, and keeps the counters of the partitions it could: those
    /// the table kept already, and its busiest new ones.
    #[test]
    fn a_bulk_load_counts_what_it_could_keep() {
        let traffic = Traffic::default();
        traffic.record_reads("t", [("kept", 1)]);
        let keys: Vec<String> = (0..5 * TRACKED_PARTITIONS)
            .map(|i| format!("p{i:05}"))
            .collect();
        let mut writes: Vec<(&str, u64)> = keys.iter().map(|k| (k.as_str(), 1)).collect();
        writes.insert(1234, ("big", 50));
        writes.push(("kept", 1));
        traffic.record_writes("t", &writes);
        let summary = traffic.table("t");
        assert_eq!(summary.total.writes, 5 * TRACKED_PARTITIONS as u64 + 51);
        assert!(summary.partitions.len() <= 2 * TRACKED_PARTITIONS);
        let total = |name: &str| {
            let row = summary.partitions.iter().find(|r| r.partition == name);
            row.map(|r| r.total)
        };
        assert_eq!(
            total("big"),
            Some(Counts {
                reads: 0,
                writes: 50
            })
        );
        assert_eq!(
            total("kept"),
            Some(Counts {
                reads: 1,
                writes: 1
            })
        );
    }

    #[test]
    fn reads_and_writes_add_up_and_the_busiest_come_first() {
        let traffic = Traffic::default();
        traffic.record_reads("t", [("a", 3), ("b", 1), ("a", 2)]);
        traffic.record_writes("t", &[("b", 10)]);
        traffic.record_scan("t", 500);
        let summary = traffic.table("t");
        assert_eq!(summary.scans, 1);
        assert_eq!(summary.entities_scanned, 500);
        let rows: Vec<_> = summary
            .partitions
            .iter()
            .map(|r| (r.partition.as_str(), r.total, r.last_minute))
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "b",
                    Counts {
                        reads: 1,
                        writes: 10
                    },
                    Counts {
                        reads: 1,
                        writes: 10
                    }
                ),
                (
                    "a",
                    Counts {
                        reads: 5,
                        writes: 0
                    },
                    Counts {
                        reads: 5,
                        writes: 0
                    }
                ),
            ]
        );
    }

    #[test]
    fn many_partitions_keep_the_busiest() {
        let traffic = Traffic::default();
        traffic.record_reads("t", [("busy", 1000)]);
        let keys: Vec<String> = (0..3 * TRACKED_PARTITIONS)
            .map(|i| format!("p{i}"))
            .collect();
        traffic.record_reads("t", keys.iter().map(|k| (k.as_str(), 1)));
        let summary = traffic.table("t");
        assert!(summary.partitions.len() <= 2 * TRACKED_PARTITIONS);
        assert_eq!(summary.partitions[0].partition, "busy");
    }

    /// Once a table tracks `TRACKED_PARTITIONS`, a partition met by one
    /// entity at a time is taken in when met again while its first
    /// meeting is still noted, with both counted; one met once is not.
    #[test]
    fn past_the_tracked_a_partition_is_taken_in_when_met_again() {
        let traffic = Traffic::default();
        let keys: Vec<String> = (0..TRACKED_PARTITIONS).map(|i| format!("p{i}")).collect();
        traffic.record_reads("t", keys.iter().map(|k| (k.as_str(), 1)));
        let tracked = |traffic: &Traffic, name: &str| {
            let summary = traffic.table("t");
            let row = summary.partitions.iter().find(|r| r.partition == name);
            row.map(|r| r.total)
        };
        traffic.record_reads("t", [("again", 1)]);
        assert_eq!(tracked(&traffic, "again"), None);
        traffic.record_writes("t", &[("again", 1)]);
        assert_eq!(
            tracked(&traffic, "again"),
            Some(Counts {
                reads: 1,
                writes: 1
            })
        );
        // More than one entity: taken in at once.
        traffic.record_reads("t", [("range", 2)]);
        assert_eq!(
            tracked(&traffic, "range"),
            Some(Counts {
                reads: 2,
                writes: 0
            })
        );
        // Many partitions met once each: none taken in, all counted in the
        // table's total.
        let once: Vec<String> = (0..10 * TRACKED_PARTITIONS)
            .map(|i| format!("once{i}"))
            .collect();
        for k in &once {
            traffic.record_reads("t", [(k.as_str(), 1)]);
        }
        let summary = traffic.table("t");
        assert_eq!(summary.partitions.len(), TRACKED_PARTITIONS + 2);
        assert_eq!(
            summary.total,
            Counts {
                reads: 11 * TRACKED_PARTITIONS as u64 + 3,
                writes: 1
            }
        );
    }

    #[test]
    fn pruning_keeps_as_many_as_it_tracks_the_busiest_first() {
        let keys: Vec<String> = (0..=2 * TRACKED_PARTITIONS)
            .map(|i| format!("p{i}"))
            .collect();
        // Partition i read i + 1 times, or all read once.
        for distinct in [true, false] {
            let traffic = Traffic::default();
            traffic.record_reads(
                "t",
                keys.iter()
                    .enumerate()
                    .map(|(i, k)| (k.as_str(), if distinct { i as u64 + 1 } else { 1 })),
            );
            let kept = traffic.table("t").partitions;
            assert_eq!(kept.len(), TRACKED_PARTITIONS);
            if distinct {
                let quietest = kept.iter().map(|p| p.total.reads).min();
                assert_eq!(quietest, Some(TRACKED_PARTITIONS as u64 + 2));
            }
        }
    }
}
