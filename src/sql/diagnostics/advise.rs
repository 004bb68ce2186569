//! `TABLEGATE ADVISE table`: concrete changes for one table, drawn from its
//! key distribution, its recent write traffic and the recent-queries log.
//! Each row names a finding, the change that addresses it and the seeds'
//! pattern behind the change.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::queries::QueryRecord;
use super::traffic::WriteShape;
use super::Monitor;
use crate::catalog::{CatalogError, TableDef};
use crate::sql::error::Result;
use crate::sql::session::{Output, Session};
use crate::store::TableStore;

/// Tables smaller than this spread fine whatever their keys.
const SPREAD_MIN_ENTITIES: u64 = 1000;
/// Partitions read to find the largest (bounds the cost on huge tables).
const SPREAD_MAX_PARTITIONS: usize = 100_000;
/// Statements of one kind that make a habit worth a change.
const FREQUENT: usize = 3;
/// A filtered scan returning fewer rows than one per this many entities
/// read is worth an index.
const INDEX_DENSITY_RATIO: u64 = 10;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("finding", DataType::Utf8, false),
        Field::new("suggestion", DataType::Utf8, false),
        Field::new("pattern", DataType::Utf8, true),
    ]))
}

struct Advice {
    finding: String,
    suggestion: String,
    pattern: Option<&'static str>,
}

/// Runs `TABLEGATE ADVISE name`; `None` for any other statement.
pub async fn advise(session: &Session, sql: &str) -> Option<Result<Output>> {
    let words: Vec<&str> = sql
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .collect();
    let [tablegate, advise, name] = words.as_slice() else {
        return None;
    };
    if !tablegate.eq_ignore_ascii_case("tablegate") || !advise.eq_ignore_ascii_case("advise") {
        return None;
    }
    let name = match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(quoted) => quoted.to_owned(),
        None => name.to_lowercase(),
    };
    Some(
        async {
            session.refresh_view();
            let def = session
                .table_def(&name)
                .ok_or_else(|| CatalogError::TableNotFound(name.clone()))?;
            if !def.holds_rows() {
                return Err(crate::sql::views::not_a("table", &name, None));
            }
            let engine = session.engine();
            let advice = advice(&def, engine.store().as_ref(), &engine.monitor).await?;
            let schema = schema();
            let column = |f: fn(&Advice) -> Option<&str>| {
                Arc::new(advice.iter().map(f).collect::<StringArray>())
            };
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    column(|a| Some(&a.finding)),
                    column(|a| Some(&a.suggestion)),
                    column(|a| a.pattern),
                ],
            )?;
            Output::from_batches(schema, vec![batch], "SELECT")
        }
        .await,
    )
}

async fn advice(def: &TableDef, store: &dyn TableStore, monitor: &Monitor) -> Result<Vec<Advice>> {
    let mut advice = Vec::new();
    if let Some(a) = key_spread(def, store).await? {
        advice.push(a);
    }
    if let Some(shape) = monitor.traffic.table(&def.name).write_shape {
        advice.push(write_shape(def, &shape));
    }
    let log: Vec<QueryRecord> = monitor
        .queries
        .recent()
        .into_iter()
        .filter(|q| q.scans.iter().any(|s| s.table == def.name))
        .collect();
    advice.extend(indexes_for_filters(def, &log));
    advice.extend(log_tail(def, &log));
    advice.extend(views_for_habits(def, &log));
    if advice.is_empty() {
        advice.push(Advice {
            finding: format!(
                "nothing to change: the keys spread the rows, and the last {} statements that \
                 read \"{}\" read what they returned",
                log.len(),
                def.name
            ),
            suggestion: "none".into(),
            pattern: None,
        });
    }
    Ok(advice)
}

/// The key columns, as the table declares them.
fn key_names(def: &TableDef) -> (Vec<&str>, Vec<&str>) {
    let (partition, row) = def.key_columns();
    let names = |cols: &[usize]| -> Vec<&str> {
        cols.iter().map(|&i| def.columns[i].name.as_str()).collect()
    };
    (names(partition), names(row))
}

/// Most of a large table in one partition.
async fn key_spread(def: &TableDef, store: &dyn TableStore) -> Result<Option<Advice>> {
    let stats = store.table_stats(&def.name).await?;
    if stats.entities < SPREAD_MIN_ENTITIES {
        return Ok(None);
    }
    let mut largest = (String::new(), 0u64);
    let mut seen = 0;
    let mut continuation = None;
    while seen < SPREAD_MAX_PARTITIONS {
        let page = store
            .list_partition_stats(&def.name, 1000, continuation.as_ref())
            .await?;
        seen += page.partitions.len();
        for p in page.partitions {
            if p.entities > largest.1 {
                largest = (p.partition_key, p.entities);
            }
        }
        continuation = page.continuation;
        if continuation.is_none() {
            break;
        }
    }
    if largest.1 * 2 <= stats.entities {
        return Ok(None);
    }
    let (partition, row) = key_names(def);
    let suggestion = match row.first() {
        Some(next) => format!(
            "make the partition key hold more than ({}): e.g. PRIMARY KEY ({}) WITH \
             (partition_key = '{}'), so rows of one ({}) spread over partitions by {}",
            partition.join(", "),
            partition
                .iter()
                .chain(&row)
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
            partition
                .iter()
                .chain([next])
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
            partition.join(", "),
            next
        ),
        None => format!(
            "choose a partition key with more distinct values than ({})",
            partition.join(", ")
        ),
    };
    Ok(Some(Advice {
        finding: format!(
            "{} of the {} rows of \"{}\" ({:.0}%) are in one partition, {:?}: one partition \
             serves them all and cannot be spread over servers",
            largest.1,
            stats.entities,
            def.name,
            100.0 * largest.1 as f64 / stats.entities as f64,
            largest.0
        ),
        suggestion,
        pattern: Some("compound key pattern; sharding pattern (data partitioning guidance)"),
    }))
}

fn write_shape(def: &TableDef, shape: &WriteShape) -> Advice {
    let (partition, _) = key_names(def);
    let key = partition.join(", ");
    let bucket = format!(
        "add a bucket column (e.g. a hash of another column modulo 16) as the first \
         partition key column, PRIMARY KEY (bucket, {key}, ...) WITH (partition_key = \
         'bucket, {key}'), and read the buckets in parallel"
    );
    let (suggestion, pattern) = match shape {
        WriteShape::HotPartition { .. } => (
            format!(
                "spread writes over partitions: put a column with more distinct values into the \
                 partition key than ({key}), or {bucket}"
            ),
            "compound key pattern; sharding pattern (data partitioning guidance)",
        ),
        WriteShape::AppendOnly { .. } | WriteShape::PrependOnly { .. } => {
            (bucket, "prepend/append anti-pattern; log data anti-pattern")
        }
    };
    Advice {
        finding: super::monitor::shape_warning(&def.name, shape),
        suggestion,
        pattern: Some(pattern),
    }
}

/// Filters on columns no key or index holds, in scans that read many
/// entities per row returned.
fn indexes_for_filters(def: &TableDef, log: &[QueryRecord]) -> Vec<Advice> {
    // Per filtered column set: statements, entities read, rows returned,
    // and whether every scan stayed inside one partition.
    let mut habits: BTreeMap<Vec<String>, (usize, u64, u64, bool)> = BTreeMap::new();
    for q in log {
        for s in q.scans.iter().filter(|s| s.table == def.name) {
            if s.filter_columns.is_empty() {
                continue;
            }
            let entry = habits
                .entry(s.filter_columns.clone())
                .or_insert((0, 0, 0, true));
            entry.0 += 1;
            entry.1 += s.entities_read;
            entry.2 += s.rows_returned;
            entry.3 &= s.in_named_partitions();
        }
    }
    let mut advice = Vec::new();
    for (columns, (statements, read, returned, in_partition)) in habits {
        if statements < FREQUENT || returned * INDEX_DENSITY_RATIO >= read {
            continue;
        }
        if def
            .indexes
            .iter()
            .any(|i| i.columns.first() == columns.first())
        {
            continue;
        }
        let name = format!("{}_{}_idx", def.name, columns.join("_"));
        let (create, pattern) = if in_partition {
            (
                format!(
                    "CREATE INDEX {name} ON {} ({}) WITH (intra_partition = true)",
                    def.name,
                    columns.join(", ")
                ),
                "intra-partition secondary index pattern",
            )
        } else {
            (
                format!(
                    "CREATE INDEX {name} ON {} ({})",
                    def.name,
                    columns.join(", ")
                ),
                "inter-partition secondary index pattern; index entities pattern",
            )
        };
        advice.push(Advice {
            finding: format!(
                "{statements} recent statements filtered \"{}\" on ({}), which no key or index \
                 holds: they read {read} entities to return {returned} rows",
                def.name,
                columns.join(", ")
            ),
            suggestion: create,
            pattern: Some(pattern),
        });
    }
    advice
}

/// Reads of the newest rows first, by a descending scan.
fn log_tail(def: &TableDef, log: &[QueryRecord]) -> Option<Advice> {
    let reverse = log
        .iter()
        .filter(|q| q.scans.iter().any(|s| s.table == def.name && s.reverse))
        .count();
    if reverse < FREQUENT {
        return None;
    }
    let (_, row) = key_names(def);
    Some(Advice {
        finding: format!(
            "{reverse} recent statements read \"{}\" in descending RowKey order; the Azure Table \
             service reads only in ascending order",
            def.name
        ),
        suggestion: format!(
            "store the RowKey reversed, e.g. a column holding (9999999999 - the time in \
             seconds), zero-padded, in place of ({}), so the newest rows come first in \
             ascending order and ORDER BY ... LIMIT n reads n rows",
            row.join(", ")
        ),
        pattern: Some("log tail pattern"),
    })
}

/// A join or an aggregate over this table, run again and again.
fn views_for_habits(def: &TableDef, log: &[QueryRecord]) -> Vec<Advice> {
    if def.view.is_some() {
        return Vec::new();
    }
    let mut habits: BTreeMap<(&str, bool), usize> = BTreeMap::new();
    for q in log {
        let scans = q.scans.iter().filter(|s| s.table == def.name);
        let (joined, aggregated) = scans.fold((false, false), |(j, a), s| {
            (j || s.joined, a || s.aggregated)
        });
        if aggregated || joined {
            *habits.entry((&*q.text, aggregated)).or_default() += 1;
        }
    }
    let mut advice = Vec::new();
    for ((text, aggregated), statements) in habits {
        if statements < FREQUENT {
            continue;
        }
        let (what, name, pattern) = if aggregated {
            (
                "aggregates",
                format!("{}_summary", def.name),
                "materialized view pattern; summary entities (denormalization pattern)",
            )
        } else {
            (
                "joins",
                format!("{}_joined", def.name),
                "denormalization pattern; materialized view pattern",
            )
        };
        let query = text.trim().trim_end_matches(';');
        advice.push(Advice {
            finding: format!(
                "the same query {what} \"{}\" in {statements} recent statements: {query}",
                def.name
            ),
            suggestion: format!(
                "CREATE MATERIALIZED VIEW {name} AS {query} (writes keep it current; the query \
                 then reads stored rows)"
            ),
            pattern: Some(pattern),
        });
    }
    advice
}
