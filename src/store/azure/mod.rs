//! The Azure Table service as a store: Azure Storage, the Cosmos DB Table
//! API, and the Azurite emulator, over the service's REST API.
//!
//! - `account`: connection strings, endpoints, Shared Key Lite signing.
//! - `names`: store names in the forms the service accepts.
//! - `json`: entities in the service's JSON; OData keys and filters.
//! - `rest`: requests, retries with backoff, the service's errors.
//! - `batch`: entity group transactions (`$batch`).
//! - `outbox`: writes over several partitions, made whole by a durable
//!   outbox.
//!
//! The service has no snapshots (a read view reads the latest data), no
//! descending order (a reversed query reads its range forward and keeps
//! the highest keys), and no atomic writes across partitions: those go
//! through the outbox, whole in the end but not at every moment. The
//! Cosmos DB Table API does not even return pages in key order
//! ([`Statistics::key_ordered`] says so, and scans then declare no order).
//! Statistics come from scanning the table, kept for [`STATS_TTL`].

mod account;
mod batch;
mod json;
mod names;
mod outbox;
mod rest;

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reqwest::Method;
use serde_json::Value as Json;

pub use account::Account;
use rest::{Request, Rest, ServiceError};

use super::{
    check_batch, check_op, AtomicWrite, BulkDelete, Continuation, EntityRead, EntityWrite,
    KeyRange, Page, PartitionStats, PartitionStatsPage, Query, Result, Snapshots, Statistics,
    StoreError, TableAdmin, TableStats, WriteOp, WriteOutcome,
};
use crate::model::{DateTime, ETag, Entity, EntityKey, IfMatch};

/// How long statistics from a scan are used before the table is scanned again.
pub const STATS_TTL: Duration = Duration::from_secs(30);
/// The service's largest page.
const SERVICE_PAGE: usize = 1000;

/// A store over one account of the Azure Table service.
#[derive(Clone)]
pub struct AzureStore {
    inner: Arc<Inner>,
}

/// A table's partition statistics, with the time they were read.
type ReadStats = (Instant, Arc<Vec<PartitionStats>>);

struct Inner {
    rest: Rest,
    stats: Mutex<HashMap<String, ReadStats>>,
}

impl AzureStore {
    /// A store over the account of a connection string. Nothing is sent
    /// until the first operation.
    pub fn connect(connection_string: &str) -> Result<AzureStore> {
        let account = Account::from_connection_string(connection_string)
            .map_err(|e| StoreError::InvalidQuery(format!("connection string: {e}")))?;
        let rest = Rest::new(account).map_err(StoreError::Storage)?;
        Ok(AzureStore {
            inner: Arc::new(Inner {
                rest,
                stats: Mutex::new(HashMap::new()),
            }),
        })
    }

    pub fn account(&self) -> &Account {
        &self.inner.rest.account
    }

    /// Finishes the outbox records abandoned for longer than `age`, left by
    /// gateways that stopped mid-write; how many there were.
    pub async fn recover(&self, age: Duration) -> Result<usize> {
        outbox::recover(self, age).await
    }

    /// Finishes left records now, then every [`RECOVERY_PERIOD`] those whose
    /// writer has not renewed them for [`RECOVERY_AGE`] (others are another
    /// gateway's, still being applied). At its start a gateway finishes
    /// every record it finds, so that a restarted gateway repairs at once
    /// what it left: a record another gateway is applying at that moment
    /// is then applied by both (the steps are idempotent, but the writer's
    /// own conditional apply may then fail and undo the write).
    pub fn spawn_recovery(&self) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        tokio::spawn(async move {
            let mut age = Duration::ZERO;
            loop {
                match store.recover(age).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!("finished {n} outbox records"),
                    Err(e) => tracing::warn!("outbox recovery failed: {e}"),
                }
                age = RECOVERY_AGE;
                tokio::time::sleep(RECOVERY_PERIOD).await;
            }
        })
    }
}

/// How often a gateway looks for outbox records left by others.
pub const RECOVERY_PERIOD: Duration = Duration::from_secs(5);
/// How long a record's writer must have been silent for another gateway
/// to finish it.
pub const RECOVERY_AGE: Duration = Duration::from_secs(30);

/// A random number: for ids that must not meet (outbox records, batch
/// boundaries) and for the jitter of retries.
fn random_u32() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    nanos.rotate_left(13) ^ COUNTER.fetch_add(0x9e37_79b9, Ordering::Relaxed) ^ std::process::id()
}

/// The store error of a service error, for an operation on `table` (and `key`).
fn store_error(error: ServiceError, table: &str, key: Option<&EntityKey>) -> StoreError {
    let key = || key.cloned().unwrap_or_else(|| EntityKey::new("", ""));
    let table = table.to_owned();
    match error.code.as_str() {
        "TableNotFound" => StoreError::TableNotFound(table),
        "TableAlreadyExists" | "TableBeingDeleted" => StoreError::TableAlreadyExists(table),
        "EntityAlreadyExists" => StoreError::EntityAlreadyExists { table, key: key() },
        "ResourceNotFound" => StoreError::EntityNotFound { table, key: key() },
        "UpdateConditionNotSatisfied" | "ConditionNotMet" => {
            StoreError::ConditionNotMet { table, key: key() }
        }
        _ if error.status == 404 => StoreError::EntityNotFound { table, key: key() },
        _ if error.status == 412 => StoreError::ConditionNotMet { table, key: key() },
        _ => StoreError::Service(error.to_string()),
    }
}

fn if_match_header(if_match: &IfMatch) -> String {
    match if_match {
        IfMatch::Any => "*".to_owned(),
        IfMatch::ETag(ETag(tag)) => tag.clone(),
    }
}

/// A write's outcome from the answer's `ETag` header, whose weak tag holds
/// the entity's new Timestamp: `W/"datetime'2026-11-22T04%3A30%3A00.1234567Z'"`.
fn outcome(etag: Option<&str>) -> WriteOutcome {
    let timestamp = etag
        .and_then(|e| e.split("datetime'").nth(1))
        .and_then(|t| t.split('\'').next())
        .map(|t| {
            percent_encoding::percent_decode_str(t)
                .decode_utf8_lossy()
                .into_owned()
        })
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| DateTime(t.timestamp_micros()));
    WriteOutcome {
        etag: etag.map(|e| ETag(e.to_owned())),
        timestamp,
    }
}

/// The `$filter` of a key range.
fn range_filter(range: &KeyRange) -> String {
    let bound = |field: &str, bound: &Bound<String>, lower: bool| {
        let (op, value) = match bound {
            Bound::Included(v) => (if lower { "ge" } else { "le" }, v),
            Bound::Excluded(v) => (if lower { "gt" } else { "lt" }, v),
            Bound::Unbounded => return None,
        };
        Some(format!("{field} {op} {}", json::literal(value)))
    };
    let parts: Vec<String> = match range {
        KeyRange::Partitions { from, to } => [
            bound("PartitionKey", from, true),
            bound("PartitionKey", to, false),
        ]
        .into_iter()
        .flatten()
        .collect(),
        KeyRange::Rows {
            partition_key,
            from,
            to,
        } => [
            Some(format!("PartitionKey eq {}", json::literal(partition_key))),
            bound("RowKey", from, true),
            bound("RowKey", to, false),
        ]
        .into_iter()
        .flatten()
        .collect(),
    };
    parts.join(" and ")
}

/// The `$select` of a projection: the asked properties, the keys and
/// system fields, and the list of tablegate's own types.
fn select(projection: &[String]) -> String {
    let mut fields: Vec<String> = ["PartitionKey", "RowKey", "Timestamp", json::TYPES_PROPERTY]
        .into_iter()
        .map(str::to_owned)
        .collect();
    fields.extend(projection.iter().map(|p| names::property(p)));
    format!("$select={}", json::encode(&fields.join(",")))
}

/// The query string of a service query: filter, projection, page size and
/// where to resume.
fn query_string(
    filter: &str,
    projection: Option<&[String]>,
    top: usize,
    resume: Option<&(String, String)>,
) -> String {
    let mut parts = vec![format!("$top={top}")];
    if !filter.is_empty() {
        parts.push(format!("$filter={}", json::encode(filter)));
    }
    if let Some(projection) = projection {
        parts.push(select(projection));
    }
    if let Some((pk, rk)) = resume {
        parts.push(format!("NextPartitionKey={}", json::encode(pk)));
        parts.push(format!("NextRowKey={}", json::encode(rk)));
    }
    parts.join("&")
}

impl Inner {
    /// One service page of a query: its entities and where the next starts.
    async fn service_page(
        &self,
        table: &str,
        filter: &str,
        projection: Option<&[String]>,
        top: usize,
        resume: Option<&(String, String)>,
    ) -> Result<(Vec<Entity>, Option<(String, String)>)> {
        let resource = format!("{}()", names::table(table));
        let query = query_string(filter, projection, top.min(SERVICE_PAGE), resume);
        let answer = self
            .rest
            .send(Request::new(Method::GET, &resource).query(&query))
            .await
            .map_err(|e| store_error(e, table, None))?;
        let next = answer
            .header("x-ms-continuation-NextPartitionKey")
            .map(|pk| {
                let rk = answer.header("x-ms-continuation-NextRowKey").unwrap_or("");
                (pk.to_owned(), rk.to_owned())
            });
        let json = answer.json().map_err(|e| store_error(e, table, None))?;
        let entities = match json.get("value") {
            Some(Json::Array(values)) => values
                .iter()
                .map(|v| match v {
                    Json::Object(map) => json::entity_of(map.clone())
                        .map(|e| project(e, projection))
                        .map_err(|e| StoreError::Service(e.to_string())),
                    _ => Err(StoreError::Service("an entity is not a JSON object".into())),
                })
                .collect::<Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        Ok((entities, next))
    }

    /// A forward query page of up to `query.page_size` entities (several
    /// service pages if need be).
    async fn forward(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
    ) -> Result<Page> {
        let mut resume = continuation.map(Continuation::decode_remote).transpose()?;
        let filter = range_filter(&query.range);
        let mut entities = Vec::new();
        loop {
            let want = query.page_size - entities.len();
            let (page, next) = self
                .service_page(
                    table,
                    &filter,
                    query.projection.as_deref(),
                    want,
                    resume.as_ref(),
                )
                .await?;
            entities.extend(page);
            resume = next;
            if resume.is_none() || entities.len() >= query.page_size {
                break;
            }
        }
        Ok(Page {
            entities,
            continuation: resume.map(|(pk, rk)| Continuation::remote(&pk, &rk)),
        })
    }

    /// A reversed query page: the service reads only forward, so the range
    /// (below the previous page's lowest key, for a continuation) is read
    /// forward and its last `page_size` entities kept, highest first.
    async fn reverse(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
    ) -> Result<Page> {
        let mut filter = range_filter(&query.range);
        if let Some(token) = continuation {
            let below = token.decode()?;
            let clause = format!(
                "(PartitionKey lt {pk} or (PartitionKey eq {pk} and RowKey lt {rk}))",
                pk = json::literal(&below.partition_key),
                rk = json::literal(&below.row_key)
            );
            filter = match filter.is_empty() {
                true => clause,
                false => format!("{filter} and {clause}"),
            };
        }
        // The highest keys seen, whatever order the pages come in.
        let mut last: BTreeMap<EntityKey, Entity> = BTreeMap::new();
        let mut more_below = false;
        let mut resume = None;
        loop {
            let (page, next) = self
                .service_page(
                    table,
                    &filter,
                    query.projection.as_deref(),
                    SERVICE_PAGE,
                    resume.as_ref(),
                )
                .await?;
            for entity in page {
                last.insert(entity.key.clone(), entity);
                if last.len() > query.page_size {
                    last.pop_first();
                    more_below = true;
                }
            }
            resume = next;
            if resume.is_none() {
                break;
            }
        }
        // The token of a reversed page holds its lowest key: the next page
        // is what lies below it.
        let continuation = match (more_below, last.keys().next()) {
            (true, Some(lowest)) => Some(Continuation::to_next(lowest)),
            _ => None,
        };
        let entities: Vec<Entity> = last.into_values().rev().collect();
        Ok(Page {
            entities,
            continuation,
        })
    }

    /// Statistics of every partition of a table, from a scan kept for [`STATS_TTL`].
    async fn partition_statistics(&self, table: &str) -> Result<Arc<Vec<PartitionStats>>> {
        if let Some((read, stats)) = self
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(table)
        {
            if read.elapsed() < STATS_TTL {
                return Ok(stats.clone());
            }
        }
        let mut partitions: BTreeMap<String, PartitionStats> = BTreeMap::new();
        let mut resume = None;
        loop {
            let (page, next) = self
                .service_page(table, "", None, SERVICE_PAGE, resume.as_ref())
                .await?;
            for entity in page {
                let bytes = entity.billed_size() as u64;
                let partition = partitions
                    .entry(entity.key.partition_key.clone())
                    .or_insert_with(|| PartitionStats {
                        partition_key: entity.key.partition_key,
                        entities: 0,
                        bytes: 0,
                    });
                partition.entities += 1;
                partition.bytes += bytes;
            }
            resume = next;
            if resume.is_none() {
                break;
            }
        }
        let stats = Arc::new(partitions.into_values().collect::<Vec<_>>());
        self.stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(table.to_owned(), (Instant::now(), stats.clone()));
        Ok(stats)
    }

    /// Writes change what statistics say.
    fn forget_stats(&self, table: &str) {
        self.stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(table);
    }
}

/// Keeps the asked properties only (the service may send more).
fn project(mut entity: Entity, projection: Option<&[String]>) -> Entity {
    if let Some(names) = projection {
        entity.properties.retain(|name, _| names.contains(name));
    }
    entity
}

#[async_trait]
impl EntityRead for AzureStore {
    async fn get(
        &self,
        table: &str,
        key: &EntityKey,
        projection: Option<&[String]>,
    ) -> Result<Option<Entity>> {
        let resource = json::entity_path(&names::table(table), key);
        let query = projection.map(select).unwrap_or_default();
        match self
            .inner
            .rest
            .send(Request::new(Method::GET, &resource).query(&query))
            .await
        {
            Ok(answer) => match answer
                .json()
                .map_err(|e| store_error(e, table, Some(key)))?
            {
                Json::Object(map) => json::entity_of(map)
                    .map(|e| Some(project(e, projection)))
                    .map_err(|e| StoreError::Service(e.to_string())),
                _ => Err(StoreError::Service("an entity is not a JSON object".into())),
            },
            Err(e) if e.code == "ResourceNotFound" => Ok(None),
            Err(e) => Err(store_error(e, table, Some(key))),
        }
    }

    async fn query(
        &self,
        table: &str,
        query: &Query,
        continuation: Option<&Continuation>,
    ) -> Result<Page> {
        query.check()?;
        if query.reverse {
            self.inner.reverse(table, query, continuation).await
        } else {
            self.inner.forward(table, query, continuation).await
        }
    }
}

#[async_trait]
impl TableAdmin for AzureStore {
    async fn create_table(&self, name: &str) -> Result<()> {
        crate::model::check_table_name(name)?;
        let body = serde_json::json!({ "TableName": names::table(name) });
        self.inner
            .rest
            .send(
                Request::new(Method::POST, "Tables")
                    .header("Prefer", "return-no-content")
                    .json(&body),
            )
            .await
            .map_err(|e| store_error(e, name, None))?;
        Ok(())
    }

    async fn drop_table(&self, name: &str) -> Result<()> {
        let resource = format!(
            "Tables({})",
            json::encode(&json::literal(&names::table(name)))
        );
        self.inner
            .rest
            .send(Request::new(Method::DELETE, &resource))
            .await
            .map_err(|e| match e.status {
                404 => StoreError::TableNotFound(name.to_owned()),
                _ => store_error(e, name, None),
            })?;
        self.inner.forget_stats(name);
        Ok(())
    }

    fn shared(&self) -> bool {
        true
    }

    async fn list_tables(&self) -> Result<Vec<String>> {
        let mut names_found = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let query = next
                .as_ref()
                .map(|n| format!("NextTableName={}", json::encode(n)))
                .unwrap_or_default();
            let answer = self
                .inner
                .rest
                .send(Request::new(Method::GET, "Tables").query(&query))
                .await
                .map_err(|e| store_error(e, "Tables", None))?;
            let json = answer.json().map_err(|e| store_error(e, "Tables", None))?;
            if let Some(Json::Array(tables)) = json.get("value") {
                names_found.extend(
                    tables
                        .iter()
                        .filter_map(|t| t["TableName"].as_str())
                        .map(|n| names::table_of(n).unwrap_or_else(|| n.to_owned())),
                );
            }
            next = answer
                .header("x-ms-continuation-NextTableName")
                .map(str::to_owned);
            if next.is_none() {
                return Ok(names_found);
            }
        }
    }
}

impl AzureStore {
    async fn write_one(&self, table: &str, op: WriteOp) -> Result<WriteOutcome> {
        check_op(&op)?;
        let service_table = names::table(table);
        let key = op.key().clone();
        // Merge Entity: the service takes PATCH (and the older MERGE).
        let merge = Method::PATCH;
        let (method, resource, if_match, body) = match &op {
            WriteOp::Insert(e) => (Method::POST, service_table.clone(), None, Some(e)),
            WriteOp::Replace { entity, if_match } => (
                Method::PUT,
                json::entity_path(&service_table, &key),
                Some(if_match.clone()),
                Some(entity),
            ),
            WriteOp::Merge { entity, if_match } => (
                merge,
                json::entity_path(&service_table, &key),
                Some(if_match.clone()),
                Some(entity),
            ),
            WriteOp::InsertOrReplace(e) => (
                Method::PUT,
                json::entity_path(&service_table, &key),
                None,
                Some(e),
            ),
            WriteOp::InsertOrMerge(e) => (
                merge,
                json::entity_path(&service_table, &key),
                None,
                Some(e),
            ),
            WriteOp::Delete { if_match, .. } => (
                Method::DELETE,
                json::entity_path(&service_table, &key),
                Some(if_match.clone()),
                None,
            ),
        };
        let mut request = Request::new(method, &resource);
        if let Some(if_match) = &if_match {
            request = request.header("If-Match", if_match_header(if_match));
        }
        if let Some(entity) = body {
            request = request
                .header("Prefer", "return-no-content")
                .json(&json::entity_body(entity));
        }
        let answer = self
            .inner
            .rest
            .send(request)
            .await
            .map_err(|e| store_error(e, table, Some(&key)))?;
        self.inner.forget_stats(table);
        Ok(match op {
            WriteOp::Delete { .. } => WriteOutcome {
                etag: None,
                timestamp: None,
            },
            _ => outcome(answer.header("ETag")),
        })
    }
}

#[async_trait]
impl EntityWrite for AzureStore {
    async fn write(&self, table: &str, op: WriteOp) -> Result<WriteOutcome> {
        self.write_one(table, op).await
    }

    async fn write_batch(&self, table: &str, ops: Vec<WriteOp>) -> Result<Vec<WriteOutcome>> {
        check_batch(&ops)?;
        if ops.len() == 1 {
            let op = ops.into_iter().next().expect("one operation");
            return Ok(vec![self.write_one(table, op).await.map_err(|e| {
                StoreError::BatchOperationFailed {
                    index: 0,
                    source: Box::new(e),
                }
            })?]);
        }
        let outcomes = batch::send(&self.inner.rest, table, &ops).await?;
        self.inner.forget_stats(table);
        Ok(outcomes)
    }
}

#[async_trait]
impl AtomicWrite for AzureStore {
    /// Up to 100 operations on distinct entities of one partition go as
    /// one entity group transaction; anything wider goes through the
    /// outbox.
    async fn write_atomic(&self, ops: Vec<(String, WriteOp)>) -> Result<Vec<WriteOutcome>> {
        let Some((table, first)) = ops.first() else {
            return Ok(Vec::new());
        };
        let (table, partition) = (table.clone(), first.key().partition_key.clone());
        let mut rows = std::collections::HashSet::new();
        let one_batch = ops.len() <= crate::model::MAX_BATCH_OPERATIONS
            && ops.iter().all(|(t, op)| {
                t == &table
                    && op.key().partition_key == partition
                    && rows.insert(op.key().row_key.clone())
            });
        if one_batch {
            let ops: Vec<WriteOp> = ops.into_iter().map(|(_, op)| op).collect();
            return self.write_batch(&table, ops).await;
        }
        for (index, (_, op)) in ops.iter().enumerate() {
            check_op(op).map_err(|e| StoreError::BatchOperationFailed {
                index,
                source: Box::new(e),
            })?;
        }
        outbox::write(self, ops).await
    }

    fn atomic_across_partitions(&self) -> bool {
        false
    }

    async fn pending_for(&self) -> Result<Option<Duration>> {
        outbox::oldest(self).await
    }
}

impl Snapshots for AzureStore {
    /// The service has no snapshots: the view reads the latest data.
    fn read_view(&self) -> Arc<dyn EntityRead> {
        Arc::new(self.clone())
    }
}

#[async_trait]
impl BulkDelete for AzureStore {
    /// The service has no range delete: the partition is read and its
    /// entities deleted in batches of 100.
    async fn delete_partition(&self, table: &str, partition_key: &str) -> Result<PartitionStats> {
        let mut stats = PartitionStats {
            partition_key: partition_key.to_owned(),
            entities: 0,
            bytes: 0,
        };
        let filter = range_filter(&Query::partition(partition_key).range);
        loop {
            let (page, _) = self
                .inner
                .service_page(table, &filter, None, 100, None)
                .await?;
            if page.is_empty() {
                return Ok(stats);
            }
            stats.entities += page.len() as u64;
            stats.bytes += page.iter().map(|e| e.billed_size() as u64).sum::<u64>();
            let deletes = page
                .into_iter()
                .map(|e| WriteOp::Delete {
                    key: e.key,
                    if_match: IfMatch::Any,
                })
                .collect();
            self.write_batch(table, deletes).await?;
        }
    }
}

#[async_trait]
impl Statistics for AzureStore {
    async fn table_stats(&self, table: &str) -> Result<TableStats> {
        let partitions = self.inner.partition_statistics(table).await?;
        Ok(TableStats {
            entities: partitions.iter().map(|p| p.entities).sum(),
            bytes: partitions.iter().map(|p| p.bytes).sum(),
            partitions: partitions.len() as u64,
        })
    }

    async fn partition_stats(&self, table: &str, partition_key: &str) -> Result<PartitionStats> {
        let partitions = self.inner.partition_statistics(table).await?;
        Ok(partitions
            .iter()
            .find(|p| p.partition_key == partition_key)
            .cloned()
            .unwrap_or(PartitionStats {
                partition_key: partition_key.to_owned(),
                entities: 0,
                bytes: 0,
            }))
    }

    fn key_ordered(&self) -> bool {
        !self.account().is_cosmos()
    }

    async fn list_partition_stats(
        &self,
        table: &str,
        page_size: usize,
        continuation: Option<&Continuation>,
    ) -> Result<PartitionStatsPage> {
        let partitions = self.inner.partition_statistics(table).await?;
        let start = match continuation {
            Some(token) => {
                let next = token.decode()?.partition_key;
                partitions.partition_point(|p| p.partition_key < next)
            }
            None => 0,
        };
        let end = (start + page_size.max(1)).min(partitions.len());
        Ok(PartitionStatsPage {
            partitions: partitions[start..end].to_vec(),
            continuation: partitions
                .get(end)
                .map(|p| Continuation::to_next(&EntityKey::new(p.partition_key.clone(), ""))),
        })
    }
}
